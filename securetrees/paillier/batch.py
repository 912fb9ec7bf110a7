"""Batch encryption, decryption and summation, serially or on any ``concurrent.futures.Executor``.

The work is cut into chunks (by default four per worker) so that the cost of
pickling a chunk is small beside its exponentiations.  Every random value is
drawn in the calling process from its :class:`~securetrees.rand.RandomSource`;
a worker receives a key, plaintext residues and exponents, computes, and
returns integers, so a worker holds no secret of its own and no generator
state is shared across fork.  Only public keys go to workers, except in the
private-key methods (:meth:`PrivateKey.decrypt_many
<securetrees.paillier.keys.PrivateKey.decrypt_many>`, :meth:`PrivateKey.encrypt_many
<securetrees.paillier.keys.PrivateKey.encrypt_many>`) when the caller passes
an executor to them explicitly: then the private key is pickled to the workers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from securetrees._nt import mpz
from securetrees.encoding import as_int
from securetrees.errors import ParameterError
from securetrees.paillier.ciphertext import Ciphertext, _key_mismatch, _make
from securetrees.rand import SYSTEM_RANDOM, RandomSource

if TYPE_CHECKING:
    from securetrees.paillier.keys import Mode, PrivateKey, PublicKey, WorkerPrivateKey

__all__ = ["decrypt_many", "encrypt_many", "obfuscators", "sum_ciphertexts"]

T = TypeVar("T")
R = TypeVar("R")

CHUNKS_PER_WORKER = 4


def _chunk_size(total: int, executor: Executor | None, chunk_size: int | None) -> int:
    if chunk_size is not None:
        if type(chunk_size) is not int or chunk_size < 1:
            raise ParameterError("chunk_size must be a positive integer")
        return chunk_size
    if executor is None:
        return max(total, 1)
    workers = getattr(executor, "_max_workers", None) or os.cpu_count() or 1
    return max(1, -(-total // (CHUNKS_PER_WORKER * workers)))


def _run_chunked(
    fn: Callable[..., list[R]], items: Sequence[T], executor: Executor | None,
    chunk_size: int | None, *args: Any,
) -> list[R]:
    """``fn(*args, chunk)`` over consecutive chunks of ``items``, results concatenated in order."""
    size = _chunk_size(len(items), executor, chunk_size)
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    if executor is None:
        parts = [fn(*args, chunk) for chunk in chunks]
    else:
        parts = [f.result() for f in [executor.submit(fn, *args, chunk) for chunk in chunks]]
    return [x for part in parts for x in part]


# -- worker functions (module level, so that they pickle by name) ------------------------
def _obfuscator_chunk(pk: PublicKey, mode: Mode, randomness: list[mpz]) -> list[mpz]:
    return [pk.obfuscator_from(mode, r) for r in randomness]


def _encrypt_chunk(
    sent: PublicKey | PrivateKey | WorkerPrivateKey, mode: Mode, pairs: list[tuple[mpz, Any]]
) -> list[mpz]:
    from securetrees.paillier.keys import PublicKey, WorkerPrivateKey

    key = WorkerPrivateKey.unwrap(sent)
    pk = key if isinstance(key, PublicKey) else key.public_key
    n, n2 = pk._n, pk._n2
    return [(1 + m * n) * key.obfuscator_from(mode, r) % n2 for m, r in pairs]


def _decrypt_chunk(sent: PrivateKey | WorkerPrivateKey, constant_time: bool, values: list[mpz]) -> list[mpz]:
    from securetrees.paillier.keys import PrivateKey, WorkerPrivateKey

    sk = WorkerPrivateKey.unwrap(sent)
    if not isinstance(sk, PrivateKey):
        raise TypeError("decryption needs a private key")
    return [sk._residue(c, constant_time) for c in values]


def _for_executor(
    key: PublicKey | PrivateKey, executor: Executor | None
) -> PublicKey | PrivateKey | WorkerPrivateKey:
    """What goes to the workers: public keys as they are; a private key only wrapped, and only
    because the caller passed an executor to a private-key method."""
    from securetrees.paillier.keys import PrivateKey

    return key.for_workers() if executor is not None and isinstance(key, PrivateKey) else key


def _product_chunk(n2: mpz, values: list[mpz]) -> list[mpz]:
    acc = mpz(1)
    for v in values:
        acc = acc * v % n2
    return [acc]


# -- the batch operations ----------------------------------------------------------------
def obfuscators(
    pk: PublicKey, mode: Mode, count: int, *, executor: Executor | None = None,
    chunk_size: int | None = None, rng: RandomSource = SYSTEM_RANDOM,
) -> list[mpz]:
    """``count`` fresh encryptions of 0 (``hs^a`` or ``r^N``), for :class:`RandomnessPool`."""
    randomness = [pk.draw_randomness(mode, rng) for _ in range(count)]
    return _run_chunked(_obfuscator_chunk, randomness, executor, chunk_size, pk, mode)


def _flatten(values: Iterable[int] | np.ndarray) -> list[int]:
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in "iuO":
            raise ParameterError(f"cannot encrypt an array of dtype {values.dtype}; encode it first")
        return [as_int(v) for v in values.ravel().tolist()]
    return [as_int(v) for v in values]


def encrypt_many(
    key: PublicKey | PrivateKey, values: Iterable[int] | np.ndarray, *, mode: Mode = "djn",
    executor: Executor | None = None, chunk_size: int | None = None,
    rng: RandomSource = SYSTEM_RANDOM,
) -> list[Ciphertext]:
    """Fresh ciphertexts of signed integers, in input order (arrays are flattened, C order)."""
    from securetrees.paillier.keys import PublicKey

    pk = key if isinstance(key, PublicKey) else key.public_key
    residues = [mpz(pk._range.embed(v)) for v in _flatten(values)]
    pairs = [(m, key.draw_randomness(mode, rng)) for m in residues]
    out = _run_chunked(_encrypt_chunk, pairs, executor, chunk_size, _for_executor(key, executor), mode)
    return [_make(pk, c, True) for c in out]


def _values_of(pk: PublicKey, ciphertexts: Iterable[Ciphertext]) -> list[mpz]:
    out = []
    for c in ciphertexts:
        if type(c) is not Ciphertext:
            raise TypeError(f"expected Ciphertext, got {type(c).__name__}")
        if c._pk is not pk:
            _key_mismatch(pk, c._pk)
        out.append(c._c)
    return out


def decrypt_many(
    sk: PrivateKey, ciphertexts: Sequence[Ciphertext] | np.ndarray, *,
    executor: Executor | None = None, chunk_size: int | None = None, constant_time: bool = True,
) -> list[int]:
    """Signed plaintexts; raises :class:`EncodingOverflowError` if any lies in the overflow band."""
    pk = sk.public_key
    items = ciphertexts.ravel().tolist() if isinstance(ciphertexts, np.ndarray) else ciphertexts
    values = _values_of(pk, items)
    residues = _run_chunked(_decrypt_chunk, values, executor, chunk_size, _for_executor(sk, executor),
                            constant_time)
    extract = pk._range.extract
    return [extract(int(m)) for m in residues]


def sum_ciphertexts(
    ciphertexts: Sequence[Ciphertext] | np.ndarray, *, executor: Executor | None = None,
    chunk_size: int | None = None,
) -> Ciphertext:
    """The homomorphic sum (product mod N²) of one or more ciphertexts of one key; not fresh."""
    items = ciphertexts.ravel().tolist() if isinstance(ciphertexts, np.ndarray) else ciphertexts
    if len(items) == 0:
        raise ParameterError("cannot sum an empty sequence of ciphertexts")
    first = items[0]
    if type(first) is not Ciphertext:
        raise TypeError(f"expected Ciphertext, got {type(first).__name__}")
    pk = first._pk
    values = _values_of(pk, items)
    partial = _run_chunked(_product_chunk, values, executor, chunk_size, pk._n2)
    return _make(pk, _product_chunk(pk._n2, partial)[0], False)
