"""The CS's forest: node records with everything FRF-Revoc and the epoch checks need.

A :class:`Node` stores, besides the structure, the provider, the column, the encrypted
split ``[[s]]_{pk_provider}`` with its epoch and the provider's signature, and the
stored FLE-Expan inputs (the sample selection μ as sample indices, the depth) that
FRF-Revoc line 8 uses to rebuild it.  Node ids are never reused, so a provider's
record of "its" node stays unambiguous across revocations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from securetrees.dtpkc import Ciphertext
from securetrees.trees import Tree, TreeBuilder

__all__ = ["Node", "RevTree", "TreeArrays", "aggregate"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass
class Node:
    """One node of a RevFRF tree as the CS holds it."""

    id: int
    depth: int
    samples: IntArray
    stats: FloatArray
    weight: float
    value: FloatArray
    parent: int = -1
    left: int = -1
    right: int = -1
    provider: str | None = None
    column: int = -1
    split: Ciphertext | None = None
    epoch: int = -1
    signature: bytes = b""
    missing_left: bool = False

    @property
    def is_leaf(self) -> bool:
        return self.left < 0


@dataclass(frozen=True)
class TreeArrays:
    """A tree's structure as arrays indexed by node id (ids not in the tree are leaves of value 0)."""

    left: IntArray
    right: IntArray
    leaf: npt.NDArray[np.bool_]
    value: FloatArray


@dataclass
class RevTree:
    """One tree: nodes by id, the root, per-sample statistics (with bootstrap weights)."""

    index: int
    sample_stats: FloatArray
    nodes: dict[int, Node] = field(default_factory=dict)
    root: int = 0
    next_id: int = 0

    def new_node(self, depth: int, samples: IntArray, stats: FloatArray, weight: float,
                 value: FloatArray, parent: int = -1) -> Node:
        node = Node(self.next_id, depth, samples, stats, weight, value, parent)
        self.nodes[node.id] = node
        self.next_id += 1
        return node

    def replace_with_leaf(self, node_id: int) -> Node:
        """FRF-Revoc line 7: drop node ``node_id`` (its descendants must be gone already) and put
        a leaf with a fresh id and the same stored FLE-Expan inputs (μ, depth) in its place."""
        old = self.nodes.pop(node_id)
        new = self.new_node(old.depth, old.samples, old.stats, old.weight, old.value, old.parent)
        if old.parent < 0:
            self.root = new.id
        else:
            parent = self.nodes[old.parent]
            if parent.left == node_id:
                parent.left = new.id
            else:
                parent.right = new.id
        return new

    def arrays(self) -> TreeArrays:
        """Child ids, leaf flags and values by node id, for vectorised traversal."""
        size = self.next_id
        width = self.nodes[self.root].value.size
        left = np.full(size, -1, dtype=np.int64)
        right = np.full(size, -1, dtype=np.int64)
        leaf = np.ones(size, dtype=bool)
        value = np.zeros((size, width), dtype=np.float64)
        for k, n in self.nodes.items():
            left[k], right[k], leaf[k] = n.left, n.right, n.is_leaf
            value[k] = n.value
        return TreeArrays(left, right, leaf, value)

    def subtree(self, node_id: int) -> list[int]:
        """``node_id`` and every descendant, parents first."""
        out, stack = [], [node_id]
        while stack:
            k = stack.pop()
            out.append(k)
            n = self.nodes[k]
            if not n.is_leaf:
                stack += [n.right, n.left]
        return out

    def internal(self) -> list[Node]:
        return [n for n in self.nodes.values() if not n.is_leaf]

    def bfs(self) -> list[int]:
        """Node ids breadth first, left before right (the numbering of :meth:`to_tree`)."""
        order, queue = [], [self.root]
        while queue:
            k = queue.pop(0)
            order.append(k)
            n = self.nodes[k]
            if not n.is_leaf:
                queue += [n.left, n.right]
        return order

    def to_tree(self, n_features: int, providers: dict[str, int],
                thresholds: dict[int, float] | None = None) -> Tree:
        """This tree as a :class:`securetrees.trees.Tree` (breadth-first ids).  Without
        ``thresholds`` the splits are withheld (the CS's view); with a threshold for every
        internal node, the full plaintext tree (tests only: it combines every provider's secret)."""
        order = self.bfs()
        builder = TreeBuilder(n_features, int(self.nodes[self.root].value.size))
        root = self.nodes[self.root]
        builder.add_root(root.weight, root.value)
        new_id = {self.root: 0}
        for k in order:
            n = self.nodes[k]
            if n.is_leaf:
                continue
            lft, rgt = self.nodes[n.left], self.nodes[n.right]
            known = thresholds is not None
            lid, rid = builder.split(
                new_id[k],
                feature=n.column if known else None,
                threshold=thresholds[k] if thresholds is not None else None,
                categorical=False,
                missing_left=n.missing_left,
                provider=providers.get(n.provider or "", -1),
                left=(lft.weight, lft.value),
                right=(rgt.weight, rgt.value),
            )
            new_id[n.left], new_id[n.right] = lid, rid
        return builder.build()


def aggregate(leaf_values: list[FloatArray], task: str, voting: str) -> FloatArray:
    """FRF-Predict lines 5-9 for a batch: ``leaf_values[t]`` is tree t's leaf value per row.

    Classification, ``voting="soft"``: mean of the per-tree class frequencies (as
    ``securetrees.trees.Forest`` and scikit-learn); ``"hard"``: share of the per-tree
    majority votes (Protocol 4 line 8).  Regression: the mean (line 6).
    """
    stack = np.stack(leaf_values)  # (trees, rows, outputs)
    if task == "regression":
        return np.asarray(stack.mean(axis=0), dtype=np.float64)
    if voting == "hard":
        votes = np.zeros_like(stack)
        idx = np.argmax(stack, axis=2)
        np.put_along_axis(votes, idx[..., None], 1.0, axis=2)
        return np.asarray(votes.mean(axis=0), dtype=np.float64)
    tot = stack.sum(axis=2, keepdims=True)
    freq = np.divide(stack, tot, out=np.zeros_like(stack), where=tot > 0)
    return np.asarray(freq.mean(axis=0), dtype=np.float64)
