"""The host's slot layout (specs/hybridtree.md, H2): sums of packed plaintexts unpack exactly."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.encoding import FixedPoint
from securetrees.errors import EncodingOverflowError, ParameterError
from securetrees.protocols.hybridtree.layout import SlotLayout


@st.composite
def leaves_and_values(draw: st.DrawFn) -> tuple[dict[int, list[tuple[float, float]]], int, int]:
    n_leaves = draw(st.integers(1, 6))
    g_bound = draw(st.integers(1, 4))
    frac = draw(st.integers(1, 30))
    leaves = {}
    for k in range(n_leaves):
        m = draw(st.integers(1, 12))
        leaves[3 * k + 1] = [
            (draw(st.floats(-g_bound, g_bound)), draw(st.floats(0.0, 1.0))) for _ in range(m)
        ]
    return leaves, g_bound, frac


@given(leaves_and_values(), st.data())
def test_sum_of_any_subset_unpacks_exactly(case, data) -> None:  # type: ignore[no-untyped-def]
    leaves, g_bound, frac = case
    layout = SlotLayout.plan({k: len(v) for k, v in leaves.items()}, frac_bits=frac,
                             g_bound=g_bound, h_bound=1, capacity=400)
    sums = [0] * layout.n_blocks
    expect = {}
    for k, vals in leaves.items():
        g = FixedPoint(frac).encode_int64(np.array([v[0] for v in vals]))
        h = FixedPoint(frac).encode_int64(np.array([v[1] for v in vals]))
        keep = data.draw(st.lists(st.booleans(), min_size=len(vals), max_size=len(vals)))
        sel = np.array(keep, dtype=bool)
        packed = layout.encode(k, g, h)
        sums[layout.slots[k].block] += sum(p for p, s in zip(packed, keep, strict=True) if s)
        expect[k] = (int(sel.sum()), int(g[sel].sum()), int(h[sel].sum()))
    for k, want in expect.items():
        assert layout.unpack(sums[layout.slots[k].block], k) == want
    assert all(s < 1 << 400 for s in sums)


@given(st.dictionaries(st.integers(0, 100), st.integers(1, 5000), min_size=1, max_size=30),
       st.integers(200, 2045))
def test_plan_fits_capacity_and_slots_are_disjoint(sizes: dict[int, int], capacity: int) -> None:
    layout = SlotLayout.plan(sizes, frac_bits=24, g_bound=1, h_bound=1, capacity=capacity)
    for b in range(layout.n_blocks):
        spans = sorted((s.offset, s.offset + s.width) for s in layout.slots.values() if s.block == b)
        assert spans[-1][1] <= capacity
        assert all(a[1] <= c[0] for a, c in itertools.pairwise(spans))


def test_known_answer() -> None:
    """Pinned: leaf 7 with 3 instances, f = 4, B = 1 (w_n = 2, w_g = 8, w_h = 7)."""
    layout = SlotLayout.plan({2: 1, 7: 3}, frac_bits=4, g_bound=1, h_bound=1, capacity=64)
    assert layout.slots[7].offset == 1 + 7 + 6 and layout.slots[7].width == 2 + 8 + 7
    packed = layout.encode(7, [-16, 8], [4, 0])
    assert packed == [(1 | 0 << 2 | 4 << 10) << 14, (1 | 24 << 2 | 0 << 10) << 14]
    assert layout.unpack(sum(packed), 7) == (2, -8, 4)


def test_overflow_and_bad_plans_raise() -> None:
    layout = SlotLayout.plan({0: 2}, frac_bits=4, g_bound=1, h_bound=1, capacity=64)
    with pytest.raises(EncodingOverflowError):
        layout.encode(0, [17], [0])
    with pytest.raises(EncodingOverflowError):
        layout.encode(0, [0], [-1])
    with pytest.raises(ParameterError):
        SlotLayout.plan({0: 1 << 20}, frac_bits=40, g_bound=1, h_bound=1, capacity=64)
    with pytest.raises(ParameterError):
        SlotLayout.plan({0: 0}, frac_bits=4, g_bound=1, h_bound=1, capacity=64)
    with pytest.raises(ParameterError):
        FixedPoint(4).encode_int64(np.array([np.nan]))
    with pytest.raises(EncodingOverflowError):
        FixedPoint(4).encode_int64(np.array([2.0**60]))
