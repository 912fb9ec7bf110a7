"""Cover splits (``encrypted`` mode): a node where the central forest stops because it is
pure or no split gains is split all the same, by a uniformly random valid candidate, so that
no client can tell such a stop from a split (``specs/federated_forest.md``, "Cover splits").

The subtree below is not part of the model: the label holder, which names every node's
winner, keeps per tree which nodes belong to the central forest's tree
(:func:`reference_ancestor` maps a cover leaf to the reference leaf it grew from, whose value
is the prediction) and :func:`prune` removes cover subtrees for audits.  A cover node's
features are its node-keyed draw (``TreeDraws.node_features_at``), like any node's; the
choices that must look like the forest's own (the winning client, the candidate) come from
:class:`~securetrees.rand.KeyedRandom` streams under the label holder's key, labelled by tree
and node, so a restarted label holder repeats them exactly.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from securetrees.rand import RandomSource
from securetrees.trees import Tree

__all__ = ["prune", "random_valid_splits", "reference_ancestor"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_TINY = 1e-12


def random_valid_splits(hist: FloatArray, slots: BoolArray, n_bins: IntArray, categorical: BoolArray,
                        weight_channel: FloatArray, min_samples_leaf: float, streams: list[RandomSource]
                        ) -> tuple[BoolArray, IntArray, IntArray, BoolArray]:
    """For each node ``k`` of ``hist`` (``(nodes, slots, max_bins + 1, S)``, missing values in the
    last bin), a candidate drawn uniformly from the node's valid candidates with
    ``streams[k]``: ``(found, slot, bin, missing_left)``.

    ``slots[k, j]``: slot ``j`` holds a candidate (pass each candidate's first slot only);
    ``n_bins[k, j]``, ``categorical[k, j]`` describe it; ``weight_channel[S]`` turns a bin's
    statistics into its weight.  Candidates are the partitions ``best_splits`` scores:
    numeric "bin <= b" at a non-empty bin ``b`` (the lowest bin of each distinct partition,
    which ``best_splits``' tie-break would report), categorical "bin == b", each with the
    missing values on either side when the node has any (else the missing side is the heavier
    child, ties left, as in ``best_splits``).  Valid: both children weigh at least
    ``max(min_samples_leaf, tiny)``.  Reveals nothing: the choice is label-independent
    (weights are bootstrap weights)."""
    n_nodes, n_slots, width, _ = hist.shape
    max_bins = width - 1
    w = hist @ weight_channel  # (nodes, slots, width)
    floor = max(float(min_samples_leaf), _TINY)
    found = np.zeros(n_nodes, dtype=bool)
    slot_out = np.zeros(n_nodes, dtype=np.int64)
    bin_out = np.zeros(n_nodes, dtype=np.int64)
    ml_out = np.zeros(n_nodes, dtype=bool)
    for k in range(n_nodes):
        options: list[tuple[int, int, bool]] = []
        for j in range(n_slots):
            if not slots[k, j]:
                continue
            nb = int(min(n_bins[k, j], max_bins))
            wb = w[k, j, :nb]
            miss = float(w[k, j, max_bins])
            total = float(wb.sum())
            left_w = wb if categorical[k, j] else np.cumsum(wb)
            for b in np.flatnonzero(wb > 0).tolist():
                lw, rw = float(left_w[b]), total - float(left_w[b])
                if miss > 0:
                    for ml, (a, c) in ((False, (lw, rw + miss)), (True, (lw + miss, rw))):
                        if a >= floor and c >= floor:
                            options.append((j, b, ml))
                elif lw >= floor and rw >= floor:
                    options.append((j, b, lw >= rw))
        if options:
            j, b, ml = options[streams[k].randbelow(len(options))]
            found[k], slot_out[k], bin_out[k], ml_out[k] = True, j, b, ml
    return found, slot_out, bin_out, ml_out


def reference_ancestor(tree: Tree, reference: BoolArray) -> IntArray:
    """Per node, itself if it belongs to the reference tree, else the reference leaf its
    cover subtree grew from."""
    parent = np.full(tree.n_nodes, -1, dtype=np.int64)
    internal = np.flatnonzero(tree.left != -1)
    parent[tree.left[internal]] = internal
    parent[tree.right[internal]] = internal
    out = np.arange(tree.n_nodes, dtype=np.int64)
    for k in range(tree.n_nodes):  # parents come first (breadth-first ids)
        if not reference[k]:
            out[k] = out[parent[k]]
    return out


def prune(tree: Tree, reference: BoolArray) -> Tree:
    """The reference tree: cover subtrees removed, the kept nodes renumbered in order (the
    central grower's breadth-first ids), a node whose children were cover made a leaf."""
    keep = np.flatnonzero(reference)
    new_id = np.full(tree.n_nodes, -1, dtype=np.int64)
    new_id[keep] = np.arange(keep.size)
    left, right = tree.left[keep], tree.right[keep]
    leaf = (left == -1) | ~reference[np.maximum(left, 0)]
    feature, threshold = tree.feature[keep].copy(), tree.threshold[keep].copy()
    categorical, missing_left = tree.categorical[keep].copy(), tree.missing_left[keep].copy()
    provider, withheld = tree.provider[keep].copy(), tree.withheld[keep].copy()
    feature[leaf], threshold[leaf], categorical[leaf], missing_left[leaf] = -1, np.nan, False, False
    provider[leaf], withheld[leaf] = -1, False
    return Tree(tree.n_features, np.where(leaf, -1, new_id[np.maximum(left, 0)]),
                np.where(leaf, -1, new_id[np.maximum(right, 0)]), feature, threshold, categorical, missing_left,
                provider, withheld, tree.weight[keep].copy(), tree.value[keep].copy())
