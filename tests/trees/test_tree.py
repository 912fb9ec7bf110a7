"""The tree data model (specs/trees.md "Data model"): builder, prediction, partial trees,
and Federated Forest's Proposition 1 (one-round prediction by intersecting leaf sets)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import ParameterError
from securetrees.testing.trees import random_tree
from securetrees.trees import Tree, TreeBuilder


def _stump() -> Tree:
    b = TreeBuilder(2, 1)
    b.add_root(4.0, [0.5])
    _, right = b.split(0, feature=1, threshold=2.0, categorical=False, missing_left=True,
                          provider=7, left=(2.0, [0.0]), right=(2.0, [1.0]))
    b.split(right, feature=0, threshold=3.0, categorical=True, missing_left=False, provider=3,
            left=(1.0, [10.0]), right=(1.0, [20.0]))
    return b.build()


def test_known_answer_prediction() -> None:
    t = _stump()
    X = np.array([[0.0, 1.0], [3.0, 5.0], [4.0, 5.0], [3.0, np.nan], [np.nan, 9.0], [0, 2.0]])
    np.testing.assert_array_equal(t.apply(X), [1, 3, 4, 1, 4, 1])
    np.testing.assert_array_equal(t.leaf_values(X)[:, 0], [0, 10, 20, 0, 20, 0])
    np.testing.assert_array_equal(t.leaves, [1, 3, 4])
    np.testing.assert_array_equal(t.depth, [0, 1, 1, 2, 2])
    assert t.max_depth == 2


def test_partial_tree_withholds_other_parties_splits() -> None:
    t = _stump()
    p = t.partial(3)
    assert p.is_partial and not t.is_partial
    assert p.withheld.tolist() == [True, False, False, False, False]
    assert p.feature[0] == -1 and np.isnan(p.threshold[0]) and p.provider[0] == 7
    assert p.feature[2] == 0 and p.threshold[2] == 3.0
    assert np.isnan(p.value[0]).all() and p.value[3, 0] == 10.0
    with pytest.raises(ParameterError):
        p.apply(np.zeros((1, 2)))
    # Node 0 is withheld: both of its subtrees stay reachable.
    np.testing.assert_array_equal(p.reachable_leaves([[3.0, 1.0]]), [[True, True, False]])


@given(seed=st.integers(0, 100_000), n_parties=st.integers(1, 4), depth=st.integers(0, 6))
def test_proposition_1_intersection_of_partial_trees_is_the_full_leaf(
        seed: int, n_parties: int, depth: int) -> None:
    rng = np.random.default_rng(seed)
    n_features = 5
    providers = rng.integers(0, n_parties, size=n_features)
    categorical = rng.random(n_features) < 0.4
    tree = random_tree(rng, n_features=n_features, providers=providers,
                       categorical=categorical, max_depth=depth)
    X = rng.normal(size=(40, n_features))
    X[:, categorical] = rng.integers(0, 4, size=(40, int(categorical.sum())))
    X[rng.random(X.shape) < 0.1] = np.nan
    full = tree.reachable_leaves(X)
    leaf_of = tree.apply(X)
    np.testing.assert_array_equal(full, leaf_of[:, None] == tree.leaves[None, :])
    inter = np.ones_like(full)
    for party in range(n_parties):
        part = tree.partial(party).reachable_leaves(X)
        assert (part >= full).all()  # every party's set contains the true leaf
        inter &= part
    np.testing.assert_array_equal(inter, full)


def test_builder_rejects_bad_calls() -> None:
    b = TreeBuilder(2, 1)
    with pytest.raises(ParameterError):
        b.build()
    b.add_root(1.0, [0.0])
    with pytest.raises(ParameterError):
        b.add_root(1.0, [0.0])
    kw = {"categorical": False, "missing_left": False, "provider": 0,
          "left": (1.0, [0.0]), "right": (1.0, [0.0])}
    with pytest.raises(ParameterError):
        b.split(0, feature=5, threshold=1.0, **kw)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        b.split(0, feature=None, threshold=1.0, **kw)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        b.split(0, feature=0, threshold=float("nan"), **kw)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        b.split(0, feature=0, threshold=1.5, **{**kw, "categorical": True})  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        b.split(3, feature=0, threshold=1.0, **kw)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        b.split(0, feature=0, threshold=1.0, **{**kw, "left": (1.0, [0.0, 1.0])})  # type: ignore[arg-type]
    b.split(0, feature=None, threshold=None, **kw)  # type: ignore[arg-type]
    t = b.build()
    assert t.withheld[0] and t.provider[0] == 0
    with pytest.raises(ParameterError):
        b.split(0, feature=0, threshold=1.0, **kw)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        t.reachable_leaves(np.zeros((2, 3)))


def test_proposition_1_on_a_trained_forest() -> None:
    """Partial trees of a forest trained with feature providers (three parties)."""
    from securetrees.trees import RandomForestClassifier

    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 6))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 3]) > 0).astype(int)
    providers = np.array([0, 0, 1, 1, 2, 2])
    forest = RandomForestClassifier(5, max_depth=5, feature_providers=providers,
                                    random_state=0).fit(X, y).model_
    for tree in forest.trees:
        assert set(tree.provider[~tree.is_leaf]) <= {0, 1, 2}
        np.testing.assert_array_equal(tree.provider[~tree.is_leaf],
                                      providers[tree.feature[~tree.is_leaf]])
        inter = np.logical_and.reduce([tree.partial(p).reachable_leaves(X) for p in range(3)])
        np.testing.assert_array_equal(inter.argmax(axis=1), np.searchsorted(tree.leaves, tree.apply(X)))
        assert (inter.sum(axis=1) == 1).all()
