"""Randomness pools: single use, fork safety, no copies (specs/paillier.md, "Randomness pools")."""

from __future__ import annotations

import copy
import multiprocessing
import os
import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from securetrees.errors import KeyMismatchError, ParameterError
from securetrees.paillier import MODES, PoolExhausted, RandomnessPool
from securetrees.testing.paillier import small_keypair

PK, SK = small_keypair(512)
OTHER, _ = small_keypair(520)


@pytest.mark.parametrize("mode", MODES)
def test_pooled_encryption_decrypts(mode: str) -> None:
    pool = RandomnessPool(PK, mode=mode)  # type: ignore[arg-type]
    pool.fill(4)
    assert len(pool) == 4
    assert [SK.decrypt(PK.encrypt(m, pool=pool)) for m in (-2, 0, 5, 10**30)] == [-2, 0, 5, 10**30]
    assert len(pool) == 0


def test_single_use() -> None:
    pool = RandomnessPool(PK)
    pool.fill(50)
    values = [pool.take() for _ in range(50)]
    assert len(set(values)) == 50
    with pytest.raises(PoolExhausted):
        pool.take()
    with pytest.raises(PoolExhausted):
        PK.encrypt(1, pool=pool)


def test_two_pooled_ciphertexts_never_share_randomness() -> None:
    """Equal plaintexts under a pool give different ciphertexts (no obfuscator reused)."""
    pool = RandomnessPool(PK)
    pool.fill(20)
    assert len({PK.encrypt(7, pool=pool).value for _ in range(20)}) == 20


def test_pool_of_another_key_refused() -> None:
    pool = RandomnessPool(OTHER)
    pool.fill(1)
    with pytest.raises(KeyMismatchError):
        PK.encrypt(1, pool=pool)
    assert len(pool) == 1


def test_bad_parameters() -> None:
    with pytest.raises(ParameterError):
        RandomnessPool(PK, mode="fast")  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        RandomnessPool(PK).fill(-1)


def test_no_pickle_no_copy() -> None:
    pool = RandomnessPool(PK)
    pool.fill(2)
    with pytest.raises(TypeError):
        pickle.dumps(pool)
    with pytest.raises(TypeError):
        copy.copy(pool)
    with pytest.raises(TypeError):
        copy.deepcopy(pool)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_never_hands_out_parent_values() -> None:
    pool = RandomnessPool(PK)
    pool.fill(5)
    parent_values = set(pool._values)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report what it sees, then exit without running pytest's teardown
        status = 1
        try:
            size = len(pool)
            try:
                v = pool.take()
                leaked = v in parent_values
                outcome = "leaked" if leaked else "new"
            except PoolExhausted:
                outcome = "empty"
            pool.fill(1)
            fresh_ok = pool.take() not in parent_values
            os.write(write_end, f"{size} {outcome} {fresh_ok}".encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    report = os.read(read_end, 100).decode()
    os.close(read_end)
    assert status == 0
    assert report == "0 empty True"
    assert len(pool) == 5  # the parent keeps its own values


def _child_take(pool: RandomnessPool) -> str:
    try:
        pool.take()
    except PoolExhausted:
        return "empty"
    return "took"


def test_fork_context_process_pool() -> None:
    """A pool captured by a fork-context worker (module global) is empty there."""
    pool = RandomnessPool(PK)
    pool.fill(3)
    global _INHERITED
    _INHERITED = pool
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(1, mp_context=ctx) as ex:
        assert ex.submit(_take_inherited).result() == "empty"
    assert len(pool) == 3


_INHERITED: RandomnessPool | None = None


def _take_inherited() -> str:
    if _INHERITED is None:
        return "missing"
    return _child_take(_INHERITED)


def test_fill_with_an_executor() -> None:
    pool = RandomnessPool(PK)
    with ProcessPoolExecutor(2) as ex:
        pool.fill(9, executor=ex)
    assert len(pool) == 9
    assert SK.decrypt(PK.encrypt(-3, pool=pool)) == -3


def test_take_many_removes_what_it_returns() -> None:
    pool = RandomnessPool(PK)
    pool.fill(6)
    first = pool.take_many(4)
    with pytest.raises(PoolExhausted):
        pool.take_many(3)  # two left: none is taken
    rest = pool.take_many(2)
    assert len(set(first + rest)) == 6 and len(pool) == 0
