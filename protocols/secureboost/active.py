"""The active party: labels, gradients, encryption, split choice, leaf weights and inference
(``specs/secureboost.md``).

The active party holds the labels and its own columns.  Per tree it encrypts each instance's
packed ``(1, g, h)`` once (S1); per layer it asks every passive party for the packed bucket
sums of the nodes to split (S2), decrypts them (S3), scores every candidate of every party with
the reference criterion, and tells the owner of each chosen passive split only "split node n on
your feature k at bucket v" (S4).  Thresholds of passive splits stay with their owners: the
active party's trees hold those nodes as withheld, with the owner's record id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from securetrees.errors import DecodeError, NotFittedError, ParameterError, ProtocolError
from securetrees.paillier import Ciphertext, PrivateKey, PublicKey
from securetrees.paillier.batch import decrypt_residues, encrypt_to_bytes, owner_key
from securetrees.paillier.prefill import BackgroundPool, role_pool
from securetrees.progress import phase
from securetrees.protocols.secureboost.buckets import expand_buckets
from securetrees.protocols.secureboost.checkpoint import ActiveState
from securetrees.protocols.secureboost.messages import (
    BUCKET_SENT,
    Ack,
    Checkpoint,
    End,
    Gradients,
    HistogramReply,
    HistogramRequest,
    NodeJob,
    PredictReply,
    PredictRequest,
    Resume,
    Setup,
    SetupReply,
    SplitOrder,
    SplitReply,
    SplitRequest,
)
from securetrees.protocols.secureboost.model import ActiveModel
from securetrees.protocols.secureboost.packing import PackingLayout, quantize
from securetrees.protocols.secureboost.params import SecureBoostParams
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Network, Party
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.trees import (
    BinMapper,
    GradientGain,
    Tree,
    TreeBuilder,
    best_splits,
    goes_left_binned,
    node_totals,
    persistence,
)
from securetrees.trees.exact import sums_exactly
from securetrees.trees.forest import BoostedForest, sigmoid, softmax
from securetrees.trees.grow import subtracted_histograms
from securetrees.trees.packed import PackedBins, packed_histograms, unpack

__all__ = ["ActiveParty", "SecureBoostModel", "TreeRecord"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class TreeRecord:
    """One tree as the active party keeps it: the structure and leaf weights, its own splits in
    full, each passive split withheld with ``provider`` = the owner's index and its record id."""

    tree: Tree
    records: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SecureBoostModel:
    """The active party's model: ``F(x) = base + learning_rate · Σ tree(x)`` per output."""

    trees: tuple[TreeRecord, ...]
    base_score: FloatArray
    learning_rate: float
    n_outputs: int


def _gradients(raw: FloatArray, target: FloatArray, loss: str) -> tuple[FloatArray, FloatArray]:
    """Gradients and hessians of the loss at the current scores (as the reference GBDT)."""
    if loss == "squared":
        return raw - target, np.ones_like(raw)
    p = sigmoid(raw) if raw.shape[1] == 1 else softmax(raw)
    return p - target, p * (1.0 - p)


class ActiveParty(Party):
    """The label holder: columns ``X`` of the aligned rows, labels ``y`` (class codes
    ``0..n_classes-1`` or regression targets), the passive parties' names in provider order
    (provider ``0`` is this party, ``u + 1`` is ``passives[u]``), and the Paillier key pair.
    With :attr:`progress` on, :meth:`fit` shows trees done of total and the tree being grown
    (:mod:`securetrees.progress`: a bar, or lines in a role's log)."""

    role = "active"
    progress: bool = False
    """Show the boosting's progress (a deployed active party, the demo)."""

    def __init__(
        self, name: str, network: Network, *, X: npt.ArrayLike, y: npt.ArrayLike, passives: Sequence[str],
        params: SecureBoostParams, keypair: tuple[PublicKey, PrivateKey],
        categorical: tuple[bool, ...] | None = None, rng: RandomSource = SYSTEM_RANDOM,
        executor: Executor | None = None, trusted_workers: bool = False, background_pool: bool = False,
        checkpoint: CheckpointStore | None = None,
    ) -> None:
        super().__init__(name, network)
        self._store = checkpoint
        self.executor = executor
        self.trusted_workers = bool(trusted_workers)
        self.background_pool = bool(background_pool)
        self._prefill: BackgroundPool | None = None
        self._trees_left = 0
        self.prefill_seconds = 0.0
        """CPU seconds the background pool's workers spent in the last ``fit``."""
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[0] < 2 or Xa.shape[1] < 1:
            raise ParameterError("the active party holds a two-dimensional table of at least two rows")
        if np.isinf(Xa).any():
            raise ParameterError("feature values must be finite or NaN (missing)")
        ya = np.asarray(y, dtype=np.float64)
        if ya.shape != (Xa.shape[0],) or not np.isfinite(ya).all():
            raise ParameterError("y must hold one finite label per row")
        if params.loss == "logistic" and (np.any(ya != np.floor(ya)) or ya.min() < 0 or ya.max() >= params.n_classes):
            raise ParameterError("classification labels are class codes 0..n_classes-1")
        if not passives or len(set(passives)) != len(passives):
            raise ParameterError("at least one passive party, each named once")
        self._X, self._y = Xa, ya
        self.passives = tuple(passives)
        self.params = params
        self._pk, self._sk = keypair
        self._rng = rng
        self._mapper = BinMapper.fit(Xa, max_bins=params.max_bins, categorical=categorical)
        self._binned = self._mapper.transform(Xa)
        self._packed = PackedBins.pack(self._binned, self._mapper)
        self._schema: dict[str, SetupReply] = {}
        self.model: SecureBoostModel | None = None
        self._train_leaf = np.zeros(Xa.shape[0], dtype=np.int64)
        self.counts = {"encrypt": 0, "decrypt": 0, "buckets": 0, "sent": 0, "rounds": 0}

    # -- S0 -------------------------------------------------------------------------------------
    def setup(self) -> None:
        """Send the public key, the row count and the bin budget; learn each passive's schema."""
        msg = Setup(self._pk.to_bytes(), self._X.shape[0], self.params.max_bins)
        self._schema = self.call_many({p: msg for p in self.passives}, expect=SetupReply)
        for p, reply in self._schema.items():
            if any(not 1 <= b <= self.params.max_bins for b in reply.n_bins):
                raise ProtocolError(f"{p} declares a bin count outside [1, max_bins]")
        self.counts["rounds"] += 1

    @property
    def _outputs(self) -> int:
        """Trees per boosting round: one per class beyond two, else one."""
        p = self.params
        return 1 if p.loss == "squared" or p.n_classes == 2 else p.n_classes

    # -- the boosting loop ----------------------------------------------------------------------
    def fit(self) -> SecureBoostModel:
        """Every round: gradients at the current scores, one tree per output (S1-S4).  Refused when
        this party's checkpoint store holds a round already: the passive parties would refuse the
        new run's requests for the rounds they answered, so an interrupted fit is finished with
        :meth:`resume` and a new one starts in an empty folder."""
        if self._store is not None and self._store.latest(ActiveState) is not None:
            raise ParameterError(f"{self.name}'s checkpoint folder holds a fit already: finish it with resume "
                                 "(securetrees operator resume); a new fit needs an empty checkpoint_dir")
        return self._pooled(self._boost)

    def resume(self) -> SecureBoostModel:
        """Finish an interrupted fit from this party's latest checkpoint (or from the start without
        one): repeat the setup (deterministic in the data), have every passive party restore the
        same number of trees, then the remaining rounds.  The model equals an uninterrupted fit's."""
        if self._store is None:
            raise ParameterError("this active party keeps no checkpoints")
        saved = self._store.latest(ActiveState)
        self.setup()
        self.call_many({q: Resume(0 if saved is None else saved.trees) for q in self.passives}, expect=Ack)
        return self._pooled(lambda: self._boost(saved))

    def _pooled(self, boost: Callable[[], SecureBoostModel]) -> SecureBoostModel:
        """``boost`` with the background pool of obfuscators (when enabled)."""
        key = self._sk if self.params.encryption == "key-owner" else self._pk
        # The first tree's obfuscators, shared with the worker (they are needed after setup),
        # and the second's at once: the worker goes on to them without waiting for a request;
        # each later tree's is requested two trees ahead.
        n = self._X.shape[0]
        second = n if self.params.n_estimators * self._outputs > 1 else 0
        with role_pool(self.background_pool, key, first=n, after=second, share_first=True, executor=self.executor,
                       trusted_workers=self.trusted_workers, rng=self._rng) as prefill:  # from S0 on
            self._prefill = prefill
            try:
                return boost()
            finally:
                self._prefill = None
                self.prefill_seconds = prefill.worker_seconds if prefill is not None else 0.0

    def _boost(self, saved: ActiveState | None = None) -> SecureBoostModel:
        """The rounds of :meth:`fit` (from ``saved``'s on a resume), a checkpoint after each."""
        if not self._schema:
            self.setup()
        p = self.params
        n = self._X.shape[0]
        if p.loss == "squared":
            target = self._y[:, None]
            base = np.array([target.mean() if p.base_score == "prior" else 0.0])
        else:
            onehot = np.zeros((n, p.n_classes))
            onehot[np.arange(n), self._y.astype(np.int64)] = 1.0
            prior = np.clip(onehot.mean(axis=0), 1e-12, 1.0)
            if p.n_classes == 2:
                target = onehot[:, 1:]
                base = np.array([np.log(prior[1] / prior[0]) if p.base_score == "prior" else 0.0])
            else:
                target = onehot
                base = np.log(prior) if p.base_score == "prior" else np.zeros(p.n_classes)
        raw = np.tile(base, (n, 1))
        trees: list[TreeRecord] = []
        if saved is not None:
            trees, raw = self._restore_state(saved, base)
        first = len(trees) // base.size
        self._trees_left = (p.n_estimators - first) * base.size
        with phase("SecureBoost trees", total=p.n_estimators * base.size, enabled=self.progress) as shown:
            shown.advance_to(len(trees))
            for _ in range(first, p.n_estimators):
                grad, hess = _gradients(raw, target, p.loss)
                for j in range(base.size):
                    shown.advance_to(len(trees), f"growing tree {len(trees) + 1}")
                    rec = self.grow(len(trees), grad[:, j], hess[:, j])
                    raw[:, j] += p.learning_rate * rec.tree.value[self._train_leaf, 0]
                    trees.append(rec)
                    shown.advance_to(len(trees))
                self._checkpoint(trees, raw, base)
        self.call_many({q: End() for q in self.passives}, expect=Ack)
        self.model = SecureBoostModel(tuple(trees), base, float(p.learning_rate), int(base.size))
        return self.model

    # -- checkpoints (``specs/secureboost.md``, "Checkpoints") ------------------------------------
    def _checkpoint(self, trees: Sequence[TreeRecord], raw: FloatArray, base: FloatArray) -> None:
        """After a round: every passive party saves its state, then this party saves its own (so a
        passive checkpoint is never behind the active one).  Reveals the round count only."""
        if self._store is None:
            return
        self.call_many({q: Checkpoint(len(trees)) for q in self.passives}, expect=Ack)
        self._store.save(ActiveState(len(trees), self._model_doc(trees, base, float(self.params.learning_rate)),
                                     raw.copy()))

    def _restore_state(self, saved: ActiveState, base: FloatArray) -> tuple[list[TreeRecord], FloatArray]:
        """The trees and raw scores of a checkpoint; :class:`ProtocolError` unless it is this run's."""
        trees, saved_base, rate = self._records(saved.model)
        raw = np.asarray(saved.raw)
        p = self.params
        if (len(trees) != saved.trees or saved.trees % base.size or saved.trees > p.n_estimators * base.size
                or raw.dtype != np.float64 or raw.shape != (self._X.shape[0], base.size)
                or not np.array_equal(saved_base, base) or rate != float(p.learning_rate)):
            raise ProtocolError("the checkpoint does not belong to this run")
        return trees, raw.copy()

    # -- the model part (a predict-only run restores it instead of training) -------------------
    def model_state(self) -> ActiveModel:
        """What this party keeps of the fitted model (local; :mod:`.model`): its trees as a
        boosted-forest document (class codes ``0..k-1``; passive splits withheld) and the record
        ids of the passive splits."""
        m = self.model
        if m is None:
            raise NotFittedError("the active party has no model yet")
        return self._model_doc(m.trees, m.base_score, m.learning_rate)

    def _model_doc(self, trees: Sequence[TreeRecord], base: FloatArray, rate: float) -> ActiveModel:
        p = self.params
        classes = np.arange(p.n_classes, dtype=np.int64) if p.loss == "logistic" else None
        forest = BoostedForest(tuple(r.tree for r in trees), p.loss, base, rate, classes)
        nodes = tuple(np.asarray(sorted(r.records), dtype=np.int64) for r in trees)
        records = tuple(np.asarray([r.records[k] for k in sorted(r.records)], dtype=np.int64) for r in trees)
        return ActiveModel(persistence.dumps(forest), nodes, records, int(self._X.shape[1]))

    def restore_model(self, state: ActiveModel) -> None:
        """Adopt a saved model instead of training (local).  :class:`DecodeError` unless it fits
        this party: its loss and outputs, its column count, its passive parties, and exactly one
        record id per withheld split."""
        trees, base, rate = self._records(state)
        self.model = SecureBoostModel(tuple(trees), base, rate, self._outputs)

    def _records(self, state: ActiveModel) -> tuple[list[TreeRecord], FloatArray, float]:
        """:meth:`restore_model`'s trees, base score and learning rate, checked."""
        forest = persistence.loads(state.forest)
        p = self.params
        outputs = self._outputs
        if (not isinstance(forest, BoostedForest) or forest.loss != p.loss or forest.n_outputs != outputs
                or state.n_own != self._X.shape[1] or not len(state.nodes) == len(state.records) == len(forest.trees)):
            raise DecodeError("the saved SecureBoost model does not fit this active party's run")
        trees = []
        for tree, saved_nodes, saved_recs in zip(forest.trees, state.nodes, state.records, strict=True):
            if np.asarray(saved_nodes).dtype.kind not in "iu" or np.asarray(saved_recs).dtype.kind not in "iu":
                raise DecodeError("a saved SecureBoost tree's record ids are not integers")
            nodes, recs = np.asarray(saved_nodes, dtype=np.int64), np.asarray(saved_recs, dtype=np.int64)
            inner = np.flatnonzero(tree.left >= 0)
            hidden = inner[tree.withheld[inner]]
            own = inner[~tree.withheld[inner]]
            if (nodes.shape != recs.shape or nodes.ndim != 1 or not np.array_equal(np.sort(nodes), hidden)
                    or recs.min(initial=0) < 0 or np.any(tree.provider[hidden] < 1)
                    or np.any(tree.provider[hidden] > len(self.passives))
                    or np.any(tree.provider[own] != 0) or np.any(tree.feature[own] >= state.n_own)):
                raise DecodeError("a saved SecureBoost tree does not fit this run's parties")
            trees.append(TreeRecord(tree, dict(zip(nodes.tolist(), recs.tolist(), strict=True))))
        return trees, np.asarray(forest.base_score, dtype=np.float64), float(forest.learning_rate)

    # -- S1 -------------------------------------------------------------------------------------
    def layout_for(self, g_fixed: IntArray, h_fixed: IntArray) -> PackingLayout:
        """The public layout of a tree: the bounds are the powers of two above ``max |g|`` and
        ``max h`` (in units), so a passive party learns only their bit lengths."""
        f = self.params.frac_bits
        g_max = int(np.abs(g_fixed).max(initial=0))
        h_max = int(np.max(h_fixed, initial=0))
        g_bound = 1 << max(0, -(-g_max >> f) - 1).bit_length()
        h_bound = 1 << max(0, -(-h_max >> f) - 1).bit_length()
        return PackingLayout(f, g_bound, h_bound, g_fixed.size, self._pk.n.bit_length() - 1)

    def encrypt_gradients(self, layout: PackingLayout, g_fixed: IntArray, h_fixed: IntArray) -> bytes:
        """Fresh ciphertexts of the packed plaintexts, one per instance, as one byte string;
        reveals nothing."""
        plain = layout.encode(g_fixed, h_fixed)
        self._trees_left -= 1
        if self._prefill is not None:
            data = encrypt_to_bytes(self._pk, plain, pool=self._prefill.ready(len(plain)))
            if self._trees_left > 1:  # the obfuscators of the tree after the next
                self._prefill.request(len(plain))
        else:
            key = (owner_key(self._sk, self.executor, self.trusted_workers)
                   if self.params.encryption == "key-owner" else self._pk)
            data = encrypt_to_bytes(key, plain, rng=self._rng, executor=self.executor,
                                    trusted_workers=self.trusted_workers)
        self.counts["encrypt"] += len(plain)
        return data

    # -- S3 -------------------------------------------------------------------------------------
    def decrypt_buckets(self, layout: PackingLayout, reply: HistogramReply, schema: SetupReply,
                        totals: IntArray) -> IntArray:
        """Decrypt the packed sums of the sent buckets and complete the others (empty: zero; the
        rest of a feature: the node's total ``totals[k]`` minus the feature's other buckets);
        ``(n_buckets, 3)`` integers ``(count, G·2^f, H·2^f)``."""
        residues = decrypt_residues(self._sk, [Ciphertext(self._pk, v) for v in reply.packed],
                                    executor=self.executor, trusted_workers=self.trusted_workers)
        self.counts["decrypt"] += len(residues)
        self.counts["buckets"] += reply.n_buckets
        n_sent = int((reply.kinds == BUCKET_SENT).sum())
        self.counts["sent"] += n_sent
        widths = [nb + 1 for nb in schema.n_bins]
        return expand_buckets(layout.unpack(residues, n_sent), reply.kinds, totals, widths)

    def _passive_hist(self, sums: IntArray, schema: SetupReply, n_nodes: int) -> FloatArray:
        """Place a passive party's decoded sums into the reference histogram layout."""
        mb = self.params.max_bins
        n_features = len(schema.n_bins)
        per_node = sum(nb + 1 for nb in schema.n_bins)
        if sums.shape[0] != n_nodes * per_node:
            raise ProtocolError("a histogram reply has the wrong number of buckets")
        # Where each bucket of one node goes in the (feature, bin) grid: its bins, then the
        # missing bucket at bin ``max_bins``.
        target = np.concatenate([np.r_[f * (mb + 1) + np.arange(nb), f * (mb + 1) + mb]
                                 for f, nb in enumerate(schema.n_bins)]).astype(np.int64)
        block = sums.reshape(n_nodes, per_node, 3).astype(np.float64)
        block[:, :, 1:] /= float(1 << self.params.frac_bits)
        hist = np.zeros((n_nodes, n_features * (mb + 1), 3))
        hist[:, target] = block
        return hist.reshape(n_nodes, n_features, mb + 1, 3)

    # -- one tree (S1-S4), layer by layer as the reference grower -------------------------------
    def grow(self, tree_no: int, grad: FloatArray, hess: FloatArray) -> TreeRecord:
        """Grow one tree on the quantized gradients; the splits equal the reference grower's on
        the same statistics (same histograms, same criterion, same tie-break)."""
        p = self.params
        f = p.frac_bits
        g_fixed, h_fixed = quantize(grad, f), quantize(hess, f)
        layout = self.layout_for(g_fixed, h_fixed)
        values = self.encrypt_gradients(layout, g_fixed, h_fixed)
        msg = Gradients(tree_no, f, layout.g_bound, layout.h_bound, values)
        self.call_many({q: msg for q in self.passives}, expect=Ack)
        self.counts["rounds"] += 1

        n = self._X.shape[0]
        stats = np.column_stack([np.ones(n), np.ldexp(g_fixed.astype(np.float64), -f),
                                 np.ldexp(h_fixed.astype(np.float64), -f)])
        crit = GradientGain(reg_lambda=p.reg_lambda, second_order=p.second_order)
        grow = p.grow
        schemas = [self._schema[q] for q in self.passives]
        categorical = np.concatenate([np.asarray(self._mapper.categorical, dtype=bool),
                                      *[np.asarray(s.categorical, dtype=bool) for s in schemas]])
        n_bins = np.concatenate([np.asarray(self._mapper.n_bins, dtype=np.int64),
                                 *[np.asarray(s.n_bins, dtype=np.int64) for s in schemas]])
        offsets = np.cumsum([self._mapper.n_features, *[len(s.n_bins) for s in schemas]])
        n_features = int(offsets[-1])
        root = stats.sum(axis=0)
        builder = TreeBuilder(n_features, 1)
        builder.add_root(float(crit.weight(root)), crit.leaf_value(root))
        records: dict[int, int] = {}
        frontier = np.zeros(1, dtype=np.int64)
        parent_of: dict[int, int] = {0: -1}
        sibling_of: dict[int, int] = {0: -1}
        idx = np.arange(n, dtype=np.int64)  # instances still in play
        pos = np.zeros(n, dtype=np.int64)  # their position in the frontier
        leaf_of = np.zeros(n, dtype=np.int64)
        # Own histograms as the reference grower builds them: packed, and where the sums are
        # exact (multiples of 2^-f well below 2^53 units) the larger sibling as parent - smaller.
        columns: list[FloatArray | None] = [None, np.ascontiguousarray(stats[:, 1]), np.ascontiguousarray(stats[:, 2])]
        exact = sums_exactly(stats)
        parent_hist: FloatArray | None = None
        depth = 0
        while frontier.size and idx.size:
            totals = node_totals(pos, stats[idx], frontier.size)
            can = grow.may_split(depth, crit.weight(totals)) & ~crit.is_pure(totals)
            if not can.any():
                break
            split_pos = np.flatnonzero(can)
            if parent_hist is not None:
                packed_own, idx, pos = subtracted_histograms(self._packed, columns, parent_hist, crit.weight(totals),
                                                             frontier, split_pos, idx, pos, leaf_of)
            else:
                renumber = np.full(frontier.size, -1, dtype=np.int64)
                renumber[split_pos] = np.arange(split_pos.size)
                keep = renumber[pos] >= 0
                idx, pos = idx[keep], renumber[pos[keep]]
                packed_own = packed_histograms(self._packed, pos, columns, split_pos.size, idx)
            own = unpack(packed_own, self._packed.layout, p.max_bins)
            nodes = frontier[split_pos]
            jobs = tuple(
                NodeJob(int(node), parent_of[int(node)],
                        sibling_of[int(node)] if sibling_of[int(node)] in set(nodes.tolist()) else -1,
                        np.asarray(idx[pos == k], dtype=np.int64))
                for k, node in enumerate(nodes)
            )
            req = HistogramRequest(tree_no, depth, jobs)
            replies = self.call_many({q: req for q in self.passives}, expect=HistogramReply)
            self.counts["rounds"] += 1
            fixed = np.zeros((split_pos.size, 3), dtype=np.int64)  # each node's (count, G·2^f, H·2^f)
            np.add.at(fixed, pos, np.column_stack([np.ones(idx.size, dtype=np.int64), g_fixed[idx], h_fixed[idx]]))
            hists = [own] + [
                self._passive_hist(self.decrypt_buckets(layout, replies[q], self._schema[q], fixed),
                                   self._schema[q], split_pos.size)
                for q in self.passives
            ]
            res = best_splits(np.concatenate(hists, axis=1), crit, categorical=categorical, n_bins=n_bins,
                              min_samples_leaf=grow.min_samples_leaf, min_gain=grow.min_gain)
            found = np.flatnonzero(res.found)
            owner = np.searchsorted(offsets, res.feature, side="right")  # 0: active, u+1: passive u
            go = np.zeros(idx.size, dtype=bool)
            orders: dict[int, list[tuple[int, SplitOrder]]] = {}
            for i in found:
                o = int(owner[i])
                if o == 0:
                    continue
                local = int(res.feature[i] - offsets[o - 1])
                orders.setdefault(o, []).append(
                    (int(i), SplitOrder(int(nodes[i]), local, int(res.bin[i]), bool(res.missing_left[i]))))
            if orders:
                split_replies = self.call_many(
                    {self.passives[o - 1]: SplitRequest(tree_no, tuple(s for _, s in lst))
                     for o, lst in orders.items()}, expect=SplitReply)
                self.counts["rounds"] += 1
                for o, lst in orders.items():
                    rep = split_replies[self.passives[o - 1]]
                    if len(rep.records) != len(lst):
                        raise ProtocolError("a split reply answers another number of orders")
                    for (k_pos, order), rec, left in zip(lst, rep.records, rep.left, strict=True):
                        members = idx[pos == k_pos]
                        if not np.isin(left, members).all():
                            raise ProtocolError("a split reply sends instances of another node left")
                        go[pos == k_pos] = np.isin(members, left)
                        records[order.node] = int(rec)
            mine = found[owner[found] == 0]
            if mine.size:
                sel = np.flatnonzero(np.isin(pos, mine))
                fs = res.feature[pos[sel]]
                go[sel] = goes_left_binned(self._binned[idx[sel], fs], res.bin[pos[sel]],
                                           categorical[fs], res.missing_left[pos[sel]], self._mapper.missing_bin)
            next_frontier: list[int] = []
            child_base = np.full(split_pos.size, -1, dtype=np.int64)
            for i in found:
                o, fg = int(owner[i]), int(res.feature[i])
                ls, rs = res.left_stats[i], res.right_stats[i]
                lid, rid = builder.split(
                    int(nodes[i]),
                    feature=fg if o == 0 else None,
                    threshold=self._mapper.threshold(fg, int(res.bin[i])) if o == 0 else None,
                    categorical=bool(categorical[fg]), missing_left=bool(res.missing_left[i]), provider=o,
                    left=(float(crit.weight(ls)), crit.leaf_value(ls)),
                    right=(float(crit.weight(rs)), crit.leaf_value(rs)),
                )
                parent_of[lid] = parent_of[rid] = int(nodes[i])
                sibling_of[lid], sibling_of[rid] = rid, lid
                child_base[i] = len(next_frontier)
                next_frontier += [lid, rid]
            moving = child_base[pos] >= 0
            idx, pos, go = idx[moving], pos[moving], go[moving]
            pos = child_base[pos] + (~go).astype(np.int64)
            frontier = np.asarray(next_frontier, dtype=np.int64)
            leaf_of[idx] = frontier[pos]
            parent_hist = packed_own[found] if exact else None
            depth += 1
        self._train_leaf = leaf_of
        return TreeRecord(builder.build(), records)

    # -- P1: inference, one round per tree level --------------------------------------------------
    def decision_function(self, X: npt.ArrayLike) -> FloatArray:
        """Raw scores of the rows whose own columns are ``X`` (each passive party has loaded its
        columns of the same rows): all trees advance one level per round."""
        if self.model is None:
            raise ProtocolError("the active party has no model yet")
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[1] != self._X.shape[1]:
            raise ParameterError(f"X must have {self._X.shape[1]} columns")
        m = self.model
        n = Xa.shape[0]
        pos = np.zeros((len(m.trees), n), dtype=np.int64)
        while True:
            queries: dict[int, list[tuple[int, IntArray, IntArray]]] = {}
            moved = False
            for t, rec in enumerate(m.trees):
                tree = rec.tree
                at = pos[t]
                inner = np.flatnonzero(tree.left[at] >= 0)
                if not inner.size:
                    continue
                moved = True
                owner = tree.provider[at[inner]]
                own = inner[owner == 0]
                if own.size:
                    nodes = at[own]
                    go = tree.goes_left(Xa[own, tree.feature[nodes]], nodes)
                    pos[t, own] = np.where(go, tree.left[nodes], tree.right[nodes])
                for o in np.unique(owner[owner > 0]).tolist():
                    rows = inner[owner == o]
                    recs = np.array([rec.records[int(k)] for k in at[rows]], dtype=np.int64)
                    queries.setdefault(o, []).append((t, rows, recs))
            if not moved:
                break
            if queries:
                reqs = {self.passives[o - 1]: PredictRequest(np.concatenate([r for _, _, r in lst]),
                                                             np.concatenate([w for _, w, _ in lst]).astype(np.int64))
                        for o, lst in queries.items()}
                replies = self.call_many(reqs, expect=PredictReply)
                for o, lst in queries.items():
                    left = replies[self.passives[o - 1]].left
                    if left.size != reqs[self.passives[o - 1]].rows.size:
                        raise ProtocolError("a prediction reply answers another number of queries")
                    start = 0
                    for t, rows, _ in lst:
                        go = left[start:start + rows.size]
                        start += rows.size
                        nodes = pos[t, rows]
                        pos[t, rows] = np.where(go, m.trees[t].tree.left[nodes], m.trees[t].tree.right[nodes])
        raw = np.tile(m.base_score, (n, 1))
        for t, rec in enumerate(m.trees):
            raw[:, t % m.n_outputs] += m.learning_rate * rec.tree.value[pos[t], 0]
        return raw
