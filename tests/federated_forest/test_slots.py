"""Slot packing: sums of weighted units never carry between slots, and decode is exact."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from protocols.federated_forest.slots import classification_units, regression_units


@given(st.lists(st.integers(0, 4), min_size=1, max_size=40), st.data())
def test_classification_sums_stay_in_their_slots(codes: list[int], data: st.DataObject) -> None:
    n = len(codes)
    layout, units = classification_units(np.asarray(codes, dtype=np.int64), 5)
    weights = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    total = sum(w * u for w, u in zip(weights, units, strict=True))
    if sum(weights) > n:  # the protocol's bound: bootstrap weights sum to n
        return
    counts = layout.decode(layout.unpack(total, 1))[0]
    want = np.bincount(codes, weights=weights, minlength=5)
    assert np.array_equal(counts, want)


@given(st.lists(st.integers(-4000, 4000), min_size=1, max_size=30), st.data())
def test_regression_bins_decode_exactly(ys: list[int], data: st.DataObject) -> None:
    y = np.asarray(ys, dtype=np.float64) / 16  # dyadic: exact at frac_bits >= 4
    layout, units = regression_units(y, 8)
    n = y.size
    bins = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    packed = sum(u << (b * layout.bin_bits) for u, b in zip(units, bins, strict=True))
    stats = layout.decode(layout.unpack(packed, 3))
    for b in range(3):
        sel = np.asarray(bins) == b
        assert stats[b, 0] == sel.sum()
        assert stats[b, 1] == y[sel].sum()
        assert stats[b, 2] == (y[sel] ** 2).sum()


def test_known_answer_layout() -> None:
    layout, units = classification_units(np.array([0, 1, 1, 2]), 3)
    assert layout.slot_bits == 8
    assert units == [1, 1 << 8, 1 << 8, 1 << 16]
    layout, units = regression_units(np.array([0.5, -1.0]), 4)
    assert (layout.bias, layout.slot_bits) == (16, 16)
    assert units[0] == 1 | (8 + 16) << 16 | 64 << 32
