"""Batch encryption on a local Dask cluster through ``Client.get_executor()`` (issue 10, item 3).

Two worker processes on loopback, dashboard off, small test keys.  Skipped only when
``distributed`` is not installed (the ``dask`` extra: ``pip install -e '.[test,dask]'``).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor

import pytest

from securetrees.paillier.batch import decrypt_many, encrypt_many

distributed = pytest.importorskip("distributed")

from securetrees.dtpkc import batch as dtpkc_batch  # noqa: E402
from securetrees.dtpkc import decrypt_strong, decrypt_weak  # noqa: E402
from securetrees.executors import run_chunked, worker_count  # noqa: E402
from securetrees.paillier import batch as paillier_batch  # noqa: E402
from securetrees.rand import DeterministicRandom  # noqa: E402
from securetrees.testing.dtpkc import dtpkc_test_keys  # noqa: E402
from securetrees.testing.paillier import small_keypair  # noqa: E402

PK, SK = small_keypair(512)
KEYS = dtpkc_test_keys(512)
VALUES = [*range(-40, 41), PK.n // 3 - 1, -(PK.n // 3 - 1)]


@pytest.fixture(scope="module")
def dask_executor() -> Iterator[Executor]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    )
    with cluster, distributed.Client(cluster) as client:
        yield client.get_executor()


def test_the_executor_reports_two_workers(dask_executor: Executor) -> None:
    assert worker_count(dask_executor) == 2


@pytest.mark.parametrize("mode", ["djn", "classic"])
def test_paillier_batch_on_dask_matches_the_serial_path(dask_executor: Executor, mode: str) -> None:
    serial = encrypt_many(PK, VALUES, mode=mode, rng=DeterministicRandom("dask"))  # type: ignore[arg-type]
    on_dask = encrypt_many(PK, VALUES, mode=mode, rng=DeterministicRandom("dask"),  # type: ignore[arg-type]
                              executor=dask_executor)
    assert decrypt_many(SK, on_dask) == decrypt_many(SK, serial) == VALUES
    assert [c.value for c in on_dask] == [c.value for c in serial]
    fresh = encrypt_many(PK, VALUES, mode=mode, executor=dask_executor)  # type: ignore[arg-type]
    assert decrypt_many(SK, fresh) == VALUES
    total = paillier_batch.sum_ciphertexts(fresh, executor=dask_executor, chunk_size=9)
    assert SK.decrypt(total) == sum(VALUES)


def test_paillier_private_key_on_trusted_dask_workers(dask_executor: Executor) -> None:
    cts = encrypt_many(PK, VALUES)
    assert decrypt_many(SK, cts, executor=dask_executor, trusted_workers=True) == VALUES


def test_dtpkc_batch_on_dask_matches_the_serial_path(dask_executor: Executor) -> None:
    weak = KEYS.weak["u1"]
    joint = weak.public.joint(KEYS.weak["u2"].public)
    values = VALUES[:-2]
    for pk in (weak.public, joint):
        serial = dtpkc_batch.encrypt_many(pk, values, rng=DeterministicRandom("dask"))
        on_dask = dtpkc_batch.encrypt_many(pk, values, rng=DeterministicRandom("dask"), executor=dask_executor)
        assert [c.to_ints() for c in on_dask] == [c.to_ints() for c in serial]
        assert [decrypt_strong(KEYS.strong, c) for c in on_dask] == values
    fresh = dtpkc_batch.encrypt_many(weak.public, values, executor=dask_executor)
    assert [decrypt_weak(weak, c) for c in fresh] == values
    total = dtpkc_batch.sum_ciphertexts(fresh, executor=dask_executor, chunk_size=9)
    assert decrypt_weak(weak, total) == sum(values)


def test_a_dask_worker_failure_raises_in_the_caller(dask_executor: Executor) -> None:
    """The worker raises (a public key cannot decrypt); the caller gets that error."""
    values = [c.value for c in encrypt_many(PK, [1, 2, 3, 4])]
    with pytest.raises(TypeError, match="needs a private key"):
        run_chunked(paillier_batch._decrypt_chunk, values, dask_executor, 1, PK, True)
