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
from securetrees.trees.histogram import best_splits, build_histograms, node_totals
from securetrees.trees.sampling import TreeDraws
from securetrees.trees.tree import Tree, TreeBuilder

__all__ = ["GrowParams", "goes_left_binned", "grow_tree"]

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
    Xb = binned[rows]
    stats = sample_stats[rows]
    root_stats = stats.sum(axis=0)
    builder = TreeBuilder(n_features, int(criterion.leaf_value(root_stats).size))
    builder.add_root(float(criterion.weight(root_stats)), criterion.leaf_value(root_stats))
    frontier = np.zeros(1, dtype=np.int64)  # node ids of the current layer
    pos = np.zeros(Xb.shape[0], dtype=np.int64)  # each sample's position in the frontier
    depth = 0
    heap = {0: 1}  # node id -> heap index (node-keyed draws)
    while frontier.size and Xb.shape[0]:
        totals = node_totals(pos, stats, frontier.size)
        can = params.may_split(depth, criterion.weight(totals)) & ~criterion.is_pure(totals)
        if not can.any():
            break
        split_pos = np.flatnonzero(can)
        node_features = None
        if draws is not None and draws.draws_per_node and draws.node_keyed:
            node_features = np.vstack([draws.node_features_at(heap[int(frontier[p])]) for p in split_pos.tolist()])
        elif draws is not None and draws.draws_per_node:
            node_features = np.vstack([draws.node_features() for _ in range(split_pos.size)])
        elif draws is not None:
            node_features = np.tile(draws.tree_features, (split_pos.size, 1))
        # Keep only the samples of nodes being split, renumbered 0..len(split_pos)-1.
        renumber = np.full(frontier.size, -1, dtype=np.int64)
        renumber[split_pos] = np.arange(split_pos.size)
        keep = renumber[pos] >= 0
        Xb, stats, pos = Xb[keep], stats[keep], renumber[pos[keep]]
        hist = build_histograms(Xb, pos, stats, split_pos.size, mapper.max_bins, node_features)
        res = best_splits(
            hist, criterion, categorical=categorical, n_bins=n_bins, features=node_features,
            min_samples_leaf=params.min_samples_leaf, min_gain=params.min_gain,
        )
        next_frontier: list[int] = []
        child_base = np.full(split_pos.size, -1, dtype=np.int64)
        for i in np.flatnonzero(res.found):
            f = int(res.feature[i])
            ls, rs = res.left_stats[i], res.right_stats[i]
            lid, rid = builder.split(
                int(frontier[split_pos[i]]),
                feature=f,
                threshold=mapper.threshold(f, int(res.bin[i])),
                categorical=bool(categorical[f]),
                missing_left=bool(res.missing_left[i]),
                provider=int(prov[f]),
                left=(float(criterion.weight(ls)), criterion.leaf_value(ls)),
                right=(float(criterion.weight(rs)), criterion.leaf_value(rs)),
            )
            child_base[i] = len(next_frontier)
            next_frontier += [lid, rid]
            h = heap[int(frontier[split_pos[i]])]
            heap[lid], heap[rid] = 2 * h, 2 * h + 1
        moving = child_base[pos] >= 0
        Xb, stats, pos = Xb[moving], stats[moving], pos[moving]
        f_of = res.feature[pos]
        go = goes_left_binned(
            Xb[np.arange(Xb.shape[0]), f_of], res.bin[pos], categorical[f_of],
            res.missing_left[pos], mapper.missing_bin,
        )
        pos = child_base[pos] + (~go).astype(np.int64)
        frontier = np.asarray(next_frontier, dtype=np.int64)
        depth += 1
    return builder.build()
