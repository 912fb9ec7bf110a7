"""DT-PKC batch HoEnc and homomorphic sums, serially or on any ``concurrent.futures.Executor``.

The recipe, the trust rule and the failure behaviour are in ``specs/batch_executors.md``;
chunking and ordering come from :mod:`securetrees.executors`.

* :func:`encrypt_many` is HoEnc (``specs/dtpkc.md``, "Operations"):
  ``T1 = (1 + mN)·h^r``, ``T2 = g^r`` with ``r`` uniform in ``[1, N/4]``.  Every
  ``r`` is drawn here from ``rng``; workers receive the public values ``(N, g, h)``
  and the exponents and return ``(h^r, g^r)``; the caller multiplies in ``1 + mN``.
  Workers never see a plaintext or a secret key.
* :func:`sum_many` / :func:`sum_ciphertexts` are same-key homomorphic addition
  (``(∏T1, ∏T2)``): workers receive ciphertext components and N² only.  An
  element-wise ``a[i] + b[i]`` is ``sum_many(zip(a, b))``.
* The secret-key steps (weak decryption, PSDec1/2, ParHDec1/2, HReEnc, HEncRef)
  have no executor path: a DT-PKC secret key refuses pickling and nothing here
  sends one.  They run in the key holder's process.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np

from securetrees._nt import mpz
from securetrees.dtpkc.ciphertext import Ciphertext
from securetrees.dtpkc.keys import PublicKey, SystemParams, TableCache
from securetrees.dtpkc.scheme import _range
from securetrees.encoding import SignedRange
from securetrees.errors import KeyMismatchError, ParameterError, TypeMismatchError
from securetrees.executors import flatten_ints, modular_products, run_chunked
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = ["PublicValues", "encrypt_many", "sum_ciphertexts", "sum_many"]

# Public keys live in this process, by their public values: the caller's own keys (so a thread
# pool or a forked worker reuses their comb tables) and, in a worker, the last few received.
_LIVE: weakref.WeakValueDictionary[PublicValues, PublicKey] = weakref.WeakValueDictionary()
_RECEIVED: deque[PublicKey] = deque(maxlen=4)


@dataclass(frozen=True)
class PublicValues:
    """What a worker receives of a DT-PKC public key: ``(N, g, h)`` and the comb-table window.

    Plain integers, so it pickles on any executor; :meth:`key` turns it back into a
    :class:`PublicKey` (the live one when this process has it).
    """

    n: int
    g: int
    h: int
    window: int | None

    @classmethod
    def of(cls, pk: PublicKey) -> PublicValues:
        """The values of ``pk``, which becomes the live key for them in this process."""
        values = cls(int(pk.n), int(pk.params.g), int(pk.h), pk.params.tables.window)
        _LIVE[values] = pk
        return values

    def key(self) -> PublicKey:
        """The live key with these values, or a new one (kept while it is among the last received)."""
        pk = _LIVE.get(self)
        if pk is None:
            params = SystemParams(mpz(self.n), mpz(self.g), TableCache(self.window))
            pk = PublicKey(params, mpz(self.h))
            _RECEIVED.append(pk)
            _LIVE[self] = pk
        return pk


# -- worker function (module level, so that it pickles by name) --------------------------
def _obfuscator_chunk(sent: PublicKey | PublicValues, exponents: list[mpz]) -> list[tuple[mpz, mpz]]:
    """``(h^r, g^r) mod N²`` for each exponent: the encryption of 0 under ``sent``."""
    pk = sent if isinstance(sent, PublicKey) else sent.key()
    g_pow = pk.params.g_pow
    return [(pk.h_pow(r), g_pow(r)) for r in exponents]


# -- the batch operations ----------------------------------------------------------------
def encrypt_many(
    pk: PublicKey, values: Iterable[int] | np.ndarray, *, executor: Executor | None = None,
    chunk_size: int | None = None, rng: RandomSource = SYSTEM_RANDOM, signed: SignedRange | None = None,
) -> list[Ciphertext]:
    """HoEnc of many signed integers under ``pk`` (weak or joint), fresh, in input order.

    ``|m| < N/3`` unless ``signed`` says otherwise (:class:`EncodingOverflowError`
    before anything is sent); arrays are flattened in C order.  With ``executor``,
    the exponentiations run in its workers, which receive public values and
    exponents only.
    """
    if not isinstance(pk, PublicKey):
        raise KeyMismatchError(f"HoEnc needs a DT-PKC PublicKey, got {type(pk).__name__}")
    plain = _range(pk.params, signed)
    residues = [mpz(plain.embed(v)) for v in flatten_ints(values)]
    exponents = [pk.params.random_exponent(rng) for _ in residues]
    sent = pk if executor is None else PublicValues.of(pk)
    pairs = run_chunked(_obfuscator_chunk, exponents, executor, chunk_size, sent)
    n, n2 = pk.n, pk.n2
    return [Ciphertext(pk, (1 + m * n) * hr % n2, gr) for m, (hr, gr) in zip(residues, pairs, strict=True)]


def sum_many(
    groups: Iterable[Sequence[Ciphertext]], *, executor: Executor | None = None,
    chunk_size: int | None = None,
) -> list[Ciphertext]:
    """One same-key homomorphic sum ``(∏T1, ∏T2)`` per group, in order; not fresh.

    Every group must be non-empty and every ciphertext under one key
    (:class:`KeyMismatchError` otherwise; crossing keys is HoAdd's job).
    """
    lists = [list(g) for g in groups]
    if not lists or any(len(g) == 0 for g in lists):
        raise ParameterError("cannot sum an empty sequence of ciphertexts")
    first = lists[0][0]
    if not isinstance(first, Ciphertext):
        raise TypeMismatchError(f"expected a DT-PKC Ciphertext, got {type(first).__name__}")
    pk = first.pk
    columns: list[list[mpz]] = []
    for group in lists:
        for c in group:
            if not isinstance(c, Ciphertext):
                raise TypeMismatchError(f"expected a DT-PKC Ciphertext, got {type(c).__name__}")
            if c.pk.key_id != pk.key_id:
                raise KeyMismatchError("ciphertexts are under different keys; use HoAdd to add across keys")
        columns.append([c.t1 for c in group])
        columns.append([c.t2 for c in group])
    products = modular_products(columns, pk.n2, executor, chunk_size)
    return [Ciphertext(pk, products[i], products[i + 1], fresh=False) for i in range(0, len(products), 2)]


def sum_ciphertexts(
    ciphertexts: Sequence[Ciphertext], *, executor: Executor | None = None, chunk_size: int | None = None
) -> Ciphertext:
    """The same-key homomorphic sum of one or more ciphertexts; not fresh."""
    return sum_many([ciphertexts], executor=executor, chunk_size=chunk_size)[0]
