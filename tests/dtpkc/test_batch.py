"""DT-PKC batch HoEnc and homomorphic sums, serially and on executors (``specs/batch_executors.md``)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

from securetrees.dtpkc import PublicKey, SystemParams, TableCache, decrypt_strong, decrypt_weak, encrypt
from securetrees.dtpkc.batch import PublicValues, encrypt_many, sum_ciphertexts, sum_many
from securetrees.encoding import SignedRange
from securetrees.errors import EncodingOverflowError, KeyMismatchError, ParameterError
from securetrees.rand import DeterministicRandom
from securetrees.testing.dtpkc import dtpkc_test_keys

KEYS = dtpkc_test_keys(512)
WEAK = KEYS.weak["u1"]
JOINT = WEAK.public.joint(KEYS.weak["u2"].public)
BOUND = int(KEYS.params.n) // 3
VALUES = [*range(-20, 21), BOUND - 1, -(BOUND - 1)]


@pytest.fixture(scope="module")
def procs() -> Iterator[Executor]:
    with ProcessPoolExecutor(2) as ex:
        yield ex


def _same(a: list, b: list) -> bool:  # type: ignore[type-arg]
    return [c.to_ints() for c in a] == [c.to_ints() for c in b]


def test_serial_batch_is_hoenc_one_by_one() -> None:
    """The batch draws r in the same order as repeated HoEnc, so equal seeds give equal ciphertexts."""
    rng = DeterministicRandom("dtpkc-batch")
    one_by_one = [encrypt(WEAK.public, m, rng=rng) for m in VALUES]
    batch = encrypt_many(WEAK.public, VALUES, rng=DeterministicRandom("dtpkc-batch"))
    assert _same(batch, one_by_one) and all(c.fresh for c in batch)
    assert [decrypt_weak(WEAK, c) for c in batch] == VALUES


@pytest.mark.parametrize("size", [None, 1, 7])
def test_processes_give_the_serial_ciphertexts(procs: Executor, size: int | None) -> None:
    for pk in (WEAK.public, JOINT):
        serial = encrypt_many(pk, VALUES, rng=DeterministicRandom("same"))
        parallel = encrypt_many(pk, VALUES, rng=DeterministicRandom("same"), executor=procs, chunk_size=size)
        assert _same(serial, parallel)
        assert [decrypt_strong(KEYS.strong, c) for c in parallel] == VALUES


def test_workers_build_comb_tables_from_the_window(procs: Executor) -> None:
    """A key whose system uses comb tables: workers rebuild it with the same window."""
    params = SystemParams(KEYS.params.n, KEYS.params.g, TableCache(4))
    pk = PublicKey(params, WEAK.public.h)
    assert PublicValues.of(pk).window == 4
    serial = encrypt_many(pk, VALUES, rng=DeterministicRandom("tables"))
    parallel = encrypt_many(pk, VALUES, rng=DeterministicRandom("tables"), executor=procs)
    assert len(params.tables) == 2 and _same(serial, parallel)
    assert [decrypt_weak(WEAK, c) for c in parallel] == VALUES


def test_threads_and_arrays() -> None:
    arr = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    with ThreadPoolExecutor(2) as ex:
        cts = encrypt_many(WEAK.public, arr, executor=ex)
    assert [decrypt_weak(WEAK, c) for c in cts] == arr.ravel().tolist()
    with pytest.raises(ParameterError):
        encrypt_many(WEAK.public, np.array([0.5]))


def test_range_checks_happen_before_anything_is_sent() -> None:
    with pytest.raises(EncodingOverflowError):
        encrypt_many(WEAK.public, [1, BOUND])
    narrow = SignedRange(int(KEYS.params.n), 2**20)
    assert [decrypt_weak(WEAK, c, signed=narrow) for c in encrypt_many(WEAK.public, [5, -5], signed=narrow)] == [5, -5]
    with pytest.raises(EncodingOverflowError):
        encrypt_many(WEAK.public, [2**20], signed=narrow)
    with pytest.raises(KeyMismatchError):
        encrypt_many(WEAK, [1])  # type: ignore[arg-type]  # a secret key is not a public key


def test_sums(procs: Executor) -> None:
    cts = encrypt_many(JOINT, VALUES[:-2])
    bounds = [(0, 1), (1, 10), (10, 41)]
    expected = [sum(VALUES[a:b]) for a, b in bounds]
    for executor, size in ((None, None), (procs, None), (procs, 2)):
        sums = sum_many([cts[a:b] for a, b in bounds], executor=executor, chunk_size=size)
        assert [decrypt_strong(KEYS.strong, s) for s in sums] == expected
        assert not any(s.fresh for s in sums)
    total = sum_ciphertexts(cts, executor=procs)
    assert decrypt_strong(KEYS.strong, total) == sum(VALUES[:-2])
    a, b = cts[:5], cts[5:10]
    assert [decrypt_strong(KEYS.strong, s) for s in sum_many(zip(a, b, strict=True))] == [
        x + y for x, y in zip(VALUES[:5], VALUES[5:10], strict=True)
    ]


def test_sum_errors() -> None:
    c = encrypt(WEAK.public, 1)
    with pytest.raises(ParameterError):
        sum_many([])
    with pytest.raises(ParameterError):
        sum_many([[c], []])
    with pytest.raises(KeyMismatchError):
        sum_ciphertexts([c, encrypt(JOINT, 1)])
    with pytest.raises(TypeError):
        sum_ciphertexts([c, 1])  # type: ignore[list-item]
