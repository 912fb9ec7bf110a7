"""A randomness pool filled in the background by another process.

Specification: ``specs/batch_executors.md``, "Randomness pools in the roles".

The obfuscators of an encryption (``hs^a``, ``r^N``) do not depend on the plaintext, so a role
that knows how many values it will encrypt can have them computed ahead, on another core,
while it waits on its peers or does other work.  :class:`BackgroundPool` does that:

* :meth:`request` draws the random exponents **here**, from the caller's ``RandomSource``, in
  order, and submits them in chunks (:func:`chunk_for`) to a worker process: the executor the
  role was given, or, without one, a dedicated single-process pool this object starts (and
  :meth:`close` stops); ``here=k`` keeps the last ``k`` for this process instead.
  What a task carries follows the trust rule of :mod:`securetrees.paillier.batch`: the public
  key and the exponents; the private key (wrapped) only with ``trusted_workers=True``.
* :meth:`ready` makes sure the underlying :class:`RandomnessPool` holds at least ``count``
  values: finished chunks are moved in, in request order; a chunk the worker has not started
  is cancelled and computed in this process instead (from the same exponents), so the caller
  never waits for work it could do itself, and both cores work when the request came late.

While a pool is open its process's GIL switch interval is :data:`SWITCH_INTERVAL`, so that the
executor's threads in this process move the chunks promptly.

Every computed value enters the :class:`RandomnessPool` exactly once and leaves it exactly once
(``take`` removes it), so the single-use rule holds whoever computed it; the values are the
obfuscators of the exponents in draw order, so the ciphertexts are distributed as without a pool.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, NoReturn

from securetrees._nt import mpz
from securetrees.errors import ParameterError, TypeMismatchError
from securetrees.executors import worker_count
from securetrees.paillier.batch import _obfuscator_chunk
from securetrees.paillier.keys import MODES, Mode, PrivateKey, PublicKey, WorkerPrivateKey
from securetrees.paillier.pool import PoolExhausted, RandomnessPool
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = ["DEFAULT_CHUNK", "BackgroundPool", "chunk_for", "role_pool"]

DEFAULT_CHUNK = 1024
"""Fewest obfuscators per task: small enough that the caller can take over the tail of a request."""


def chunk_for(key: PublicKey) -> int:
    """Obfuscators per task for ``key``: :data:`DEFAULT_CHUNK`, or two per entry of a row of the
    key's batch table if that is more (``2 · 2^w``).  A chunk walks every row of the table once;
    with fewer values than entries nearly every lookup misses the cache (``benchmarks/run.py
    executors`` measures 1,024 against 8,192 at 512 bits, window 12)."""
    return max(DEFAULT_CHUNK, 2 << key.batch_window())


SWITCH_INTERVAL = 0.0002
"""The GIL switch interval (seconds) of a process while one of its background pools is open."""

_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved = 0.0


def _hold_switch_interval() -> None:
    """Shorten the process's GIL switch interval while a pool is open (counted: the first
    pool saves the setting, the last to close restores it).  The executor's threads in this
    process carry every chunk through 64 KiB pipes, one GIL turn per piece; at the default
    5 ms a role computing in Python starves them, and the worker idles while its finished
    chunk waits to be read."""
    global _switch_users, _switch_saved
    with _switch_lock:
        if _switch_users == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, SWITCH_INTERVAL))
        _switch_users += 1


def _release_switch_interval() -> None:
    global _switch_users
    with _switch_lock:
        _switch_users -= 1
        if _switch_users == 0:
            sys.setswitchinterval(_switch_saved)


def _timed_chunk(sent: PublicKey | PrivateKey | WorkerPrivateKey, mode: Mode, randomness: list[Any]
                 ) -> tuple[list[mpz], float]:
    """A worker's chunk of obfuscators with the CPU seconds it took (module level: pickled by name)."""
    t0 = time.process_time()
    values = _obfuscator_chunk(sent, mode, randomness)
    return values, time.process_time() - t0


class BackgroundPool:
    """Obfuscators for one key and mode, computed ahead by a worker process (see the module)."""

    def __init__(
        self, key: PublicKey | PrivateKey, *, mode: Mode = "djn", executor: Executor | None = None,
        trusted_workers: bool = False, chunk_size: int | None = None, rng: RandomSource = SYSTEM_RANDOM,
    ) -> None:
        if mode not in MODES:
            raise ParameterError(f"unknown encryption mode {mode!r}; choose one of {MODES}")
        pk = key if isinstance(key, PublicKey) else key.public_key
        if chunk_size is None:
            chunk_size = chunk_for(pk)
        if type(chunk_size) is not int or chunk_size < 1:
            raise ParameterError("chunk_size must be a positive integer")
        self._key = key  # what this process computes with (the key owner's CRT if a private key)
        # What a task carries: the public key, or the wrapped private key only when trusted.
        self._sent: PublicKey | WorkerPrivateKey = (
            key.for_workers() if isinstance(key, PrivateKey) and trusted_workers else pk)
        self._mode: Mode = mode
        self._rng = rng
        self._chunk = chunk_size
        self._owned = executor is None
        self._executor: Executor = ProcessPoolExecutor(1) if executor is None else executor
        self._pool = RandomnessPool(pk, mode=mode)
        self._pending: deque[tuple[list[Any], Future[tuple[list[mpz], float]] | None]] = deque()
        self.worker_seconds = 0.0
        """CPU seconds the workers spent on the chunks taken so far."""
        self.stolen = 0
        """Obfuscators computed in this process: its share (``request(here=...)``) and the chunks
        the worker had not started."""
        self._pid = os.getpid()
        self._holds_switch = True
        _hold_switch_interval()

    def _check_process(self) -> None:
        # The pending exponents are secrets of the process that drew them: a forked child that
        # took them would compute the parent's obfuscators (two ciphertexts sharing randomness).
        if self._pid != os.getpid():
            self._pending = deque()
            self._pool = RandomnessPool(self._pool.public_key, mode=self._mode)
            raise PoolExhausted("a background pool is not usable in a forked process: its values belong to the "
                                "parent")

    def __reduce__(self) -> NoReturn:
        raise TypeMismatchError("a background pool holds single-use secrets and is never pickled or copied")

    @property
    def pool(self) -> RandomnessPool:
        return self._pool

    @property
    def queued(self) -> int:
        """Obfuscators requested and not yet moved into the pool."""
        return sum(len(r) for r, _ in self._pending)

    def request(self, count: int, *, here: int = 0) -> None:
        """Draw ``count`` exponents now and submit their obfuscators to the worker, except the
        last ``here`` of them: those are left to this process, which computes them in
        :meth:`ready` (its share of a batch it will need soon: submitted, they would queue in
        the executor before this process could take them over)."""
        if type(count) is not int or count < 0:
            raise ParameterError("count must be a non-negative integer")
        if type(here) is not int or not 0 <= here <= count:
            raise ParameterError("here must be an integer in [0, count]")
        self._check_process()
        randomness = self._key.draw_randomness_many(self._mode, count, self._rng)
        sent = count - here
        for part, start, stop in ((True, 0, sent), (False, sent, count)):
            for i in range(start, stop, self._chunk):
                chunk = randomness[i:min(i + self._chunk, stop)]
                self._pending.append((chunk, self._executor.submit(_timed_chunk, self._sent, self._mode, chunk)
                                      if part else None))

    def ready(self, count: int) -> RandomnessPool:
        """The pool, holding at least ``count`` obfuscators (requesting the shortfall if needed)."""
        self._check_process()
        missing = count - len(self._pool) - self.queued
        if missing > 0:
            self.request(missing)
        need = count - len(self._pool)
        chunks: list[tuple[list[Any], Future[tuple[list[mpz], float]] | None]] = []
        while need > 0:
            chunk, fut = self._pending.popleft()
            chunks.append((chunk, fut))
            need -= len(chunk)
        values: list[list[mpz] | None] = [None] * len(chunks)
        for i in reversed(range(len(chunks))):  # this process's share, then the tail the worker has not started
            chunk, fut = chunks[i]
            if fut is None or fut.cancel():
                values[i] = _obfuscator_chunk(self._key, self._mode, chunk)
                self.stolen += len(chunk)
        for i, (_, fut) in enumerate(chunks):
            if values[i] is None and fut is not None:
                got, seconds = fut.result()
                values[i] = got
                self.worker_seconds += seconds
            self._pool.extend(values[i] or [])
        return self._pool

    def close(self) -> None:
        """Cancel what is still queued, drop the unused values, and stop a dedicated process."""
        for _, fut in self._pending:
            if fut is not None:
                fut.cancel()
        self._pending.clear()
        self._pool = RandomnessPool(self._pool.public_key, mode=self._mode)
        if self._holds_switch and self._pid == os.getpid():
            self._holds_switch = False
            _release_switch_interval()
        if self._owned:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> BackgroundPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def role_pool(
    enabled: bool, key: PublicKey | PrivateKey, *, first: int, after: int = 0, share_first: bool = False,
    mode: Mode = "djn", executor: Executor | None = None, trusted_workers: bool = False,
    rng: RandomSource = SYSTEM_RANDOM,
) -> Iterator[BackgroundPool | None]:
    """A role's pool for the duration of its ``fit``: ``None`` unless ``enabled``; else a
    :class:`BackgroundPool` on the role's executor (or a dedicated process) with ``first``
    obfuscators requested at once, then ``after`` more, closed on exit.  ``share_first``: the
    role needs the first batch soon after it starts, so it keeps its share of it (one part in
    ``workers + 1``) rather than racing the workers for it."""
    if not enabled:
        yield None
        return
    with BackgroundPool(key, mode=mode, executor=executor, trusted_workers=trusted_workers, rng=rng) as bg:
        workers = 1 if executor is None else worker_count(executor)
        bg.request(first, here=first // (workers + 1) if share_first else 0)
        bg.request(after)
        yield bg
