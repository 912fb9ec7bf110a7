"""Batch operations over sequences and arrays, serially and with a process pool.

The executor machinery itself (chunking, order, failures, what workers receive) is
tested in ``tests/test_executors.py``; the Dask cluster in ``tests/test_executors_dask.py``.
"""

from __future__ import annotations

from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from securetrees.errors import (
    DecodeError,
    EncodingOverflowError,
    InvalidCiphertext,
    KeyMismatchError,
    ParameterError,
)
from securetrees.paillier import sum_ciphertexts
from securetrees.paillier.batch import (
    ciphertext_values,
    ciphertexts_from_bytes,
    ciphertexts_to_bytes,
    decrypt_many,
    encrypt_many,
    encrypt_to_bytes,
    sum_many,
)
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
    cts = encrypt_many(PK, VALUES, mode=mode)  # type: ignore[arg-type]
    assert all(c.fresh for c in cts)
    assert decrypt_many(SK, cts) == VALUES


def test_with_processes(procs: Executor) -> None:
    cts = encrypt_many(PK, np.array(VALUES[:-2], dtype=np.int64), executor=procs)
    assert decrypt_many(SK, cts, executor=procs, trusted_workers=True) == VALUES[:-2]
    for mode in ("djn", "classic"):
        owner = encrypt_many(SK, VALUES, mode=mode, executor=procs, chunk_size=5,  # type: ignore[arg-type]
                                trusted_workers=True)
        assert decrypt_many(SK, owner) == VALUES
    assert SK.decrypt(sum_ciphertexts(cts, executor=procs, chunk_size=7)) == sum(VALUES[:-2])


def test_with_threads() -> None:
    with ThreadPoolExecutor(2) as ex:
        cts = encrypt_many(PK, VALUES, executor=ex)
        assert decrypt_many(SK, cts, executor=ex, trusted_workers=True) == VALUES
        assert decrypt_many(SK, cts, executor=ex) == VALUES  # in this process


def test_private_key_work_stays_here_by_default(procs: Executor) -> None:
    """Without trusted_workers an executor does not change what a private-key call computes."""
    rng_a, rng_b = DeterministicRandom("owner"), DeterministicRandom("owner")
    for mode in ("djn", "classic"):
        a = encrypt_many(SK, VALUES, mode=mode, rng=rng_a)  # type: ignore[arg-type]
        b = encrypt_many(SK, VALUES, mode=mode, rng=rng_b, executor=procs)  # type: ignore[arg-type]
        assert [c.value for c in a] == [c.value for c in b]
        assert decrypt_many(SK, b, executor=procs) == VALUES


def test_owner_and_public_encryption_agree_in_djn_mode(procs: Executor) -> None:
    """Key-owner CRT encryption on trusted workers gives the public key's ciphertexts."""
    a = encrypt_many(PK, VALUES, rng=DeterministicRandom("agree"))
    b = encrypt_many(SK, VALUES, rng=DeterministicRandom("agree"), executor=procs, trusted_workers=True)
    assert [c.value for c in a] == [c.value for c in b]


def test_same_result_serial_and_parallel(procs: Executor) -> None:
    """All randomness is drawn in the caller, so the executor does not change the ciphertexts."""
    a = encrypt_many(PK, VALUES, rng=DeterministicRandom("batch"))
    b = encrypt_many(PK, VALUES, rng=DeterministicRandom("batch"), executor=procs, chunk_size=3)
    assert [c.value for c in a] == [c.value for c in b]


def test_arrays_and_shapes() -> None:
    arr = np.arange(-6, 6).reshape(3, 4)
    cts = encrypt_many(PK, arr)
    assert decrypt_many(SK, np.array(cts, dtype=object).reshape(3, 4)) == arr.ravel().tolist()
    with pytest.raises(ParameterError):
        encrypt_many(PK, np.array([1.5, 2.0]))


def test_sum_of_many() -> None:
    cts = encrypt_many(PK, VALUES[:-2])
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
        encrypt_many(PK, [1, PK.n])
    big = PK.encrypt_residue(PK.n // 2)
    with pytest.raises(EncodingOverflowError):
        decrypt_many(SK, [PK.encrypt(1), big])


def test_sum_many(procs: Executor) -> None:
    cts = encrypt_many(PK, VALUES[:-2])
    bounds = [(0, 1), (1, 9), (9, 30), (30, len(cts))]
    groups = [cts[a:b] for a, b in bounds]
    expected = [sum(VALUES[a:b]) for a, b in bounds]
    for executor, size in ((None, None), (procs, None), (procs, 3)):
        sums = sum_many(groups, executor=executor, chunk_size=size)
        assert [SK.decrypt(s) for s in sums] == expected
        assert not any(s.fresh for s in sums)
    columns = np.array(cts[:12], dtype=object).reshape(3, 4)
    assert [SK.decrypt(s) for s in sum_many(columns.T)] == [sum(VALUES[i:12:4]) for i in range(4)]
    with pytest.raises(ParameterError):
        sum_many([cts[:2], []])
    with pytest.raises(ParameterError):
        sum_many([])
    with pytest.raises(KeyMismatchError):
        sum_many([cts[:2], [OTHER.encrypt(1)]], executor=procs)


def test_private_key_is_never_pickled() -> None:
    """Review finding: pickling a private key would write its factors in the clear. A copy is the
    key itself (it is immutable; a copy would only duplicate its secret in memory), so that
    scikit-learn's ``clone`` of an estimator holding a key pair works without pickling."""
    import copy
    import pickle

    _, sk = small_keypair()
    with pytest.raises(TypeError, match="never pickled"):
        pickle.dumps(sk)
    assert copy.copy(sk) is sk and copy.deepcopy(sk) is sk


def test_private_key_batches_on_trusted_workers(procs: Executor) -> None:
    """With trusted_workers=True the (wrapped) key reaches the workers and they do the work."""
    _, sk = small_keypair()
    values = list(range(-20, 20))
    cts = encrypt_many(sk, values, executor=procs, trusted_workers=True)
    assert decrypt_many(sk, cts, executor=procs, trusted_workers=True) == values
    with ThreadPoolExecutor(2) as threads:
        owner = encrypt_many(sk, values, executor=threads, trusted_workers=True)
        assert decrypt_many(sk, owner, executor=threads, trusted_workers=True) == values


def test_wrapped_private_key_survives_a_forwarding_hop() -> None:
    """A cluster may unpickle a task and pickle it again (Dask: client, scheduler, worker):
    the wrapper unpickles as a wrapper, never as a bare key that would refuse the next hop."""
    import pickle

    from securetrees.paillier.keys import WorkerPrivateKey

    first = pickle.loads(pickle.dumps(SK.for_workers()))  # noqa: S301  # our own bytes
    hop = pickle.loads(pickle.dumps(first))  # noqa: S301
    assert isinstance(hop, WorkerPrivateKey)
    assert hop.key.decrypt(PK.encrypt(-5)) == -5


def test_ciphertext_bytes_round_trip_and_refresh() -> None:
    cts = encrypt_many(PK, VALUES)
    stale = cts[0] + cts[1]  # not fresh: re-randomised on the way out
    data = ciphertexts_to_bytes([*cts, stale])
    back = ciphertexts_from_bytes(data, PK)
    assert decrypt_many(SK, back) == [*VALUES, VALUES[0] + VALUES[1]]
    assert [c.value for c in back[:-1]] == [c.value for c in cts]
    assert back[-1].value != stale.value
    assert ciphertext_values(back) == [c.value for c in back]
    assert ciphertexts_to_bytes([]) == b"" and ciphertexts_from_bytes(b"", PK) == []


def test_ciphertext_bytes_refuse_bad_values() -> None:
    width = 2 * PK.modulus_bytes
    good = ciphertexts_to_bytes(encrypt_many(PK, [1, 2]))
    with pytest.raises(DecodeError):
        ciphertexts_from_bytes(good[:-1], PK)
    for bad in (0, PK.n_square, PK.n * 7):  # zero, out of range, not a unit
        with pytest.raises(InvalidCiphertext):
            ciphertexts_from_bytes(good + int(bad).to_bytes(width, "big"), PK)


@pytest.mark.parametrize("key", [PK, SK])
def test_encrypt_to_bytes_writes_what_the_objects_would(key: Any) -> None:
    """Same seeded source: the bytes of :func:`ciphertexts_to_bytes` over :func:`encrypt_many`."""
    data = encrypt_to_bytes(key, VALUES, rng=DeterministicRandom("to bytes"))
    assert data == ciphertexts_to_bytes(encrypt_many(key, VALUES, rng=DeterministicRandom("to bytes")))
    assert decrypt_many(SK, ciphertexts_from_bytes(data, PK)) == VALUES
    assert encrypt_to_bytes(PK, []) == b""


def test_a_batch_is_range_checked_at_both_ends() -> None:
    """One check per batch (the least and the greatest value) still refuses any value outside."""
    for bad in (PK.n // 3, -(PK.n // 3)):
        for where in (0, len(VALUES) // 2, len(VALUES)):
            values = [*VALUES[:where], bad, *VALUES[where:]]
            with pytest.raises(EncodingOverflowError):
                encrypt_to_bytes(PK, values)
            with pytest.raises(EncodingOverflowError):
                encrypt_many(PK, values)
    assert PK.plaintext_range.embed_many([-1, 0, 5]) == [PK.n - 1, 0, 5]
