"""The paper's histograms: bins ``(centre, class counts)`` merged by nearest centres (Algorithms 2-3).

Spec: ``specs/histogram_forest.md``, departure 4.  A histogram here is a pair
``(centres, counts)``: centres strictly increasing, ``counts[i]`` the class-count
vector of bin ``i`` (Eq. 1 with any number of classes).  :func:`group_bins` does
the work for many groups at once (every node of a layer on a client, every
(node, feature) pair on the server): equal values add, bins sort, and
:func:`merge_nearest` runs the "merge the two nearest bins until at most b
remain" loop of Eq. 4-5.  :func:`build_node_bins` / :func:`build_bins` are
Algorithm 2 over a layer's / a node's rows, :func:`combine_bins` Algorithm 3.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError

__all__ = ["build_bins", "build_node_bins", "combine_bins", "group_bins", "merge_nearest"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: While more than this many times ``b`` bins remain, several local-minimum pairs merge per pass.
_BATCH_FACTOR = 2


def _merge_pairs(centres: FloatArray, counts: IntArray, firsts: IntArray) -> tuple[FloatArray, IntArray]:
    """Merge each bin ``i`` in ``firsts`` with bin ``i + 1`` (pairs disjoint) by Eq. 5."""
    second = np.zeros(centres.size, dtype=bool)
    second[firsts + 1] = True
    group = np.cumsum(~second) - 1
    n_groups = int(group[-1]) + 1
    weight = counts.sum(axis=1).astype(np.float64)
    w_sum = np.bincount(group, weights=weight, minlength=n_groups)
    c_sum = np.bincount(group, weights=centres * weight, minlength=n_groups)
    plain = np.bincount(group, weights=centres, minlength=n_groups) / np.bincount(group, minlength=n_groups)
    new_centres = np.where(w_sum > 0, c_sum / np.where(w_sum > 0, w_sum, 1.0), plain)
    new_counts = np.zeros((n_groups, counts.shape[1]), dtype=np.int64)
    np.add.at(new_counts, group, counts)
    return new_centres, new_counts


def _merge_one_at_a_time(centres: FloatArray, counts: IntArray, max_bins: int) -> tuple[FloatArray, IntArray]:
    """Eq. 4-5 exactly: repeatedly merge the single nearest pair (ties: the leftmost)."""
    c = centres.tolist()
    k = counts.tolist()
    w = counts.sum(axis=1).astype(np.float64).tolist()
    gaps = [c[i + 1] - c[i] for i in range(len(c) - 1)]
    while len(c) > max_bins:
        i = min(range(len(gaps)), key=gaps.__getitem__)
        total = w[i] + w[i + 1]
        c[i] = (w[i] * c[i] + w[i + 1] * c[i + 1]) / total if total > 0 else (c[i] + c[i + 1]) / 2.0
        k[i] = [a + b for a, b in zip(k[i], k[i + 1], strict=True)]
        w[i] = total
        del c[i + 1], k[i + 1], w[i + 1], gaps[i]
        if i > 0:
            gaps[i - 1] = c[i] - c[i - 1]
        if i < len(gaps):
            gaps[i] = c[i + 1] - c[i]
    return np.asarray(c, dtype=np.float64), np.asarray(k, dtype=np.int64).reshape(len(c), counts.shape[1])


def merge_nearest(centres: FloatArray, counts: IntArray, max_bins: int) -> tuple[FloatArray, IntArray]:
    """Reduce sorted bins to at most ``max_bins`` by merging nearest neighbours (Eq. 4-5).

    The merged centre is the count-weighted mean of the two centres, the counts
    add.  While more than ``2·max_bins`` bins remain, every pair whose gap is a
    local minimum among the gaps (such pairs are disjoint) and among the
    smallest half of the excess merges in one pass; the last merges take the
    single nearest pair each, exactly as Eq. 4.
    """
    if max_bins < 1:
        raise ParameterError("max_bins must be >= 1")
    c, k = np.asarray(centres, dtype=np.float64), np.asarray(counts, dtype=np.int64)
    while c.size > _BATCH_FACTOR * max_bins:
        gaps = np.diff(c)
        prev_ok = np.concatenate(([True], gaps[1:] <= gaps[:-1]))
        next_ok = np.concatenate((gaps[:-1] < gaps[1:], [True]))
        minima = np.flatnonzero(prev_ok & next_ok)
        take = max(1, (c.size - max_bins) // 2)
        firsts = np.sort(minima[np.argsort(gaps[minima], kind="stable")[:take]])
        c, k = _merge_pairs(c, k, firsts)
    if c.size > max_bins:
        c, k = _merge_one_at_a_time(c, k, max_bins)
    return c, k


def group_bins(
    values: FloatArray,
    group: IntArray,
    counts: IntArray,
    n_groups: int,
    max_bins: int | None,
    *,
    value_sorted: bool = False,
) -> tuple[FloatArray, IntArray, IntArray]:
    """For each group ``g`` (a node, or a (node, feature) pair), the bins of the entries with
    ``group == g``: equal values add their count vectors, bins are sorted by value, then nearest bins
    merge until at most ``max_bins`` remain (``None``: no merging).  Entries with ``group < 0`` are
    ignored.  ``value_sorted`` promises that ``values`` is already in increasing order (then only a
    stable sort by group is needed).  Returns ``(centres, counts, bounds)``: group ``g`` owns rows
    ``bounds[g]:bounds[g+1]``."""
    n_classes = counts.shape[1]
    keep = group >= 0
    v, g, k = values[keep], group[keep], counts[keep]
    if v.size == 0:
        return np.empty(0), np.empty((0, n_classes), dtype=np.int64), np.zeros(n_groups + 1, dtype=np.int64)
    if value_sorted:
        small = np.int16 if n_groups < 2**15 else np.int32 if n_groups < 2**31 else np.int64
        order = np.argsort(g.astype(small), kind="stable")  # radix sort for small integer types
    else:
        order = np.lexsort((v, g))
    v, g, k = v[order], g[order], k[order]
    new_bin = np.concatenate(([True], (g[1:] != g[:-1]) | (v[1:] != v[:-1])))
    firsts = np.flatnonzero(new_bin)
    centres = v[firsts]
    summed = np.add.reduceat(k, firsts, axis=0).astype(np.int64)
    bounds = np.searchsorted(g[firsts], np.arange(n_groups + 1)).astype(np.int64)
    if max_bins is None:
        return centres, summed, bounds
    big = np.flatnonzero(np.diff(bounds) > max_bins)
    if big.size == 0:
        return centres, summed, bounds
    c_parts: list[FloatArray] = []
    k_parts: list[IntArray] = []
    done = 0
    for j in big:
        lo, hi = int(bounds[j]), int(bounds[j + 1])
        c_parts.append(centres[done:lo])
        k_parts.append(summed[done:lo])
        c, kk = merge_nearest(centres[lo:hi], summed[lo:hi], max_bins)
        c_parts.append(c)
        k_parts.append(kk)
        done = hi
    c_parts.append(centres[done:])
    k_parts.append(summed[done:])
    lengths = np.diff(bounds)
    lengths[big] = max_bins
    new_bounds = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    return np.concatenate(c_parts), np.concatenate(k_parts), new_bounds


def build_node_bins(
    values: FloatArray,
    node: IntArray,
    labels: IntArray,
    weights: IntArray,
    n_nodes: int,
    n_classes: int,
    max_bins: int | None,
    value_order: IntArray | None = None,
) -> tuple[FloatArray, IntArray, IntArray]:
    """Algorithm 2 for one feature, for every node of a layer at once: the rows of node ``j``
    (``node == j``; ``-1`` for none) with equal values share a bin (lines 5-7), then nearest bins
    merge until at most ``max_bins`` remain (lines 10-13; ``None``: no merging, for categorical
    features).  Rows with weight 0 are not in the sample; NaN values are left out (the caller counts
    them).  ``value_order`` may pass ``argsort(values)`` computed once for many layers.  Returns
    :func:`group_bins`' ``(centres, counts, bounds)`` with one group per node."""
    present = (weights > 0) & ~np.isnan(values)
    counts = np.zeros((values.shape[0], n_classes), dtype=np.int64)
    counts[np.arange(values.shape[0]), labels] = weights
    order = np.argsort(values, kind="stable") if value_order is None else value_order  # NaN last
    return group_bins(
        values[order], np.where(present, node, -1)[order], counts[order], n_nodes, max_bins, value_sorted=True
    )


def build_bins(
    values: FloatArray, labels: IntArray, weights: IntArray, n_classes: int, max_bins: int | None
) -> tuple[FloatArray, IntArray]:
    """Algorithm 2 for one feature over some rows (:func:`build_node_bins` with a single node)."""
    node = np.zeros(np.asarray(values).shape[0], dtype=np.int64)
    centres, counts, _ = build_node_bins(values, node, labels, weights, 1, n_classes, max_bins)
    return centres, counts


def combine_bins(
    parts: list[tuple[FloatArray, IntArray]], n_classes: int, max_bins: int | None
) -> tuple[FloatArray, IntArray]:
    """Algorithm 3: the union of several histograms of one feature (equal centres add), sorted,
    then merged down to ``max_bins`` (``None``: no merging)."""
    if not parts:
        return np.empty(0, dtype=np.float64), np.empty((0, n_classes), dtype=np.int64)
    centres = np.concatenate([p[0] for p in parts])
    counts = np.concatenate([p[1] for p in parts]).reshape(-1, n_classes)
    merged, summed, _ = group_bins(centres, np.zeros(centres.size, dtype=np.int64), counts, 1, max_bins)
    return merged, summed
