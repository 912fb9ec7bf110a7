"""Batch encryption, decryption and homomorphic sums, serially or on any ``concurrent.futures.Executor``.

The recipe, the trust rule and the failure behaviour are in ``specs/batch_executors.md``;
the chunking and ordering machinery is :mod:`securetrees.executors`.

* Encryption: every random value is drawn here, in the calling process, from its
  :class:`~securetrees.rand.RandomSource`.  Workers receive the **public key** and
  the random exponents and return obfuscators (encryptions of 0, ``hs^a`` or
  ``r^N``, ``specs/paillier.md``, "Encryption modes"); the caller multiplies in ``1 + mN``.  Workers never
  see a plaintext, hold no secret of their own and share no generator state.
* Sums: workers receive ciphertext values and N², multiply consecutive pieces; the
  caller multiplies the pieces' products (:func:`~securetrees.executors.modular_products`).
* Anything that needs the private key (decryption; key-owner CRT encryption) runs
  **in the calling process** even when an executor is given, unless the caller
  opts in with ``trusted_workers=True``: only then is the key wrapped
  (:meth:`PrivateKey.for_workers <securetrees.paillier.keys.PrivateKey.for_workers>`)
  and its factors pickled to the workers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

import gmpy2
import numpy as np

from securetrees._nt import mpz
from securetrees.errors import DecodeError, InvalidCiphertext, ParameterError, TypeMismatchError
from securetrees.executors import flatten_ints, modular_products, run_chunked
from securetrees.paillier.ciphertext import Ciphertext, _key_mismatch, _make
from securetrees.paillier.keys import Mode, PrivateKey, PublicKey, WorkerPrivateKey
from securetrees.rand import SYSTEM_RANDOM, RandomSource

if TYPE_CHECKING:
    from securetrees.paillier.pool import RandomnessPool

__all__ = [
    "ciphertext_values",
    "ciphertext_values_from_bytes",
    "ciphertexts_from_bytes",
    "ciphertexts_to_bytes",
    "decrypt_many",
    "decrypt_residues",
    "encrypt_many",
    "encrypt_to_bytes",
    "obfuscators",
    "owner_encrypt_many",
    "owner_key",
    "pack_slots",
    "sum_ciphertexts",
    "sum_many",
]


# -- worker functions (module level, so that they pickle by name) ------------------------
def _obfuscator_chunk(
    sent: PublicKey | PrivateKey | WorkerPrivateKey, mode: Mode, randomness: list[Any]
) -> list[mpz]:
    return WorkerPrivateKey.unwrap(sent).obfuscators_from(mode, randomness)


def _decrypt_chunk(sent: PrivateKey | WorkerPrivateKey, constant_time: bool, values: list[mpz]) -> list[mpz]:
    sk = WorkerPrivateKey.unwrap(sent)
    if not isinstance(sk, PrivateKey):
        raise TypeMismatchError("decryption needs a private key")
    return [sk._residue(c, constant_time) for c in values]


def _placement(
    key: PublicKey | PrivateKey, executor: Executor | None, trusted_workers: bool
) -> tuple[PublicKey | PrivateKey | WorkerPrivateKey, Executor | None]:
    """The trust rule: what is sent, and where it runs.

    A public key goes to the executor as it is.  A private key goes only wrapped and
    only with ``trusted_workers=True``; otherwise its work stays in this process.
    """
    if executor is None or not isinstance(key, PrivateKey):
        return key, executor
    if trusted_workers:
        return key.for_workers(), executor
    return key, None


# -- the batch operations ----------------------------------------------------------------
def obfuscators(
    key: PublicKey | PrivateKey, mode: Mode, count: int, *, executor: Executor | None = None,
    chunk_size: int | None = None, rng: RandomSource = SYSTEM_RANDOM, trusted_workers: bool = False,
) -> list[mpz]:
    """``count`` fresh encryptions of 0 (``hs^a`` or ``r^N``), for encryption and :class:`RandomnessPool`.

    The randomness is drawn here; a private key computes them by CRT (in this process
    unless ``trusted_workers``).
    """
    randomness = key.draw_randomness_many(mode, count, rng)
    sent, where = _placement(key, executor, trusted_workers)
    return run_chunked(_obfuscator_chunk, randomness, where, chunk_size, sent, mode)


def encrypt_many(
    key: PublicKey | PrivateKey, values: Iterable[int] | np.ndarray, *, mode: Mode = "djn",
    executor: Executor | None = None, chunk_size: int | None = None,
    rng: RandomSource = SYSTEM_RANDOM, trusted_workers: bool = False, pool: RandomnessPool | None = None,
) -> list[Ciphertext]:
    """Fresh ciphertexts of signed integers, in input order (arrays are flattened, C order).

    With a public key and an executor, workers compute the obfuscators from the
    public key; plaintexts never leave this process.  With a private key (key-owner
    CRT encryption) the executor is used only if ``trusted_workers=True``.  With ``pool``
    the obfuscators are taken from it (single use; its mode, not ``mode``), nothing is computed.
    """
    pk = key if isinstance(key, PublicKey) else key.public_key
    return [_make(pk, c, True) for c in _encrypted_values(key, values, mode, executor, chunk_size, rng,
                                                          trusted_workers, pool)]


def encrypt_to_bytes(
    key: PublicKey | PrivateKey, values: Iterable[int] | np.ndarray, *, mode: Mode = "djn",
    executor: Executor | None = None, chunk_size: int | None = None,
    rng: RandomSource = SYSTEM_RANDOM, trusted_workers: bool = False, pool: RandomnessPool | None = None,
) -> bytes:
    """:func:`encrypt_many` written as :func:`ciphertexts_to_bytes` writes fresh ciphertexts (the
    same bytes for the same random source), without building the ciphertext objects."""
    pk = key if isinstance(key, PublicKey) else key.public_key
    width = 2 * pk.modulus_bytes
    return b"".join(c.to_bytes(width, "big") for c in _encrypted_values(key, values, mode, executor, chunk_size,
                                                                        rng, trusted_workers, pool))


def _encrypted_values(
    key: PublicKey | PrivateKey, values: Iterable[int] | np.ndarray, mode: Mode, executor: Executor | None,
    chunk_size: int | None, rng: RandomSource, trusted_workers: bool, pool: RandomnessPool | None,
) -> list[mpz]:
    """The values ``(1 + mN) · obfuscator mod N²`` of :func:`encrypt_many`."""
    pk = key if isinstance(key, PublicKey) else key.public_key
    residues = pk._range.embed_many(flatten_ints(values))
    if pool is not None:
        pk._same_key(pool.public_key)
        obfs = pool.take_many(len(residues))
    else:
        obfs = obfuscators(key, mode, len(residues), executor=executor, chunk_size=chunk_size, rng=rng,
                           trusted_workers=trusted_workers)
    n, n2 = pk._n, pk._n2
    return [(1 + m * n) * r % n2 for m, r in zip(residues, obfs, strict=True)]


def owner_encrypt_many(
    sk: PrivateKey, values: Iterable[int] | np.ndarray, *, mode: Mode = "djn",
    executor: Executor | None = None, chunk_size: int | None = None,
    rng: RandomSource = SYSTEM_RANDOM, trusted_workers: bool = False,
) -> list[Ciphertext]:
    """A key owner's batch encryption, the fastest placement the trust rule allows.

    No executor: key-owner CRT here.  An executor and ``trusted_workers``: CRT on the
    workers (the key is shipped wrapped).  An executor without ``trusted_workers``: the
    workers compute the **public** key's obfuscators (the key stays here); in the DJN modes
    the exponents are drawn as the key owner draws them, so the ciphertexts are the same
    values for the same ``rng`` in all three placements.
    """
    return encrypt_many(owner_key(sk, executor, trusted_workers), values, mode=mode, executor=executor,
                        chunk_size=chunk_size, rng=rng, trusted_workers=trusted_workers)


def owner_key(sk: PrivateKey, executor: Executor | None, trusted_workers: bool) -> PublicKey | PrivateKey:
    """The key a key owner's batch encrypts with (:func:`owner_encrypt_many`): the private key
    (CRT) in this process or on trusted workers, the public key on untrusted workers."""
    return sk.public_key if executor is not None and not trusted_workers else sk


def _values_of(pk: PublicKey, ciphertexts: Iterable[Ciphertext]) -> list[mpz]:
    out = []
    for c in ciphertexts:
        if type(c) is not Ciphertext:
            raise TypeMismatchError(f"expected Ciphertext, got {type(c).__name__}")
        if c._pk is not pk:
            _key_mismatch(pk, c._pk)
        out.append(c._c)
    return out


def ciphertext_values(ciphertexts: Sequence[Ciphertext]) -> list[mpz]:
    """The values of ciphertexts of one key, in order (for sums on raw values modulo N²)."""
    if not ciphertexts:
        return []
    first = ciphertexts[0]
    if type(first) is not Ciphertext:
        raise TypeMismatchError(f"expected Ciphertext, got {type(first).__name__}")
    return _values_of(first._pk, ciphertexts)


def ciphertexts_to_bytes(ciphertexts: Sequence[Ciphertext], *, rng: RandomSource = SYSTEM_RANDOM) -> bytes:
    """Ciphertexts of one key as one byte string: each value big-endian in the fixed width of N²
    (no header: the receiver knows the key), in order.  As :meth:`Ciphertext.to_bytes`, a
    ciphertext that is not fresh is re-randomised first."""
    if not ciphertexts:
        return b""
    pk = ciphertexts[0].public_key
    width = 2 * pk.modulus_bytes
    fresh = [c if c.fresh else c.rerandomize(rng=rng) for c in ciphertexts]
    return b"".join(int(v).to_bytes(width, "big") for v in _values_of(pk, fresh))


def ciphertexts_from_bytes(data: bytes, public_key: PublicKey) -> list[Ciphertext]:
    """Decode :func:`ciphertexts_to_bytes` under ``public_key`` (not fresh).  Raises
    :class:`DecodeError` for a length that is not a multiple of the width and
    :class:`InvalidCiphertext` unless every value is in ``(0, N²)`` and a unit modulo N (one gcd
    for the batch: the product modulo N is a unit exactly when every factor is)."""
    return [_make(public_key, v, False) for v in ciphertext_values_from_bytes(data, public_key)]


def ciphertext_values_from_bytes(data: bytes, public_key: PublicKey) -> list[mpz]:
    """The values of :func:`ciphertexts_from_bytes`, checked the same way, without building
    :class:`Ciphertext` objects (for sums on raw values modulo N²)."""
    width = 2 * public_key.modulus_bytes
    if len(data) % width:
        raise DecodeError(f"a ciphertext string of {len(data)} bytes is not a multiple of {width}")
    n, n2 = public_key._n, public_key._n2
    values = [mpz(int.from_bytes(data[i:i + width], "big")) for i in range(0, len(data), width)]
    if values and not (min(values) > 0 and max(values) < n2):
        raise InvalidCiphertext("ciphertext is out of range or not a unit modulo N")
    acc = mpz(1)
    for v in values:
        acc = acc * v % n
    if gmpy2.gcd(acc, n) != 1:
        raise InvalidCiphertext("ciphertext is out of range or not a unit modulo N")
    return values


def _items(ciphertexts: Sequence[Ciphertext] | np.ndarray) -> Sequence[Ciphertext]:
    return ciphertexts.ravel().tolist() if isinstance(ciphertexts, np.ndarray) else ciphertexts


def decrypt_many(
    sk: PrivateKey, ciphertexts: Sequence[Ciphertext] | np.ndarray, *,
    executor: Executor | None = None, chunk_size: int | None = None, constant_time: bool = True,
    trusted_workers: bool = False,
) -> list[int]:
    """Signed plaintexts; raises :class:`EncodingOverflowError` if any lies in the overflow band.

    Runs in this process unless ``trusted_workers=True`` *and* an executor is given,
    in which case the private key's factors are pickled to the executor's workers.
    """
    residues = decrypt_residues(sk, ciphertexts, executor=executor, chunk_size=chunk_size,
                                constant_time=constant_time, trusted_workers=trusted_workers)
    extract = sk.public_key._range.extract
    return [extract(m) for m in residues]


def decrypt_residues(
    sk: PrivateKey, ciphertexts: Sequence[Ciphertext] | np.ndarray, *,
    executor: Executor | None = None, chunk_size: int | None = None, constant_time: bool = True,
    trusted_workers: bool = False,
) -> list[int]:
    """The plaintext residues in ``[0, N)`` (no signed decoding, e.g. packed slots); where it
    runs as :func:`decrypt_many`."""
    pk = sk.public_key
    values = _values_of(pk, _items(ciphertexts))
    sent, where = _placement(sk, executor, trusted_workers)
    return [int(m) for m in run_chunked(_decrypt_chunk, values, where, chunk_size, sent, constant_time)]


def sum_many(
    groups: Sequence[Sequence[Ciphertext] | np.ndarray], *, executor: Executor | None = None,
    chunk_size: int | None = None,
) -> list[Ciphertext]:
    """One homomorphic sum per group (e.g. per histogram bin or per column), in order; not fresh.

    Every group must be non-empty and all ciphertexts under one key.  Workers
    receive ciphertext values and N² only.
    """
    lists = [_items(g) for g in groups]
    if not lists or any(len(g) == 0 for g in lists):
        raise ParameterError("cannot sum an empty sequence of ciphertexts")
    first = lists[0][0]
    if type(first) is not Ciphertext:
        raise TypeMismatchError(f"expected Ciphertext, got {type(first).__name__}")
    pk = first._pk
    products = modular_products([_values_of(pk, g) for g in lists], pk._n2, executor, chunk_size)
    return [_make(pk, p, False) for p in products]


def _pack_chunk(modulus: mpz, bits: int, groups: list[list[mpz | None]]) -> list[tuple[mpz | None, int]]:
    """Horner's rule per group on raw values (None: an empty slot), with the shifts done."""
    shift = mpz(1) << bits
    out: list[tuple[mpz | None, int]] = []
    for group in groups:
        acc: mpz | None = None
        shifts = 0
        for c in reversed(group):
            if acc is not None:
                acc = gmpy2.powmod(acc, shift, modulus)
                shifts += 1
            if c is not None:
                acc = c if acc is None else acc * c % modulus
        out.append((acc, shifts))
    return out


def pack_slots(
    groups: Sequence[Sequence[Ciphertext | None]], slot_bits: int, *, executor: Executor | None = None,
    chunk_size: int | None = None,
) -> tuple[list[Ciphertext | None], int]:
    """Pack each group into one ciphertext, slot ``j`` (the group's ``j``-th item, low slot first)
    at bit ``j·slot_bits``: ``Σ_j S_j·2^{j·slot_bits}`` by Horner's rule, one scalar
    multiplication by ``2^slot_bits`` per slot above the highest non-empty one, None for an
    all-empty group; not fresh.  Returns the packed ciphertexts and the number of shifts.
    Workers receive N², the slot width and ciphertext values."""
    pk: PublicKey | None = None
    raw: list[list[mpz | None]] = []
    for group in groups:
        row: list[mpz | None] = []
        for c in group:
            if c is None:
                row.append(None)
                continue
            if type(c) is not Ciphertext:
                raise TypeMismatchError(f"expected Ciphertext, got {type(c).__name__}")
            if pk is None:
                pk = c._pk
            elif c._pk is not pk:
                _key_mismatch(pk, c._pk)
            row.append(c._c)
        raw.append(row)
    if pk is None:
        return [None] * len(raw), 0
    packed = run_chunked(_pack_chunk, raw, executor, chunk_size, pk._n2, slot_bits)
    return [None if v is None else _make(pk, v, False) for v, _ in packed], sum(s for _, s in packed)


def sum_ciphertexts(
    ciphertexts: Sequence[Ciphertext] | np.ndarray, *, executor: Executor | None = None,
    chunk_size: int | None = None,
) -> Ciphertext:
    """The homomorphic sum (product mod N²) of one or more ciphertexts of one key; not fresh."""
    return sum_many([ciphertexts], executor=executor, chunk_size=chunk_size)[0]
