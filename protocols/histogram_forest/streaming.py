"""The paper's histograms: bins ``(centre, class counts)`` merged by nearest centres (Algorithms 2-3).

Spec: ``specs/histogram_forest.md``, departure 4.  A histogram here is a pair
``(centres, counts)``: centres strictly increasing, ``counts[i]`` the class-count
vector of bin ``i`` (Eq. 1 with any number of classes).  :func:`build_bins` is
Algorithm 2 over a node's rows, :func:`combine_bins` the union step of
Algorithm 3, and both end in :func:`merge_nearest`, the "merge the two nearest
bins until at most b remain" loop of Eq. 4-5.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError

__all__ = ["build_bins", "build_node_bins", "combine_bins", "merge_nearest", "split_thresholds"]

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


def build_node_bins(
    values: FloatArray,
    node: IntArray,
    labels: IntArray,
    weights: IntArray,
    n_nodes: int,
    n_classes: int,
    max_bins: int | None,
) -> list[tuple[FloatArray, IntArray]]:
    """Algorithm 2 for one feature, for every node of a layer at once: the rows of node ``j``
    (``node == j``) with equal values share a bin (lines 5-7), then nearest bins merge until at
    most ``max_bins`` remain (lines 10-13; ``None``: no merging, for categorical features).
    Rows with weight 0 are not in the sample; NaN values are left out (the caller counts them)."""
    present = (weights > 0) & ~np.isnan(values) & (node >= 0)
    v, nd, lab, w = values[present], node[present], labels[present], weights[present]
    empty = (np.empty(0, dtype=np.float64), np.empty((0, n_classes), dtype=np.int64))
    out: list[tuple[FloatArray, IntArray]] = [empty] * n_nodes
    if v.size == 0:
        return out
    order = np.lexsort((v, nd))
    v, nd, lab, w = v[order], nd[order], lab[order], w[order]
    new_group = np.concatenate(([True], (nd[1:] != nd[:-1]) | (v[1:] != v[:-1])))
    group = np.cumsum(new_group) - 1
    firsts = np.flatnonzero(new_group)
    counts = np.zeros((firsts.size, n_classes), dtype=np.int64)
    np.add.at(counts, (group, lab), w)
    centres, owner = v[firsts], nd[firsts]
    bounds = np.searchsorted(owner, np.arange(n_nodes + 1))
    for j in np.flatnonzero(np.diff(bounds)):
        c, k = centres[bounds[j]:bounds[j + 1]], counts[bounds[j]:bounds[j + 1]]
        out[j] = (c, k) if max_bins is None or c.size <= max_bins else merge_nearest(c, k, max_bins)
    return out


def build_bins(
    values: FloatArray, labels: IntArray, weights: IntArray, n_classes: int, max_bins: int | None
) -> tuple[FloatArray, IntArray]:
    """Algorithm 2 for one feature over some rows (:func:`build_node_bins` with a single node)."""
    node = np.zeros(np.asarray(values).shape[0], dtype=np.int64)
    return build_node_bins(values, node, labels, weights, 1, n_classes, max_bins)[0]


def combine_bins(
    parts: list[tuple[FloatArray, IntArray]], n_classes: int, max_bins: int | None
) -> tuple[FloatArray, IntArray]:
    """Algorithm 3: the union of several histograms of one feature (equal centres add), sorted,
    then merged down to ``max_bins`` (``None``: no merging)."""
    centres = np.concatenate([p[0] for p in parts]) if parts else np.empty(0)
    counts = np.concatenate([p[1] for p in parts]) if parts else np.empty((0, n_classes), dtype=np.int64)
    if centres.size == 0:
        return np.empty(0, dtype=np.float64), np.empty((0, n_classes), dtype=np.int64)
    uniq, inverse = np.unique(centres, return_inverse=True)
    summed = np.zeros((uniq.size, n_classes), dtype=np.int64)
    np.add.at(summed, inverse, counts)
    if max_bins is None:
        return uniq, summed
    return merge_nearest(uniq, summed, max_bins)


def split_thresholds(centres: FloatArray, width: int) -> FloatArray:
    """Candidate thresholds of bin slots ``0 .. width-1``: the midpoint between bin ``b`` and
    ``b + 1``, and ``+inf`` from the last real bin on (a split that separates only missing values)."""
    out = np.full(width, np.inf, dtype=np.float64)
    if centres.size >= 2:
        out[: centres.size - 1] = (centres[:-1] + centres[1:]) / 2.0
    return out
