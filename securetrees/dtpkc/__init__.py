"""DT-PKC: the double-trapdoor cryptosystem (Bresson-Catalano-Pointcheval 2003, as extended
by Liu et al. 2016 and used by RevFRF), following ``specs/dtpkc.md``."""

from __future__ import annotations

from securetrees.dtpkc.batch import encrypt_many, sum_ciphertexts, sum_many
from securetrees.dtpkc.ciphertext import Ciphertext
from securetrees.dtpkc.keys import (
    DEFAULT_BITS,
    KGC,
    PublicKey,
    StrongKeyShare,
    StrongSecretKey,
    SystemParams,
    TableCache,
    WeakSecretKey,
    generate_system,
    generate_weak_key,
    split_strong_key,
)
from securetrees.dtpkc.scheme import (
    PartialDecryption,
    decrypt_strong,
    decrypt_weak,
    encrypt,
    encrypt_residue,
    hencref,
    hreenc,
    parhdec1,
    parhdec2,
    psdec1,
    psdec2,
)

__all__ = [
    "DEFAULT_BITS",
    "KGC",
    "Ciphertext",
    "PartialDecryption",
    "PublicKey",
    "StrongKeyShare",
    "StrongSecretKey",
    "SystemParams",
    "TableCache",
    "WeakSecretKey",
    "decrypt_strong",
    "decrypt_weak",
    "encrypt",
    "encrypt_many",
    "encrypt_residue",
    "generate_system",
    "generate_weak_key",
    "hencref",
    "hreenc",
    "parhdec1",
    "parhdec2",
    "psdec1",
    "psdec2",
    "split_strong_key",
    "sum_ciphertexts",
    "sum_many",
]
