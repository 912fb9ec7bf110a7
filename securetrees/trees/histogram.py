"""Per-node, per-feature, per-bin statistics and the vectorised search for the best split.

Spec: ``specs/trees.md`` sections "Histograms" and "Split search".  A layer's
histogram has shape ``(n_nodes, n_features, max_bins + 1, n_stats)``; slot
``max_bins`` holds the missing values.  Histograms of disjoint sample sets add
(histogram forest, Algorithm 3), so a party can compute its share and a server
can sum them before calling :func:`best_splits`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.trees.criteria import Criterion, gain_is_cost_difference

__all__ = [
    "LayerSplits", "best_splits", "bucket_sums", "build_histograms", "layer_splits", "node_totals",
    "score_candidates",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def node_totals(node_index: IntArray, sample_stats: FloatArray, n_nodes: int, *,
                rows: IntArray | None = None) -> FloatArray:
    """Sum of ``sample_stats`` per node: shape ``(n_nodes, n_stats)``.  ``rows`` (optional):
    the rows of ``sample_stats`` counted, ``node_index[i]`` being the node of ``rows[i]``."""
    out = np.empty((n_nodes, sample_stats.shape[1]), dtype=np.float64)
    for s in range(sample_stats.shape[1]):
        weights = sample_stats[:, s] if rows is None else sample_stats[rows, s]
        out[:, s] = np.bincount(node_index, weights=weights, minlength=n_nodes)
    return out


def build_histograms(
    binned: npt.NDArray[np.unsignedinteger[npt.NBitBase]],
    node_index: IntArray,
    sample_stats: FloatArray,
    n_nodes: int,
    max_bins: int,
    features: IntArray | None = None,
    *,
    rows: IntArray | None = None,
    missing_bin: int | None = None,
) -> FloatArray:
    """Histograms of one layer: ``hist[k, j, b, s] = Σ sample_stats[i, s]`` over the samples
    ``i`` of node ``k`` (``node_index[i] == k``) whose feature ``features[k, j]`` falls in
    bin ``b``.  ``features=None`` means every feature for every node (``j = f``); an
    entry ``-1`` pads a node's row (a slot without a feature; its histogram stays zero
    and is ignored by :func:`best_splits`), so nodes may have different numbers of
    features.  A 1-D ``features`` keeps the all-features layout and fills only the
    listed columns (the others stay zero).

    ``rows`` (optional) names the samples counted, as row indices of ``binned`` and
    ``sample_stats``, with ``node_index[i]`` the node of row ``rows[i]``; only those
    entries are read.  ``missing_bin`` (optional) is the code of missing values when it
    is not ``max_bins``: they are counted in slot ``max_bins``, so a histogram may stop
    above the largest real bin of its features (every other code must be below
    ``max_bins``).
    """
    n_samples, n_features = binned.shape
    n_counted = n_samples if rows is None else rows.shape[0]
    if node_index.shape != (n_counted,) or sample_stats.shape[0] != n_samples or (
            rows is not None and rows.ndim != 1):
        raise ParameterError("binned, node_index, sample_stats and rows disagree on the samples")
    if features is not None and features.ndim == 1:
        full = np.zeros((n_nodes, n_features, max_bins + 1, sample_stats.shape[1]))
        cols = np.unique(np.asarray(features, dtype=np.int64))
        if cols.size and (cols[0] < 0 or cols[-1] >= n_features):
            raise ParameterError("feature index out of range")
        full[:, cols] = build_histograms(binned, node_index, sample_stats, n_nodes, max_bins,
                                         np.tile(cols, (n_nodes, 1)), rows=rows, missing_bin=missing_bin)
        return full
    if features is not None and (features.ndim != 2 or features.shape[0] != n_nodes):
        raise ParameterError("features must have shape (n_nodes, k)")
    width = max_bins + 1
    n_stats = sample_stats.shape[1]
    n_slots = n_features if features is None else features.shape[1]
    hist = np.zeros((n_nodes, n_slots, width, n_stats), dtype=np.float64)
    # Per counted sample, in order: its node's offset, its row and its statistics (a
    # statistic equal to 1 everywhere is counted instead: the same sums).
    base = node_index * width
    row_of = np.arange(n_samples, dtype=np.int64) if rows is None else rows
    weights: list[FloatArray | None] = []
    for s in range(n_stats):
        w = np.ascontiguousarray(sample_stats[:, s] if rows is None else sample_stats[rows, s])
        weights.append(None if np.all(w == 1.0) else w)
    flat_binned = np.ascontiguousarray(binned).reshape(-1)
    for j in range(n_slots):
        b, sel, ws = base, None, weights  # sel None: every counted sample
        if features is None:
            col = binned[:, j] if rows is None else binned[rows, j]
        else:
            f = features[node_index, j]
            if features[:, j].min(initial=0) < 0:  # padded slot: count only the nodes that have one
                sel = np.flatnonzero(f >= 0)
                f, b = f[sel], b[sel]
                ws = [None if w is None else w[sel] for w in weights]
            col = flat_binned[(row_of if sel is None else row_of[sel]) * n_features + f]
        if missing_bin is not None and missing_bin != max_bins:
            col = np.where(col == missing_bin, np.int64(max_bins), col)
        flat = b + col
        for s, wt in enumerate(ws):
            hist[:, j, :, s] = bucket_sums(flat, wt, n_nodes * width).reshape(n_nodes, width)
    return hist


def bucket_sums(index: IntArray, weights: FloatArray | None, size: int) -> FloatArray:
    """``out[b] = Σ weights[i]`` over ``index[i] == b`` (``weights=None``: counts), adding in
    the order of ``index``, as ``np.bincount`` does (``np.add.at``, faster for float sums)."""
    out = np.zeros(size, dtype=np.float64)
    np.add.at(out, np.asarray(index, dtype=np.intp), 1.0 if weights is None else weights)
    return out


@dataclass(frozen=True)
class LayerSplits:
    """The best split of each node of a layer (arrays indexed by the node's position).

    ``found[k]`` is False where no candidate is valid (the node becomes a leaf);
    the other fields of such a node are meaningless.  ``bin`` is the histogram bin
    (numeric: "bin <= b" goes left; categorical: "bin == b" goes left).
    """

    found: BoolArray
    gain: FloatArray
    feature: IntArray
    bin: IntArray
    missing_left: BoolArray
    left_stats: FloatArray
    right_stats: FloatArray


def best_splits(
    hist: FloatArray,
    criterion: Criterion,
    *,
    categorical: BoolArray,
    n_bins: IntArray,
    features: IntArray | None = None,
    feature_mask: BoolArray | None = None,
    min_samples_leaf: float = 1.0,
    min_gain: float = 0.0,
) -> LayerSplits:
    """Score every candidate of every node of a layer at once and keep each node's best.

    ``hist`` comes from :func:`build_histograms` with the same ``features``
    (``None``: all features; ``-1`` entries are empty slots); ``categorical`` and
    ``n_bins`` describe all features.  With the all-features layout
    (``features=None``), ``feature_mask[k, f]`` may restrict node ``k`` to some features.
    Candidates per (node, feature): numeric "bin <= b" for ``b < n_bins[f]``
    (``b = n_bins[f]-1`` isolates the missing values); categorical "bin == b"
    (one category against the rest, the same partitions as a one-hot encoding).
    Missing values are tried on both sides; the missing-left variant wins only
    if strictly better.  A candidate is valid if both children weigh at least
    ``max(min_samples_leaf, tiny)`` and its gain exceeds ``min_gain`` (plus a
    rounding tolerance).  Where the node has no missing value of the chosen
    feature, ``missing_left`` sends future missing values to the heavier child
    (ties: left).  Ties go to the first slot ``j`` (features are listed in
    increasing order), then the lowest bin, then missing-right.
    """
    n_nodes, n_slots, width, _ = hist.shape
    max_bins = width - 1
    if n_slots < 1 or max_bins < 1:
        raise ParameterError("hist needs at least one feature slot and one bin")
    categorical = np.asarray(categorical, dtype=bool)
    n_bins = np.asarray(n_bins, dtype=np.int64)
    if categorical.ndim != 1 or categorical.shape != n_bins.shape:
        raise ParameterError("categorical and n_bins must have one entry per feature")
    if feature_mask is not None:
        fm = np.asarray(feature_mask, dtype=bool)
        if features is not None or fm.shape != (n_nodes, n_slots):
            raise ParameterError("feature_mask needs the all-features layout, shape (n_nodes, n_features)")
        features = _mask_to_features(fm)
        hist = hist[np.arange(n_nodes)[:, None], np.maximum(features, 0)]
        n_slots = features.shape[1]
    if features is None:
        if n_slots != categorical.size:
            raise ParameterError("hist must have one slot per feature when features is None")
        feat = np.broadcast_to(np.arange(n_slots, dtype=np.int64), (n_nodes, n_slots))
    else:
        feat = np.asarray(features, dtype=np.int64)
        if feat.shape != (n_nodes, n_slots):
            raise ParameterError("features must have shape (n_nodes, k) matching hist")
        if feat.size and (feat.min() < -1 or feat.max() >= categorical.size):
            raise ParameterError("feature index out of range")
    present = feat >= 0
    fz = np.maximum(feat, 0)
    real_bins = np.where(present, np.minimum(n_bins[fz], max_bins), 0)  # (nodes, slots)
    rows = np.arange(n_nodes)
    cum = np.cumsum(hist, axis=2)  # running sums over the bins, the missing slot last
    node_total = cum[rows, np.argmax(present, axis=1), max_bins]  # (nodes, S)
    missing = hist[:, :, max_bins, :]
    has_missing = criterion.weight(missing) > 0  # (nodes, slots)

    # Candidates (node, slot, bin), scored only where they can win: an empty numeric bin
    # b > 0 repeats the partition (and, bit for bit, the left sums) of the last non-empty
    # bin below it, which comes first in the tie-break, so it is skipped; bin 0 and every
    # categorical bin stay (an empty one still offers "missing values against the rest").
    real = hist[:, :, :max_bins, :]
    cat_slot = categorical[fz] & present  # (nodes, slots)
    left = cum[:, :, :max_bins, :]  # numeric: "bin <= b"; categorical: "bin == b"
    if cat_slot.any():
        left[cat_slot] = real[cat_slot]
    bins = np.arange(max_bins)
    keep = real[..., 0] != 0
    for s in range(1, real.shape[3]):
        keep |= real[..., s] != 0
    keep[:, :, 0] = True
    keep |= cat_slot[:, :, None]
    keep &= bins < real_bins[:, :, None]
    kk, jj, bb = np.nonzero(keep)
    gains = score_candidates(criterion, left[kk, jj, bb], node_total, kk, jj, (kk, jj, bb), missing,
                             has_missing, (n_nodes, n_slots, max_bins), min_samples_leaf=min_samples_leaf,
                             min_gain=min_gain)

    # The first best in (slot, bin, missing side) order: features are listed in increasing order.
    flat = np.argmax(gains.reshape(n_nodes, -1), axis=1)
    best = gains.reshape(n_nodes, -1)[rows, flat]
    slot, rest = np.divmod(flat, 2 * max_bins)
    bin_index, variant = np.divmod(rest, 2)
    return layer_splits(criterion, best, variant, left[rows, slot, bin_index], missing[rows, slot],
                        has_missing[rows, slot], node_total, fz[rows, slot].astype(np.int64), bin_index)


def score_candidates(
    criterion: Criterion,
    lft: FloatArray,
    node_total: FloatArray,
    node: IntArray,
    slot: IntArray,
    where: tuple[npt.NDArray[np.integer[Any]], ...],
    missing: FloatArray,
    has_missing: BoolArray,
    shape: tuple[int, ...],
    *,
    min_samples_leaf: float,
    min_gain: float,
) -> FloatArray:
    """Gains of a layer's candidates, ``-inf`` where invalid: an array ``shape + (2,)``
    (last axis: missing values right, then left) filled at the index arrays ``where``.
    Candidate ``c`` belongs to node ``node[c]`` and feature slot ``slot[c]`` and sends
    ``lft[c]`` left; ``missing[k, j]`` are node ``k``'s missing values of slot ``j``, tried
    on the left only where ``has_missing[k, j]``.  Valid: both children weigh at least
    ``max(min_samples_leaf, tiny)`` and the gain beats ``min_gain`` plus a rounding
    tolerance (``1e-10·max(|cost(node)|, 1)``)."""
    node_cost = criterion.cost(node_total)
    tol = 1e-10 * np.maximum(np.abs(node_cost), 1.0)
    floor = min_gain + tol  # (nodes,)
    min_w = max(float(min_samples_leaf), 1e-12)
    parent = node_total[node]
    # gain = cost(parent) - cost(left) - cost(right): the parent's cost once per node.
    parent_cost = node_cost[node] if gain_is_cost_difference(criterion) else None
    fl = floor[node]
    gains = np.full((*shape, 2), -np.inf)
    gains[..., 0][where] = _score(criterion, lft, parent, fl, min_w, parent_cost)
    hm = np.flatnonzero(has_missing[node, slot])
    if hm.size:  # the missing-left variant, only where it differs
        km, jm = node[hm], slot[hm]
        gains[..., 1][tuple(w[hm] for w in where)] = _score(
            criterion, lft[hm] + missing[km, jm], parent[hm], fl[hm], min_w,
            None if parent_cost is None else parent_cost[hm])
    return gains


def layer_splits(
    criterion: Criterion,
    best: FloatArray,
    variant: IntArray,
    left: FloatArray,
    missing: FloatArray,
    has_missing: BoolArray,
    node_total: FloatArray,
    feature: IntArray,
    bin_index: IntArray,
) -> LayerSplits:
    """The :class:`LayerSplits` of each node's chosen candidate: its gain ``best``
    (``-inf``: none found), missing side ``variant`` (1: left), left sums without the
    missing values, the node's missing values of that feature (and whether it had any),
    its totals, feature and bin.  Where the node had no missing value of the chosen
    feature, missing values met at prediction time follow the heavier child (ties: left)."""
    found = np.isfinite(best)
    chosen_left = left + np.where(variant[:, None] == 1, missing, 0.0)
    heavier_left = criterion.weight(chosen_left) >= criterion.weight(node_total - chosen_left)
    return LayerSplits(
        found=found,
        gain=np.where(found, best, 0.0),
        feature=feature,
        bin=bin_index,
        missing_left=np.where(~has_missing, heavier_left, variant == 1),
        left_stats=chosen_left,
        right_stats=node_total - chosen_left,
    )


def _score(criterion: Criterion, lft: FloatArray, parent: FloatArray, floor: FloatArray,
           min_w: float, parent_cost: FloatArray | None = None) -> FloatArray:
    """Gain of each candidate whose children both weigh ``min_w`` and whose gain beats
    ``floor``; ``-inf`` elsewhere.  ``parent_cost``: ``criterion.cost(parent)`` where the
    gain is that cost minus the children's (the same numbers, computed once per node)."""
    rgt = parent - lft
    if parent_cost is None:
        g = criterion.gain(parent, lft, rgt)
    else:
        g = parent_cost - criterion.cost(lft) - criterion.cost(rgt)
    ok = (criterion.weight(lft) >= min_w) & (criterion.weight(rgt) >= min_w) & (g > floor)
    return np.where(ok, g, -np.inf)


def _mask_to_features(mask: BoolArray) -> IntArray:
    """Row-wise feature lists of a boolean mask, in increasing order, padded with -1."""
    k = max(int(mask.sum(axis=1).max(initial=0)), 1)
    out = np.full((mask.shape[0], k), -1, dtype=np.int64)
    for i, row in enumerate(mask):
        idx = np.flatnonzero(row)
        out[i, : idx.size] = idx
    return out
