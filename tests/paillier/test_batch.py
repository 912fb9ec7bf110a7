"""Batch operations over sequences and arrays, serially and with a process pool."""

from __future__ import annotations

from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from securetrees.errors import EncodingOverflowError, KeyMismatchError, ParameterError
from securetrees.paillier import sum_ciphertexts
from securetrees.paillier.batch import _chunk_size
from securetrees.rand import DeterministicRandom
from securetrees.testing.paillier import small_keypair

PK, SK = small_keypair(512)
OTHER, _ = small_keypair(520)
VALUES = [*list(range(-20, 21)), PK.n // 3 - 1, -(PK.n // 3 - 1)]


@pytest.fixture(scope="module")
def procs() -> Any:
    with ProcessPoolExecutor(2) as ex:
        yield ex


@pytest.mark.parametrize("mode", ["djn", "djn-short", "classic"])
def test_encrypt_decrypt_many_serial(mode: str) -> None:
    cts = PK.encrypt_many(VALUES, mode=mode)  # type: ignore[arg-type]
    assert all(c.fresh for c in cts)
    assert SK.decrypt_many(cts) == VALUES


def test_with_processes(procs: Executor) -> None:
    cts = PK.encrypt_many(np.array(VALUES[:-2], dtype=np.int64), executor=procs)
    assert SK.decrypt_many(cts, executor=procs) == VALUES[:-2]
    for mode in ("djn", "classic"):
        owner = SK.encrypt_many(VALUES, mode=mode, executor=procs, chunk_size=5)  # type: ignore[arg-type]
        assert SK.decrypt_many(owner) == VALUES
    assert SK.decrypt(sum_ciphertexts(cts, executor=procs, chunk_size=7)) == sum(VALUES[:-2])


def test_with_threads() -> None:
    with ThreadPoolExecutor(2) as ex:
        assert SK.decrypt_many(PK.encrypt_many(VALUES, executor=ex), executor=ex) == VALUES


def test_same_result_serial_and_parallel(procs: Executor) -> None:
    """All randomness is drawn in the caller, so the executor does not change the ciphertexts."""
    a = PK.encrypt_many(VALUES, rng=DeterministicRandom("batch"))
    b = PK.encrypt_many(VALUES, rng=DeterministicRandom("batch"), executor=procs, chunk_size=3)
    assert [c.value for c in a] == [c.value for c in b]


def test_arrays_and_shapes() -> None:
    arr = np.arange(-6, 6).reshape(3, 4)
    cts = PK.encrypt_many(arr)
    assert SK.decrypt_many(np.array(cts, dtype=object).reshape(3, 4)) == arr.ravel().tolist()
    with pytest.raises(ParameterError):
        PK.encrypt_many(np.array([1.5, 2.0]))


def test_sum_of_many() -> None:
    cts = PK.encrypt_many(VALUES[:-2])
    s = sum_ciphertexts(cts)
    assert not s.fresh and SK.decrypt(s) == sum(VALUES[:-2])
    with pytest.raises(ParameterError):
        sum_ciphertexts([])
    with pytest.raises(KeyMismatchError):
        sum_ciphertexts([*cts, OTHER.encrypt(1)])
    with pytest.raises(TypeError):
        sum_ciphertexts([1, 2])  # type: ignore[list-item]


def test_overflow_in_batch() -> None:
    with pytest.raises(EncodingOverflowError):
        PK.encrypt_many([1, PK.n])
    big = PK.encrypt_residue(PK.n // 2)
    with pytest.raises(EncodingOverflowError):
        SK.decrypt_many([PK.encrypt(1), big])


def test_chunking() -> None:
    with ProcessPoolExecutor(2) as ex:
        assert _chunk_size(80, ex, None) == 10  # four chunks per worker
    assert _chunk_size(80, None, None) == 80
    with pytest.raises(ParameterError):
        _chunk_size(10, None, 0)


def test_private_key_is_never_pickled() -> None:
    """Review finding: pickling (or copying) a private key would write its factors in the clear."""
    import copy
    import pickle

    _, sk = small_keypair()
    with pytest.raises(TypeError, match="never pickled"):
        pickle.dumps(sk)
    with pytest.raises(TypeError, match="never pickled"):
        copy.copy(sk)


def test_private_key_batches_on_workers(procs: Executor) -> None:
    """Only an explicit private-key batch call sends the (wrapped) key to its workers."""
    _, sk = small_keypair()
    values = list(range(-20, 20))
    cts = sk.encrypt_many(values, executor=procs)
    assert sk.decrypt_many(cts, executor=procs) == values
    with ThreadPoolExecutor(2) as threads:
        assert sk.decrypt_many(sk.encrypt_many(values, executor=threads), executor=threads) == values
