"""Versioned byte formats for DT-PKC public keys, ciphertexts and (passphrase-encrypted)
secret keys.  No pickle.

Layout (all integers unsigned big-endian, each length-prefixed with 4 bytes)::

    public key:  b"STDK" | version 1 | kind 1 | N | g | h | u16 count | count × 16-byte component ids
    ciphertext:  b"STDK" | version 1 | kind 2 | 16-byte key id | T1 | T2
    secret key:  the envelope of securetrees.sealing ("STSK", scrypt, AES-256-GCM) with the
                 label b"STDK" | version 1 | kind 3 and the parameters' id as key id, sealing
                 u8 type (1 weak, 2 share 1, 3 share 2) | N | g | secret [| h for a weak key]

Decoding is strict: wrong magic, version or kind, truncation, trailing bytes,
a non-minimal or oversized integer raise :class:`DecodeError`; a ciphertext whose
key id is not the given key's raises :class:`KeyMismatchError`; T1 or T2 out of
``(0, N²)`` or not a unit raises :class:`InvalidCiphertext`.  A decoded public key
obeys the key-size policy (2048 bits, or 1024 with ``allow_insecure=True``).
"""

from __future__ import annotations

from typing import Final

import gmpy2

from securetrees import sealing
from securetrees._nt import mpz, powmod_sec
from securetrees.dtpkc.ciphertext import Ciphertext
from securetrees.dtpkc.keys import (
    KEY_ID_BYTES,
    PublicKey,
    StrongKeyShare,
    SystemParams,
    WeakSecretKey,
    check_key_size,
)
from securetrees.errors import DecodeError, KeyMismatchError, ParameterError
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = [
    "decode_ciphertext",
    "decode_public_key",
    "decrypt_secret_key",
    "encode_ciphertext",
    "encode_public_key",
    "encrypt_secret_key",
    "secret_key_bytes",
    "secret_key_from_bytes",
]

MAGIC: Final = b"STDK"
VERSION: Final = 1
KIND_PUBLIC_KEY: Final = 1
KIND_CIPHERTEXT: Final = 2
KIND_SECRET_KEY: Final = 3
_SECRET_LABEL: Final = MAGIC + bytes([VERSION, KIND_SECRET_KEY])
"""The sealing label of a DT-PKC secret key (the envelope itself is :mod:`securetrees.sealing`'s)."""
MAX_INT_BYTES: Final = 2 * 8192 // 8
"""Largest integer accepted (an N² of a 8192-bit N)."""
MAX_COMPONENTS: Final = 1024


def _int_bytes(v: int | mpz) -> bytes:
    v = int(v)
    raw = v.to_bytes((v.bit_length() + 7) // 8, "big")
    return len(raw).to_bytes(4, "big") + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise DecodeError("expected bytes")
        self.data = bytes(data)
        self.pos = 0

    def take(self, k: int) -> bytes:
        if k < 0 or self.pos + k > len(self.data):
            raise DecodeError("truncated input")
        out = self.data[self.pos : self.pos + k]
        self.pos += k
        return out

    def header(self, kind: int) -> None:
        if self.take(4) != MAGIC:
            raise DecodeError("not a securetrees DT-PKC object (bad magic)")
        version, got = self.take(2)
        if version != VERSION:
            raise DecodeError(f"unsupported format version {version}")
        if got != kind:
            raise DecodeError(f"wrong object kind {got} (expected {kind})")

    def integer(self) -> mpz:
        length = int.from_bytes(self.take(4), "big")
        if length > MAX_INT_BYTES:
            raise DecodeError("integer too large")
        raw = self.take(length)
        if length and raw[0] == 0:
            raise DecodeError("non-minimal integer encoding")
        return mpz(int.from_bytes(raw, "big"))

    def end(self) -> None:
        if self.pos != len(self.data):
            raise DecodeError("trailing bytes after the object")


def encode_public_key(pk: PublicKey) -> bytes:
    """The public key ``(N, g, h)`` with its component ids."""
    parts = [MAGIC, bytes([VERSION, KIND_PUBLIC_KEY]), _int_bytes(pk.n), _int_bytes(pk.params.g)]
    parts += [_int_bytes(pk.h), len(pk.components).to_bytes(2, "big"), *pk.components]
    return b"".join(parts)


def _decode_public_key(data: bytes, params: SystemParams | None) -> PublicKey:
    r = _Reader(data)
    r.header(KIND_PUBLIC_KEY)
    n, g, h = r.integer(), r.integer(), r.integer()
    count = int.from_bytes(r.take(2), "big")
    if not 1 <= count <= MAX_COMPONENTS:
        raise DecodeError("bad component count")
    comps = tuple(r.take(KEY_ID_BYTES) for _ in range(count))
    r.end()
    if n % 2 == 0 or gmpy2.is_square(n) or gmpy2.gcd(n, 2 * 3 * 5 * 7 * 11 * 13) != 1:
        raise DecodeError("N is not an RSA-type modulus")
    if params is not None:
        if params.n != n or params.g != g:
            raise KeyMismatchError("public key belongs to other system parameters")
    else:
        try:
            params = SystemParams(n, g)
        except ParameterError as exc:
            raise DecodeError(f"invalid system parameters: {exc}") from exc
    try:
        pk = PublicKey(params, h, comps)
    except ParameterError as exc:
        raise DecodeError(f"invalid public key: {exc}") from exc
    if count == 1 and comps[0] != pk.key_id:
        raise DecodeError("a weak public key must list its own key id as its component")
    return pk


def decode_public_key(
    data: bytes, *, params: SystemParams | None = None, allow_insecure: bool = False
) -> PublicKey:
    """Decode and validate a public key.  Pass the ``params`` you already hold to share
    their table cache (their N and g must match: :class:`KeyMismatchError` otherwise)."""
    pk = _decode_public_key(data, params)
    try:
        check_key_size(pk.params.bits, allow_insecure=allow_insecure)
    except ParameterError as exc:
        raise DecodeError(str(exc)) from exc
    return pk


def encode_ciphertext(c: Ciphertext, *, rng: RandomSource = SYSTEM_RANDOM) -> bytes:
    """The ciphertext with its key id; a stale ciphertext (the result of a deterministic
    operation) is re-randomised first, so what leaves the party is fresh."""
    if not c.fresh:
        c = c.rerandomize(rng=rng)
    parts = [MAGIC, bytes([VERSION, KIND_CIPHERTEXT]), c.pk.key_id, _int_bytes(c.t1), _int_bytes(c.t2)]
    return b"".join(parts)


def decode_ciphertext(data: bytes, pk: PublicKey) -> Ciphertext:
    """Decode a ciphertext that must be under ``pk`` and validate ``T1``, ``T2``."""
    r = _Reader(data)
    r.header(KIND_CIPHERTEXT)
    key_id = r.take(KEY_ID_BYTES)
    t1, t2 = r.integer(), r.integer()
    r.end()
    if key_id != pk.key_id:
        raise KeyMismatchError("ciphertext is under another key")
    return Ciphertext.from_ints(pk, int(t1), int(t2))


def secret_key_bytes(key: WeakSecretKey | StrongKeyShare) -> bytes:
    """The *unencrypted* body of a secret-key file: ``u8 type | N | g | secret [| h]``.

    Only for a container that is itself sealed (a party's key file, ``securetrees.net.keyfile``);
    on its own use :func:`encrypt_secret_key`."""
    if isinstance(key, WeakSecretKey):
        params, secret, kind = key.public.params, key.theta, 1
        extra = _int_bytes(key.public.h)
    elif isinstance(key, StrongKeyShare):
        params, secret, kind, extra = key.params, key.share, 1 + key.index, b""
    else:
        raise ParameterError("only a weak key or a strong-key share can be serialised")
    return bytes([kind]) + _int_bytes(params.n) + _int_bytes(params.g) + _int_bytes(secret) + extra


def secret_key_from_bytes(body: bytes, *, params: SystemParams | None = None) -> WeakSecretKey | StrongKeyShare:
    """Read :func:`secret_key_bytes`' output, with the same checks as :func:`decrypt_secret_key`."""
    b = _Reader(body)
    kind = b.take(1)[0]
    n, g, secret = b.integer(), b.integer(), b.integer()
    h = b.integer() if kind == 1 else None
    b.end()
    if params is not None and (params.n != n or params.g != g):
        raise KeyMismatchError("secret key belongs to other system parameters")
    if kind not in (1, 2, 3):
        raise DecodeError(f"unknown secret-key type {kind}")
    try:
        if params is None:
            params = SystemParams(n, g)
        if kind == 1 and h is not None:
            if powmod_sec(params.g, secret, params.n2) != h:
                raise DecodeError("weak key does not match its public key")
            return WeakSecretKey(PublicKey(params, h), secret)
        return StrongKeyShare(params, secret, 1 if kind == 2 else 2)
    except ParameterError as exc:
        raise DecodeError(f"invalid secret key: {exc}") from exc


def encrypt_secret_key(
    key: WeakSecretKey | StrongKeyShare,
    passphrase: bytes,
    *,
    rng: RandomSource = SYSTEM_RANDOM,
    scrypt_log2_n: int = sealing.SCRYPT_LOG2_N_DEFAULT,
) -> bytes:
    """A weak key or a strong-key share sealed under ``passphrase`` by :mod:`securetrees.sealing`
    (scrypt, AES-256-GCM), labelled as a DT-PKC secret key, with its parameters' id as key id.

    The whole strong key λ has no serialised form: only the KGC holds it, in memory.
    """
    if not isinstance(passphrase, bytes):
        raise ParameterError("the passphrase must be non-empty bytes")
    body = secret_key_bytes(key)
    params = key.public.params if isinstance(key, WeakSecretKey) else key.params
    return sealing.seal(_SECRET_LABEL, params.params_id, body, passphrase, rng=rng, log2_n=scrypt_log2_n)


def decrypt_secret_key(
    data: bytes, passphrase: bytes, *, params: SystemParams | None = None
) -> WeakSecretKey | StrongKeyShare:
    """Open :func:`encrypt_secret_key`'s output; a wrong passphrase, any change to the bytes
    or scrypt parameters over the cap raise :class:`DecodeError`.  A weak key is checked (``h = g^θ``)."""
    if not isinstance(passphrase, bytes):
        raise ParameterError("the passphrase must be non-empty bytes")
    label, kid, body = sealing.open_sealed(data, passphrase)
    if label != _SECRET_LABEL:
        raise DecodeError("not a sealed DT-PKC secret key")
    key = secret_key_from_bytes(body, params=params)
    got = key.public.params if isinstance(key, WeakSecretKey) else key.params
    if got.params_id != kid:
        raise DecodeError("the key id in the header does not match the sealed key")
    return key
