"""Precomputed encryption randomness: single use, and safe across fork (``specs/paillier.md``, "Randomness pools").

A :class:`RandomnessPool` holds obfuscators (``hs^a`` or ``r^N`` mod N²)
computed ahead of time, optionally by the workers of an executor, so that an
online encryption costs one multiplication:
``public_key.encrypt(m, pool=pool)``.

Rules that keep it safe (``specs/paillier.md``, "Randomness pools"):

* single use: :meth:`take` removes the value it returns (two ciphertexts that
  share an obfuscator reveal the difference of their plaintexts);
* fork: the pool records the PID that filled it; in any other process it
  discards every inherited value before doing anything, so a child never
  hands out its parent's randomness;
* no copies: a pool refuses pickling and ``copy``.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Executor
from typing import NoReturn

from securetrees._nt import mpz
from securetrees.errors import ParameterError, SecureTreesError, TypeMismatchError
from securetrees.paillier import batch
from securetrees.paillier.keys import MODES, Mode, PublicKey
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = ["PoolExhausted", "RandomnessPool"]


class PoolExhausted(SecureTreesError, LookupError):
    """A randomness pool has no value left (or its values were dropped after a fork)."""


class RandomnessPool:
    """Single-use obfuscators for one public key and one encryption mode."""

    __slots__ = ("_lock", "_mode", "_pid", "_pk", "_values")

    def __init__(self, public_key: PublicKey, *, mode: Mode = "djn") -> None:
        if mode not in MODES:
            raise ParameterError(f"unknown encryption mode {mode!r}; choose one of {MODES}")
        self._pk = public_key
        self._mode: Mode = mode
        self._values: deque[mpz] = deque()
        self._pid = os.getpid()
        self._lock = threading.Lock()

    @property
    def public_key(self) -> PublicKey:
        return self._pk

    @property
    def mode(self) -> Mode:
        return self._mode

    def _forget_if_forked(self) -> None:
        # After a fork the inherited values belong to the parent: drop them (a new deque and
        # a new lock, since the parent may have held the old lock at the moment of the fork).
        if self._pid != os.getpid():
            self._values = deque()
            self._lock = threading.Lock()
            self._pid = os.getpid()

    def __len__(self) -> int:
        self._forget_if_forked()
        return len(self._values)

    def __repr__(self) -> str:
        return f"RandomnessPool({self._pk!r}, mode={self._mode!r}, size={len(self)})"

    def fill(
        self, count: int, *, executor: Executor | None = None, chunk_size: int | None = None,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> None:
        """Add ``count`` fresh obfuscators; with ``executor`` they are computed in its workers.

        The random exponents are drawn here from ``rng``; workers only
        exponentiate, so they hold no secret of their own and share no state.
        """
        if type(count) is not int or count < 0:
            raise ParameterError("count must be a non-negative integer")
        self.extend(batch.obfuscators(self._pk, self._mode, count, executor=executor,
                                      chunk_size=chunk_size, rng=rng))

    def extend(self, values: Iterable[mpz]) -> None:
        """Add obfuscators computed elsewhere (:class:`~securetrees.paillier.prefill.BackgroundPool`):
        the caller hands each value over and keeps no copy of it."""
        self._forget_if_forked()
        with self._lock:
            self._values.extend(values)

    def take(self) -> mpz:
        """Remove and return one obfuscator; raises :class:`PoolExhausted` when empty."""
        self._forget_if_forked()
        try:
            return self._values.popleft()
        except IndexError:
            raise PoolExhausted("the randomness pool is empty; fill() it first") from None

    def take_many(self, count: int) -> list[mpz]:
        """Remove and return ``count`` obfuscators at once (:class:`PoolExhausted` if fewer are
        left: then none is taken)."""
        self._forget_if_forked()
        with self._lock:
            if count > len(self._values):
                raise PoolExhausted(f"the randomness pool holds {len(self._values)} obfuscators, "
                                    f"{count} are needed")
            popleft = self._values.popleft
            return [popleft() for _ in range(count)]

    def __reduce__(self) -> NoReturn:
        raise TypeMismatchError("a RandomnessPool cannot be pickled: its values are single-use")

    def __copy__(self) -> NoReturn:
        raise TypeMismatchError("a RandomnessPool cannot be copied: its values are single-use")

    def __deepcopy__(self, memo: object) -> NoReturn:
        raise TypeMismatchError("a RandomnessPool cannot be copied: its values are single-use")
