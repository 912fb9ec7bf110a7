"""The host's subset-sum solver (securetrees.protocols.hybridtree.attack) is sound against brute force: it keeps
every bin some assignment consistent with the aggregates gives (so a cell it calls certain is
determined), never excludes the true bin, and pins instances with distinct gradients in tiny bins."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees.protocols.hybridtree.attack import Observation, SplitObservation, SubsetSumAttack
from securetrees.protocols.hybridtree.coarsen import coarsen_hist, group_bounds

WIDTH = 4  # three real bins and the missing bin


def _hist(bins: np.ndarray, g: np.ndarray, h: np.ndarray) -> np.ndarray:
    hist = np.zeros((1, WIDTH, 3), dtype=np.int64)
    for b, gi, hi in zip(bins.tolist(), g.tolist(), h.tolist(), strict=True):
        hist[0, b] += (1, gi, hi)
    return hist


def _brute_force(hist: np.ndarray, g: np.ndarray, h: np.ndarray) -> list[set[int]]:
    """Every bin each instance takes in some assignment reproducing ``hist``."""
    n = g.size
    possible: list[set[int]] = [set() for _ in range(n)]
    for assign in itertools.product(range(WIDTH), repeat=n):
        if np.array_equal(_hist(np.array(assign), g, h), hist):
            for i, b in enumerate(assign):
                possible[i].add(b)
    return possible


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, WIDTH - 1), st.integers(-6, 6), st.integers(0, 2)),
                min_size=1, max_size=6))
def test_solver_is_sound_against_brute_force(cells: list[tuple[int, int, int]]) -> None:
    bins = np.array([c[0] for c in cells], dtype=np.int64)
    g = np.array([c[1] for c in cells], dtype=np.int64)
    h = np.array([c[2] for c in cells], dtype=np.int64)
    n = bins.size
    hist = _hist(bins, g, h)
    solver = SubsetSumAttack(np.ones((n, 1), dtype=bool), [WIDTH - 1], WIDTH)
    solver.observe(Observation(0, np.arange(n, dtype=np.int64), hist, {0: (0, 1, 2)}), g, h)
    cand = solver.cand[:, 0, :]
    truth = _brute_force(hist, g, h)
    for i in range(n):
        assert cand[i, bins[i]]  # never excludes the true bin
        found = set(np.flatnonzero(cand[i]).tolist())
        assert truth[i] <= found  # sound: keeps every bin some assignment gives


def test_distinct_gradients_in_tiny_bins_are_recovered() -> None:
    rng = np.random.default_rng(0)
    n = 40
    g = rng.integers(-(1 << 24), 1 << 24, size=n)
    h = np.full(n, 1 << 24)
    bins = rng.integers(0, WIDTH, size=n)
    solver = SubsetSumAttack(np.ones((n, 1), dtype=bool), [WIDTH - 1], WIDTH)
    solver.observe(Observation(0, np.arange(n, dtype=np.int64), _hist(bins, g, h),
                               {0: (0, 1, 2)}), g, h)
    assert solver.certain()[:, 0].all()
    assert np.array_equal(np.argmax(solver.cand[:, 0, :], axis=1), bins)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(-6, 6), st.integers(0, 2)), min_size=1,
                max_size=7), st.sampled_from([(1, 5), (3, 5), (5,)]), st.integers(0, 5),
       st.booleans(), st.booleans())
def test_grouped_aggregates_and_routing_keep_the_truth_and_whole_groups(
    cells: list[tuple[int, int, int]], ends: tuple[int, ...], split_bin: int, categorical: bool,
    missing_left: bool,
) -> None:
    """Real bins 0-5 in groups ``ends`` and the missing bin 6: a grouped aggregate and one split's
    routing never exclude the true bin, and never separate two bins of one group."""
    width = 7
    bins = np.array([c[0] for c in cells], dtype=np.int64)
    g = np.array([c[1] for c in cells], dtype=np.int64)
    h = np.array([c[2] for c in cells], dtype=np.int64)
    n = bins.size
    hist = np.zeros((1, width, 3), dtype=np.int64)
    for b, gi, hi in zip(bins.tolist(), g.tolist(), h.tolist(), strict=True):
        hist[0, b] += (1, gi, hi)
    grouped = coarsen_hist(hist[0], ends)[None]
    solver = SubsetSumAttack(np.ones((n, 1), dtype=bool), [6], width)
    solver.observe(Observation(0, np.arange(n, dtype=np.int64), grouped, {0: ends}), g, h)
    j = int(np.searchsorted(np.asarray(ends), split_bin))
    lo, hi = group_bounds(ends, j)
    side = (lo <= bins) & (bins <= hi) if categorical else bins <= hi
    left = np.where(bins == 6, missing_left, side)
    solver.route(SplitObservation(np.arange(n, dtype=np.int64), 0, lo, hi, categorical,
                                  missing_left, left))
    cand = solver.cand[:, 0, :]
    assert cand[np.arange(n), bins].all()  # the true bin is never excluded
    for k in range(len(ends)):  # bins of one group stay or go together
        a, b = group_bounds(ends, k)
        assert (cand[:, a : b + 1].all(axis=1) | ~cand[:, a : b + 1].any(axis=1)).all()
