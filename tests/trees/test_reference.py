"""Central reference trainers (specs/trees.md "Growing", "Random forest", "Gradient
boosting", "Random-draw order"): scikit-learn agreement, replayability, stopping rules,
missing values and categorical features."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from securetrees.trees import (
    BinMapper,
    Gini,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    GrowParams,
    RandomForestClassifier,
    RandomForestRegressor,
    Tree,
    TreeBuilder,
    TreeDraws,
    best_splits,
    build_histograms,
    class_stats,
    goes_left_binned,
    make_criterion,
    node_totals,
)


def _float32_data(seed: int, n: int = 200) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Continuous data without ties, exactly representable in float32 (scikit-learn's dtype)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).astype(np.float32).astype(np.float64)
    y_cls = (X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.normal(size=n) > 0).astype(int) + (X[:, 3] > 1)
    y_reg = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + 0.3 * rng.normal(size=n)
    return X, y_cls, y_reg


def _walk_together(sk: object, ours: Tree, X: np.ndarray, y: np.ndarray,
                   criterion: str) -> tuple[int, int]:
    """Walk both trees together; return (internal nodes matched, exact gain ties met).

    Same features, same partition of the training rows, same leaf values.  Thresholds
    differ by design: scikit-learn takes the midpoint between the two adjacent values
    *within the node*, we take the bin edge (the midpoint between adjacent values of the
    whole column), so each of our thresholds must lie in the node's gap (max value sent
    left, min value sent right).  Where two features give exactly the same gain,
    scikit-learn breaks the tie by a random feature order and we by the lowest feature:
    there we check that both gains are equal and stop descending."""
    t = sk.tree_  # type: ignore[attr-defined]
    proba = criterion != "squared_error"
    crit = make_criterion(criterion)

    def stats(r: np.ndarray) -> np.ndarray:
        if proba:
            return np.bincount(y[r], minlength=t.value.shape[2]).astype(float)
        return np.array([r.size, y[r].sum(), (y[r] ** 2).sum()])

    ties = matched = 0
    stack = [(0, 0, np.arange(X.shape[0]))]
    while stack:
        a, b, rows = stack.pop()
        assert (t.children_left[a] == -1) == (ours.left[b] == -1)
        if t.children_left[a] == -1:
            v = t.value[a, 0] / t.value[a, 0].sum() if proba else t.value[a, 0]
            w = ours.value[b] / ours.value[b].sum() if proba else ours.value[b]
            np.testing.assert_allclose(v, w, rtol=1e-9, atol=1e-12)
            continue
        f, g = t.feature[a], ours.feature[b]
        if f != g:
            sk_go = X[rows, f] <= t.threshold[a]
            our_go = X[rows, g] <= ours.threshold[b]
            gains = [crit.gain(stats(rows), stats(rows[go]), stats(rows[~go]))
                     for go in (sk_go, our_go)]
            assert gains[0] == pytest.approx(gains[1], rel=1e-12)
            assert g < f
            ties += 1
            continue
        matched += 1
        x = X[rows, f]
        go = x <= t.threshold[a]
        np.testing.assert_array_equal(go, x <= ours.threshold[b])
        assert x[go].max() <= ours.threshold[b] < x[~go].min()
        stack += [(t.children_left[a], ours.left[b], rows[go]),
                  (t.children_right[a], ours.right[b], rows[~go])]
    return matched, ties


@pytest.mark.parametrize("criterion", ["gini", "entropy", "squared_error"])
def test_single_tree_equals_sklearn_tree(criterion: str) -> None:
    """Seed 0 has no gain ties at depth 4: the trees are identical."""
    X, y_cls, y_reg = _float32_data(0)
    if criterion == "squared_error":
        y = y_reg
        sk = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
        ours = RandomForestRegressor(1, max_depth=4, bootstrap=False, max_features=None,
                                     max_bins=256).fit(X, y)
        np.testing.assert_allclose(sk.predict(X), ours.predict(X), rtol=1e-9, atol=1e-12)
    else:
        y = y_cls
        sk = DecisionTreeClassifier(criterion=criterion, max_depth=4, random_state=0).fit(X, y)
        ours = RandomForestClassifier(1, criterion=criterion, max_depth=4, bootstrap=False,
                                      max_features=None, max_bins=256).fit(X, y)
        np.testing.assert_allclose(sk.predict_proba(X), ours.predict_proba(X))
    assert _walk_together(sk, ours.model_.trees[0], X, y, criterion)[1] == 0
    assert sk.tree_.node_count == ours.model_.trees[0].n_nodes


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
def test_trees_agree_with_sklearn_up_to_gain_ties(criterion: str) -> None:
    matched = ties = 0
    for seed in range(1, 8):
        X, y, _ = _float32_data(seed)
        sk = DecisionTreeClassifier(criterion=criterion, max_depth=5, random_state=0).fit(X, y)
        ours = RandomForestClassifier(1, criterion=criterion, max_depth=5, bootstrap=False,
                                      max_features=None, max_bins=256).fit(X, y)
        m, t = _walk_together(sk, ours.model_.trees[0], X, y, criterion)
        matched, ties = matched + m, ties + t
    assert matched > 5 * ties  # ties are the exception


def _replay_vertical(X: np.ndarray, y: np.ndarray, parties: np.ndarray, seed: int,
                     n_trees: int, max_depth: int) -> list[Tree]:
    """A vertically partitioned replay built only from the public building blocks: the
    master replays the draws; each party scores its own drawn features on its own
    histograms; the master keeps the best (ties: lower feature); the provider routes."""
    n, n_features = X.shape
    mapper = BinMapper.fit(X)  # in a protocol each party bins its own columns
    binned = mapper.transform(X)
    gens = np.random.SeedSequence(seed).spawn(n_trees)
    trees = []
    for child in gens:
        draws = TreeDraws(np.random.Generator(np.random.PCG64(child)), n, n_features,
                          bootstrap=True, max_features=2)
        stats = class_stats(y, 2, draws.sample_weight)
        rows = np.flatnonzero(draws.sample_weight > 0)
        builder = TreeBuilder(n_features, 2)
        builder.add_root(stats.sum(), stats.sum(axis=0))
        frontier, pos, depth = [0], np.zeros(rows.size, dtype=np.int64), 0
        while frontier:
            totals = node_totals(pos, stats[rows], len(frontier))
            can = GrowParams(max_depth).may_split(depth, totals.sum(axis=1)) & ~Gini().is_pure(totals)
            drawn = {k: draws.node_features() for k in np.flatnonzero(can)}
            best: dict[int, tuple[float, int, int, bool]] = {}
            for p in np.unique(parties):
                for k, feats in drawn.items():
                    own = feats[parties[feats] == p]
                    if own.size == 0:
                        continue
                    sel = rows[pos == k]
                    hist = build_histograms(binned[sel], np.zeros(sel.size, dtype=np.int64),
                                            stats[sel], 1, mapper.max_bins, own[None, :])
                    r = best_splits(hist, Gini(), categorical=np.array(mapper.categorical),
                                    n_bins=np.array(mapper.n_bins), features=own[None, :])
                    cand = (float(r.gain[0]), -int(r.feature[0]), int(r.bin[0]),
                            bool(r.missing_left[0]))
                    if r.found[0] and (k not in best or cand[:2] > best[k][:2]):
                        best[k] = cand
            nxt: list[int] = []
            new_pos = np.full(rows.size, -1)
            for k in sorted(best):
                _, neg_f, b, ml = best[k]
                f = -neg_f
                here = np.flatnonzero(pos == k)
                go = goes_left_binned(binned[rows[here], f], np.int64(b),
                                      np.bool_(mapper.categorical[f]), np.bool_(ml),
                                      mapper.missing_bin)
                ls, rs = stats[rows[here[go]]].sum(axis=0), stats[rows[here[~go]]].sum(axis=0)
                lid, rid = builder.split(frontier[k], feature=f, threshold=mapper.threshold(f, b),
                                         categorical=False, missing_left=ml, provider=int(parties[f]),
                                         left=(ls.sum(), ls), right=(rs.sum(), rs))
                new_pos[here[go]], new_pos[here[~go]] = len(nxt), len(nxt) + 1
                nxt += [lid, rid]
            keep = new_pos >= 0
            rows, pos, frontier, depth = rows[keep], new_pos[keep], nxt, depth + 1
        trees.append(builder.build())
    return trees


def test_federated_replay_grows_the_same_forest() -> None:
    X, _, r = _float32_data(5, 300)
    y = (r > 0).astype(int)
    parties = np.array([0, 1, 1, 2])
    central = RandomForestClassifier(3, max_depth=4, max_features=2, random_state=11,
                                     feature_providers=parties).fit(X, y)
    replay = _replay_vertical(X, y, parties, seed=11, n_trees=3, max_depth=4)
    for a, b in zip(central.model_.trees, replay, strict=True):
        assert a.same_as(b)


def test_same_seed_same_forest_other_seed_other_forest() -> None:
    X, y, _ = _float32_data(3)
    a = RandomForestClassifier(4, max_depth=3, random_state=7).fit(X, y).model_
    b = RandomForestClassifier(4, max_depth=3, random_state=7).fit(X, y).model_
    c = RandomForestClassifier(4, max_depth=3, random_state=8).fit(X, y).model_
    assert all(s.same_as(t) for s, t in zip(a.trees, b.trees, strict=True))
    assert not all(s.same_as(t) for s, t in zip(a.trees, c.trees, strict=True))


def test_per_tree_feature_sampling_restricts_each_tree() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 8))
    y = (X.sum(axis=1) > 0).astype(int)
    m = RandomForestClassifier(10, max_depth=3, max_features_tree=3, max_features=None,
                               random_state=1).fit(X, y).model_
    used = [set(t.feature[t.feature >= 0].tolist()) for t in m.trees]
    assert all(len(u) <= 3 for u in used)
    assert len(set().union(*used)) > 3


def test_stopping_rules() -> None:
    X, y, _ = _float32_data(4, 400)
    for depth in (0, 1, 3):
        t = RandomForestClassifier(1, max_depth=depth, bootstrap=False,
                                   max_features=None).fit(X, y).model_.trees[0]
        assert t.max_depth == depth
    t = RandomForestClassifier(1, min_samples_leaf=30, bootstrap=False,
                               max_features=None).fit(X, y).model_.trees[0]
    assert t.weight[t.is_leaf].min() >= 30
    t = RandomForestClassifier(1, min_samples_split=100, bootstrap=False,
                               max_features=None).fit(X, y).model_.trees[0]
    assert t.weight[~t.is_leaf].min() >= 100
    full = RandomForestClassifier(1, bootstrap=False, max_features=None).fit(X, y).model_.trees[0]
    leaves = full.value[full.is_leaf]
    assert (np.count_nonzero(leaves, axis=1) == 1).all()  # grown to purity
    assert full.n_nodes < 400


def test_missing_values_in_training_and_prediction() -> None:
    """NaN carries the signal: the tree learns where missing values go."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    y = (x > 0).astype(int)
    missing = rng.random(400) < 0.3
    x_obs = np.where(missing, np.nan, x)
    y = np.where(missing, 1, y)
    for est in (RandomForestClassifier(1, max_depth=2, bootstrap=False, max_features=None),
                GradientBoostingClassifier(20, max_depth=2, min_samples_leaf=1)):
        est.fit(x_obs[:, None], y)
        assert est.predict(np.array([[np.nan], [-1.0], [1.0]])).tolist() == [1, 0, 1]
        assert est.score(x_obs[:, None], y) == 1.0


def test_categorical_features_in_training_and_prediction() -> None:
    """Category 2 of 5 decides the label; as ordinal codes no single threshold isolates it."""
    rng = np.random.default_rng(1)
    c = rng.integers(0, 5, size=500).astype(float)
    noise = rng.normal(size=500)
    y = (c == 2).astype(int)
    X = np.column_stack([noise, c])
    m = RandomForestClassifier(1, max_depth=1, bootstrap=False, max_features=None,
                               categorical_features=[1]).fit(X, y)
    t = m.model_.trees[0]
    assert (t.feature[0], t.threshold[0], bool(t.categorical[0])) == (1, 2.0, True)
    assert m.predict(np.array([[0.0, 2.0], [0.0, 3.0], [0.0, 7.0], [0.0, np.nan]])).tolist() == [
        1, 0, 0, 0]
    gb = GradientBoostingClassifier(10, max_depth=1, categorical_features=np.array([False, True]))
    assert gb.fit(X, y).score(X, y) == 1.0


def test_gbdt_first_round_known_answer() -> None:
    """One depth-1 round by hand: squared loss, base 0, λ = 1, learning rate 0.5 (Eq. 7/8)."""
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([1.0, 1.0, 3.0, 5.0])
    m = GradientBoostingRegressor(1, learning_rate=0.5, max_depth=1, min_samples_leaf=1,
                                  base_score="zero", reg_lambda=1.0).fit(X, y)
    t = m.model_.trees[0]
    # g = pred - y = -y, h = 1: best split {0,1} | {2,3}; leaves -G/(H+λ) = 2/3 and 8/3.
    assert t.threshold[0] == 1.5
    np.testing.assert_allclose(t.value[t.is_leaf, 0], [2 / 3, 8 / 3])
    np.testing.assert_allclose(m.predict(X), [1 / 3, 1 / 3, 4 / 3, 4 / 3])
    first = GradientBoostingRegressor(1, learning_rate=1.0, max_depth=1, min_samples_leaf=1,
                                      base_score="zero", second_order=False).fit(X, y)
    np.testing.assert_allclose(first.predict(X), [2 / 3, 2 / 3, 8 / 3, 8 / 3])


def test_gbdt_logistic_binary_base_score_and_fit() -> None:
    X, _, r = _float32_data(2, 400)
    y = (r > 0).astype(int)
    m = GradientBoostingClassifier(1, learning_rate=1e-9, max_depth=1).fit(X, y)
    p = y.mean()
    np.testing.assert_allclose(m.predict_proba(X[:3])[:, 1], p, rtol=1e-6)
    strong = GradientBoostingClassifier(30, max_depth=3).fit(X, y)
    assert strong.score(X, y) > 0.9


@pytest.mark.parametrize("est", [
    RandomForestClassifier(20, max_depth=5, random_state=0),
    GradientBoostingClassifier(20, max_depth=3),
    RandomForestClassifier(10, criterion="entropy", max_depth=5, random_state=0,
                           binning="uniform", max_bins=16),
])
def test_multiclass(est: RandomForestClassifier | GradientBoostingClassifier) -> None:
    rng = np.random.default_rng(3)
    centres = np.array([[0, 0], [3, 0], [0, 3]])
    y = rng.integers(0, 3, size=600)
    X = centres[y] + rng.normal(size=(600, 2)) * 0.7
    labels = np.array([10, 20, 30])[y]
    est.fit(X[:400], labels[:400])
    assert est.classes_.tolist() == [10, 20, 30]
    proba = est.predict_proba(X[400:])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert est.score(X[400:], labels[400:]) > 0.85


def test_regression_forest_and_gbdt() -> None:
    X, _, y = _float32_data(6, 600)
    for est in (RandomForestRegressor(20, max_depth=6, random_state=0),
                GradientBoostingRegressor(50, max_depth=3)):
        est.fit(X[:400], y[:400])
        assert est.score(X[400:], y[400:]) > 0.7
