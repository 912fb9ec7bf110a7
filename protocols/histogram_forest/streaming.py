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

__all__ = ["build_bins", "combine_bins", "merge_nearest", "split_thresholds"]

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
    while c.size > max_bins:
        gaps = np.diff(c)
        excess = c.size - max_bins
        if c.size > _BATCH_FACTOR * max_bins:
            prev_ok = np.concatenate(([True], gaps[1:] <= gaps[:-1]))
            next_ok = np.concatenate((gaps[:-1] < gaps[1:], [True]))
            minima = np.flatnonzero(prev_ok & next_ok)
            take = max(1, excess // 2)
            firsts = np.sort(minima[np.argsort(gaps[minima], kind="stable")[:take]])
        else:
            firsts = np.array([int(np.argmin(gaps))], dtype=np.int64)
        c, k = _merge_pairs(c, k, firsts)
    return c, k


def build_bins(
    values: FloatArray, labels: IntArray, weights: IntArray, n_classes: int, max_bins: int | None
) -> tuple[FloatArray, IntArray]:
    """Algorithm 2 for one feature over some rows: equal values share a bin (lines 5-7), then
    nearest bins merge until at most ``max_bins`` remain (lines 10-13; ``None``: no merging, for
    categorical features).  Rows with weight 0 are not in the sample; NaN values are excluded
    (the caller counts them separately)."""
    present = (weights > 0) & ~np.isnan(values)
    v, lab, w = values[present], labels[present], weights[present]
    if v.size == 0:
        return np.empty(0, dtype=np.float64), np.empty((0, n_classes), dtype=np.int64)
    centres, inverse = np.unique(v, return_inverse=True)
    counts = np.zeros((centres.size, n_classes), dtype=np.int64)
    np.add.at(counts, (inverse, lab), w)
    if max_bins is None:
        return centres, counts
    return merge_nearest(centres, counts, max_bins)


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
