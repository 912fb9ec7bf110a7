"""Packed histograms: each feature's real bins and its missing slot, back to back.

Spec: ``specs/trees.md`` section "Packed histograms".  The padded layout of
:func:`~securetrees.trees.histogram.build_histograms` gives every feature
``max_bins + 1`` slots; on Adult (255 bins, most features far fewer) four fifths of
them are always empty, yet every layer sums, copies and scans them.  The packed layout
``hist[k, p, s]`` keeps, per feature ``j`` of the layout, ``n_bins[j]`` real bins then
one missing slot, at positions ``offsets[j] .. offsets[j] + n_bins[j]``.

:func:`packed_best_splits` scores the same candidates in the same order as
:func:`~securetrees.trees.histogram.best_splits` on the padded histogram, with the same
running sums (a padded slot's extra bins are zeros, which add nothing), so it reports
the same splits bit for bit; ``tests/trees/test_packed.py`` checks this.  The central
grower uses it; the protocols keep the padded layout of their messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.trees.binning import BinMapper
from securetrees.trees.criteria import Criterion
from securetrees.trees.histogram import LayerSplits, layer_splits, score_candidates

__all__ = ["PackedBins", "PackedLayout", "packed_best_splits", "packed_histograms", "unpack"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class PackedLayout:
    """Where each feature's bins sit: ``features[j]`` (increasing) has ``sizes[j] =
    n_bins[j] + 1`` positions from ``offsets[j]``, the last one its missing values."""

    features: IntArray
    categorical: BoolArray
    n_bins: IntArray
    offsets: IntArray
    sizes: IntArray

    @classmethod
    def of(cls, mapper: BinMapper, features: IntArray | None = None) -> PackedLayout:
        """The layout of ``features`` (default: all) of a fitted ``mapper``."""
        n_features = mapper.n_features
        cols = np.arange(n_features) if features is None else np.unique(np.asarray(features, dtype=np.int64))
        if cols.size == 0 or cols[0] < 0 or cols[-1] >= n_features:
            raise ParameterError("a packed layout needs at least one feature, all in range")
        n_bins = np.minimum(np.asarray(mapper.n_bins, dtype=np.int64)[cols], mapper.max_bins)
        sizes = n_bins + 1
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        return cls(cols.astype(np.int64), np.asarray(mapper.categorical, dtype=bool)[cols], n_bins, offsets,
                   sizes.astype(np.int64))

    @property
    def width(self) -> int:
        """Positions per node."""
        return int(self.sizes.sum())

    @property
    def feature_of_position(self) -> IntArray:
        """The layout slot ``j`` of every position."""
        return np.repeat(np.arange(self.features.size, dtype=np.int64), self.sizes)


@dataclass(frozen=True, eq=False)
class PackedBins:
    """Binned data in a packed layout: ``codes[j, i]`` is sample ``i``'s bin of feature
    ``layout.features[j]`` (``n_bins[j]`` for a missing value), one row per feature."""

    layout: PackedLayout
    codes: npt.NDArray[np.unsignedinteger[npt.NBitBase]]

    @cached_property
    def bin_counts(self) -> FloatArray:
        """The number of samples at every position (the root's count histogram)."""
        return np.concatenate([np.bincount(c, minlength=int(size)).astype(np.float64)
                               for c, size in zip(self.codes, self.layout.sizes, strict=True)])

    @classmethod
    def pack(cls, binned: npt.NDArray[np.unsignedinteger[npt.NBitBase]], mapper: BinMapper,
             features: IntArray | None = None) -> PackedBins:
        """Pack ``binned`` (``mapper.transform`` output) for the layout of ``features``."""
        layout = PackedLayout.of(mapper, features)
        if binned.ndim != 2 or binned.shape[1] != mapper.n_features:
            raise ParameterError("binned data and bin mapper disagree on the number of features")
        codes = np.ascontiguousarray(binned[:, layout.features].T)
        missing = codes == mapper.missing_bin
        if missing.any():
            codes = np.where(missing, layout.n_bins[:, None], codes).astype(binned.dtype)
        if codes.size and np.any(codes > layout.n_bins[:, None]):
            raise ParameterError("a bin code is above its feature's number of bins")
        return cls(layout, codes)


def packed_histograms(packed: PackedBins, node_index: IntArray, columns: list[FloatArray | None],
                      n_nodes: int, rows: IntArray) -> FloatArray:
    """``hist[k, p, s]``: the sum of ``columns[s][i]`` over the rows ``i`` of node ``k``
    (``node_index[t]`` is the node of ``rows[t]``) whose bin falls at position ``p``.
    ``columns`` holds one contiguous array per statistic, indexed by row, or ``None`` for
    a statistic that is 1 on every counted row (then rows are counted, which gives the
    same sums).  Each bucket adds its rows in the order of ``rows``, as
    :func:`~securetrees.trees.histogram.build_histograms` does."""
    layout = packed.layout
    if node_index.shape != rows.shape or rows.ndim != 1:
        raise ParameterError("node_index and rows disagree on the samples")
    width = layout.width
    n = packed.codes.shape[1]
    everything = n_nodes == 1 and rows.size == n and bool(np.array_equal(rows, np.arange(n)))  # the root
    weights = [None if c is None else c if everything else c[rows] for c in columns]
    sums = [packed.bin_counts.copy() if everything and w is None else np.zeros(n_nodes * width) for w in weights]
    base = node_index * width
    for j in range(layout.features.size):
        off = int(layout.offsets[j])
        flat = packed.codes[j] + np.intp(off) if everything else base + off + packed.codes[j][rows]
        for w, out in zip(weights, sums, strict=True):
            if not (everything and w is None):
                np.add.at(out, flat, 1.0 if w is None else w)
    return np.stack([x.reshape(n_nodes, width) for x in sums], axis=-1)


def unpack(hist: FloatArray, layout: PackedLayout, max_bins: int) -> FloatArray:
    """The padded histogram ``(n_nodes, len(features), max_bins + 1, n_stats)`` of a
    packed one (the slots of :func:`build_histograms` with a 2-D ``features``)."""
    n_nodes, _, n_stats = hist.shape
    out = np.zeros((n_nodes, layout.features.size, max_bins + 1, n_stats), dtype=np.float64)
    for j in range(layout.features.size):
        off, nb = int(layout.offsets[j]), int(layout.n_bins[j])
        out[:, j, :nb] = hist[:, off:off + nb]
        out[:, j, max_bins] = hist[:, off + nb]
    return out


def packed_best_splits(hist: FloatArray, layout: PackedLayout, criterion: Criterion, *,
                       min_samples_leaf: float = 1.0, min_gain: float = 0.0, exact: bool = False) -> LayerSplits:
    """:func:`~securetrees.trees.histogram.best_splits` on a packed histogram: the same
    candidates, validity rules, gains and tie-break (first feature, lowest bin,
    missing-right), so the same result as on the padded histogram of these features.

    ``exact=True`` promises statistics that sum exactly
    (:func:`~securetrees.trees.exact.sums_exactly`): then every feature's bins sum to
    the node's totals, and one running sum over all positions, with those totals taken
    off at each feature's first bin, gives each feature's own running sums (every
    intermediate is a sum of at most twice the column's absolute values, so exact)."""
    n_nodes, width, n_stats = hist.shape
    if width != layout.width:
        raise ParameterError("hist does not match the packed layout")
    last = layout.offsets + layout.sizes - 1  # each feature's missing slot
    if exact:
        node_total = hist[:, : last[0] + 1].sum(axis=1)
        shifted = hist.copy()
        shifted[:, layout.offsets[1:]] -= node_total[:, None]
        cum = np.cumsum(shifted, axis=1)
    else:
        cum = np.empty_like(hist)
        for j in range(layout.features.size):
            off, end = int(layout.offsets[j]), int(last[j]) + 1
            np.cumsum(hist[:, off:end], axis=1, out=cum[:, off:end])
        node_total = cum[:, last[0]]  # (nodes, S)
    missing = hist[:, last]  # (nodes, m, S)
    has_missing = criterion.weight(missing) > 0  # (nodes, m)
    slot = layout.feature_of_position  # (P,)
    local_bin = np.arange(width) - layout.offsets[slot]
    cat_pos = layout.categorical[slot]
    left = cum  # numeric "bin <= b"; categorical "bin == b"
    cat_idx = np.flatnonzero(cat_pos)
    if cat_idx.size:
        left[:, cat_idx] = hist[:, cat_idx]

    # The candidates best_splits keeps: every real bin of a categorical feature, bin 0 and
    # the non-empty bins of a numeric one (an empty bin b > 0 repeats the bin below it).
    keep = hist[..., 0] != 0
    for s in range(1, n_stats):
        keep |= hist[..., s] != 0
    keep |= (local_bin == 0) | cat_pos
    keep &= local_bin < layout.n_bins[slot]
    kk, pp = np.nonzero(keep)
    gains = score_candidates(criterion, left[kk, pp], node_total, kk, slot[pp], (kk, pp), missing, has_missing,
                             (n_nodes, width), min_samples_leaf=min_samples_leaf, min_gain=min_gain)
    flat = np.argmax(gains.reshape(n_nodes, -1), axis=1)
    rows = np.arange(n_nodes)
    best = gains.reshape(n_nodes, -1)[rows, flat]
    position, variant = np.divmod(flat, 2)
    j_best = slot[position]
    return layer_splits(criterion, best, variant, left[rows, position], missing[rows, j_best],
                        has_missing[rows, j_best], node_total, layout.features[j_best], local_bin[position])
