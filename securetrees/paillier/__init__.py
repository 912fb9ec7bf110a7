"""Paillier encryption with Damgård-Jurik-Nielsen, key-owner and pooled fast paths.

The safe API (``specs/paillier.md``)::

    from securetrees.paillier import generate_keypair
    pk, sk = generate_keypair()          # 2048 bits; 3072 for 128-bit security
    c = pk.encrypt(-7) + pk.encrypt(12)  # DJN mode by default
    sk.decrypt(c * 3)                    # 15

Modules: :mod:`~securetrees.paillier.keys` (keys, modes, decryption),
:mod:`~securetrees.paillier.ciphertext` (operators, freshness),
:mod:`~securetrees.paillier.pool` (precomputed randomness),
:mod:`~securetrees.paillier.batch` (sequences, arrays, executors),
:mod:`~securetrees.paillier.wire` (byte formats),
:mod:`~securetrees.paillier.phe_interop` (conversions to and from python-paillier).
"""

from __future__ import annotations

from securetrees.paillier.batch import decrypt_many, encrypt_many, sum_ciphertexts, sum_many
from securetrees.paillier.ciphertext import Ciphertext, FixedCiphertext
from securetrees.paillier.keys import (
    DEFAULT_BITS,
    MODES,
    Mode,
    PrivateKey,
    PublicKey,
    generate_keypair,
    security_level,
)
from securetrees.paillier.pool import PoolExhausted, RandomnessPool

__all__ = [
    "DEFAULT_BITS",
    "MODES",
    "Ciphertext",
    "FixedCiphertext",
    "Mode",
    "PoolExhausted",
    "PrivateKey",
    "PublicKey",
    "RandomnessPool",
    "decrypt_many",
    "encrypt_many",
    "generate_keypair",
    "security_level",
    "sum_ciphertexts",
    "sum_many",
]
