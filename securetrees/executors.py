"""Batch cryptography on any ``concurrent.futures.Executor`` (``specs/batch_executors.md``).

The batch functions of :mod:`securetrees.paillier.batch` and
:mod:`securetrees.dtpkc.batch` share this machinery:

* :func:`run_chunked` cuts a batch into consecutive chunks, submits one task
  per chunk and concatenates the results **in input order**; the first chunk
  that fails cancels the chunks not yet started and its exception is raised
  in the caller;
* :func:`chunk_size` picks the chunk length: :data:`CHUNKS_PER_WORKER`
  chunks per worker, so a slow worker delays the batch by about a quarter of
  its share, and each chunk's pickling is small beside its exponentiations;
* :func:`worker_count` reads the width of a standard pool or of a Dask
  ``Client.get_executor()``; any other executor counts as ``os.cpu_count()``
  workers (pass ``chunk_size`` to choose);
* :func:`modular_products` multiplies groups of residues (homomorphic sums) as
  a two-level tree: workers multiply consecutive pieces, the caller multiplies
  the pieces' products;
* :func:`scatter_products` multiplies each of many residues into several
  accumulators (a histogram: one ciphertext per row, one bin per feature):
  workers take runs of rows and return their partial accumulators, the caller
  multiplies the partials;
* :func:`flatten_ints` reads a batch of plaintexts (a sequence, or a numpy
  integer / object array flattened in C order);
* :func:`role_executor` is how a role gets its executor: the one it is given,
  or a process pool of ``n_jobs`` workers that it owns for the duration.

What a task carries is decided by the callers, never here: public keys,
exponents and public residues by default (the trust rule of the spec).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import numpy as np

from securetrees._nt import mpz
from securetrees.encoding import as_int
from securetrees.errors import ParameterError

__all__ = [
    "CHUNKS_PER_WORKER",
    "check_flag",
    "check_n_jobs",
    "check_trusted",
    "chunk_size",
    "flatten_ints",
    "modular_products",
    "process_pool",
    "role_executor",
    "run_chunked",
    "scatter_products",
    "worker_count",
]

T = TypeVar("T")
R = TypeVar("R")

CHUNKS_PER_WORKER: Final = 4


def flatten_ints(values: Iterable[int] | np.ndarray) -> list[int]:
    """A batch of plaintexts as Python ints: any iterable of integers, or a numpy integer or
    object array (flattened in C order); floats are refused with :class:`ParameterError`."""
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in "iuO":
            raise ParameterError(f"cannot encrypt an array of dtype {values.dtype}; encode it first")
        return [as_int(v) for v in values.ravel().tolist()]
    return [as_int(v) for v in values]


def worker_count(executor: Executor) -> int:
    """How many tasks ``executor`` runs at once.

    ``ThreadPoolExecutor`` / ``ProcessPoolExecutor`` (and pools that copy
    their ``_max_workers``): that width.  Dask's ``ClientExecutor``: the
    total number of worker threads known to the scheduler at the call.
    Anything else: ``os.cpu_count()``.
    """
    width = getattr(executor, "_max_workers", None)
    if isinstance(width, int) and width > 0:
        return width
    client = getattr(executor, "_client", None)
    nthreads = getattr(client, "nthreads", None)
    if callable(nthreads):
        threads = nthreads()
        if isinstance(threads, dict) and threads:
            return max(1, sum(int(t) for t in threads.values()))
    return os.cpu_count() or 1


def chunk_size(total: int, executor: Executor | None, size: int | None = None) -> int:
    """Items per task: ``size`` if given (a positive int), else everything in one chunk without an
    executor, else ``ceil(total / (CHUNKS_PER_WORKER · workers))``."""
    if size is not None:
        if type(size) is not int or size < 1:
            raise ParameterError("chunk_size must be a positive integer")
        return size
    if executor is None:
        return max(total, 1)
    return max(1, -(-total // (CHUNKS_PER_WORKER * worker_count(executor))))


def _collect(futures: list[Future[list[R]]]) -> list[list[R]]:
    """Results in submission order; on the first failure the rest are cancelled and it is raised."""
    try:
        return [f.result() for f in futures]
    except BaseException:
        for f in futures:
            f.cancel()
        raise


def run_chunked(
    fn: Callable[..., list[R]], items: Sequence[T], executor: Executor | None,
    size: int | None, *args: Any,
) -> list[R]:
    """``fn(*args, chunk)`` over consecutive chunks of ``items``, results concatenated in order.

    Without an executor the chunks run here, one after another.  ``fn`` must be
    a module-level function (it is pickled by name) returning one list per chunk.
    """
    step = chunk_size(len(items), executor, size)
    chunks = [list(items[i : i + step]) for i in range(0, len(items), step)]
    if executor is None:
        parts = [fn(*args, chunk) for chunk in chunks]
    else:
        parts = _collect([executor.submit(fn, *args, chunk) for chunk in chunks])
    return [x for part in parts for x in part]


def _products(modulus: mpz, pieces: list[list[mpz]]) -> list[mpz]:
    """The product of each piece modulo ``modulus`` (a worker task)."""
    out = []
    for piece in pieces:
        acc = mpz(1)
        for v in piece:
            acc = acc * v % modulus
        out.append(acc)
    return out


def modular_products(
    groups: Sequence[Sequence[mpz]], modulus: mpz, executor: Executor | None = None,
    size: int | None = None,
) -> list[mpz]:
    """``∏ group mod modulus`` for each group, in order (a homomorphic sum per group).

    Every group is cut into pieces of at most ``chunk_size(total, executor, size)``
    residues; one task multiplies a run of consecutive pieces holding about that
    many residues; the caller multiplies each group's piece products.  Without an
    executor every group is one piece.  An empty group has product 1.
    """
    total = sum(len(g) for g in groups)
    step = chunk_size(total, executor, size)
    pieces: list[list[mpz]] = []
    owner: list[int] = []
    for index, group in enumerate(groups):
        for i in range(0, len(group), step):
            pieces.append(list(group[i : i + step]))
            owner.append(index)
    tasks: list[list[list[mpz]]] = []
    load = step
    for piece in pieces:
        if load + len(piece) > step:
            tasks.append([])
            load = 0
        tasks[-1].append(piece)
        load += len(piece)
    if executor is None:
        parts = [_products(modulus, task) for task in tasks]
    else:
        parts = _collect([executor.submit(_products, modulus, task) for task in tasks])
    out = [mpz(1)] * len(groups)
    for index, product in zip(owner, (p for part in parts for p in part), strict=True):
        out[index] = out[index] * product % modulus
    return out


def _scatter(modulus: mpz, length: int, rows: list[tuple[mpz, list[int]]]) -> list[tuple[int, mpz]]:
    """Partial accumulators of a run of rows, as (index, product) pairs (a worker task)."""
    acc: dict[int, mpz] = {}
    for value, targets in rows:
        for k in targets:
            if 0 <= k < length:
                prev = acc.get(k)
                acc[k] = value if prev is None else prev * value % modulus
    return sorted(acc.items())


def scatter_products(
    values: Sequence[mpz], targets: Sequence[Sequence[int]], length: int, modulus: mpz,
    executor: Executor | None = None, size: int | None = None,
) -> list[mpz]:
    """``length`` accumulators: accumulator ``k`` is the product modulo ``modulus`` of every
    ``values[i]`` with ``k`` in ``targets[i]`` (negative indices are skipped), 1 if none.

    Each task multiplies a run of consecutive rows into sparse partial accumulators;
    the caller multiplies the partials.  A row's value is sent once whatever the
    number of its targets, so this pays off where every value lands in several
    accumulators (one per feature).  Products modulo ``modulus`` do not depend on
    the order of the factors: the result is the same with any executor.
    """
    if len(values) != len(targets):
        raise ParameterError("one list of targets per value")
    rows = [(v, list(t)) for v, t in zip(values, targets, strict=True)]
    out = [mpz(1)] * length
    if not rows:
        return out
    step = chunk_size(len(rows), executor, size)
    tasks = [rows[i : i + step] for i in range(0, len(rows), step)]
    if executor is None:
        parts = [_scatter(modulus, length, task) for task in tasks]
    else:
        parts = _collect([executor.submit(_scatter, modulus, length, task) for task in tasks])
    for part in parts:
        for k, product in part:
            out[k] = out[k] * product % modulus
    return out


def check_n_jobs(n_jobs: object) -> int | None:
    """``n_jobs`` as a role parameter: None (no executor) or a positive int, else
    :class:`ParameterError`."""
    if n_jobs is None:
        return None
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise ParameterError("n_jobs must be a positive integer (or None)")
    return n_jobs


def check_flag(value: object, name: str) -> bool:
    """An opt-in flag: exactly ``True`` or ``False`` (a string such as ``"false"`` is refused
    with :class:`ParameterError` rather than read as true)."""
    if not isinstance(value, bool):
        raise ParameterError(f"{name} must be true or false")
    return value


def check_trusted(trusted_workers: object) -> bool:
    """The ``trusted_workers`` opt-in (:func:`check_flag`)."""
    return check_flag(trusted_workers, "trusted_workers")


def process_pool(n_jobs: object) -> Executor | None:
    """A deployed role's executor from its ``n_jobs`` setting: a ``ProcessPoolExecutor`` of that
    many workers for the life of the role's process when it is at least 2, else None.

    The workers are never forked from the role's process, which runs gRPC's threads: a worker
    forked from it can die on its first task (``BrokenProcessPool``; gRPC skips its fork
    handlers while other threads are in a call).  They are forked from a fresh ``forkserver``
    process instead (``spawn`` where there is none)."""
    jobs = check_n_jobs(n_jobs)
    if jobs is None or jobs < 2:
        return None
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context(method))


@contextmanager
def role_executor(executor: Executor | None, n_jobs: int | None) -> Iterator[Executor | None]:
    """The executor a role's hot loops use: ``executor`` if given (the caller owns it), else a
    ``ProcessPoolExecutor(n_jobs)`` started here and shut down on exit when ``n_jobs`` is at
    least 2, else None (everything serial, in this process).  Giving both is refused."""
    jobs = check_n_jobs(n_jobs)
    if executor is not None and jobs is not None:
        raise ParameterError("give an executor or n_jobs, not both")
    if executor is not None or jobs is None or jobs < 2:
        yield executor
        return
    pool = ProcessPoolExecutor(jobs)
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
