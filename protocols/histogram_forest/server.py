"""The server role (the paper's global server G): Algorithm 1 and 3, one round trip per layer.

Spec: ``specs/histogram_forest.md``, "Message flow" and "Server per layer".
The server holds only public parameters and what the clients send; it grows
every tree layer by layer, scoring candidates with the shared
:func:`securetrees.trees.histogram.best_splits`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError, ProtocolError
from securetrees.progress import progress as progress_bar
from securetrees.protocols.histogram_forest.accountant import (
    PrivacyAccountant,
    Release,
    budget_split,
    layer_sensitivity,
)
from securetrees.protocols.histogram_forest.checkpoint import Ledger, ServerState, TreeState
from securetrees.protocols.histogram_forest.messages import (
    Ack,
    BinsReply,
    Checkpoint,
    CountsReply,
    EdgesNotice,
    GridRequest,
    KeysRequest,
    LayerRequest,
    RangesReply,
    RangesRequest,
    Resume,
    SetupReply,
    SetupRequest,
)
from securetrees.protocols.histogram_forest.ring import RING, check_capacity
from securetrees.protocols.histogram_forest.sampling import dp_row_law
from securetrees.protocols.histogram_forest.schema import (
    fixed_mapper,
    grid_quantile_edges,
    mapper_from_edges,
    slot_count,
)
from securetrees.protocols.histogram_forest.streaming import group_bins
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Network, Party
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.secagg.masker import check_party_count
from securetrees.trees.binning import BinMapper
from securetrees.trees.criteria import Criterion, make_criterion
from securetrees.trees.grow import GrowParams
from securetrees.trees.histogram import best_splits
from securetrees.trees.sampling import TreeDraws, tree_generators
from securetrees.trees.tree import Tree, TreeBuilder

__all__ = ["ForestConfig", "Server"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class ForestConfig:
    """The public parameters of one run (validated by the facade; spec "Modes").

    ``low``/``high`` are declared numeric ranges (NaN for categorical features),
    or None to ask the clients (fixed bins without DP only).  ``grid_cells > 0``
    replaces the equal-width bins by quantile bins from a first private round.
    ``task="regression"`` (``n_classes = 0``, criterion ``"squared_error"``) bins the statistics
    ``(Σw, Σw·t1, Σw·t2)`` of targets encoded over ``[y_low, y_high]`` with ``y_bits`` fractional bits.
    """

    n_features: int
    categories: tuple[int, ...]
    n_classes: int
    n_trees: int
    max_depth: int
    n_bins: int
    histogram: str
    features_per_node: int
    criterion: str = "gini"
    sampling: str = "bootstrap"
    subsample_fraction: float = 0.632
    max_multiplicity: int = 3
    grid_cells: int = 0
    min_samples_split: float = 2.0
    min_samples_leaf: float = 1.0
    epsilon: float | None = None
    input_epsilon: float | None = None
    secure: bool = False
    low: FloatArray | None = field(default=None, compare=False)
    high: FloatArray | None = field(default=None, compare=False)
    task: str = "classification"
    y_low: float = 0.0
    y_high: float = 1.0
    y_bits: int = 0

    @property
    def n_stats(self) -> int:
        """Statistics per histogram cell: the class counts, or ``(Σw, Σw·t1, Σw·t2)``."""
        return self.n_classes if self.task == "classification" else 3


class Server(Party):
    """Grows the forest from the clients' histograms.  ``random_state`` seeds the per-node feature
    draws (ML randomness); ``rng`` only draws the public session id."""

    role = "server"

    def __init__(
        self,
        name: str,
        network: Network,
        clients: Sequence[str],
        config: ForestConfig,
        *,
        random_state: int | None = None,
        rng: RandomSource = SYSTEM_RANDOM,
        checkpoint: CheckpointStore | None = None,
    ) -> None:
        super().__init__(name, network)
        self._store = checkpoint
        self._request: SetupRequest | None = None
        self._edges: list[FloatArray] = []
        if len(clients) < 1 or len(set(clients)) != len(clients):
            raise ParameterError("the server needs at least one client, each named once")
        if config.secure:
            check_party_count(len(clients))
        if config.task == "regression" and (
            config.histogram != "fixed" or config.epsilon is not None or config.input_epsilon is not None
            or config.criterion != "squared_error"
        ):
            raise ParameterError("regression needs fixed bins, the squared error and no differential privacy")
        if config.task == "regression":
            check_capacity(0, len(clients), config.y_bits)
        self.clients = tuple(clients)
        self.config = config
        self._random_state = random_state
        self._rng = rng
        self._criterion: Criterion = make_criterion(config.criterion)
        self._grow = GrowParams(
            max_depth=config.max_depth,
            min_samples_split=config.min_samples_split,
            min_samples_leaf=config.min_samples_leaf,
        )
        self._slots = slot_count(config.categories, config.n_bins)
        self._categorical = np.array([k > 0 for k in config.categories], dtype=bool)
        self._step = 0
        self.accountant: PrivacyAccountant | None = None
        self.low: FloatArray | None = None
        self.high: FloatArray | None = None
        self.mapper: BinMapper | None = None

    # -- setup -------------------------------------------------------------------------------

    def ranges(self) -> tuple[FloatArray, FloatArray]:
        """Step ``ranges``: the union of the clients' ranges.  Reveals each client's min and max."""
        if self.config.epsilon is not None or self.config.input_epsilon is not None:
            raise ParameterError("differential privacy needs declared feature ranges")
        numeric = ~self._categorical
        replies = self.call_many({c: RangesRequest(numeric=numeric) for c in self.clients}, expect=RangesReply)
        lows = np.vstack([r.low for r in replies.values()])
        highs = np.vstack([r.high for r in replies.values()])
        if lows.shape[1] != self.config.n_features:
            raise ProtocolError("a client answered ranges for a different number of features")
        unknown = np.isnan(lows).all(axis=0) | np.isnan(highs).all(axis=0)
        low = np.where(unknown, np.nan, np.where(np.isnan(lows), np.inf, lows).min(axis=0))
        high = np.where(unknown, np.nan, np.where(np.isnan(highs), -np.inf, highs).max(axis=0))
        return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)

    def setup(self) -> None:
        """Steps ``setup`` (and ``ranges``, ``keys`` where needed)."""
        cfg = self.config
        if cfg.histogram == "fixed" or cfg.input_epsilon is not None:
            if cfg.low is None or cfg.high is None:
                self.low, self.high = self.ranges()
            else:
                self.low, self.high = np.asarray(cfg.low, np.float64), np.asarray(cfg.high, np.float64)
        else:
            self.low = self.high = np.empty(0, dtype=np.float64)
        request = SetupRequest(
            session=self._rng.token_bytes(16),
            n_features=cfg.n_features,
            categories=cfg.categories,
            n_classes=cfg.n_classes,
            n_trees=cfg.n_trees,
            histogram=cfg.histogram,
            n_bins=cfg.n_bins,
            low=self.low,
            high=self.high,
            sampling=cfg.sampling,
            subsample_fraction=cfg.subsample_fraction,
            max_multiplicity=cfg.max_multiplicity,
            features_per_node=cfg.features_per_node,
            max_depth=cfg.max_depth,
            grid_cells=cfg.grid_cells,
            epsilon=cfg.epsilon,
            input_epsilon=cfg.input_epsilon,
            secure=cfg.secure,
            task=cfg.task,
            y_low=cfg.y_low,
            y_high=cfg.y_high,
            y_bits=cfg.y_bits,
            n_clients=len(self.clients) if cfg.task == "regression" else 0,
        )
        self._request = request
        replies = self.call_many({c: request for c in self.clients}, expect=SetupReply)
        for name, reply in replies.items():
            if reply.n_features != cfg.n_features:
                raise ProtocolError(f"{name} has {reply.n_features} features, the schema {cfg.n_features}")
        if cfg.secure:
            directory = {name: reply.public_key for name, reply in replies.items()}
            if len(set(directory.values())) != len(directory):
                raise ProtocolError("two clients sent the same public key")
            self.call_many({c: KeysRequest(public_keys=directory) for c in self.clients}, expect=Ack)
        if cfg.epsilon is not None:
            self.accountant = PrivacyAccountant(cfg.epsilon)
        if cfg.histogram == "fixed":
            self.mapper = self.agree_edges() if cfg.grid_cells else fixed_mapper(
                cfg.categories, self.low, self.high, cfg.n_bins
            )

    def agree_edges(self) -> BinMapper:
        """Steps ``grid`` and ``edges``: quantile edges from the clients' summed grid counts.

        Reveals to the server: the sum over clients of the grid counts (noisy under DP); in plain mode
        also each client's counts."""
        cfg = self.config
        if self.low is None or self.high is None:  # pragma: no cover - set by setup()
            raise ProtocolError("not set up")
        grid = fixed_mapper(cfg.categories, self.low, self.high, cfg.grid_cells)
        numeric = [f for f, k in enumerate(cfg.categories) if not k]
        if self.accountant is not None and cfg.epsilon is not None and numeric:
            eps_grid, _ = budget_split(cfg.epsilon, cfg.n_trees, cfg.max_depth, grid=True)
            self.accountant.charge(Release(-1, -1, 1, len(numeric), len(numeric), float(eps_grid or 0.0)))
        replies = self.call_many({c: GridRequest(cells=cfg.grid_cells) for c in self.clients}, expect=CountsReply)
        sums = self._merge_counts(replies, len(numeric) * cfg.grid_cells).reshape(len(numeric), cfg.grid_cells)
        edges = [np.empty(0, dtype=np.float64) for _ in cfg.categories]
        for j, f in enumerate(numeric):
            edges[f] = grid_quantile_edges(grid, sums[j].astype(np.float64), f, cfg.n_bins)
        self.call_many({c: EdgesNotice(edges=edges) for c in self.clients}, expect=Ack)
        self._edges = edges
        return mapper_from_edges(cfg.categories, edges, cfg.n_bins)

    # -- training ------------------------------------------------------------------------------

    def train(self, *, progress: bool = False) -> list[Tree]:
        """Algorithm 1: set up, then grow ``n_trees`` trees layer by layer (with a checkpoint store:
        a checkpoint after the setup and after every tree)."""
        self.setup()
        self.logger.info("set up with %d clients; growing %d trees", len(self.clients), self.config.n_trees)
        self._checkpoint([])
        return self._grow_from([], progress)

    def resume(self, *, progress: bool = False) -> list[Tree]:
        """Finish an interrupted :meth:`train` from this server's latest checkpoint: restore the
        setup's outcome (session, ranges, edges, privacy ledger), have every client restore the same
        marker, grow the remaining trees.  Clients answer repeated requests from their journals, so
        no release is drawn or charged twice and the forest equals an uninterrupted run's."""
        if self._store is None:
            raise ParameterError("this server keeps no checkpoints")
        saved = self._store.latest(ServerState)
        if saved is None:
            raise ProtocolError("no checkpoint: the run stopped during its setup; start it again with every party")
        cfg, req = self.config, saved.setup
        trees = [t.tree() for t in saved.grown]
        if (req.n_features != cfg.n_features or tuple(req.categories) != tuple(cfg.categories)
                or req.n_trees != cfg.n_trees or req.epsilon != cfg.epsilon or req.histogram != cfg.histogram
                or req.grid_cells != cfg.grid_cells or len(trees) != saved.trees or saved.trees > cfg.n_trees
                or any(t.n_features != cfg.n_features for t in trees)):
            raise ProtocolError("the checkpoint does not belong to this run")
        self._request, self._edges = req, [np.asarray(e, dtype=np.float64) for e in saved.edges]
        self.low, self.high = np.asarray(req.low, np.float64), np.asarray(req.high, np.float64)
        if cfg.epsilon is not None:
            self.accountant = PrivacyAccountant(cfg.epsilon, [] if saved.ledger is None else saved.ledger.releases())
        if cfg.histogram == "fixed":
            self.mapper = (mapper_from_edges(cfg.categories, self._edges, cfg.n_bins) if cfg.grid_cells
                           else fixed_mapper(cfg.categories, self.low, self.high, cfg.n_bins))
        self._step = saved.step
        self.call_many({c: Resume(saved.trees, saved.step) for c in self.clients}, expect=Ack)
        return self._grow_from(trees, progress)

    def _grow_from(self, trees: list[Tree], progress: bool) -> list[Tree]:
        """The trees after ``trees``, each followed by a checkpoint."""
        generators = tree_generators(self._random_state, self.config.n_trees)
        for t in progress_bar(range(len(trees), len(generators)), desc="trees", total=len(generators) - len(trees),
                              enabled=progress):
            trees.append(self._grow_tree(t, generators[t]))
            self._checkpoint(trees)
        return trees

    def _checkpoint(self, trees: list[Tree]) -> None:
        """Every client saves its state under ``(trees, next step)``, then the server saves its own
        (so no client checkpoint is behind the server's).  Reveals nothing."""
        if self._store is None:
            return
        if self._request is None:  # pragma: no cover - set by setup()
            raise ProtocolError("not set up")
        self.call_many({c: Checkpoint(len(trees), self._step) for c in self.clients}, expect=Ack)
        self._store.save(ServerState(len(trees), self._step, tuple(TreeState.of(t) for t in trees), self._request,
                                     list(self._edges),
                                     None if self.accountant is None else Ledger.of(self.accountant.releases)))

    def _draw_features(self, draws: TreeDraws, count: int) -> BoolArray:
        mask = np.zeros((count, self.config.n_features), dtype=bool)
        for i in range(count):
            mask[i, draws.node_features()] = True
        return mask

    def _grow_tree(self, tree: int, gen: np.random.Generator) -> Tree:
        cfg = self.config
        self.logger.debug("tree %d of %d", tree + 1, cfg.n_trees)
        draws = TreeDraws(gen, 1, cfg.n_features, max_features=cfg.features_per_node)
        builder = TreeBuilder(cfg.n_features, cfg.n_classes if cfg.task == "classification" else 1)
        features = self._draw_features(draws, 1)
        empty_i, empty_f, empty_b = np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, bool)
        request = LayerRequest(
            step=self._step, tree=tree, layer=0, split_feature=empty_i, split_threshold=empty_f,
            split_categorical=empty_b, split_missing_left=empty_b, keep=np.zeros(1, np.int64), features=features,
        )
        node_ids: list[int] = []
        layer = 0
        while True:
            hist, thresholds = self._layer_histograms(request)
            if layer == 0:
                root = self._node_totals(hist, request.features)[0]
                node_ids = [builder.add_root(float(self._criterion.weight(root)), self._leaf(root))]
                if not self._splittable(0, root[None, :])[0]:
                    break
            res = best_splits(
                hist, self._criterion, categorical=self._categorical, n_bins=self._n_bins_for_search(),
                feature_mask=request.features, min_samples_leaf=cfg.min_samples_leaf,
            )
            split_feature = np.full(len(node_ids), -1, dtype=np.int64)
            split_threshold = np.zeros(len(node_ids), dtype=np.float64)
            split_categorical = np.zeros(len(node_ids), dtype=bool)
            split_missing_left = np.zeros(len(node_ids), dtype=bool)
            children: list[int] = []
            child_stats: list[FloatArray] = []
            for i in np.flatnonzero(res.found):
                f, b = int(res.feature[i]), int(res.bin[i])
                thr = self._threshold(f, b, None if thresholds is None else thresholds[i])
                ls, rs = res.left_stats[i], res.right_stats[i]
                lid, rid = builder.split(
                    node_ids[i], feature=f, threshold=thr, categorical=bool(self._categorical[f]),
                    missing_left=bool(res.missing_left[i]), provider=-1,
                    left=(float(self._criterion.weight(ls)), self._leaf(ls)),
                    right=(float(self._criterion.weight(rs)), self._leaf(rs)),
                )
                split_feature[i], split_threshold[i] = f, thr
                split_categorical[i], split_missing_left[i] = self._categorical[f], res.missing_left[i]
                children += [lid, rid]
                child_stats += [ls, rs]
            layer += 1
            if not children:
                break
            ok = self._splittable(layer, np.vstack(child_stats))
            keep = np.flatnonzero(ok).astype(np.int64)
            if keep.size == 0:
                break
            node_ids = [children[k] for k in keep]
            self._step += 1
            request = LayerRequest(
                step=self._step, tree=tree, layer=layer, split_feature=split_feature,
                split_threshold=split_threshold, split_categorical=split_categorical,
                split_missing_left=split_missing_left, keep=keep, features=self._draw_features(draws, keep.size),
            )
        self._step += 1
        return builder.build()

    def _leaf(self, stats: FloatArray) -> FloatArray:
        """A node's value: its class counts clipped at zero (noisy differences can go negative;
        post-processing), or the mean target ``y_low + (y_high - y_low) · Σw·u / Σw``."""
        if self.config.task == "classification":
            return np.maximum(np.asarray(stats, dtype=np.float64), 0.0)
        cfg = self.config
        mean_u = stats[1] / stats[0] if stats[0] > 0 else 0.5
        return np.array([cfg.y_low + (cfg.y_high - cfg.y_low) * mean_u], dtype=np.float64)

    def _splittable(self, depth: int, stats: FloatArray) -> BoolArray:
        weight = self._criterion.weight(stats)
        return np.asarray(self._grow.may_split(depth, weight) & ~self._criterion.is_pure(stats))

    def _n_bins_for_search(self) -> IntArray:
        if self.config.histogram == "fixed":
            if self.mapper is None:  # pragma: no cover - set by setup()
                raise ProtocolError("not set up")
            return np.asarray(self.mapper.n_bins, dtype=np.int64)
        return np.array([k if k else self._slots for k in self.config.categories], dtype=np.int64)

    def _threshold(self, feature: int, bin_index: int, streaming: FloatArray | None) -> float:
        if self._categorical[feature]:
            return float(bin_index)
        if streaming is not None:
            return float(streaming[feature, bin_index])
        if self.mapper is None:  # pragma: no cover - set by setup()
            raise ProtocolError("not set up")
        return self.mapper.threshold(feature, bin_index)

    def _node_totals(self, hist: FloatArray, features: BoolArray) -> FloatArray:
        first = np.argmax(features, axis=1)
        return np.asarray(hist[np.arange(hist.shape[0]), first].sum(axis=1), dtype=np.float64)

    def _charge(self, request: LayerRequest) -> None:
        cfg = self.config
        if self.accountant is None or cfg.epsilon is None:
            return
        multiplicity = dp_row_law(cfg.sampling, cfg.subsample_fraction, cfg.max_multiplicity).max_weight
        delta = layer_sensitivity(multiplicity, cfg.features_per_node)
        _, eps = budget_split(cfg.epsilon, cfg.n_trees, cfg.max_depth, grid=cfg.grid_cells > 0)
        self.accountant.charge(
            Release(request.tree, request.layer, int(request.keep.size), cfg.features_per_node, delta, eps)
        )

    def _layer_histograms(self, request: LayerRequest) -> tuple[FloatArray, FloatArray | None]:
        """One round trip: send the request, merge the replies into ``(kept, features, slots+1, C)``
        (the all-features layout of :func:`best_splits`; unrequested features stay zero and are
        masked out by ``feature_mask``)."""
        cfg = self.config
        n_kept = int(request.keep.size)
        C = cfg.n_stats
        width = self._slots + 1
        feat, node = np.nonzero(request.features.T)  # wire order: by feature, then by node
        hist = np.zeros((n_kept, cfg.n_features, width, C), dtype=np.float64)
        thresholds: FloatArray | None = None
        if cfg.histogram == "streaming":
            replies = self.call_many({c: request for c in self.clients}, expect=BinsReply)
            thresholds = np.full((n_kept, cfg.n_features, self._slots), np.inf)
            self._merge_streaming(replies, node, feat, hist, thresholds)
        else:
            self._charge(request)
            replies_c = self.call_many({c: request for c in self.clients}, expect=CountsReply)
            hist[node, feat] = self._merge_counts(replies_c, node.size * width * C).reshape(node.size, width, C)
            if cfg.task == "regression":  # fixed point back to units of u (a power of two: exact)
                hist[..., 1:] *= 2.0 ** -cfg.y_bits
        np.maximum(hist, 0.0, out=hist)  # noisy counts: clipping is post-processing
        return hist, thresholds

    def _merge_counts(self, replies: dict[str, CountsReply], length: int) -> npt.NDArray[np.int64]:
        if self.config.secure:
            total = RING.zeros(length)
            for name, reply in replies.items():
                try:
                    vec = RING.from_wire(reply.counts, length)
                except ProtocolError as exc:
                    raise ProtocolError(f"{name}: {exc}") from exc
                total = RING.add(total, vec)
            return np.asarray(total, dtype=np.uint64).view(np.int64)
        out = np.zeros(length, dtype=np.int64)
        for name, reply in replies.items():
            if reply.counts.dtype != np.int64 or reply.counts.shape != (length,):
                raise ProtocolError(f"{name} sent counts of the wrong shape or type")
            out += reply.counts
        return out

    def _merge_streaming(
        self,
        replies: dict[str, BinsReply],
        node: IntArray,
        feat: IntArray,
        hist: FloatArray,
        thresholds: FloatArray,
    ) -> None:
        """Algorithm 3 for every requested (node, feature) pair at once; fills ``hist`` and, per numeric
        pair, the midpoint thresholds of adjacent merged bins (``+inf`` from the last bin on)."""
        cfg = self.config
        C = cfg.n_classes
        centres: list[FloatArray] = []
        counts: list[npt.NDArray[np.int64]] = []
        pair_of: list[IntArray] = []
        for name, reply in replies.items():
            if reply.lengths.size != node.size or reply.counts.shape[1] != C:
                raise ProtocolError(f"{name} sent bins for a different request")
            if (reply.counts.size and reply.counts.min() < 0) or (reply.missing.size and reply.missing.min() < 0):
                raise ProtocolError(f"{name} sent negative counts")
            centres.append(reply.centres)
            counts.append(reply.counts)
            pair_of.append(np.repeat(np.arange(node.size, dtype=np.int64), reply.lengths))
            hist[node, feat, -1, :] += reply.missing
        v, k, pair = np.concatenate(centres), np.concatenate(counts), np.concatenate(pair_of)
        cats = np.asarray(cfg.categories, dtype=np.int64)
        is_cat = cats[feat] > 0
        for categorical in (False, True):
            grouped, summed, bounds = group_bins(
                v, np.where(is_cat[pair] == categorical, pair, -1), k, node.size, None if categorical else cfg.n_bins
            )
            owner = np.repeat(np.arange(node.size), np.diff(bounds))
            if categorical:
                codes = grouped.astype(np.int64)
                if np.any(codes != grouped) or np.any((codes < 0) | (codes >= cats[feat[owner]])):
                    raise ProtocolError("categorical bins must be declared category codes")
                hist[node[owner], feat[owner], codes, :] = summed
                continue
            slot = np.arange(grouped.size) - bounds[owner]
            hist[node[owner], feat[owner], slot, :] = summed
            inner = np.flatnonzero(np.diff(owner) == 0)  # bin b and b + 1 of the same pair
            mid = (grouped[inner] + grouped[inner + 1]) / 2
            thresholds[node[owner[inner]], feat[owner[inner]], slot[inner]] = mid
