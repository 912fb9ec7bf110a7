"""Batch cryptography on executors (``specs/batch_executors.md``): chunking, order, failures,
and the trust rule (workers receive public keys only unless the caller opts in)."""

from __future__ import annotations

import math
import multiprocessing
import os
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor

import pytest

from securetrees._nt import mpz
from securetrees.dtpkc import batch as dtpkc_batch
from securetrees.errors import ParameterError
from securetrees.executors import (
    CHUNKS_PER_WORKER,
    check_n_jobs,
    chunk_size,
    modular_products,
    process_pool,
    role_executor,
    run_chunked,
    scatter_products,
    worker_count,
)
from securetrees.paillier import Ciphertext
from securetrees.paillier import batch as paillier_batch
from securetrees.paillier.batch import decrypt_many, encrypt_many
from securetrees.testing.dtpkc import dtpkc_test_keys
from securetrees.testing.paillier import small_keypair
from tests.pickling_executor import PicklingExecutor, leaks

PK, SK = small_keypair(512)
VALUES = list(range(-30, 30))


# -- chunking and order ---------------------------------------------------------------------


def test_worker_count() -> None:
    with ThreadPoolExecutor(3) as threads:
        assert worker_count(threads) == 3
    with ProcessPoolExecutor(2) as procs:
        assert worker_count(procs) == 2
    assert worker_count(PicklingExecutor(5)) == 5

    class Bare(Executor):
        pass

    assert worker_count(Bare()) == (os.cpu_count() or 1)

    class FakeClient:
        def nthreads(self) -> dict[str, int]:
            return {"tcp://a": 1, "tcp://b": 2}

    fake = Bare()
    fake._client = FakeClient()  # type: ignore[attr-defined]  # the shape of Dask's ClientExecutor
    assert worker_count(fake) == 3


def test_chunk_size() -> None:
    with ThreadPoolExecutor(2) as ex:
        assert chunk_size(80, ex) == 80 // (CHUNKS_PER_WORKER * 2)
        assert chunk_size(3, ex) == 1
        assert chunk_size(80, ex, 7) == 7
    assert chunk_size(80, None) == 80
    assert chunk_size(0, None) == 1
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ParameterError):
            chunk_size(10, None, bad)  # type: ignore[arg-type]


def _slow_identity(delays: dict[int, float], chunk: list[int]) -> list[int]:
    time.sleep(delays.get(chunk[0], 0.0))
    return chunk


def test_order_is_preserved_when_chunks_finish_out_of_order() -> None:
    items = list(range(40))
    delays = {i: 0.002 * (40 - i) for i in items}  # the first chunks finish last
    with ThreadPoolExecutor(4) as ex:
        assert run_chunked(_slow_identity, items, ex, 3, delays) == items
        assert run_chunked(_slow_identity, [], ex, None, delays) == []
    assert run_chunked(_slow_identity, items, None, None, delays) == items


def test_a_worker_failure_raises_in_the_caller_and_cancels_the_rest() -> None:
    """The one worker fails on chunk 0, then holds chunk 1 until the caller has raised: every later
    chunk is still queued when the caller cancels, whatever the machine's load (a fixed sleep in
    chunk 1 let a starved caller find chunk 2 started)."""
    started: list[int] = []
    lock = threading.Lock()
    raised = threading.Event()

    def task(chunk: list[int]) -> list[int]:
        with lock:
            started.append(chunk[0])
        if chunk[0] == 0:
            raise ParameterError("chunk 0 failed")
        raised.wait(60)
        return chunk

    with ThreadPoolExecutor(1) as ex:
        try:
            with pytest.raises(ParameterError, match="chunk 0 failed"):
                run_chunked(task, list(range(10)), ex, 1)
        finally:
            raised.set()
    assert started in ([0], [0, 1])  # the queued chunks were cancelled: none ran after the failure


def test_a_process_worker_failure_raises_its_own_type() -> None:
    """The worker raises (a public key cannot decrypt); the caller sees that TypeError."""
    with ProcessPoolExecutor(2) as ex, pytest.raises(TypeError, match="needs a private key"):
        run_chunked(paillier_batch._decrypt_chunk, [mpz(1)] * 4, ex, 1, PK, True)


def test_modular_products() -> None:
    modulus = mpz(2**127 - 1)
    groups = [[mpz(3 + i + 7 * j) for i in range(n)] for j, n in enumerate([1, 0, 5, 17, 2, 40])]
    expected = [math.prod(int(v) for v in g) % int(modulus) for g in groups]
    assert modular_products(groups, modulus) == expected
    with ThreadPoolExecutor(2) as ex:
        for size in (None, 1, 3, 100):
            assert modular_products(groups, modulus, ex, size) == expected
    assert modular_products([], modulus) == []


# -- the trust rule ----------------------------------------------------------------------------


@pytest.fixture
def rec() -> PicklingExecutor:
    return PicklingExecutor()


def test_the_leak_detector_finds_a_factor() -> None:
    """The detector can fail: the opt-in path does ship the factors, and it sees them."""
    ex = PicklingExecutor()
    cts = encrypt_many(PK, VALUES)
    assert decrypt_many(SK, cts, executor=ex, trusted_workers=True, chunk_size=8) == VALUES
    assert leaks(ex, int(SK._p)) and leaks(ex, int(SK._q))
    assert "securetrees.paillier.keys._restore_private_key" in ex.globals


def test_paillier_workers_receive_no_private_key_by_default(rec: PicklingExecutor) -> None:
    cts = encrypt_many(PK, VALUES, executor=rec, chunk_size=8)
    assert decrypt_many(SK, cts, executor=rec, chunk_size=8) == VALUES
    for mode in ("djn", "djn-short", "classic"):
        owner = encrypt_many(SK, VALUES, mode=mode, executor=rec, chunk_size=8)  # type: ignore[arg-type]
        assert decrypt_many(SK, owner) == VALUES
    assert SK.decrypt(paillier_batch.sum_ciphertexts(cts, executor=rec, chunk_size=5)) == sum(VALUES)
    assert rec.payloads, "the public-key work did go to the executor"
    assert not leaks(rec, int(SK._p), int(SK._q))
    assert not any("PrivateKey" in g or "private_key" in g for g in rec.globals)


def test_paillier_workers_never_see_plaintexts(rec: PicklingExecutor) -> None:
    """Public-key encryption ships exponents, not plaintexts (a distinctive value is not sent)."""
    marker = 0x5EC2E7_5EC2E7_5EC2E7_5EC2E7_5EC2E7_5EC2E7
    cts = encrypt_many(PK, [marker, 1], executor=rec, chunk_size=1)
    assert decrypt_many(SK, cts) == [marker, 1]
    assert len(rec.payloads) == 2 and not leaks(rec, marker)
    assert leaks(PicklingExecutor().record(marker), marker)  # the detector would see it


def test_dtpkc_workers_receive_public_values_only(rec: PicklingExecutor) -> None:
    keys = dtpkc_test_keys(512)
    weak = keys.weak["u1"]
    joint = weak.public.joint(keys.weak["u2"].public)
    secrets = [int(weak.theta), int(keys.weak["u2"].theta), int(keys.strong.lam),
               int(keys.cs_share.share), int(keys.cc_share.share)]
    marker = 0x7A11_7A11_7A11_7A11_7A11_7A11_7A11
    for pk in (weak.public, joint):
        cts = dtpkc_batch.encrypt_many(pk, [*VALUES, marker], executor=rec, chunk_size=8)
        dtpkc_batch.sum_many([cts[:5], cts[5:]], executor=rec, chunk_size=4)
    assert len(rec.payloads) > 10
    assert not leaks(rec, *secrets, marker)
    # what the payloads are made of: the two worker functions, the public values, integers
    assert {g for g in rec.globals if not g.startswith("gmpy2.")} == {
        "securetrees.dtpkc.batch._obfuscator_chunk", "securetrees.dtpkc.batch.PublicValues",
        "securetrees.executors._products",
    }, rec.globals


def test_secret_keys_cannot_be_submitted() -> None:
    """Even by mistake: a DT-PKC secret key or a bare Paillier private key refuses pickling."""
    keys = dtpkc_test_keys(512)
    ex = PicklingExecutor()
    for secret in (SK, keys.weak["u1"], keys.cs_share, keys.strong):
        with pytest.raises(TypeError, match="never pickled"):
            ex.submit(repr, secret)


# -- the roles' helpers ---------------------------------------------------------------------


def test_scatter_products_equals_the_naive_sums(rec: PicklingExecutor) -> None:
    modulus = mpz(PK.n_square)
    values = [mpz(c.value) for c in encrypt_many(PK, range(40))]
    targets = [[i % 7, 7 + i % 3, -1] for i in range(40)]
    want = [mpz(1)] * 11
    for v, ks in zip(values, targets, strict=True):
        for k in ks:
            if k >= 0:
                want[k] = want[k] * v % modulus
    assert scatter_products(values, targets, 11, modulus) == want
    assert scatter_products(values, targets, 11, modulus, rec, size=6) == want
    assert len(rec.payloads) == 7
    assert SK.decrypt(Ciphertext(PK, int(want[0]))) == sum(range(0, 40, 7))
    with pytest.raises(ParameterError):
        scatter_products(values, targets[:-1], 11, modulus)


def test_role_executor_and_process_pool() -> None:
    given = ThreadPoolExecutor(1)
    with role_executor(given, None) as ex:
        assert ex is given
    with role_executor(None, 1) as ex:
        assert ex is None
    with role_executor(None, 2) as ex:
        assert isinstance(ex, ProcessPoolExecutor) and worker_count(ex) == 2
    with pytest.raises(RuntimeError):
        ex.submit(int)  # shut down with the block
    with pytest.raises(ParameterError), role_executor(given, 2):
        pass
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ParameterError):
            check_n_jobs(bad)
    assert process_pool(None) is None and process_pool(1) is None
    pool = process_pool(2)
    assert isinstance(pool, ProcessPoolExecutor)
    if "forkserver" in multiprocessing.get_all_start_methods():  # a role's process runs gRPC threads:
        assert pool.submit(os.getppid).result() != os.getpid()  # its workers are a forkserver's children
    pool.shutdown()
    given.shutdown()
