"""Plaintext mode's G1 sums (``add_plain_sums``) equal the plain per-row loop, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.errors import ProtocolError
from securetrees.protocols.hybridtree.guest import add_plain_sums


def _loop(acc: list[int], values: list[int], keys: np.ndarray) -> list[int]:
    out = list(acc)
    for v, row in zip(values, keys.tolist(), strict=True):
        for k in row:
            if k >= 0:
                out[k] += v
    return out


@pytest.mark.parametrize("seed", range(20))
def test_limb_sums_equal_the_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, f, length = int(rng.integers(1, 300)), int(rng.integers(1, 6)), int(rng.integers(1, 60))
    offset = int(rng.integers(0, 4000))  # packed slots sit far up a block
    values = [(int(rng.integers(0, 2**62)) * int(rng.integers(1, 2**62)) + 1) << offset for _ in range(n)]
    values[0] <<= int(rng.integers(0, 200))  # values of unequal widths and trailing zeros
    keys = rng.integers(-1, length, (n, f))
    acc = [int(a) for a in rng.integers(0, 1000, length)]
    got = list(acc)
    add_plain_sums(got, values, keys)
    assert got == _loop(acc, values, keys)


def test_full_carry_chain() -> None:
    """Limbs of all ones in every row: every limb's sum carries into the next."""
    values = [(1 << 200) - 1] * 1000
    keys = np.zeros((1000, 1), dtype=np.int64)
    acc = [0]
    add_plain_sums(acc, values, keys)
    assert acc == [1000 * ((1 << 200) - 1)]


def test_missing_keys_and_zero_values_add_nothing() -> None:
    acc = [5, 6]
    add_plain_sums(acc, [0, 7, 9], np.array([[0], [-1], [-1]]))
    assert acc == [5, 6]


def test_negative_values_are_refused() -> None:
    with pytest.raises(ProtocolError):
        add_plain_sums([0], [3, -1], np.array([[0], [0]]))
