"""Batch tables: the wider window a large batch of obfuscators uses, and the one check of a
batch's exponents (``securetrees.paillier.keys.batch_window``, ``securetrees._nt.exponent_columns``)."""

from __future__ import annotations

from typing import Any

import gmpy2
import numpy as np
import pytest

from securetrees._nt import FixedBaseTable, exponent_columns, mpz, window_digits
from securetrees.errors import ExponentRangeError
from securetrees.paillier import keys
from securetrees.paillier.keys import BATCH_TABLE_BYTES, BATCH_TABLE_MIN, COMB_WINDOW, batch_window
from securetrees.rand import DeterministicRandom
from securetrees.testing.paillier import small_keypair

HALF = BATCH_TABLE_BYTES // 2  # a key owner's two CRT tables


@pytest.mark.parametrize(("modulus_bits", "exp_bits", "budget", "window"),
                         [(1024, 256, BATCH_TABLE_BYTES, 12), (512, 256, HALF, 12),  # 512-bit keys
                          (2048, 512, BATCH_TABLE_BYTES, 10), (1024, 512, HALF, 10),  # 1024-bit keys
                          (4096, 1024, BATCH_TABLE_BYTES, 8), (2048, 1024, HALF, 8)])  # 2048-bit keys
def test_batch_window_is_the_widest_within_the_budget(modulus_bits: int, exp_bits: int, budget: int,
                                                      window: int) -> None:
    assert batch_window(modulus_bits, exp_bits, budget) == window

    def size(w: int) -> int:
        return -(-exp_bits // w) * (1 << w) * ((modulus_bits + 7) // 8)

    assert window == COMB_WINDOW or size(window) <= budget
    assert window == 12 or size(window + 1) > budget


@pytest.mark.parametrize("bits", [512, 768])
@pytest.mark.parametrize("batch_slice", [keys.BATCH_SLICE, 1000])
def test_large_batches_give_the_single_obfuscators(bits: int, batch_slice: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch tables (both placements, both sides of the CRT threshold) compute ``hs^a``, a
    batch raised in slices (1,000: five of them) as in one."""
    monkeypatch.setattr(keys, "BATCH_SLICE", batch_slice)
    pk, sk = small_keypair(bits)
    rng = DeterministicRandom(f"batch tables {bits}")
    a = pk.draw_randomness_many("djn", BATCH_TABLE_MIN, rng)
    a[0], a[1] = mpz(0), (mpz(1) << pk.exponent_bits("djn")) - 1  # the extremes of the range
    expect = [gmpy2.powmod(pk.hs, e, pk.n_square) for e in a]
    assert pk.obfuscators_from("djn", a) == expect
    assert sk.obfuscators_from("djn", a) == expect
    assert pk.batch_table().window == batch_window(pk.n_square.bit_length(), pk.exponent_bits("djn")) > COMB_WINDOW
    small = a[:10]
    assert pk.obfuscators_from("djn", small) == sk.obfuscators_from("djn", small) == expect[:10]


@pytest.mark.parametrize("bad", [[-1], [1 << 64], [3, -5, 7], [1.5], ["7"], [None], [np.float64(2.0)]])
def test_a_batch_with_one_exponent_out_of_range_is_refused(bad: list[Any]) -> None:
    with pytest.raises(ExponentRangeError):
        exponent_columns([1, 2, *bad], 64, 12)
    table = FixedBaseTable.build(7, (1 << 127) - 1, 64, 12)
    with pytest.raises(ExponentRangeError):
        table.pow_many([1, *bad], 64)


def test_exponent_columns_are_the_digits() -> None:
    exps = [mpz(0), mpz(1), (mpz(1) << 64) - 1, mpz(0x0123456789ABCDEF)]
    for window in (3, 8, 12, 16):
        count = -(-64 // window)
        columns = exponent_columns(exps, 64, window)
        assert len(columns) == count
        assert [list(c) for c in zip(*columns, strict=True)] == [window_digits(e, window, count) for e in exps]
    assert exponent_columns([], 64, 12) == [[]] * 6
    as_numpy = exponent_columns([np.int64(5), 7, mpz(9)], 64, 12)  # any integer type, as mpz
    assert as_numpy == exponent_columns([mpz(5), mpz(7), mpz(9)], 64, 12)
