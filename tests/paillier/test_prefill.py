"""The background pool (``securetrees.paillier.prefill``): the obfuscators of the exponents in
draw order, whoever computed them (the worker, or this process for chunks the worker had not
started); the worker's tasks carry a private key only when trusted."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

import pytest

from securetrees.errors import ParameterError
from securetrees.paillier import batch, prefill
from securetrees.paillier.prefill import BackgroundPool
from securetrees.rand import DeterministicRandom
from securetrees.testing.paillier import small_keypair
from tests.pickling_executor import PicklingExecutor, leaks

PK, SK = small_keypair(1024)


class StalledExecutor(Executor):
    """Accepts tasks and never starts them: every chunk is left to the caller."""

    def __init__(self) -> None:
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return Future()


def _expected(key: Any, count: int) -> list[Any]:
    return batch.obfuscators(key, "djn", count, rng=DeterministicRandom("prefill"))


@pytest.mark.parametrize("key", [PK, SK], ids=["public", "private"])
def test_worker_values_are_the_serial_obfuscators(key: Any) -> None:
    ex = PicklingExecutor()
    with BackgroundPool(key, executor=ex, chunk_size=7, rng=DeterministicRandom("prefill")) as bg:
        bg.request(20)
        pool = bg.ready(30)  # 10 more requested on the way
        assert len(pool) == 30 and bg.stolen == 0
        assert [pool.take() for _ in range(30)] == _expected(key, 30)
    assert not leaks(ex, int(SK._p), int(SK._q)) and not ex.shipped_private_key()


def test_chunks_the_worker_did_not_start_are_computed_here() -> None:
    ex = StalledExecutor()
    with BackgroundPool(SK, executor=ex, chunk_size=4, rng=DeterministicRandom("prefill")) as bg:
        bg.request(10)
        pool = bg.ready(6)  # two chunks taken over; the third stays queued
        assert ex.submitted == 3 and bg.stolen == 8 and bg.queued == 2
        assert [pool.take() for _ in range(8)] == _expected(SK, 8)
        assert len(bg.ready(2)) == 2 and bg.queued == 0


class HeadStartedExecutor(Executor):
    """A worker that has finished the first task and is running the second (it completes shortly,
    on a timer); the others are never started."""

    def __init__(self) -> None:
        self.futures: list[Future[Any]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        if len(self.futures) == 0:
            fut.set_result(fn(*args, **kwargs))
        elif len(self.futures) == 1:
            fut.set_running_or_notify_cancel()
            threading.Timer(0.05, fut.set_result, [fn(*args, **kwargs)]).start()
        self.futures.append(fut)
        return fut


def test_the_caller_takes_the_tail_while_the_worker_holds_the_head() -> None:
    """Shared chunk by chunk: the finished head is taken, the two unstarted tail chunks are
    computed here, and the running one is waited for; the values keep the request order."""
    ex = HeadStartedExecutor()
    with BackgroundPool(SK, executor=ex, chunk_size=3, rng=DeterministicRandom("prefill")) as bg:
        bg.request(12)
        pool = bg.ready(12)
        assert bg.stolen == 6 and bg.queued == 0 and [f.cancelled() for f in ex.futures] == [False, False, True, True]
        assert [pool.take() for _ in range(12)] == _expected(SK, 12)


class SteppedExecutor(Executor):
    """A worker that starts and finishes its next task, in submission order, each time
    :meth:`step` is called (the test steps it whenever the caller computes a chunk)."""

    def __init__(self) -> None:
        self.tasks: list[tuple[Future[Any], Callable[[], Any]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        self.tasks.append((fut, lambda: fn(*args, **kwargs)))
        return fut

    def step(self) -> None:
        for fut, run in self.tasks:
            if not fut.done() and fut.set_running_or_notify_cancel():
                fut.set_result(run())
                return


def test_both_sides_keep_working_until_the_request_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the caller computes a tail chunk the worker finishes a head chunk: 8 chunks end 4 and
    4: the caller cancels a tail chunk only just before computing it."""
    ex = SteppedExecutor()
    here = prefill._obfuscator_chunk

    worker = [False]

    def computed_here(*args: Any) -> Any:  # also what the stepped worker's task calls
        if not worker[0]:
            worker[0] = True
            ex.step()
            worker[0] = False
        return here(*args)

    monkeypatch.setattr(prefill, "_obfuscator_chunk", computed_here)
    with BackgroundPool(SK, executor=ex, chunk_size=2, rng=DeterministicRandom("prefill")) as bg:
        bg.request(16)
        pool = bg.ready(16)
        assert bg.stolen == 8 and bg.queued == 0
        assert [pool.take() for _ in range(16)] == _expected(SK, 16)


def test_trusted_workers_receive_the_private_key() -> None:
    ex = PicklingExecutor()
    with BackgroundPool(SK, executor=ex, trusted_workers=True, rng=DeterministicRandom("prefill")) as bg:
        pool = bg.ready(5)
        assert [pool.take() for _ in range(5)] == _expected(SK, 5)
    assert ex.shipped_private_key()


def test_a_dedicated_process_fills_the_pool() -> None:
    with BackgroundPool(PK, chunk_size=8, rng=DeterministicRandom("prefill")) as bg:
        bg.request(24)
        pool = bg.ready(24)
        assert [pool.take() for _ in range(24)] == _expected(PK, 24)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ParameterError):
        BackgroundPool(PK, chunk_size=0, executor=PicklingExecutor())
    with pytest.raises(ParameterError):
        BackgroundPool(PK, mode="bad", executor=PicklingExecutor())  # type: ignore[arg-type]
    with BackgroundPool(PK, executor=PicklingExecutor()) as bg, pytest.raises(ParameterError):
        bg.request(-1)


def test_a_forked_child_cannot_take_the_parents_pending_exponents() -> None:
    """A child process (fork) holding the pool refuses to compute from the parent's pending secret
    exponents; the companion: the parent itself, with the same pending chunks, takes them.  Pickling
    (and so copying into another process) is refused."""
    import copy
    import os
    import pickle

    from securetrees.errors import TypeMismatchError
    from securetrees.paillier.pool import PoolExhausted

    ex = StalledExecutor()
    with BackgroundPool(PK, executor=ex, chunk_size=4, rng=DeterministicRandom("prefill")) as bg:
        bg.request(8)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what ready() did, then leave without running the parent's exit code
            try:
                bg.ready(4)
                verdict = b"took"
            except PoolExhausted:
                verdict = b"refused"
            except BaseException:
                verdict = b"error"
            os.write(write, verdict)
            os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        assert os.read(read, 16) == b"refused"
        os.close(read)
        assert [bg.ready(4).take() for _ in range(4)] == _expected(PK, 4)  # the parent still may
        with pytest.raises(TypeMismatchError):
            pickle.dumps(bg)
        with pytest.raises(TypeMismatchError):
            copy.copy(bg)


@pytest.mark.parametrize(("bits", "chunk"), [(512, 8192), (1024, 2048), (2048, 1024)])
def test_the_default_chunk_covers_each_batch_table_row_twice(bits: int, chunk: int) -> None:
    """A chunk has two values per entry of a row of the key's batch table (window 12, 10, 8 from
    512 to 2048 bits), and never fewer than DEFAULT_CHUNK; a pool without ``chunk_size`` uses it."""
    pk, _ = small_keypair(bits)
    assert prefill.chunk_for(pk) == chunk == max(prefill.DEFAULT_CHUNK, 2 << pk.batch_window())
    ex = StalledExecutor()
    with BackgroundPool(pk, executor=ex, rng=DeterministicRandom("prefill")) as bg:
        bg.request(chunk + 1)
        assert ex.submitted == 2


def test_the_switch_interval_is_short_while_a_pool_is_open_and_restored_by_the_last_close() -> None:
    """Open pools shorten the process's GIL switch interval (so the executor's threads move the
    chunks); the setting comes back when the last of them closes, not before."""
    import sys

    before = sys.getswitchinterval()
    first = BackgroundPool(PK, executor=StalledExecutor(), rng=DeterministicRandom("prefill"))
    second = BackgroundPool(PK, executor=StalledExecutor(), rng=DeterministicRandom("prefill"))
    try:
        assert sys.getswitchinterval() == pytest.approx(min(before, prefill.SWITCH_INTERVAL))
        first.close()
        first.close()  # closing twice releases once
        assert sys.getswitchinterval() == pytest.approx(min(before, prefill.SWITCH_INTERVAL))
    finally:
        second.close()
        first.close()
    assert sys.getswitchinterval() == before


def test_the_callers_share_is_never_submitted_and_keeps_the_draw_order() -> None:
    """``request(count, here=k)``: the last k values are not handed to the executor; ``ready``
    computes them here, and the values are still the obfuscators of the exponents in draw order."""
    ex = StalledExecutor()
    with BackgroundPool(SK, executor=ex, chunk_size=4, rng=DeterministicRandom("prefill")) as bg:
        bg.request(10, here=4)
        assert ex.submitted == 2 and bg.queued == 10  # 4 + 2 submitted, 4 left here
        pool = bg.ready(10)
        assert bg.stolen == 10
        assert [pool.take() for _ in range(10)] == _expected(SK, 10)
    with BackgroundPool(SK, executor=StalledExecutor(), chunk_size=4) as bg:
        for bad in (-1, 11, 2.0):
            with pytest.raises(ParameterError):
                bg.request(10, here=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("workers", "share"), [(1, 6), (3, 3)])
def test_a_role_keeps_one_part_in_workers_plus_one_of_its_first_batch(workers: int, share: int) -> None:
    """``role_pool(share_first=True)``: of the first batch the role computes ``first // (workers + 1)``
    itself; ``after`` goes to the workers in full; the values keep the draw order."""
    ex = PicklingExecutor(workers)
    with prefill.role_pool(True, SK, first=12, after=5, share_first=True, executor=ex,
                           rng=DeterministicRandom("prefill")) as bg:
        assert bg is not None
        pool = bg.ready(17)
        assert bg.stolen == share
        assert [pool.take() for _ in range(17)] == _expected(SK, 17)
    with prefill.role_pool(False, SK, first=12) as none:
        assert none is None
