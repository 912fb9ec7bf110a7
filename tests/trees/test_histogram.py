"""Layer histograms and the vectorised split search (specs/trees.md "Histograms",
"Split search") against a brute-force search over raw partitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import ParameterError
from securetrees.trees import (
    BinMapper,
    Criterion,
    Gini,
    GradientGain,
    SquaredError,
    best_splits,
    build_histograms,
    class_stats,
    goes_left_binned,
)

CRITERIA: list[Criterion] = [Gini(), SquaredError(), GradientGain(1.0, True),
                             GradientGain(0.5, False)]


def _data(seed: int, n: int) -> tuple[np.ndarray, BinMapper, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack([
        rng.normal(size=n).round(1),
        rng.integers(0, 4, size=n).astype(float),
        rng.integers(0, 3, size=n).astype(float),
    ])
    X[rng.random((n, 3)) < 0.15] = np.nan
    mapper = BinMapper.fit(X, max_bins=6, categorical=[False, False, True])
    return X, mapper, mapper.transform(X), rng.integers(0, 3, size=n)


def _stats(crit: Criterion, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    w = rng.integers(1, 3, size=y.size).astype(float)
    if isinstance(crit, Gini):
        return class_stats(y, 3, w)
    if isinstance(crit, SquaredError):
        return np.column_stack([w, w * y, w * y * y])
    return np.column_stack([np.ones(y.size), rng.normal(size=y.size), rng.random(y.size)])


def _brute_force(binned: np.ndarray, mapper: BinMapper, stats: np.ndarray, crit: Criterion,
                 features: list[int], min_leaf: float) -> float:
    """Best gain over every (feature, bin, missing side) partition, computed from raw rows."""
    best = -np.inf
    parent = stats.sum(axis=0)
    tol = 1e-10 * max(abs(float(crit.cost(parent))), 1.0)
    for f in features:
        for b in range(mapper.n_bins[f]):
            for miss_left in (False, True):
                go = goes_left_binned(binned[:, f], np.int64(b), np.bool_(mapper.categorical[f]),
                                      np.bool_(miss_left), mapper.missing_bin)
                lft, rgt = stats[go].sum(axis=0), stats[~go].sum(axis=0)
                if min(crit.weight(lft), crit.weight(rgt)) < max(min_leaf, 1e-12):
                    continue
                g = float(crit.gain(parent, lft, rgt))
                if g > tol:
                    best = max(best, g)
    return best


@pytest.mark.parametrize("crit", CRITERIA, ids=lambda c: f"{c.name}")
@given(seed=st.integers(0, 10_000), min_leaf=st.sampled_from([1.0, 3.0]))
def test_best_split_matches_brute_force(crit: Criterion, seed: int, min_leaf: float) -> None:
    _, mapper, binned, y = _data(seed, 40)
    stats = _stats(crit, y, np.random.default_rng(seed + 1))
    hist = build_histograms(binned, np.zeros(40, dtype=np.int64), stats, 1, mapper.max_bins)
    res = best_splits(hist, crit, categorical=np.array(mapper.categorical),
                      n_bins=np.array(mapper.n_bins), min_samples_leaf=min_leaf)
    want = _brute_force(binned, mapper, stats, crit, [0, 1, 2], min_leaf)
    assert res.found[0] == np.isfinite(want)
    if res.found[0]:
        assert res.gain[0] == pytest.approx(want, rel=1e-9, abs=1e-9)
        # The reported children are the partition the split makes.
        go = goes_left_binned(binned[:, res.feature[0]], res.bin[0],
                              np.bool_(mapper.categorical[res.feature[0]]),
                              res.missing_left[0], mapper.missing_bin)
        np.testing.assert_allclose(res.left_stats[0], stats[go].sum(axis=0), atol=1e-9)
        np.testing.assert_allclose(res.right_stats[0], stats[~go].sum(axis=0), atol=1e-9)


@given(seed=st.integers(0, 10_000))
def test_histograms_add_over_disjoint_samples(seed: int) -> None:
    """The histogram forest merges client histograms by addition (Algorithm 3)."""
    _, mapper, binned, y = _data(seed, 50)
    stats = class_stats(y, 3, np.ones(50))
    nodes = np.random.default_rng(seed).integers(0, 3, size=50)
    whole = build_histograms(binned, nodes, stats, 3, mapper.max_bins)
    a = build_histograms(binned[:20], nodes[:20], stats[:20], 3, mapper.max_bins)
    b = build_histograms(binned[20:], nodes[20:], stats[20:], 3, mapper.max_bins)
    np.testing.assert_allclose(whole, a + b)


@given(seed=st.integers(0, 10_000))
def test_layer_search_equals_per_node_search_with_feature_subsets(seed: int) -> None:
    _, mapper, binned, y = _data(seed, 60)
    rng = np.random.default_rng(seed)
    stats = class_stats(y, 3, np.ones(60))
    nodes = rng.integers(0, 3, size=60)
    feats = np.array([[0, 2], [1, -1], [-1, 2]])  # -1 pads a node with fewer features
    kw = {"categorical": np.array(mapper.categorical), "n_bins": np.array(mapper.n_bins)}
    hist = build_histograms(binned, nodes, stats, 3, mapper.max_bins, feats)
    layer = best_splits(hist, Gini(), features=feats, **kw)
    for k in range(3):
        own = feats[k][feats[k] >= 0]
        sel = nodes == k
        h1 = build_histograms(binned[sel], np.zeros(sel.sum(), dtype=np.int64), stats[sel], 1,
                              mapper.max_bins, own[None, :])
        one = best_splits(h1, Gini(), features=own[None, :], **kw)
        assert layer.found[k] == one.found[0]
        if one.found[0]:
            assert (layer.feature[k], layer.bin[k], layer.missing_left[k], layer.gain[k]) == (
                one.feature[0], one.bin[0], one.missing_left[0], one.gain[0])
            assert layer.feature[k] in own
            want = _brute_force(binned[sel], mapper, stats[sel], Gini(), list(own), 1.0)
            assert layer.gain[k] == pytest.approx(want)


def test_missing_side_is_learned_and_defaults_to_heavier_child() -> None:
    # Missing values behave like class 1: the best split sends them with the 1s.
    X = np.array([[0.0], [1.0], [2.0], [3.0], [np.nan], [np.nan]])
    y = np.array([0, 0, 1, 1, 1, 1])
    m = BinMapper.fit(X)
    hist = build_histograms(m.transform(X), np.zeros(6, dtype=np.int64),
                            class_stats(y, 2, np.ones(6)), 1, m.max_bins)
    res = best_splits(hist, Gini(), categorical=np.array([False]), n_bins=np.array(m.n_bins))
    assert (res.bin[0], bool(res.missing_left[0])) == (0 + 1, False)
    # No missing values at the node: future ones follow the heavier child (left here).
    X2 = np.array([[0.0], [1.0], [2.0], [3.0]])
    m2 = BinMapper.fit(X2)
    hist2 = build_histograms(m2.transform(X2), np.zeros(4, dtype=np.int64),
                             class_stats(np.array([0, 0, 0, 1]), 2, np.ones(4)), 1, m2.max_bins)
    res2 = best_splits(hist2, Gini(), categorical=np.array([False]), n_bins=np.array(m2.n_bins))
    assert (res2.bin[0], bool(res2.missing_left[0])) == (2, True)


def test_bad_shapes_rejected() -> None:
    hist = np.zeros((2, 3, 5, 2))
    with pytest.raises(ParameterError):
        best_splits(hist, Gini(), categorical=np.zeros(2, bool), n_bins=np.ones(2, int))
    with pytest.raises(ParameterError):
        best_splits(hist, Gini(), categorical=np.zeros(3, bool), n_bins=np.ones(3, int),
                    features=np.zeros((2, 2), int))
    with pytest.raises(ParameterError):
        best_splits(hist, Gini(), categorical=np.zeros(3, bool), n_bins=np.ones(3, int),
                    features=np.full((2, 3), 7))
    with pytest.raises(ParameterError):
        build_histograms(np.zeros((4, 2), np.uint8), np.zeros(3, np.int64), np.ones((4, 1)), 1, 4)


@given(seed=st.integers(0, 10_000))
def test_feature_mask_and_column_subset_layouts(seed: int) -> None:
    """The all-features layout: a 1-D column list and a per-node boolean mask give the same
    splits as the per-node feature lists."""
    _, mapper, binned, y = _data(seed, 60)
    rng = np.random.default_rng(seed)
    stats = class_stats(y, 3, np.ones(60))
    nodes = rng.integers(0, 2, size=60)
    kw = {"categorical": np.array(mapper.categorical), "n_bins": np.array(mapper.n_bins)}
    feats = np.array([[0, 2], [1, -1]])
    mask = np.array([[True, False, True], [False, True, False]])
    full = build_histograms(binned, nodes, stats, 2, mapper.max_bins, np.array([0, 1, 2]))
    np.testing.assert_allclose(full, build_histograms(binned, nodes, stats, 2, mapper.max_bins))
    a = best_splits(full, Gini(), feature_mask=mask, **kw)
    b = best_splits(build_histograms(binned, nodes, stats, 2, mapper.max_bins, feats), Gini(),
                    features=feats, **kw)
    for field in ("found", "gain", "feature", "bin", "missing_left"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    with pytest.raises(ParameterError):
        best_splits(full, Gini(), feature_mask=mask[:, :2], **kw)
    with pytest.raises(ParameterError):
        build_histograms(binned, nodes, stats, 2, mapper.max_bins, np.array([5]))


def _first_best(binned: np.ndarray, mapper: BinMapper, stats: np.ndarray, features: list[int]
                ) -> tuple[int, int, int] | None:
    """The documented tie-break by brute force over raw partitions: the first strictly best
    (feature, bin, missing side) in the order features, bins, missing-right then missing-left
    (missing-left only where the node has missing values of the feature)."""
    crit = Gini()
    parent = stats.sum(axis=0)
    tol = 1e-10 * max(abs(float(crit.cost(parent))), 1.0)
    best: tuple[float, int, int, int] | None = None
    for f in features:
        has_missing = bool(np.any(binned[:, f] == mapper.missing_bin))
        for b in range(mapper.n_bins[f]):
            for variant in (0, 1) if has_missing else (0,):
                go = goes_left_binned(binned[:, f], np.int64(b), np.bool_(mapper.categorical[f]),
                                      np.bool_(variant == 1), mapper.missing_bin)
                lft, rgt = stats[go].sum(axis=0), stats[~go].sum(axis=0)
                if min(crit.weight(lft), crit.weight(rgt)) < 1.0:
                    continue
                g = float(crit.gain(parent, lft, rgt))
                if g > tol and (best is None or g > best[0]):
                    best = (g, f, b, variant)
    return None if best is None else best[1:]


@given(seed=st.integers(0, 10_000))
def test_tie_break_with_empty_bins_matches_brute_force(seed: int) -> None:
    """Nodes with few samples leave most bins empty; the search (which skips the empty numeric
    bins) still picks the first best candidate in the documented order, integer counts making
    ties exact."""
    rng = np.random.default_rng(seed)
    n = 60
    X = np.column_stack([rng.integers(0, 12, size=n).astype(float), rng.integers(0, 9, size=n).astype(float),
                         rng.integers(0, 5, size=n).astype(float)])
    X[rng.random(X.shape) < 0.2] = np.nan
    mapper = BinMapper.fit(X, max_bins=16, categorical=[False, False, True])
    binned = mapper.transform(X)
    y = np.where(np.isnan(X[:, 2]), 1, rng.integers(0, 2, size=n))  # often "missing against the rest"
    stats = class_stats(y, 2, rng.integers(1, 3, size=n).astype(float))
    nodes = rng.integers(0, 6, size=n)
    kw = {"categorical": np.array(mapper.categorical), "n_bins": np.array(mapper.n_bins)}
    res = best_splits(build_histograms(binned, nodes, stats, 6, mapper.max_bins), Gini(), **kw)
    for k in range(6):
        sel = nodes == k
        want = _first_best(binned[sel], mapper, stats[sel], [0, 1, 2])
        assert res.found[k] == (want is not None)
        if want is not None:
            f, b, variant = want
            assert (res.feature[k], res.bin[k]) == (f, b)
            if np.any(binned[sel, f] == mapper.missing_bin):
                assert bool(res.missing_left[k]) == (variant == 1)


@given(seed=st.integers(0, 10_000))
def test_histograms_of_listed_rows_and_narrow_width(seed: int) -> None:
    """``rows=`` equals histograms of the gathered rows; ``missing_bin=`` a narrower histogram
    with the missing values in its last slot, the same split."""
    _, mapper, binned, y = _data(seed, 50)
    rng = np.random.default_rng(seed)
    stats = class_stats(y, 3, np.ones(50))
    rows = np.sort(rng.choice(50, 30, replace=False))
    nodes = rng.integers(0, 2, size=30)
    feats = np.array([[0, 1], [2, -1]])
    want = build_histograms(binned[rows], nodes, stats[rows], 2, mapper.max_bins, feats)
    np.testing.assert_array_equal(build_histograms(binned, nodes, stats, 2, mapper.max_bins, feats, rows=rows), want)
    assert not want[1, 1].any()  # a padded slot stays empty
    top = int(max(mapper.n_bins))
    narrow = build_histograms(binned, nodes, stats, 2, top, feats, rows=rows, missing_bin=mapper.missing_bin)
    np.testing.assert_array_equal(narrow[:, :, :top], want[:, :, :top])
    np.testing.assert_array_equal(narrow[:, :, top], want[:, :, mapper.max_bins])
    kw = {"categorical": np.array(mapper.categorical), "n_bins": np.array(mapper.n_bins), "features": feats}
    a, b = best_splits(want, Gini(), **kw), best_splits(narrow, Gini(), **kw)
    for field in ("found", "gain", "feature", "bin", "missing_left"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
