"""The tree under construction, as each party sees it, and the layer bookkeeping all share.

Every party holds the same shape (node ids in creation order, breadth first) and
the same per-sample positions, because all of them apply the broadcast
partitions (paper Section 4.1, "Model Storage").  What differs is what a node
records: the master the owner, the weights and (``shared``) the values; a client the
weights and, at its own nodes only, feature and threshold; the label holder in
``encrypted`` mode also the values.  :func:`assemble_tree` joins
the master's tree and the clients' partial trees into the complete tree
``T = T_1 ∪ ... ∪ T_M`` for tests and audits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError, ProtocolError
from securetrees.protocols.federated_forest.cover import prune
from securetrees.trees import Tree

__all__ = ["LayerState", "OwnSplit", "TreeSkeleton", "assemble_tree", "check_positions", "forest_output",
           "model_tree"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class OwnSplit:
    """A split whose details the recording party holds (the owner's view of its node)."""

    node: int
    feature: int
    threshold: float
    categorical: bool
    missing_left: bool


@dataclass
class TreeSkeleton:
    """Growable parallel lists that become a :class:`Tree` (withheld fields as in ``Tree.partial``)."""

    n_features: int
    n_outputs: int
    left: list[int] = field(default_factory=list)
    right: list[int] = field(default_factory=list)
    feature: list[int] = field(default_factory=list)
    threshold: list[float] = field(default_factory=list)
    categorical: list[bool] = field(default_factory=list)
    missing_left: list[bool] = field(default_factory=list)
    provider: list[int] = field(default_factory=list)
    withheld: list[bool] = field(default_factory=list)
    weight: list[float] = field(default_factory=list)
    value: list[list[float]] = field(default_factory=list)

    def add(self, *weights: float) -> int:
        """Append one leaf per weight; returns the first new id."""
        k = len(weights)
        first = len(self.left)
        self.left += [-1] * k
        self.right += [-1] * k
        self.feature += [-1] * k
        self.threshold += [float("nan")] * k
        self.categorical += [False] * k
        self.missing_left += [False] * k
        self.provider += [-1] * k
        self.withheld += [False] * k
        self.weight += [float(w) for w in weights]
        self.value += [[float("nan")] * self.n_outputs for _ in range(k)]
        return first

    def split_layer(self, nodes: IntArray, left_weight: FloatArray, right_weight: FloatArray, *,
                    provider: IntArray | int = -1, own: Sequence[OwnSplit] = ()) -> IntArray:
        """Make the leaves ``nodes`` internal, in order, with two new leaves each (ids
        consecutive: left, right); returns the children's ids.  ``own`` lists the splits whose
        details this party holds; every other split is recorded as withheld."""
        nodes_l = nodes.tolist()
        if any(self.left[k] != -1 for k in nodes_l):
            raise ProtocolError("a node is already split")
        first = self.add(*np.column_stack([left_weight, right_weight]).ravel().tolist())
        providers = np.broadcast_to(np.asarray(provider, dtype=np.int64), nodes.shape).tolist()
        for i, (k, prov) in enumerate(zip(nodes_l, providers, strict=True)):
            self.left[k], self.right[k] = first + 2 * i, first + 2 * i + 1
            self.provider[k] = prov
            self.withheld[k] = True
        for d in own:
            k = d.node
            self.withheld[k] = False
            self.feature[k], self.threshold[k] = d.feature, d.threshold
            self.categorical[k], self.missing_left[k] = d.categorical, d.missing_left
        return np.arange(first, first + 2 * len(nodes_l), dtype=np.int64)

    def set_values(self, nodes: IntArray, values: FloatArray) -> None:
        for k, v in zip(nodes.tolist(), np.asarray(values, dtype=np.float64).tolist(), strict=True):
            self.value[k] = v

    def build(self) -> Tree:
        return Tree(
            n_features=self.n_features,
            left=np.array(self.left, dtype=np.int64),
            right=np.array(self.right, dtype=np.int64),
            feature=np.array(self.feature, dtype=np.int64),
            threshold=np.array(self.threshold, dtype=np.float64),
            categorical=np.array(self.categorical, dtype=bool),
            missing_left=np.array(self.missing_left, dtype=bool),
            provider=np.array(self.provider, dtype=np.int64),
            withheld=np.array(self.withheld, dtype=bool),
            weight=np.array(self.weight, dtype=np.float64),
            value=np.array(self.value, dtype=np.float64).reshape(len(self.left), self.n_outputs),
        )

    @classmethod
    def from_tree(cls, tree: Tree) -> TreeSkeleton:
        sk = cls(tree.n_features, tree.n_outputs)
        sk.left, sk.right = tree.left.tolist(), tree.right.tolist()
        sk.feature, sk.threshold = tree.feature.tolist(), tree.threshold.tolist()
        sk.categorical, sk.missing_left = tree.categorical.tolist(), tree.missing_left.tolist()
        sk.provider, sk.withheld = tree.provider.tolist(), tree.withheld.tolist()
        sk.weight, sk.value = tree.weight.tolist(), tree.value.tolist()
        return sk


@dataclass
class LayerState:
    """Rows in the tree (canonical indices, weight > 0), each row's frontier position, the
    frontier's node ids, and the depth: the same at every party after every layer."""

    rows: IntArray
    pos: IntArray
    frontier: IntArray
    depth: int = 0
    _cache: tuple[IntArray, IntArray, IntArray] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def start(cls, weights: npt.NDArray[np.int64]) -> LayerState:
        rows = np.flatnonzero(weights > 0).astype(np.int64)
        return cls(rows, np.zeros(rows.size, dtype=np.int64), np.zeros(1, dtype=np.int64), 0)

    def node_weights(self, weights: npt.NDArray[np.int64]) -> FloatArray:
        """Σ bootstrap weight per frontier position."""
        return np.asarray(np.bincount(self.pos, weights=weights[self.rows].astype(np.float64),
                                      minlength=self.frontier.size), dtype=np.float64)

    def _grouping(self) -> tuple[IntArray, IntArray]:
        """Rows sorted by frontier position (stable) and each position's start; cached per layer."""
        cached = self._cache
        if cached is None or cached[0] is not self.pos:
            small = self.pos.astype(np.uint16) if self.frontier.size <= 1 << 16 else self.pos
            order = np.argsort(small, kind="stable")  # radix sort on 16-bit keys
            starts = np.searchsorted(self.pos[order], np.arange(self.frontier.size + 1))
            cached = self._cache = (self.pos, order, starts)
        return cached[1], cached[2]

    def samples_of(self, positions: IntArray) -> list[IntArray]:
        """Row indices (into ``rows``) of each listed frontier position, in canonical order."""
        order, starts = self._grouping()
        return [order[starts[p]:starts[p + 1]] for p in positions.tolist()]

    def advance(self, positions: IntArray, left: BoolArray, weights: npt.NDArray[np.int64],
                split: Callable[[IntArray, FloatArray, FloatArray], IntArray]) -> None:
        """Apply the layer's partitions: split each listed position (in order) with its left
        indicator (concatenated over the positions' samples), number the children breadth
        first, and move the samples; rows of nodes not split leave the tree.
        ``split(nodes, left_weights, right_weights)`` records the splits in the party's
        skeleton (:meth:`TreeSkeleton.split_layer`) and returns the children's ids."""
        order, starts = self._grouping()
        sizes = np.diff(starts)[positions]
        if left.dtype != np.bool_ or left.shape != (int(sizes.sum()),):
            raise ProtocolError("a partition does not match the nodes' sample counts")
        chosen = np.zeros(self.frontier.size, dtype=bool)
        chosen[positions] = True
        idx = order[chosen[self.pos[order]]]  # the positions' rows, position by position
        child = 2 * np.repeat(np.arange(positions.size, dtype=np.int64), sizes) + (~left).astype(np.int64)
        cw = np.asarray(np.bincount(child, weights=weights[self.rows[idx]].astype(np.float64),
                                    minlength=2 * positions.size), dtype=np.float64)
        frontier = split(self.frontier[positions], cw[0::2], cw[1::2])
        new_pos = np.full(self.rows.size, -1, dtype=np.int64)
        new_pos[idx] = child
        keep = new_pos >= 0
        self.rows, self.pos = self.rows[keep], new_pos[keep]
        self.frontier = np.asarray(frontier, dtype=np.int64)
        self.depth += 1


def check_positions(positions: IntArray, n_frontier: int) -> None:
    """Raise ProtocolError unless ``positions`` are distinct, increasing frontier positions."""
    if positions.ndim != 1 or (positions.size and (
            positions.min() < 0 or positions.max() >= n_frontier or np.any(np.diff(positions) <= 0))):
        raise ProtocolError("node positions must be increasing positions of the frontier")


def assemble_tree(master_tree: Tree, client_trees: Sequence[Tree], partition: Sequence[Sequence[int]]) -> Tree:
    """The complete tree: shape, owners, weights and values from the master; feature (mapped to
    the global column) and threshold of each node from its owner's partial tree."""
    feature = master_tree.feature.copy()
    threshold = master_tree.threshold.copy()
    categorical = master_tree.categorical.copy()
    missing_left = master_tree.missing_left.copy()
    for k in np.flatnonzero(master_tree.left != -1):
        owner = int(master_tree.provider[k])
        t = client_trees[owner]
        if t.withheld[k] or not np.array_equal(t.left, master_tree.left):
            raise ParameterError(f"client {owner} does not hold the split of node {k}")
        feature[k] = sorted(partition[owner])[int(t.feature[k])]  # local columns: increasing global id
        threshold[k] = t.threshold[k]
        categorical[k] = t.categorical[k]
        missing_left[k] = t.missing_left[k]
    n_features = sum(len(p) for p in partition)
    return Tree(n_features, master_tree.left.copy(), master_tree.right.copy(), feature, threshold,
                categorical, missing_left, master_tree.provider.copy(),
                np.zeros(master_tree.n_nodes, dtype=bool), master_tree.weight.copy(),
                master_tree.value.copy())


def forest_output(trees: Sequence[Tree], leaves: IntArray, *, classification: bool) -> FloatArray:
    """Forest output from the node whose value each test sample takes in each tree
    (``leaves[t, j]``), as ``trees.Forest`` computes it: mean over the trees of the class
    distributions (classification) or of the values."""
    n_outputs = trees[0].value.shape[1]
    total = np.zeros((leaves.shape[1], n_outputs), dtype=np.float64)
    for ti, tree in enumerate(trees):
        v = tree.value[leaves[ti]]
        if classification:
            s = v.sum(axis=1, keepdims=True)
            v = np.divide(v, s, out=np.zeros_like(v), where=s > 0)
        total += v
    return total / len(trees)


def model_tree(master_tree: Tree, reference: BoolArray, client_trees: Sequence[Tree],
               partition: Sequence[Sequence[int]], *, values: FloatArray | None = None) -> Tree:
    """The model's complete tree (tests, audits): :func:`assemble_tree`, the values of
    ``values`` (the label holder's tree in ``encrypted`` mode) or the master's, and the cover
    subtrees removed (``reference``: the label holder's flags of the central forest's nodes)."""
    full = assemble_tree(master_tree, client_trees, partition)
    if values is not None:
        full = replace(full, value=np.asarray(values, dtype=np.float64).copy())
    return prune(full, np.asarray(reference, dtype=bool))
