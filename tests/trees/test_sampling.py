"""Node-keyed feature draws (specs/trees.md "Random-draw order", node-keyed variant)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from securetrees.errors import ParameterError
from securetrees.trees import GrowParams, Tree, TreeDraws, heap_indices, train_forest, tree_generators


def _draws(seed: int = 3, *, keyed: bool = True) -> TreeDraws:
    return TreeDraws(tree_generators(seed, 1)[0], 50, 6, bootstrap=True, max_features=3, node_keyed=keyed)


def test_a_nodes_draw_depends_on_its_heap_index_only() -> None:
    a, b = _draws(), _draws()
    order = [9, 1, 5, 2, 1000, 3]
    first = {h: a.node_features_at(h).tolist() for h in order}
    second = {h: b.node_features_at(h).tolist() for h in reversed(order[::2])}  # fewer nodes, other order
    assert all(second[h] == first[h] for h in second)
    assert np.array_equal(a.sample_weight, _draws(keyed=False).sample_weight)  # steps 1-2 unchanged
    subsets = {tuple(a.node_features_at(h).tolist()) for h in range(1, 400)}
    assert subsets == set(combinations(range(6), 3))  # every 3-subset of the 6 features turns up
    assert all(len(s) == 3 for s in subsets)
    assert a.node_features_at(2 ** 90 + 1).size == 3  # exact at any depth


def test_keyed_and_sequential_draws_are_not_mixed() -> None:
    with pytest.raises(ParameterError):
        _draws().node_features()
    with pytest.raises(ParameterError):
        _draws(keyed=False).node_features_at(1)
    with pytest.raises(ParameterError):
        _draws().node_features_at(0)


def test_heap_indices() -> None:
    left = np.array([1, 3, -1, 5, -1, -1, -1])
    right = np.array([2, 4, -1, 6, -1, -1, -1])
    assert heap_indices(left, right) == [1, 2, 3, 4, 5, 8, 9]
    assert heap_indices(np.zeros(0, np.int64), np.zeros(0, np.int64)) == []


def _splits_use_keyed_draws(tree: Tree, draws: TreeDraws) -> bool:
    heap = heap_indices(tree.left, tree.right)
    return all(int(tree.feature[k]) in draws.node_features_at(heap[k]).tolist()
               for k in np.flatnonzero(tree.left != -1).tolist())


@pytest.mark.parametrize("keyed", [True, False])
def test_train_forest_splits_on_each_nodes_keyed_draw(keyed: bool) -> None:
    """Node-keyed: every split's feature is in its node's keyed draw.  Sequential draws (the
    default) fail the same check, so it can fail."""
    g = np.random.default_rng(0)
    X = g.normal(size=(200, 6))
    y = (X[:, 0] + X[:, 3] > 0).astype(np.int64)
    forest, _ = train_forest(X, y, n_classes=2, n_estimators=4, grow=GrowParams(max_depth=5), max_features=2,
                             random_state=5, node_keyed_draws=keyed, classes=np.arange(2))
    gens = tree_generators(5, 4)
    ok = [_splits_use_keyed_draws(t, TreeDraws(gen, 200, 6, bootstrap=True, max_features=2, node_keyed=True))
          for t, gen in zip(forest.trees, gens, strict=True)]
    assert all(ok) if keyed else not all(ok)
