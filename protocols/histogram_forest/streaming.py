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

__all__ = ["build_bins", "build_node_bins", "combine_bins", "group_bins", "merge_groups", "merge_nearest",
           "sorted_node_bins"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: While more than this many times ``b`` bins remain, several local-minimum pairs merge per pass.
_BATCH_FACTOR = 2


def _segments(sizes: IntArray) -> tuple[IntArray, IntArray]:
    """Each entry's group and each group's first entry, for groups of ``sizes`` laid end to end."""
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    return np.repeat(np.arange(sizes.size), sizes), starts


def _batch_pass(
    centres: FloatArray, counts: IntArray, sizes: IntArray, active: npt.NDArray[np.bool_], max_bins: int
) -> tuple[FloatArray, IntArray, IntArray]:
    """One batched pass of :func:`merge_nearest` in every ``active`` group at once: the pairs whose gap
    is a local minimum among the group's gaps (ties: the left gap wins) and among the group's
    ``max(1, (size - max_bins) // 2)`` smallest such gaps (ties: leftmost) merge by Eq. 5; the bins of
    the other groups are left untouched."""
    seg, starts = _segments(sizes)
    gaps = np.diff(centres)
    gseg = seg[:-1]
    last = starts[gseg] + sizes[gseg] - 2  # the last gap of each gap's group
    valid = (gseg == seg[1:]) & active[gseg]
    at = np.arange(gaps.size)
    prev_ok = np.ones(gaps.size, dtype=bool)
    prev_ok[1:] = gaps[1:] <= gaps[:-1]
    prev_ok |= at == starts[gseg]
    next_ok = np.ones(gaps.size, dtype=bool)
    next_ok[:-1] = gaps[:-1] < gaps[1:]
    next_ok |= at == last
    minima = np.flatnonzero(valid & prev_ok & next_ok)
    mseg = gseg[minima]
    order = np.lexsort((gaps[minima], mseg))  # by group, then gap; stable: ties stay leftmost first
    mseg_sorted = mseg[order]
    rank = np.arange(order.size) - np.searchsorted(mseg_sorted, mseg_sorted)
    take = np.maximum(1, (sizes - max_bins) // 2)
    firsts = np.sort(minima[order][rank < take[mseg_sorted]])
    second = np.zeros(centres.size, dtype=bool)
    second[firsts + 1] = True
    group = np.cumsum(~second) - 1
    n_groups = int(group[-1]) + 1
    weight = counts.sum(axis=1).astype(np.float64)
    w_sum = np.bincount(group, weights=weight, minlength=n_groups)
    c_sum = np.bincount(group, weights=centres * weight, minlength=n_groups)
    plain = np.bincount(group, weights=centres, minlength=n_groups) / np.bincount(group, minlength=n_groups)
    new_centres = np.where(w_sum > 0, c_sum / np.where(w_sum > 0, w_sum, 1.0), plain)
    still = ~active[seg]
    new_centres[group[still]] = centres[still]  # groups not in this pass keep their bins bit for bit
    new_counts = np.add.reduceat(counts, np.flatnonzero(~second), axis=0).astype(np.int64)
    return new_centres, new_counts, sizes - np.bincount(gseg[firsts], minlength=sizes.size)


def _single_pass(
    centres: FloatArray, counts: IntArray, weight: FloatArray, sizes: IntArray, active: npt.NDArray[np.bool_]
) -> tuple[FloatArray, IntArray, FloatArray, IntArray]:
    """Eq. 4-5 exactly, one merge in every ``active`` group at once: its single nearest pair (ties:
    the leftmost) merges; the centre is the count-weighted mean (the plain mean for weight 0)."""
    seg, starts = _segments(sizes)
    gaps = np.diff(centres)
    gseg = seg[:-1]
    valid = (gseg == seg[1:]) & active[gseg]
    masked = np.where(valid, gaps, np.inf)
    groups = np.flatnonzero(active)
    low = np.minimum.reduceat(masked, starts[groups])
    best = np.full(sizes.size, np.inf)
    best[groups] = low
    cand = np.flatnonzero(valid & (masked == best[gseg]))
    first = np.concatenate(([True], gseg[cand][1:] != gseg[cand][:-1]))
    i = cand[first]
    j = i + 1
    total = weight[i] + weight[j]
    pos = total > 0
    mean = (weight[i] * centres[i] + weight[j] * centres[j]) / np.where(pos, total, 1.0)
    c = centres.copy()
    c[i] = np.where(pos, mean, (centres[i] + centres[j]) / 2.0)
    k = counts.copy()
    k[i] += counts[j]
    w = weight.copy()
    w[i] = total
    keep = np.ones(centres.size, dtype=bool)
    keep[j] = False
    return c[keep], k[keep], w[keep], sizes - active.astype(np.int64)


def merge_groups(centres: FloatArray, counts: IntArray, sizes: IntArray, max_bins: int) -> tuple[FloatArray, IntArray]:
    """:func:`merge_nearest` in every group of sorted bins at once (groups of ``sizes`` laid end to
    end); the result of each group is bit for bit that of :func:`merge_nearest` on it alone."""
    if max_bins < 1:
        raise ParameterError("max_bins must be >= 1")
    c, k = np.asarray(centres, dtype=np.float64), np.asarray(counts, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    while (active := sizes > _BATCH_FACTOR * max_bins).any():
        c, k, sizes = _batch_pass(c, k, sizes, active, max_bins)
    w = k.sum(axis=1).astype(np.float64)
    while (active := sizes > max_bins).any():
        c, k, w, sizes = _single_pass(c, k, w, sizes, active)
    return c, k


def merge_nearest(centres: FloatArray, counts: IntArray, max_bins: int) -> tuple[FloatArray, IntArray]:
    """Reduce sorted bins to at most ``max_bins`` by merging nearest neighbours (Eq. 4-5).

    The merged centre is the count-weighted mean of the two centres, the counts
    add.  While more than ``2·max_bins`` bins remain, every pair whose gap is a
    local minimum among the gaps (such pairs are disjoint) and among the
    smallest half of the excess merges in one pass; the last merges take the
    single nearest pair each, exactly as Eq. 4.
    """
    c = np.asarray(centres, dtype=np.float64)
    return merge_groups(c, counts, np.array([c.size], dtype=np.int64), max_bins)


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
    return _merged(centres, summed, bounds, max_bins)


def _merged(
    centres: FloatArray, counts: IntArray, bounds: IntArray, max_bins: int | None
) -> tuple[FloatArray, IntArray, IntArray]:
    """Every group of more than ``max_bins`` bins merged down to ``max_bins`` (``None``: none)."""
    lengths = np.diff(bounds)
    if max_bins is None or not (lengths > max_bins).any():
        return centres, counts, bounds
    merged, merged_counts = merge_groups(centres, counts, lengths, max_bins)
    new_bounds = np.concatenate(([0], np.cumsum(np.minimum(lengths, max_bins)))).astype(np.int64)
    return merged, merged_counts, new_bounds


def sorted_node_bins(
    values: FloatArray,
    node: IntArray,
    labels: IntArray,
    weights: IntArray,
    n_nodes: int,
    n_classes: int,
    max_bins: int | None,
) -> tuple[FloatArray, IntArray, IntArray]:
    """Algorithm 2 for one feature, every node of a layer at once, on rows already in increasing
    order of ``values`` (no NaN): the rows of node ``j`` (``node == j``; ``-1`` for none) with
    equal values share a bin (lines 5-7), then nearest bins merge until at most ``max_bins`` remain
    (lines 10-13; ``None``: no merging, for categorical features).  Rows with weight 0 are not in
    the sample.  Linear time: one stable radix sort by node, class counts by ``np.bincount``.
    Returns :func:`group_bins`' ``(centres, counts, bounds)`` with one group per node."""
    keep = (node >= 0) & (weights > 0)
    v, g, y, w = values[keep], node[keep], labels[keep], weights[keep]
    if v.size == 0:
        return np.empty(0), np.empty((0, n_classes), dtype=np.int64), np.zeros(n_nodes + 1, dtype=np.int64)
    small = np.int16 if n_nodes < 2**15 else np.int32 if n_nodes < 2**31 else np.int64
    order = np.argsort(g.astype(small), kind="stable")  # radix sort for small integer types
    v, g, y, w = v[order], g[order], y[order], w[order]
    new_bin = np.concatenate(([True], (g[1:] != g[:-1]) | (v[1:] != v[:-1])))
    firsts = np.flatnonzero(new_bin)
    slot = (np.cumsum(new_bin) - 1) * n_classes + y
    # integer weights: float64 sums are exact below 2^53
    counts = np.rint(np.bincount(slot, weights=w, minlength=firsts.size * n_classes)).astype(np.int64)
    bounds = np.searchsorted(g[firsts], np.arange(n_nodes + 1)).astype(np.int64)
    return _merged(v[firsts], counts.reshape(firsts.size, n_classes), bounds, max_bins)


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
    """:func:`sorted_node_bins` on rows in any order (NaN values are left out: the caller counts
    them).  ``value_order`` may pass ``argsort(values)`` computed once for many layers."""
    order = np.argsort(values, kind="stable") if value_order is None else value_order  # NaN last
    v = values[order]
    return sorted_node_bins(v, np.where(np.isnan(v), -1, node[order]), labels[order], weights[order], n_nodes,
                            n_classes, max_bins)


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
