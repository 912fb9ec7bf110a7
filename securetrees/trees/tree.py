"""The tree data model shared by the central trainers and every federated protocol.

Spec: ``specs/trees.md`` section "Data model".  A tree is a set of parallel
arrays indexed by node id; ids are assigned in creation order, and the growers
create nodes layer by layer (breadth first), so a parent's id is smaller than
its children's.  An internal node records the feature, the threshold, the kind
of test, where missing values go, and the *provider* (the party that owns the
feature).  A *partial tree* (Federated Forest, Section 3) is the same structure
with the split fields of other providers' nodes withheld (``withheld[k]``):
prediction then follows both branches of such a node, and intersecting the
reachable leaves of all parties' partial trees gives the full tree's leaf
(Federated Forest, Proposition 1).

Tests: numeric ``x <= threshold`` goes left (``threshold = +inf`` separates only
the missing values); categorical ``x == threshold`` goes left; NaN follows
``missing_left``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError

__all__ = ["Tree", "TreeBuilder"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

LEAF = -1
NO_FEATURE = -1


@dataclass(frozen=True, eq=False)
class Tree:
    """An immutable (possibly partial) decision tree.

    Arrays of length ``n_nodes``: ``left``/``right`` (child ids, ``-1`` at leaves),
    ``feature`` (``-1`` at leaves and withheld nodes), ``threshold`` (NaN there),
    ``categorical``, ``missing_left``, ``provider`` (``-1`` at leaves), ``withheld``,
    ``weight`` (weighted number of training samples) and ``value`` (shape
    ``(n_nodes, n_outputs)``: class counts for a classification tree, the mean for
    regression, the Eq. 8 leaf value for boosting; NaN at internal nodes of a
    partial tree).
    """

    n_features: int
    left: IntArray
    right: IntArray
    feature: IntArray
    threshold: FloatArray
    categorical: BoolArray
    missing_left: BoolArray
    provider: IntArray
    withheld: BoolArray
    weight: FloatArray
    value: FloatArray

    @property
    def n_nodes(self) -> int:
        return int(self.left.size)

    @property
    def n_outputs(self) -> int:
        return int(self.value.shape[1])

    @property
    def is_leaf(self) -> BoolArray:
        return np.asarray(self.left == LEAF)

    @property
    def leaves(self) -> IntArray:
        """Ids of the leaves in increasing order (the column order of :meth:`reachable_leaves`)."""
        return np.flatnonzero(self.left == LEAF).astype(np.int64)

    @property
    def depth(self) -> IntArray:
        """Depth of every node (root 0)."""
        d = np.zeros(self.n_nodes, dtype=np.int64)
        for k in range(self.n_nodes):
            if self.left[k] != LEAF:
                d[self.left[k]] = d[self.right[k]] = d[k] + 1
        return d

    @property
    def max_depth(self) -> int:
        return int(self.depth.max())

    @property
    def is_partial(self) -> bool:
        return bool(self.withheld.any())

    def _check_X(self, X: npt.ArrayLike) -> FloatArray:
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[1] != self.n_features:
            raise ParameterError(f"X must have shape (n, {self.n_features}), got {Xa.shape}")
        return Xa

    def goes_left(self, x: FloatArray, nodes: IntArray | int) -> BoolArray:
        """The routing rule: does value ``x`` at node ``nodes`` go left?  ``x <= threshold``
        (categorical: ``x == threshold``); NaN follows the node's ``missing_left``."""
        nodes = np.broadcast_to(np.asarray(nodes, dtype=np.int64), np.shape(x))
        thr = self.threshold[nodes]
        nan = np.isnan(x)
        test = np.where(self.categorical[nodes], x == thr, x <= thr)
        return np.asarray(np.where(nan, self.missing_left[nodes], test))

    @cached_property
    def _routing(self) -> _Routing:
        """The node arrays :meth:`apply` walks, with every leaf made a node that sends
        everything to itself (feature 0, threshold +inf, NaN left)."""
        leaf = self.left == LEAF
        ids = np.arange(self.n_nodes, dtype=np.int64)
        left = np.where(leaf, ids, self.left)
        right = np.where(leaf, ids, self.right)
        return _Routing(
            feature=np.where(leaf, 0, self.feature),
            threshold=np.where(leaf, np.inf, self.threshold),
            categorical=self.categorical & ~leaf,
            missing_left=self.missing_left | leaf,
            left=left,
            right=right,
            paired=bool(np.array_equal(right[~leaf], left[~leaf] + 1)),
            has_categorical=bool(self.categorical[~leaf].any()),
            depth=self.max_depth,
        )

    def apply(self, X: npt.ArrayLike) -> IntArray:
        """The leaf id each row of ``X`` reaches (full trees only): every row moves one
        level per step, ``max_depth`` steps, leaves keeping their rows."""
        if self.is_partial:
            raise ParameterError("a partial tree has no single leaf per sample: use reachable_leaves")
        Xa = np.ascontiguousarray(self._check_X(X))
        r = self._routing
        node = np.zeros(Xa.shape[0], dtype=np.int64)
        if not Xa.size:
            return node
        flat = Xa.reshape(-1)
        base = np.arange(0, flat.size, self.n_features, dtype=np.int64)
        any_nan = bool(np.isnan(flat).any())
        for _ in range(r.depth):
            x = flat[base + r.feature[node]]
            thr = r.threshold[node]
            go = x <= thr
            if r.has_categorical:
                go = np.where(r.categorical[node], x == thr, go)
            if any_nan:
                nan = np.flatnonzero(np.isnan(x))
                go[nan] = r.missing_left[node[nan]]
            node = r.left[node] + ~go if r.paired else np.where(go, r.left[node], r.right[node])
        return node

    def reachable_leaves(self, X: npt.ArrayLike) -> BoolArray:
        """``R[i, j]``: can sample ``i`` reach leaf ``leaves[j]``?  Withheld nodes pass
        samples to both children (Federated Forest, one-round prediction)."""
        Xa = self._check_X(X)
        reach = np.zeros((self.n_nodes, Xa.shape[0]), dtype=bool)
        reach[0] = True
        for k in range(self.n_nodes):
            lft, rgt = self.left[k], self.right[k]
            if lft == LEAF:
                continue
            if self.withheld[k]:
                reach[lft] = reach[rgt] = reach[k]
                continue
            idx = np.flatnonzero(reach[k])
            go = self.goes_left(Xa[idx, self.feature[k]], k)
            reach[lft, idx[go]] = True
            reach[rgt, idx[~go]] = True
        return np.ascontiguousarray(reach[self.leaves].T)

    def leaf_values(self, X: npt.ArrayLike) -> FloatArray:
        """``value`` of the leaf each row reaches: shape ``(n, n_outputs)``."""
        return np.asarray(self.value[self.apply(X)], dtype=np.float64)

    def partial(self, party: int) -> Tree:
        """The partial tree ``party`` keeps: its own nodes' split fields, the shape, the
        providers and the leaf values; other parties' split fields and all internal
        values withheld (Federated Forest, Section 3.2)."""
        internal = self.left != LEAF
        hide = internal & (self.provider != party)
        value = self.value.copy()
        value[internal] = np.nan
        return Tree(
            n_features=self.n_features,
            left=self.left.copy(),
            right=self.right.copy(),
            feature=np.where(hide, NO_FEATURE, self.feature),
            threshold=np.where(hide, np.nan, self.threshold),
            categorical=self.categorical & ~hide,
            missing_left=self.missing_left & ~hide,
            provider=self.provider.copy(),
            withheld=self.withheld | hide,
            weight=self.weight.copy(),
            value=value,
        )

    def same_as(self, other: Tree) -> bool:
        """Field-by-field equality (NaN equal to NaN)."""
        return self.n_features == other.n_features and all(
            np.array_equal(getattr(self, name), getattr(other, name), equal_nan=True)
            for name in _ARRAY_FIELDS
        )


@dataclass(frozen=True)
class _Routing:
    feature: IntArray
    threshold: FloatArray
    categorical: BoolArray
    missing_left: BoolArray
    left: IntArray
    right: IntArray
    paired: bool  # right == left + 1 at every internal node
    has_categorical: bool
    depth: int


_ARRAY_FIELDS = (
    "left", "right", "feature", "threshold", "categorical", "missing_left",
    "provider", "withheld", "weight", "value",
)


@dataclass
class TreeBuilder:
    """Grows a :class:`Tree` node by node, for the central growers and the protocols.

    ``add_root`` once, then ``split`` any current leaf; ids follow creation order,
    so splitting a layer's nodes in id order numbers the next layer breadth first.
    """

    n_features: int
    n_outputs: int
    _left: list[int] = field(default_factory=list)
    _right: list[int] = field(default_factory=list)
    _feature: list[int] = field(default_factory=list)
    _threshold: list[float] = field(default_factory=list)
    _categorical: list[bool] = field(default_factory=list)
    _missing_left: list[bool] = field(default_factory=list)
    _provider: list[int] = field(default_factory=list)
    _withheld: list[bool] = field(default_factory=list)
    _weight: list[float] = field(default_factory=list)
    _value: list[FloatArray] = field(default_factory=list)

    def _new(self, weight: float, value: npt.ArrayLike) -> int:
        v = np.asarray(value, dtype=np.float64).reshape(-1)
        if v.size != self.n_outputs:
            raise ParameterError(f"a node value needs {self.n_outputs} outputs, got {v.size}")
        self._left.append(LEAF)
        self._right.append(LEAF)
        self._feature.append(NO_FEATURE)
        self._threshold.append(float("nan"))
        self._categorical.append(False)
        self._missing_left.append(False)
        self._provider.append(-1)
        self._withheld.append(False)
        self._weight.append(float(weight))
        self._value.append(v)
        return len(self._left) - 1

    def add_root(self, weight: float, value: npt.ArrayLike) -> int:
        if self._left:
            raise ParameterError("the tree already has a root")
        return self._new(weight, value)

    def split(
        self,
        node: int,
        *,
        feature: int | None,
        threshold: float | None,
        categorical: bool,
        missing_left: bool,
        provider: int,
        left: tuple[float, npt.ArrayLike],
        right: tuple[float, npt.ArrayLike],
    ) -> tuple[int, int]:
        """Turn leaf ``node`` into an internal node; ``left``/``right`` are (weight, value)
        of the new children, whose ids are returned.  ``feature=None`` and
        ``threshold=None`` record a node whose split this party does not know."""
        if not 0 <= node < len(self._left) or self._left[node] != LEAF:
            raise ParameterError(f"node {node} is not a leaf of this tree")
        withheld = feature is None
        if withheld != (threshold is None):
            raise ParameterError("feature and threshold are withheld together or not at all")
        if feature is not None and not 0 <= feature < self.n_features:
            raise ParameterError(f"feature {feature} out of range")
        if threshold is not None and (np.isnan(threshold) or threshold == -np.inf):
            raise ParameterError("a threshold must be a number or +inf")
        if threshold is not None and categorical and not float(threshold).is_integer():
            raise ParameterError("a categorical threshold is an integer category code")
        lid = self._new(*left)
        rid = self._new(*right)
        self._left[node], self._right[node] = lid, rid
        self._feature[node] = NO_FEATURE if feature is None else int(feature)
        self._threshold[node] = float("nan") if threshold is None else float(threshold)
        self._categorical[node] = bool(categorical) and not withheld
        self._missing_left[node] = bool(missing_left) and not withheld
        self._provider[node] = int(provider)
        self._withheld[node] = withheld
        return lid, rid

    def split_many(
        self,
        nodes: IntArray,
        *,
        feature: IntArray,
        threshold: FloatArray,
        categorical: BoolArray,
        missing_left: BoolArray,
        provider: IntArray,
        left_weight: FloatArray,
        left_value: FloatArray,
        right_weight: FloatArray,
        right_value: FloatArray,
    ) -> IntArray:
        """:meth:`split` of several leaves at once (known splits only), in the order given:
        the same tree as splitting them one by one.  Values have shape ``(k, n_outputs)``.
        Returns the new ids, ``(k, 2)``: left and right child of each node."""
        nodes = np.asarray(nodes, dtype=np.int64)
        k, n_old = nodes.size, len(self._left)
        if nodes.ndim != 1 or any(np.shape(a) != (k,) for a in (
                feature, threshold, categorical, missing_left, provider, left_weight, right_weight)) \
                or np.shape(left_value) != (k, self.n_outputs) or np.shape(right_value) != (k, self.n_outputs):
            raise ParameterError("split_many needs one entry per node and n_outputs values per child")
        if k and (nodes.min() < 0 or nodes.max() >= n_old or np.unique(nodes).size != k
                  or any(self._left[i] != LEAF for i in nodes.tolist())):
            raise ParameterError("split_many splits distinct current leaves")
        if k and (feature.min() < 0 or feature.max() >= self.n_features):
            raise ParameterError("feature out of range")
        if np.any(np.isnan(threshold) | (threshold == -np.inf)):
            raise ParameterError("a threshold must be a number or +inf")
        cat = np.asarray(categorical, dtype=bool)
        if np.any(cat & (threshold != np.floor(threshold))):
            raise ParameterError("a categorical threshold is an integer category code")
        ids = n_old + np.arange(2 * k, dtype=np.int64).reshape(k, 2)
        two = 2 * k
        self._left.extend([LEAF] * two)
        self._right.extend([LEAF] * two)
        self._feature.extend([NO_FEATURE] * two)
        self._threshold.extend([float("nan")] * two)
        self._categorical.extend([False] * two)
        self._missing_left.extend([False] * two)
        self._provider.extend([-1] * two)
        self._withheld.extend([False] * two)
        self._weight.extend(np.column_stack([left_weight, right_weight]).astype(np.float64).reshape(-1).tolist())
        values = np.stack([left_value, right_value], axis=1).astype(np.float64).reshape(two, self.n_outputs)
        self._value.extend(list(values))
        for i, (node, f, t, c, m, p) in enumerate(zip(
                nodes.tolist(), feature.tolist(), threshold.tolist(), cat.tolist(),
                np.asarray(missing_left, dtype=bool).tolist(), provider.tolist(), strict=True)):
            self._left[node], self._right[node] = int(ids[i, 0]), int(ids[i, 1])
            self._feature[node], self._threshold[node] = int(f), float(t)
            self._categorical[node], self._missing_left[node] = bool(c), bool(m)
            self._provider[node] = int(p)
        return ids

    def build(self) -> Tree:
        if not self._left:
            raise ParameterError("the tree has no root")
        return Tree(
            n_features=self.n_features,
            left=np.array(self._left, dtype=np.int64),
            right=np.array(self._right, dtype=np.int64),
            feature=np.array(self._feature, dtype=np.int64),
            threshold=np.array(self._threshold, dtype=np.float64),
            categorical=np.array(self._categorical, dtype=bool),
            missing_left=np.array(self._missing_left, dtype=bool),
            provider=np.array(self._provider, dtype=np.int64),
            withheld=np.array(self._withheld, dtype=bool),
            weight=np.array(self._weight, dtype=np.float64),
            value=np.vstack(self._value),
        )
