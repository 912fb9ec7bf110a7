"""The machine-learning randomness of a forest, in an order a federated run can replay.

Spec: ``specs/trees.md`` section "Random-draw order".  This is *not* secret
randomness (that comes only from :mod:`securetrees.rand`): bootstrap and feature
sampling come from a user-seeded numpy Generator so that the central reference
and a federated implementation make exactly the same choices.

Order, per forest: ``SeedSequence(random_state).spawn(n_trees)`` gives tree ``t``
its own ``Generator(PCG64(child[t]))``.  Per tree, on that generator:

1. bootstrap (if on): ``integers(0, n_samples, size=n_samples)``; the sample
   weights are the counts of each index;
2. per-tree features (if ``max_features_tree``): ``choice(n_features, k, replace=False)``, sorted
   (Federated Forest, Algorithm 1 line 4);
3. per node, for each node that passes the pre-split stopping rules, layer by layer
   and in increasing node id within a layer: if ``max_features`` is smaller than the
   tree's feature set, ``choice(tree_features, k, replace=False)``, sorted; otherwise
   no draw.

Node-keyed variant (``node_keyed=True``, used by Federated Forest): after step 2 one more
draw, ``rng.integers(0, 2**32, size=4)``, the tree's node key; step 3 then draws node ``h``'s
features (``h`` its heap index: root 1, children of ``h`` are ``2h`` and ``2h+1``) from its own
``Generator(PCG64(SeedSequence(node_key, spawn_key=(h,))))``, in any order: a node that is not
split draws nothing and shifts nobody else's draw, so a party can replay the draws of any
node without knowing which other nodes stopped (e.g. because they were pure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError

__all__ = ["TreeDraws", "heap_indices", "resolve_max_features", "tree_generators"]

IntArray = npt.NDArray[np.int64]


def tree_generators(random_state: int | None, n_trees: int) -> list[np.random.Generator]:
    """One independent Generator per tree, derived from ``random_state`` (step 0)."""
    if random_state is not None and (
        isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer))
        or random_state < 0
    ):
        raise ParameterError("random_state must be a non-negative int or None")
    if n_trees < 1:
        raise ParameterError("n_trees must be >= 1")
    root = np.random.SeedSequence(None if random_state is None else int(random_state))
    return [np.random.Generator(np.random.PCG64(child)) for child in root.spawn(n_trees)]


def resolve_max_features(spec: int | float | str | None, n_features: int) -> int:
    """Number of features for ``spec``: None/"all" (all), "sqrt", "log2", an int, a fraction."""
    if spec is None or spec == "all":
        k = n_features
    elif spec == "sqrt":
        k = int(math.sqrt(n_features))
    elif spec == "log2":
        k = int(math.log2(n_features)) if n_features > 0 else 0
    elif isinstance(spec, bool):
        raise ParameterError(f"invalid max_features {spec!r}")
    elif isinstance(spec, (int, np.integer)):
        k = int(spec)
        if not 1 <= k <= n_features:
            raise ParameterError(f"max_features={k} must be in [1, {n_features}]")
    elif isinstance(spec, float):
        if not 0.0 < spec <= 1.0:
            raise ParameterError("a fractional max_features must be in (0, 1]")
        k = int(spec * n_features)
    else:
        raise ParameterError(f"invalid max_features {spec!r}")
    return max(1, k)


@dataclass
class TreeDraws:
    """All random choices of one tree, drawn from its Generator in the documented order.

    Construction performs steps 1 and 2; call :meth:`node_features` once per node
    that passes the pre-split stopping rules, in the order of step 3.
    """

    rng: np.random.Generator
    n_samples: int
    n_features: int
    bootstrap: bool = False
    max_features_tree: int | None = None
    max_features: int | None = None
    node_keyed: bool = False
    sample_weight: npt.NDArray[np.float64] = field(init=False)
    tree_features: IntArray = field(init=False)
    node_key: npt.NDArray[np.uint64] = field(init=False)

    def __post_init__(self) -> None:
        if self.n_samples < 1 or self.n_features < 1:
            raise ParameterError("a tree needs at least one sample and one feature")
        if self.bootstrap:
            idx = self.rng.integers(0, self.n_samples, size=self.n_samples)
            self.sample_weight = np.bincount(idx, minlength=self.n_samples).astype(np.float64)
        else:
            self.sample_weight = np.ones(self.n_samples, dtype=np.float64)
        k_tree = self.n_features if self.max_features_tree is None else self.max_features_tree
        if not 1 <= k_tree <= self.n_features:
            raise ParameterError("max_features_tree out of range")
        if k_tree < self.n_features:
            chosen = self.rng.choice(self.n_features, size=k_tree, replace=False)
            self.tree_features = np.sort(chosen).astype(np.int64)
        else:
            self.tree_features = np.arange(self.n_features, dtype=np.int64)
        if self.max_features is not None and self.max_features < 1:
            raise ParameterError("max_features must be >= 1")
        self.node_key = (self.rng.integers(0, 2**32, size=4, dtype=np.uint64) if self.node_keyed
                         else np.zeros(0, dtype=np.uint64))

    @property
    def draws_per_node(self) -> bool:
        """Whether step 3 draws (``max_features`` smaller than the tree's feature set)."""
        return self.max_features is not None and self.max_features < self.tree_features.size

    def node_features(self) -> IntArray:
        """The features one node may split on (step 3, in the documented node order)."""
        if not self.draws_per_node:
            return self.tree_features
        if self.node_keyed:
            raise ParameterError("node-keyed draws are taken by heap index (node_features_at)")
        k = int(self.max_features)  # type: ignore[arg-type]
        return np.sort(self.rng.choice(self.tree_features, size=k, replace=False)).astype(np.int64)

    def node_features_at(self, heap: int) -> IntArray:
        """The features of the node with heap index ``heap`` (node-keyed step 3); the same
        for a given node whichever other nodes draw, in whichever order."""
        if not self.draws_per_node:
            return self.tree_features
        if not self.node_keyed or heap < 1:
            raise ParameterError("node_features_at needs node-keyed draws and a heap index >= 1")
        seed = np.random.SeedSequence([int(w) for w in self.node_key.tolist()], spawn_key=(int(heap),))
        k = int(self.max_features)  # type: ignore[arg-type]
        g = np.random.Generator(np.random.PCG64(seed))
        return np.sort(g.choice(self.tree_features, size=k, replace=False)).astype(np.int64)


def heap_indices(left: npt.ArrayLike, right: npt.ArrayLike) -> list[int]:
    """Each node's heap index (root 1, children of ``h``: ``2h`` left, ``2h+1`` right) for a
    tree whose parents come before their children (breadth-first ids); Python ints, exact at
    any depth."""
    lt, rt = np.asarray(left).tolist(), np.asarray(right).tolist()
    heap = [0] * len(lt)
    if heap:
        heap[0] = 1
    for k, (a, b) in enumerate(zip(lt, rt, strict=True)):
        if a != -1:
            heap[a], heap[b] = 2 * heap[k], 2 * heap[k] + 1
    return heap
