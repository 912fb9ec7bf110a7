"""Coarsened guest bins (protocols/hybridtree/coarsen.py): every node grouping is a union of base
groups, groups reach the expected size where the node allows, and the guests refuse anything
finer (specs/hybridtree.md, "Coarsened guest bins")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees.errors import ParameterError, ProtocolError
from securetrees.protocols.hybridtree.coarsen import (
    base_ends,
    check_grouping,
    coarsen_hist,
    group_bounds,
    node_groups,
)
from securetrees.protocols.hybridtree.messages import BuildNode, HistogramRequest, SplitChoice, SplitDecision
from securetrees.protocols.hybridtree.testing import HybridData


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 70), st.integers(1, 8), st.floats(0, 5000), st.integers(0, 200))
def test_node_groups_are_unions_of_base_groups_of_the_expected_size(
    n_bins: int, width: int, expected: float, min_size: int,
) -> None:
    base = base_ends(n_bins, width)
    assert base[-1] == n_bins - 1 and list(base) == sorted(set(base))
    sizes = np.diff((-1, *base))
    assert sizes.min() >= min(width, n_bins)  # no base group narrower than the width
    assert sizes.max() < 2 * width or len(base) == 1  # the remainder joins the last group only
    ends = node_groups(base, n_bins, expected, min_size)
    assert set(ends) <= set(base) and ends[-1] == n_bins - 1
    assert check_grouping(ends, n_bins, width) == ends
    per_bin = expected / n_bins
    for j in range(len(ends)):
        lo, hi = group_bounds(ends, j)
        if len(ends) > 1:  # each group of a split feature reaches the expected size
            assert per_bin * (hi - lo + 1) >= min_size * (1 - 1e-12)
    # where the counts allow it (the shortest prefix of base groups reaching the size leaves a
    # rest that reaches it too), the feature keeps at least two groups
    first = next((e for e in base if per_bin * (e + 1) >= min_size), None)
    if first is not None and first < n_bins - 1 and per_bin * (n_bins - 1 - first) >= min_size:
        assert len(ends) >= 2


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 40), st.integers(1, 4), st.floats(1, 3000), st.floats(1, 3000),
       st.integers(1, 64))
def test_child_groups_coarsen_the_parents(n_bins: int, width: int, big: float, small: float,
                                          min_size: int) -> None:
    parent = node_groups(base_ends(n_bins, width), n_bins, max(big, small), min_size)
    child = node_groups(parent, n_bins, min(big, small), min_size)
    assert set(child) <= set(parent)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=60), st.integers(1, 3))
def test_coarsen_hist_moves_each_group_sum_to_its_last_bin(bins: list[int], width: int) -> None:
    n_bins = 10
    hist = np.zeros((n_bins + 1, 3), dtype=np.int64)
    for i, b in enumerate(bins):
        hist[b] += (1, i, 2 * i)
    hist[-1] = (4, 5, 6)
    ends = base_ends(n_bins, width)
    out = coarsen_hist(hist, ends)
    assert np.array_equal(out[-1], hist[-1]) and np.array_equal(out.sum(axis=0), hist.sum(axis=0))
    for j in range(len(ends)):
        lo, hi = group_bounds(ends, j)
        assert np.array_equal(out[hi], hist[lo : hi + 1].sum(axis=0))
        assert not out[lo:hi].any()


@pytest.mark.parametrize("ends", [(), (3, 3, 7), (5, 3, 7), (3,), (2, 7), (0, 7), (3, 8)])
def test_check_grouping_refuses(ends: tuple[int, ...]) -> None:
    with pytest.raises(ParameterError):
        check_grouping(ends, 8, 2)


@pytest.mark.parametrize("args", [(0, 2), (5, 0)])
def test_base_ends_refuses(args: tuple[int, int]) -> None:
    with pytest.raises(ParameterError):
        base_ends(*args)


def test_messages_refuse_malformed_groups() -> None:
    with pytest.raises(ParameterError):
        BuildNode(0, 0, (0, 1), ((7,),))  # one grouping per feature
    with pytest.raises(ParameterError):
        SplitChoice(3, False, 0, 3, False, 4, 5, 0)  # a group of no bin
    with pytest.raises(ParameterError):
        SplitChoice(3, False, 0, 3, False, 4, 5, 5)  # more bins than end at bin 3
    assert SplitChoice(3, True, -1, -1, False, -1, -1, 0).is_leaf  # a leaf carries no group


def _fitted(make: Any, fit_quiet: Any, data: HybridData) -> Any:
    return fit_quiet(make("clf", "plaintext", categorical_features=[5]), data.X, data.y,
                     data.host_features, data.guest_features, data.guest_rows)


@pytest.mark.parametrize("groups", [(tuple(range(8)),), ((0, 7),), ((2, 7),), ((3, 6),)])
def test_guest_refuses_groups_finer_than_the_base_groups(make: Any, fit_quiet: Any, data: HybridData,
                                                         groups: tuple[tuple[int, ...], ...]) -> None:
    m = _fitted(make, fit_quiet, data)
    guest = m.guests_[0]
    peers = tuple(g.name for g in m.guests_)
    req = HistogramRequest(len(m.host_.records) - 1, 1, 77, peers, 1, (BuildNode(0, 0, (0,), groups),))
    with pytest.raises(ProtocolError):
        guest.on_histogram("host", req)


@pytest.mark.parametrize(("bin_", "width"), [(2, 1), (3, 1), (4, 2), (3, 3)])
def test_guest_refuses_a_split_group_finer_than_the_base_groups(
    make: Any, fit_quiet: Any, data: HybridData, bin_: int, width: int,
) -> None:
    m = _fitted(make, fit_quiet, data)
    guest = m.guests_[0]
    tree = len(m.host_.records) - 1
    node = max(guest.splits[tree], default=0) + 1000  # a node id the guest has not split
    with pytest.raises(ProtocolError):
        guest.on_split("host", SplitDecision(tree, 1, (SplitChoice(node, False, 0, bin_, False,
                                                                    node + 1, node + 2, width),)))


def test_guests_only_ever_see_base_group_splits(make: Any, fit_quiet: Any, data: HybridData) -> None:
    """Every split of the fitted model is at a base-group end (numeric) or on a union of base groups
    (categorical); with the mitigation off, single bins appear (the planted leak)."""
    def finest(model: Any) -> int:
        width = 1 << 30
        for table in model.guests_[0].splits.values():
            for split in table.values():
                if split.categorical:
                    width = min(width, int(split.threshold - split.low + 1))
        return width

    m = _fitted(make, fit_quiet, data)
    assert finest(m) >= 2
    for table in m.guests_[0].splits.values():
        for s in table.values():
            if not s.categorical:
                b = int(np.searchsorted(m.guests_[0]._mapper.edges[s.feature], s.threshold))
                assert b in base_ends(int(m.guests_[0]._mapper.n_bins[s.feature]), 2)
    off = fit_quiet(make("clf", "plaintext", categorical_features=[5], min_group_width=1), data.X,
                    data.y, data.host_features, data.guest_features, data.guest_rows)
    assert finest(off) == 1
