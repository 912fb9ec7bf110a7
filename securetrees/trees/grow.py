"""The layer-by-layer grower used by the central reference trainers.

Spec: ``specs/trees.md`` section "Growing".  A whole layer (every frontier node
of one depth) is expanded per step, as the federated protocols expand one layer
per round: node totals, pre-split stopping rules, per-node feature draws (in id
order), one histogram pass for the layer, :func:`best_splits`, then the samples
move to the children.  Splits are applied in node id order, so children are
numbered breadth first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.trees.binning import BinMapper
from securetrees.trees.criteria import Criterion
from securetrees.trees.exact import sums_exactly
from securetrees.trees.histogram import best_splits, build_histograms, node_totals
from securetrees.trees.packed import PackedBins, packed_best_splits, packed_histograms
from securetrees.trees.sampling import TreeDraws
from securetrees.trees.tree import Tree, TreeBuilder

__all__ = ["GrowParams", "goes_left_binned", "goes_left_by_table", "grow_tree", "grow_tree_with_leaves",
           "subtracted_histograms"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class GrowParams:
    """Stopping rules.  A node is split only if its depth is below ``max_depth``
    (None: unlimited), it weighs at least ``min_samples_split`` and twice
    ``min_samples_leaf``, it is not pure, and its best split leaves both
    children at least ``min_samples_leaf`` and gains more than ``min_gain``."""

    max_depth: int | None = None
    min_samples_split: float = 2.0
    min_samples_leaf: float = 1.0
    min_gain: float = 0.0

    def __post_init__(self) -> None:
        if self.max_depth is not None and self.max_depth < 0:
            raise ParameterError("max_depth must be >= 0 or None")
        if self.min_samples_split < 2 or self.min_samples_leaf < 1:
            raise ParameterError("min_samples_split must be >= 2 and min_samples_leaf >= 1")
        if not self.min_gain >= 0:
            raise ParameterError("min_gain must be >= 0")

    def may_split(self, depth: int, weight: FloatArray) -> npt.NDArray[np.bool_]:
        """The pre-split stopping rules (without purity), per node of a layer."""
        ok = (weight >= self.min_samples_split) & (weight >= 2 * self.min_samples_leaf)
        if self.max_depth is not None and depth >= self.max_depth:
            ok[:] = False
        return np.asarray(ok)


def goes_left_binned(
    bins: npt.NDArray[np.unsignedinteger[npt.NBitBase]],
    split_bin: IntArray,
    categorical: npt.NDArray[np.bool_],
    missing_left: npt.NDArray[np.bool_],
    missing_bin: int,
) -> npt.NDArray[np.bool_]:
    """Per sample: does its bin go left under the split ("bin <= b", "bin == b", NaN rule)?"""
    b = bins.astype(np.int64)
    test = np.where(categorical, b == split_bin, b <= split_bin)
    return np.asarray(np.where(b == missing_bin, missing_left, test))


def goes_left_by_table(
    bins: npt.NDArray[np.unsignedinteger[npt.NBitBase]],
    node: IntArray,
    split_bin: IntArray,
    categorical: npt.NDArray[np.bool_],
    missing_left: npt.NDArray[np.bool_],
    missing_bin: int,
) -> npt.NDArray[np.bool_]:
    """:func:`goes_left_binned` for samples of several nodes: sample ``t`` (bin ``bins[t]``)
    at node ``node[t]``, whose split is ``split_bin``, ``categorical``, ``missing_left``
    (arrays per node), read from a per-node table of every bin's answer."""
    codes = np.arange(missing_bin + 1)
    b = np.asarray(split_bin, dtype=np.int64)[:, None]
    table = np.where(np.asarray(categorical, dtype=bool)[:, None], codes == b, codes <= b)
    table[:, missing_bin] = missing_left
    return np.asarray(table.reshape(-1)[node * (missing_bin + 1) + bins])


def grow_tree(
    binned: npt.NDArray[np.unsignedinteger[npt.NBitBase]],
    mapper: BinMapper,
    sample_stats: FloatArray,
    criterion: Criterion,
    params: GrowParams,
    *,
    draws: TreeDraws | None = None,
    providers: Sequence[int] | None = None,
) -> Tree:
    """Grow one tree on binned data.  ``sample_stats[i]`` is sample ``i``'s statistics
    vector, already multiplied by its (bootstrap) weight; zero-weight rows are ignored.
    ``draws`` supplies the per-node feature sets (all features if None);
    ``providers[f]`` labels the party owning feature ``f`` (default 0)."""
    return grow_tree_with_leaves(binned, mapper, sample_stats, criterion, params, draws=draws,
                                 providers=providers)[0]


def grow_tree_with_leaves(
    binned: npt.NDArray[np.unsignedinteger[npt.NBitBase]],
    mapper: BinMapper,
    sample_stats: FloatArray,
    criterion: Criterion,
    params: GrowParams,
    *,
    draws: TreeDraws | None = None,
    providers: Sequence[int] | None = None,
    packed: PackedBins | None = None,
    exact: bool | None = None,
) -> tuple[Tree, IntArray]:
    """:func:`grow_tree`, and the leaf id each row of ``binned`` reaches (``-1`` for
    zero-weight rows): the same leaf as ``tree.apply`` on the raw rows, since "bin <= b"
    and "x <= threshold" agree.  ``packed`` (optional): ``PackedBins.pack(binned, mapper,
    features)`` computed once for many trees, ``features`` being the draws' tree features.
    ``exact`` (optional): whether the weighted rows' statistics sum exactly, when the
    caller made them so (:func:`~securetrees.trees.exact.snap_to_exact_grid`); None: checked.

    Where every node sees the same features, the histograms are packed
    (:mod:`securetrees.trees.packed`; same splits as the padded layout).  Where moreover
    the statistics sum exactly (:func:`~securetrees.trees.exact.sums_exactly`), a split
    node's larger child gets its histogram as the parent's minus the smaller child's, and
    the children's totals come from the parent's split; both equal the direct sums bit
    for bit.  Otherwise every histogram is summed directly, in row order, as a protocol
    party sums it."""
    n_samples, n_features = binned.shape
    if sample_stats.ndim != 2 or sample_stats.shape[0] != n_samples:
        raise ParameterError("sample_stats must have one row per sample")
    if n_features != mapper.n_features:
        raise ParameterError("binned data and bin mapper disagree on the number of features")
    prov = np.zeros(n_features, dtype=np.int64) if providers is None else np.asarray(providers)
    if prov.shape != (n_features,):
        raise ParameterError("providers must have one entry per feature")
    categorical = np.asarray(mapper.categorical, dtype=bool)
    n_bins = np.asarray(mapper.n_bins, dtype=np.int64)

    rows = np.flatnonzero(criterion.weight(sample_stats) > 0)
    columns: list[FloatArray | None] = []
    for s in range(sample_stats.shape[1]):
        col = np.ascontiguousarray(sample_stats[:, s])
        columns.append(None if np.all(col[rows] == 1.0) else col)
    per_node_draws = draws is not None and draws.draws_per_node
    packed = None if per_node_draws else _check_packed(packed, binned, mapper,
                                                       None if draws is None else draws.tree_features)
    if exact is None:
        exact = sums_exactly(sample_stats[rows])
    subtract = packed is not None and exact
    # Exact sums do not depend on the order of summation; otherwise the rows' sum, in order.
    root_stats = node_totals(np.zeros(rows.size, dtype=np.int64), sample_stats, 1, rows=rows)[0] if exact \
        else sample_stats[rows].sum(axis=0)
    builder = TreeBuilder(n_features, int(criterion.leaf_value(root_stats).size))
    builder.add_root(float(criterion.weight(root_stats)), criterion.leaf_value(root_stats))
    leaf_of = np.full(n_samples, -1, dtype=np.int64)
    flat_binned = np.ascontiguousarray(binned).reshape(-1)
    frontier = np.zeros(1, dtype=np.int64)  # node ids of the current layer
    pos = np.zeros(rows.size, dtype=np.int64)  # each row's position in the frontier
    # Exact sums: the layer's totals are known (the root's; then the children's from the split).
    known_totals: FloatArray | None = root_stats[None, :] if exact else None
    parent_hist: FloatArray | None = None  # exact sums: the last layer's histograms, per pair
    depth = 0
    heap_front = np.ones(1, dtype=object)  # heap index of each frontier node (Python ints: exact at any depth)
    while frontier.size and rows.size:
        totals = node_totals(pos, sample_stats, frontier.size, rows=rows) if known_totals is None else known_totals
        can = params.may_split(depth, criterion.weight(totals)) & ~criterion.is_pure(totals)
        if not can.any():
            break
        split_pos = np.flatnonzero(can)
        if parent_hist is not None and packed is not None:
            hist, rows, pos = subtracted_histograms(packed, columns, parent_hist, criterion.weight(totals),
                                                     frontier, split_pos, rows, pos, leaf_of)
        else:
            # Keep only the rows of nodes being split, renumbered 0..len(split_pos)-1.
            renumber = np.full(frontier.size, -1, dtype=np.int64)
            renumber[split_pos] = np.arange(split_pos.size)
            keep = renumber[pos] >= 0
            leaf_of[rows[~keep]] = frontier[pos[~keep]]
            rows, pos = rows[keep], renumber[pos[keep]]
        if packed is not None:
            if parent_hist is None:
                hist = packed_histograms(packed, pos, columns, split_pos.size, rows)
            res = packed_best_splits(hist, packed.layout, criterion, min_samples_leaf=params.min_samples_leaf,
                                     min_gain=params.min_gain, exact=subtract)
        else:
            node_features = None
            if draws is not None and draws.node_keyed:
                node_features = np.vstack([draws.node_features_at(int(h)) for h in heap_front[split_pos]])
            elif draws is not None:
                node_features = np.vstack([draws.node_features() for _ in range(split_pos.size)])
            hist = build_histograms(binned, pos, sample_stats, split_pos.size, mapper.max_bins, node_features,
                                    rows=rows)
            res = best_splits(
                hist, criterion, categorical=categorical, n_bins=n_bins, features=node_features,
                min_samples_leaf=params.min_samples_leaf, min_gain=params.min_gain,
            )
        found = np.flatnonzero(res.found)
        f_found = res.feature[found]
        next_frontier = builder.split_many(
            frontier[split_pos[found]], feature=f_found, threshold=mapper.thresholds(f_found, res.bin[found]),
            categorical=categorical[f_found], missing_left=res.missing_left[found], provider=prov[f_found],
            left_weight=criterion.weight(res.left_stats[found]), left_value=criterion.leaf_value(res.left_stats[found]),
            right_weight=criterion.weight(res.right_stats[found]),
            right_value=criterion.leaf_value(res.right_stats[found]),
        ).reshape(-1)
        child_base = np.full(split_pos.size, -1, dtype=np.int64)
        child_base[found] = 2 * np.arange(found.size)
        child = child_base[pos]
        moving = child >= 0
        if not moving.all():
            leaf_of[rows[~moving]] = frontier[split_pos[pos[~moving]]]
            rows, pos, child = rows[moving], pos[moving], child[moving]
        bins = flat_binned[rows * n_features + res.feature[pos]]
        if mapper.max_bins <= 255:  # a table of max_bins + 1 answers per node
            go = goes_left_by_table(bins, pos, res.bin, categorical[res.feature], res.missing_left, mapper.missing_bin)
        else:
            go = goes_left_binned(bins, res.bin[pos], categorical[res.feature[pos]], res.missing_left[pos],
                                  mapper.missing_bin)
        pos = child + ~go
        frontier = next_frontier
        parents = heap_front[split_pos[found]]
        heap_front = np.stack([2 * parents, 2 * parents + 1], axis=1).reshape(-1)
        known_totals = None
        if subtract:
            parent_hist = hist[found]
            known_totals = np.empty((2 * found.size, sample_stats.shape[1]), dtype=np.float64)
            known_totals[0::2], known_totals[1::2] = res.left_stats[found], res.right_stats[found]
        depth += 1
    leaf_of[rows] = frontier[pos]
    return builder.build(), leaf_of


def _check_packed(packed: PackedBins | None, binned: npt.NDArray[np.unsignedinteger[npt.NBitBase]],
                  mapper: BinMapper, features: IntArray | None) -> PackedBins:
    """``packed`` if it packs ``features`` (None: all) of data of ``binned``'s shape, else
    a fresh packing of ``binned``."""
    if packed is None:
        return PackedBins.pack(binned, mapper, features)
    want = np.arange(mapper.n_features) if features is None else np.unique(features)
    if packed.codes.shape != (want.size, binned.shape[0]) or not np.array_equal(packed.layout.features, want):
        raise ParameterError("packed bins do not match the binned data and features")
    return packed


def subtracted_histograms(
    packed: PackedBins,
    columns: list[FloatArray | None],
    parent_hist: FloatArray,
    weight: FloatArray,
    frontier: IntArray,
    split_pos: IntArray,
    rows: IntArray,
    pos: IntArray,
    leaf_of: IntArray,
) -> tuple[FloatArray, IntArray, IntArray]:
    """The packed histograms of the frontier nodes ``split_pos`` (exact statistics only):
    the frontier holds sibling pairs ``(2c, 2c+1)`` whose parent's histogram is
    ``parent_hist[c]``; of each pair with a node to split, the lighter child (``weight``;
    ties: left) is summed directly and its sibling is the parent minus it.  Returns the
    histograms and the rows (with their positions among ``split_pos``) of the nodes to
    split; the other rows are recorded in ``leaf_of``."""
    n_front = frontier.size
    small = 2 * np.arange(n_front // 2) + (weight[0::2] > weight[1::2])
    in_split = np.zeros(n_front, dtype=bool)
    in_split[split_pos] = True
    direct = small[in_split[0::2] | in_split[1::2]]
    slot = np.full(n_front, -1, dtype=np.int64)
    slot[direct] = np.arange(direct.size)
    node = slot[pos]
    sel = node >= 0
    direct_hist = packed_histograms(packed, node[sel], columns, direct.size, rows[sel])
    own = slot[split_pos] >= 0
    hist = np.empty((split_pos.size, *direct_hist.shape[1:]), dtype=np.float64)
    hist[own] = direct_hist[slot[split_pos[own]]]
    other = split_pos[~own]
    hist[~own] = parent_hist[other // 2] - direct_hist[slot[other ^ 1]]
    renumber = np.full(n_front, -1, dtype=np.int64)
    renumber[split_pos] = np.arange(split_pos.size)
    new_pos = renumber[pos]
    keep = new_pos >= 0
    if keep.all():
        return hist, rows, new_pos
    leaf_of[rows[~keep]] = frontier[pos[~keep]]
    return hist, rows[keep], new_pos[keep]
