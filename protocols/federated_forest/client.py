"""The client role of Federated Forest (Algorithms 1, 3 / 5, 7), label holder included.

A client holds some columns of every sample; it finds the best split among its
own candidate features at each node (plaintext statistics in ``shared`` mode,
encrypted label statistics scored by the label holder in ``encrypted`` mode),
splits the nodes it wins, keeps a partial tree per tree and routes test samples
through it.  The label holder is the client constructed with ``labels``: it
distributes the labels (``shared``) or their encryptions (``encrypted``) and answers the
node statistics (``shared``); in ``encrypted`` mode it scores other clients' encrypted
candidates, names each node's winner, and alone knows which nodes are cover splits, the
node values and the purity of every node.
See ``specs/federated_forest.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import DecodeError, ParameterError, ProtocolError, UnexpectedMessage
from securetrees.paillier import Ciphertext, Mode, PrivateKey, PublicKey, generate_keypair
from securetrees.paillier.batch import encrypt_many
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.checkpoint import (
    CheckpointStore,
    ClientState,
    ScoreJournal,
    SentScore,
    TreeState,
    WorkState,
)
from securetrees.protocols.federated_forest.cover import random_valid_splits, reference_ancestor
from securetrees.protocols.federated_forest.encrypted_stats import (
    CryptoCounters,
    bin_sums,
    candidate_histograms,
    pack_bins,
)
from securetrees.protocols.federated_forest.ids import canonical_order, hash_ids
from securetrees.protocols.federated_forest.model import ClientModel
from securetrees.protocols.federated_forest.skeleton import (
    LayerState,
    OwnSplit,
    TreeSkeleton,
    check_positions,
    forest_output,
)
from securetrees.protocols.federated_forest.slots import SlotLayout, classification_units, regression_units
from securetrees.rand import SYSTEM_RANDOM, KeyedRandom, RandomSource
from securetrees.runtime import Message, Network, Party, encode, handles
from securetrees.trees import BinMapper, Criterion, Tree, best_splits, build_histograms, make_criterion, node_totals
from securetrees.trees.grow import goes_left_binned
from securetrees.trees.train import class_stats, regression_stats

__all__ = ["Client", "CryptoCounters", "LabelSpec"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class LabelSpec:
    """The label holder's labels: class codes ``0..n_classes-1`` or regression targets
    (``n_classes=None``), and how to protect them in ``encrypted`` mode."""

    y: npt.NDArray[np.generic]
    n_classes: int | None
    key_bits: int = 2048
    allow_insecure: bool = False
    keypair: tuple[PublicKey, PrivateKey] | None = None
    frac_bits: int = 32

    def __post_init__(self) -> None:
        y = np.asarray(self.y)
        if y.ndim != 1 or y.size == 0:
            raise ParameterError("labels must be a non-empty vector")
        if self.n_classes is None:
            if not np.all(np.isfinite(y.astype(np.float64))):
                raise ParameterError("regression targets must be finite (no NaN)")
        else:
            codes = y.astype(np.int64)
            if self.n_classes < 2 or codes.min() < 0 or codes.max() >= self.n_classes or not np.array_equal(codes, y):
                raise ParameterError("class codes must be integers in [0, n_classes), n_classes >= 2")


@dataclass(frozen=True, slots=True)
class _Answer:
    """A score request the label holder answered: its digest, the reply, the positions with a
    valid candidate and their gains (kept for naming the winners)."""

    digest: bytes
    reply: m.ScoreReply
    positions: IntArray
    gains: FloatArray


def _digest(msg: Message) -> bytes:
    """SHA-256 of a message's wire encoding (the strict codec's encoding is canonical)."""
    return hashlib.sha256(encode(msg)).digest()


@dataclass(slots=True)
class _Candidate:
    feature: int  # local column
    bin: int
    missing_left: bool


class Client(Party):
    """One organisation's columns ``X`` (rows in its own order, named by ``ids``).

    ``feature_ids`` are the global ids of the columns (the encoded features the
    master samples from); ``id_key`` is the HMAC key all clients share.  Instructions are
    admitted from the master role only, score requests and labels from other clients (the
    message declarations); the labels' sender must moreover be the setup's label holder.
    """

    role = "client"

    def __init__(
        self,
        name: str,
        network: Network,
        X: npt.ArrayLike,
        ids: Sequence[object],
        feature_ids: Sequence[int],
        id_key: bytes,
        *,
        categorical: Sequence[bool] | None = None,
        labels: LabelSpec | None = None,
        paillier_mode: Mode = "djn",
        public_key_loader: Callable[[bytes], PublicKey] = PublicKey.from_bytes,
        checkpoint: CheckpointStore | None = None,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> None:
        super().__init__(name, network)
        Xa = np.asarray(X, dtype=np.float64)
        fids = [int(f) for f in feature_ids]
        if Xa.ndim != 2 or Xa.shape[1] != len(fids) or Xa.shape[0] != len(ids):
            raise ParameterError("X must have one row per id and one column per feature id")
        if len(set(fids)) != len(fids) or any(f < 0 for f in fids):
            raise ParameterError("feature ids must be distinct non-negative ints")
        if np.isinf(Xa).any():
            raise ParameterError("feature values must be finite or NaN (missing)")
        if labels is not None and np.asarray(labels.y).shape[0] != Xa.shape[0]:
            raise ParameterError("labels must have one entry per row")
        cols = np.argsort(fids, kind="stable")  # local order = increasing global id (tie-breaking)
        self._cols = cols
        self._X_raw = Xa[:, cols]
        self._feature_ids = np.asarray(fids, dtype=np.int64)[cols]
        cat = [False] * len(fids) if categorical is None else [bool(c) for c in categorical]
        if len(cat) != len(fids):
            raise ParameterError("categorical needs one flag per column")
        self._categorical = tuple(cat[int(c)] for c in cols)
        self._hashed = hash_ids(id_key, ids)
        self._id_key = id_key
        self._labels_spec = labels
        self._mode: Mode = paillier_mode
        self._load_pk = public_key_loader
        self._rng = rng
        self._cover_key = rng.token_bytes(32)  # label holder: its cover-split choices (``cover.py``)
        self._store = checkpoint
        self.counters = CryptoCounters()
        self.trees: list[Tree] = []
        self._setup: m.Setup | None = None
        self._index = -1
        self._X = np.empty((0, 0))
        self._binned: npt.NDArray[np.unsignedinteger[npt.NBitBase]] | None = None
        self._mapper: BinMapper | None = None
        self._labels: npt.NDArray[np.generic] | None = None  # canonical order (shared mode / holder)
        self._pk: PublicKey | None = None
        self._sk: PrivateKey | None = None
        self._layout: SlotLayout | None = None
        self._enc: list[Ciphertext] = []
        self._criterion: Criterion | None = None
        # per tree
        self._tree = -1
        self._weights = np.zeros(0, dtype=np.int64)
        self._state: LayerState | None = None
        self._skeleton: TreeSkeleton | None = None
        self._stats: FloatArray | None = None
        self._weighted: list[Ciphertext | None] = []
        self._candidates: dict[int, _Candidate] = {}
        self._won: dict[int, _Candidate] = {}
        self._won_left = np.zeros(0, dtype=bool)
        # label holder: every score request answered in the tree in progress, by (tree, layer, sender)
        self._answered: dict[tuple[int, int, str], _Answer] = {}
        # label holder (``encrypted``): its own valid candidates' gains of the layer, by position
        self._own_gains: dict[int, float] = {}
        # label holder: per position named a winner this layer, is the split part of the model?
        self._kept: dict[int, bool] = {}
        # label holder: per finished tree and for the tree in progress, which nodes belong to the
        # central forest's tree (the others are cover splits)
        self.reference: list[BoolArray] = []
        self._ref: list[bool] = []
        # other clients (``encrypted``): the score requests sent in the tree in progress, by (tree, layer)
        self._sent: dict[tuple[int, int], SentScore] = {}
        # prediction
        self._test_hashed: tuple[bytes, ...] = ()
        self._X_test = np.empty((0, 0))
        self._holds_labels = False  # a label holder restored from its model part (no labels then)

    # ------------------------------------------------------------------ properties
    @property
    def is_label_holder(self) -> bool:
        return self._labels_spec is not None or self._holds_labels

    @property
    def feature_ids(self) -> tuple[int, ...]:
        return tuple(int(f) for f in self._feature_ids)

    @property
    def n_outputs(self) -> int:
        s = self._require_setup()
        return max(1, s.n_classes)

    def _require_setup(self) -> m.Setup:
        if self._setup is None:
            raise UnexpectedMessage(f"{self.name} has not been set up")
        return self._setup

    def _require_tree(self, tree: int) -> LayerState:
        if self._state is None or tree != self._tree:
            raise UnexpectedMessage(f"{self.name} is not building tree {tree}")
        return self._state

    # ------------------------------------------------------------------ setup
    @handles(m.Hello)
    def on_hello(self, sender: str, msg: m.Hello) -> m.ClientInfo:
        """Setup: report the HMAC ids, the global feature ids, the label role (Reveals: the
        master learns pseudonymous ids, the feature layout and the number of classes)."""
        spec = self._labels_spec
        n_classes = 0 if spec is None or spec.n_classes is None else spec.n_classes
        return m.ClientInfo(b"".join(self._hashed), self.feature_ids, spec is not None, n_classes)

    @handles(m.Setup)
    def on_setup(self, sender: str, msg: m.Setup) -> m.Ack:
        """Setup: adopt the canonical order, bin the own columns."""
        if msg.n_samples != len(self._hashed) or self.name not in msg.client_names:
            raise ProtocolError("setup does not match this client's data")
        if msg.label_protection not in ("shared", "encrypted"):
            raise ProtocolError(f"unknown label protection {msg.label_protection!r}")
        self._setup = msg
        self._index = msg.client_names.index(self.name)
        self._criterion = make_criterion(msg.criterion)
        order = canonical_order(self._hashed)
        self._X = self._X_raw[order]
        if self._X.shape[1]:
            self._mapper = BinMapper.fit(self._X, max_bins=msg.max_bins, categorical=self._categorical)
            self._binned = self._mapper.transform(self._X)
        if self._labels_spec is not None:
            self._labels = np.asarray(self._labels_spec.y)[order]
        self.logger.info("%s set up: %d rows, %d own features", self.name, msg.n_samples, self._X.shape[1])
        return m.Ack()

    @handles(m.DistributeLabels)
    def on_distribute_labels(self, sender: str, msg: m.DistributeLabels) -> m.Ack:
        """Setup (label holder): labels to every other client (``shared``), or one fresh
        ciphertext of each sample's packed unit statistics (``encrypted``)."""
        setup = self._require_setup()
        spec, labels = self._labels_spec, self._labels
        if spec is None or labels is None:
            raise UnexpectedMessage(f"{self.name} holds no labels")
        others = [c for c in setup.client_names if c != self.name]
        request: m.SharedLabels | m.EncryptedLabels
        if setup.label_protection == "shared":
            request = m.SharedLabels(np.asarray(labels, dtype=np.float64 if spec.n_classes is None else np.int64))
        else:
            if spec.keypair is not None:
                self._sk = spec.keypair[1]
            elif self._sk is None:  # a repeated setup (resume) keeps the key: sent requests stay valid
                self._sk = generate_keypair(spec.key_bits, rng=self._rng, allow_insecure=spec.allow_insecure)[1]
            pk = self._pk = self._sk.public_key if spec.keypair is None else spec.keypair[0]
            if spec.n_classes is None:
                layout, units = regression_units(np.asarray(labels, dtype=np.float64), spec.frac_bits)
            else:
                layout, units = classification_units(np.asarray(labels, dtype=np.int64), spec.n_classes)
            self._layout = layout
            layout.bins_per_plaintext(pk.bits)
            cts = encrypt_many(pk, units, mode=self._mode, rng=self._rng)
            self.counters.encryptions += len(cts)
            request = m.EncryptedLabels(pk.to_bytes(), layout.n_slots, layout.slot_bits,
                                        tuple(c.value for c in cts))
        if others:
            self.call_many(dict.fromkeys(others, request), expect=m.Ack)
        return m.Ack()

    @handles(m.SharedLabels)
    def on_shared_labels(self, sender: str, msg: m.SharedLabels) -> m.Ack:
        """Setup (``shared``): keep the labels (Reveals: every label, the paper's practice)."""
        setup = self._require_setup()
        if sender != setup.label_holder:
            raise UnexpectedMessage("labels come from the label holder only")
        if setup.label_protection != "shared" or self.is_label_holder:
            raise UnexpectedMessage("labels in the clear are only accepted in shared mode")
        y = msg.labels
        if y.shape != (setup.n_samples,):
            raise ProtocolError("wrong number of labels")
        if setup.n_classes and (y.dtype.kind not in "iu" or (y.size and (y.min() < 0 or y.max() >= setup.n_classes))):
            raise ProtocolError("class codes out of range")
        if not setup.n_classes and (y.dtype.kind != "f" or not np.all(np.isfinite(y))):
            raise ProtocolError("regression targets must be finite floats")
        self._labels = msg.labels
        return m.Ack()

    @handles(m.EncryptedLabels)
    def on_encrypted_labels(self, sender: str, msg: m.EncryptedLabels) -> m.Ack:
        """Setup (``encrypted``): validate and keep the public key and every ciphertext."""
        setup = self._require_setup()
        if sender != setup.label_holder:
            raise UnexpectedMessage("labels come from the label holder only")
        if setup.label_protection != "encrypted" or self.is_label_holder:
            raise UnexpectedMessage("encrypted labels are only accepted in encrypted mode")
        if len(msg.ciphertexts) != setup.n_samples:
            raise ProtocolError("wrong number of encrypted labels")
        pk = self._load_pk(msg.public_key)
        layout = SlotLayout(msg.n_slots, msg.slot_bits)
        layout.bins_per_plaintext(pk.bits)
        self._enc = [Ciphertext(pk, v) for v in msg.ciphertexts]  # raises InvalidCiphertext
        self._pk, self._layout = pk, layout
        return m.Ack()

    # ------------------------------------------------------------------ training
    @handles(m.TreeStart)
    def on_tree_start(self, sender: str, msg: m.TreeStart) -> m.Ack:
        """Tree start (Algorithm 1 line 2): the bootstrap weights and the own selected features."""
        setup = self._require_setup()
        w = np.asarray(msg.weights)
        if w.shape != (setup.n_samples,) or w.dtype.kind not in "iu" or (w.size and w.min() < 0):
            raise ProtocolError("bootstrap weights must be n non-negative integers")
        if not set(msg.features) <= set(self.feature_ids):
            raise ProtocolError("the master selected a feature this client does not hold")
        skeleton = TreeSkeleton(self._X.shape[1], self.n_outputs)
        skeleton.add(float(w.sum()))
        self._ref = [True]
        self._begin_tree(msg.tree, w.astype(np.int64), LayerState.start(w.astype(np.int64)), skeleton)
        return m.Ack()

    def _begin_tree(self, tree: int, weights: IntArray, state: LayerState, skeleton: TreeSkeleton) -> None:
        """Adopt a tree's weights and state; derive the weighted label statistics or ciphertexts."""
        setup = self._require_setup()
        self._tree = tree
        self._forget_before(tree)
        self._weights = weights
        self._state = state
        self._skeleton = skeleton
        self._candidates, self._won = {}, {}
        self._own_gains, self._kept = {}, {}
        self._stats = None
        if self._labels is not None:
            if setup.n_classes:
                self._stats = class_stats(np.asarray(self._labels, dtype=np.int64), setup.n_classes,
                                          self._weights.astype(np.float64))
            else:
                self._stats = regression_stats(np.asarray(self._labels, dtype=np.float64),
                                               self._weights.astype(np.float64))
            if self.is_label_holder and setup.label_protection == "encrypted":
                self._record_values()
        elif setup.label_protection == "encrypted":
            self._weight_ciphertexts()

    def _frontier_totals(self) -> FloatArray:
        """The label holder's summed label statistics of each frontier node."""
        state = self._state
        if self._stats is None or state is None:
            raise UnexpectedMessage(f"{self.name} holds no labels")
        return node_totals(state.pos, self._stats, state.frontier.size, rows=state.rows)

    def _record_values(self) -> None:
        """``encrypted`` (label holder): the frontier's values, kept in the own tree for
        prediction's last step; nobody is sent them."""
        if self._criterion is None or self._skeleton is None or self._state is None:
            raise UnexpectedMessage(f"{self.name} holds no labels")
        values = self._criterion.leaf_value(self._frontier_totals()).reshape(self._state.frontier.size, -1)
        self._skeleton.set_values(self._state.frontier, values)

    def _forget_before(self, tree: int) -> None:
        """Drop the score requests of finished trees (no resume goes back before ``tree``)."""
        self._answered = {k: a for k, a in self._answered.items() if k[0] >= tree}
        self._sent = {k: s for k, s in self._sent.items() if k[0] >= tree}

    @handles(m.Checkpoint)
    def on_checkpoint(self, sender: str, msg: m.Checkpoint) -> m.Ack:
        """Save this client's own state under the progress marker (``specs``, "Checkpoints")."""
        self._require_setup()
        if self._store is None:
            raise UnexpectedMessage(f"{self.name} keeps no checkpoints")
        work = None
        if msg.layer:
            state = self._require_tree(msg.tree)
            if state.depth != msg.layer or self._skeleton is None:
                raise UnexpectedMessage("checkpoint marker does not match the tree in progress")
            work = WorkState.of(self._skeleton, self._weights, state)
        elif self._state is not None or len(self.trees) != msg.tree:
            raise UnexpectedMessage("checkpoint marker does not match the finished trees")
        self._store.save(ClientState(msg.tree, msg.layer, tuple(TreeState.of(t) for t in self.trees), work,
                                     self._cover_key, tuple(self.reference),
                                     np.asarray(self._ref if work is not None else [], dtype=bool)))
        return m.Ack()

    @handles(m.Resume)
    def on_resume(self, sender: str, msg: m.Resume) -> m.Ack:
        """Restore the checkpoint with the master's progress marker (current or previous file)."""
        self._require_setup()
        if self._store is None:
            raise UnexpectedMessage(f"{self.name} keeps no checkpoints")
        saved = self._store.load(ClientState, (msg.tree, msg.layer))
        journal = self._store.load_journal(ScoreJournal)
        for s in journal.sent if journal is not None else ():  # a restarted client resends these
            self._sent.setdefault((s.tree, s.layer), s)
        self._forget_before(msg.tree)
        trees = [t.tree() for t in saved.trees]
        if len(trees) != msg.tree or any(t.n_features != self._X.shape[1] for t in trees):
            raise ProtocolError("the checkpoint does not belong to this client's run")
        reference = [np.asarray(r, dtype=bool) for r in saved.reference]
        if self.is_label_holder and (len(reference) != len(trees) or any(
                r.shape != (t.n_nodes,) for r, t in zip(reference, trees, strict=True))):
            raise ProtocolError("the checkpoint's reference flags do not match its trees")
        self.trees, self.reference, self._cover_key = trees, reference, saved.cover_key
        self._state, self._skeleton, self._weighted = None, None, []
        if saved.work is not None:
            skeleton, weights, state = saved.work.restore()
            if weights.shape != (self._require_setup().n_samples,):
                raise ProtocolError("the checkpoint does not belong to this client's run")
            self._ref = np.asarray(saved.work_reference, dtype=bool).tolist()
            if self.is_label_holder and len(self._ref) != len(skeleton.left):
                raise ProtocolError("the checkpoint's reference flags do not match its tree")
            self._begin_tree(msg.tree, weights, state, skeleton)
        return m.Ack()

    def _weight_ciphertexts(self) -> None:
        """``Enc(w_i · unit_i) = Enc(unit_i)^{w_i}``: the bootstrap weight as a short exponent."""
        weighted: list[Ciphertext | None] = []
        for c, w in zip(self._enc, self._weights.tolist(), strict=True):
            if w == 0:
                weighted.append(None)
            elif w == 1:
                weighted.append(c)
            else:
                weighted.append(c * w)
                self.counters.weightings += 1
        self._weighted = weighted

    @handles(m.NodeStatsRequest)
    def on_node_stats(self, sender: str, msg: m.NodeStatsRequest) -> m.NodeStats:
        """Layer step 1 (label holder, ``shared`` mode only): purity of each frontier node and
        its value (Reveals: to the master, which nodes are pure and the node values, the complete
        model's leaves; every client holds the labels in this mode anyway).  Refused in
        ``encrypted`` mode: values and purity stay with the label holder."""
        setup = self._require_setup()
        state = self._require_tree(msg.tree)
        if self._stats is None or not self.is_label_holder or self._criterion is None:
            raise UnexpectedMessage(f"{self.name} holds no labels")
        if setup.label_protection == "encrypted":
            raise UnexpectedMessage("node statistics stay with the label holder in encrypted mode")
        totals = self._frontier_totals()
        values = self._criterion.leaf_value(totals).reshape(state.frontier.size, -1)
        return m.NodeStats(np.ascontiguousarray(values), np.asarray(self._criterion.is_pure(totals)))

    def _node_features(self, msg: m.FindSplits, n_frontier: int) -> tuple[IntArray, IntArray, IntArray]:
        """Requested positions, their own local features (padded by repetition to one width)
        and how many each has."""
        positions = np.asarray(msg.positions, dtype=np.int64)
        counts = np.asarray(msg.counts, dtype=np.int64)
        feats = np.asarray(msg.features, dtype=np.int64)
        check_positions(positions, n_frontier)
        if counts.shape != positions.shape or (counts.size and counts.min() < 1) or feats.shape != (counts.sum(),):
            raise ProtocolError("malformed feature lists")
        # own columns are stored in increasing global id: the local index is the rank
        local = np.searchsorted(self._feature_ids, feats)
        if feats.size and (local.max() >= self._feature_ids.size or np.any(self._feature_ids[local] != feats)):
            raise ProtocolError("the master selected a feature this client does not hold")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        segment = np.repeat(np.arange(counts.size), counts)
        if feats.size and np.any((np.diff(feats) <= 0) & (segment[1:] == segment[:-1])):
            raise ProtocolError("a node's features must be distinct and increasing")
        width = int(counts.max()) if counts.size else 0
        j = np.minimum(np.arange(width)[None, :], counts[:, None] - 1)  # pad by repeating the last
        table = local[starts[:, None] + j] if width else np.zeros((positions.size, 0), dtype=np.int64)
        return positions, table.astype(np.int64), counts

    @handles(m.FindSplits)
    def on_find_splits(self, sender: str, msg: m.FindSplits) -> m.LocalBest:
        """Layer step 2 (Algorithm 1 lines 10-15): the local best split of each listed node
        (Reveals: the master learns the best feature's id, not the threshold, and in ``shared``
        mode the best gain; in ``encrypted`` mode every gain is sent as 0 (the label holder keeps
        its own for naming the winners) and a client other than the label holder learns which
        of its candidates is best at each node, never the gain)."""
        setup = self._require_setup()
        state = self._require_tree(msg.tree)
        if msg.layer != state.depth:
            raise UnexpectedMessage("find_splits for another layer")
        positions, table, counts = self._node_features(msg, state.frontier.size)
        self._candidates, self._own_gains = {}, {}
        if positions.size == 0:
            e = np.zeros(0)
            return m.LocalBest(e.astype(np.int64), e.astype(bool), e, e.astype(np.int64))
        if self._stats is not None:
            found, gains, feat, bins, mleft = self._score_plain(state, positions, table, counts)
        elif setup.label_protection == "encrypted":
            found, gains, feat, bins, mleft = self._score_encrypted(state, positions, table, msg)
        else:
            raise UnexpectedMessage(f"{self.name} has no labels to score splits with")
        ok = np.flatnonzero(found)
        self._candidates = {
            p: _Candidate(f, b, ml) for p, f, b, ml in zip(
                positions[ok].tolist(), feat[ok].tolist(), bins[ok].tolist(), mleft[ok].tolist(), strict=True)
        }
        fids = np.where(found, self._feature_ids[feat], -1).astype(np.int64)
        if setup.label_protection == "encrypted":  # the gains stay here (``on_winners_request``)
            self._own_gains = dict(zip(positions[ok].tolist(), gains[ok].tolist(), strict=True))
            gains = np.zeros_like(gains)
        return m.LocalBest(positions, found.astype(bool), np.where(found, gains, 0.0), fids)

    def _score_plain(self, state: LayerState, positions: IntArray, table: IntArray, counts: IntArray
                     ) -> tuple[BoolArray, FloatArray, IntArray, IntArray, BoolArray]:
        """Plaintext histograms of the own features, scored as the central grower does, all
        requested nodes in one pass: a node's row of candidates is padded with ``-1`` (empty
        slots), so within a node the slots keep increasing global id (the central tie-break).
        The histograms stop at the largest bin count of the candidates (then the missing
        slot follows): the bins above it are always empty, so the candidates, the sums and
        their order, and hence the result, are those of the full width, with less work."""
        if self._stats is None or self._binned is None or self._mapper is None or self._criterion is None:
            raise UnexpectedMessage("no statistics to score")
        mapper = self._mapper
        n_bins = np.asarray(mapper.n_bins, dtype=np.int64)
        rank = np.full(state.frontier.size, -1, dtype=np.int64)  # requested node -> its row
        rank[positions] = np.arange(positions.size)
        node = rank[state.pos]
        rows = state.rows
        if positions.size < state.frontier.size:
            inside = np.flatnonzero(node >= 0)
            node, rows = node[inside], rows[inside]
        features = np.where(np.arange(table.shape[1]) < counts[:, None], table, -1)
        top = int(n_bins[table].max())  # bins above every candidate's count stay empty
        hist = build_histograms(self._binned, node, self._stats, positions.size, top, features, rows=rows,
                                missing_bin=mapper.missing_bin)
        setup = self._require_setup()
        cat = np.asarray(mapper.categorical, dtype=bool)
        res = best_splits(hist, self._criterion, categorical=cat, n_bins=n_bins, features=features,
                          min_samples_leaf=setup.min_samples_leaf)
        found, gain, feat = res.found.copy(), res.gain.copy(), res.feature.copy()
        bins, mleft = res.bin.copy(), res.missing_left.copy()
        if setup.label_protection == "encrypted":  # the label holder's own nodes without gain
            fz = np.maximum(features, 0)
            self._cover(hist, features >= 0, n_bins[fz], cat[fz], positions, found, gain, bins, mleft,
                        lambda k, j: int(features[k, j]), feat, f"{state.depth}/{self.name}")
        return found, gain, feat, bins, mleft

    def _cover(self, hist: FloatArray, slots: BoolArray, n_bins: IntArray, categorical: BoolArray,
               positions: IntArray, found: BoolArray, gain: FloatArray, bins: IntArray, mleft: BoolArray,
               feature_of: Callable[[int, int], int], feat: IntArray, label: str) -> None:
        """Cover splits (label holder, ``encrypted``): where no candidate gains, a uniformly random
        valid candidate is reported as found with gain 0, so the scored client cannot tell a
        pure or gainless node from one that splits (``specs``, "Cover splits").  In place."""
        setup = self._require_setup()
        need = np.flatnonzero(~found)
        if need.size == 0:
            return
        channel = np.ones(hist.shape[-1]) if setup.n_classes else np.eye(hist.shape[-1])[0]
        streams: list[RandomSource] = [KeyedRandom(self._cover_key, f"split/{self._tree}/{label}/{int(positions[k])}")
                                       for k in need.tolist()]
        ok, slot, b, ml = random_valid_splits(hist[need], slots[need], n_bins[need], categorical[need], channel,
                                              setup.min_samples_leaf, streams)
        for i, k in enumerate(need.tolist()):
            if ok[i]:
                found[k], gain[k], bins[k], mleft[k] = True, 0.0, b[i], ml[i]
                feat[k] = feature_of(k, int(slot[i]))

    def _score_encrypted(self, state: LayerState, positions: IntArray, table: IntArray, msg: m.FindSplits
                         ) -> tuple[BoolArray, FloatArray, IntArray, IntArray, BoolArray]:
        """Encrypted per-bin label statistics of every candidate, packed, re-randomised and
        scored by the label holder (``specs/federated_forest.md``, "Encrypted label statistics")."""
        if self._pk is None or self._layout is None or self._binned is None or self._mapper is None:
            raise UnexpectedMessage("encrypted labels have not arrived")
        setup = self._require_setup()
        pk = self._pk
        groups = state.samples_of(positions)
        entry_node: list[int] = []
        entry_feat: list[int] = []
        for k, p in enumerate(positions.tolist()):
            for f in dict.fromkeys(table[k].tolist()):  # distinct, in increasing global id
                entry_node.append(p)
                entry_feat.append(f)
        asked, key_id = _digest(msg), hashlib.sha256(pk.to_bytes()).digest()
        sent = self._sent.get((msg.tree, msg.layer))
        if sent is None or sent.asked != asked or sent.public_key != key_id:
            request = self._pack_request(state, positions, groups, table, msg)
            sent = SentScore(msg.tree, msg.layer, asked, key_id, request)
            self._sent[(msg.tree, msg.layer)] = sent
            if self._store is not None:  # on disk before it leaves: a restart resends these bytes
                self._store.save_journal(ScoreJournal(tuple(self._sent.values())))
        reply = self.call(setup.label_holder, sent.request, expect=m.ScoreReply)
        if not np.array_equal(reply.positions, positions):
            raise ProtocolError("the label holder scored other nodes")
        entries = np.asarray(reply.entries, dtype=np.int64)
        found = np.asarray(reply.found, dtype=bool)
        if entries.shape != positions.shape or (found.any() and (
                entries[found].min() < 0 or entries[found].max() >= len(entry_feat))):
            raise ProtocolError("the label holder named an unknown candidate")
        feat = np.asarray(entry_feat, dtype=np.int64)[np.where(found, entries, 0)]
        if np.any(found & (np.asarray(entry_node)[np.where(found, entries, 0)] != positions)):
            raise ProtocolError("the label holder chose a candidate of another node")
        gains = np.zeros(positions.size, dtype=np.float64)  # the label holder tells the master
        return found, gains, feat, np.asarray(reply.bins, dtype=np.int64), np.asarray(reply.missing_left, dtype=bool)

    def _pack_request(self, state: LayerState, positions: IntArray, groups: list[IntArray], table: IntArray,
                      msg: m.FindSplits) -> m.ScoreRequest:
        """Each candidate's encrypted per-bin statistics, packed and re-randomised."""
        if self._pk is None or self._layout is None or self._binned is None or self._mapper is None:
            raise UnexpectedMessage("encrypted labels have not arrived")
        pk, layout, mapper = self._pk, self._layout, self._mapper
        per_ct = layout.bins_per_plaintext(pk.bits)
        zero = Ciphertext(pk, 1)
        entry_node: list[int] = []
        entry_feat: list[int] = []
        chunks: list[int] = []
        packed: list[int] = []
        for k, p in enumerate(positions.tolist()):
            samples = state.rows[groups[k]]
            for f in dict.fromkeys(table[k].tolist()):  # distinct, in increasing global id
                nb = self._padded_bins(f)
                bins = self._binned[samples, f].astype(np.int64)
                bins = np.where(bins == mapper.missing_bin, nb, bins)  # missing after the padded bins
                sums = bin_sums(self._weighted, samples, bins, nb, self.counters)
                cts = pack_bins(sums, per_ct, layout, zero, self.counters, mode=self._mode, rng=self._rng)
                packed += cts
                entry_node.append(p)
                entry_feat.append(f)
                chunks.append(len(cts))
        return m.ScoreRequest(
            msg.tree, msg.layer, np.asarray(entry_node, dtype=np.int64),
            np.asarray([self._padded_bins(f) for f in entry_feat], dtype=np.int64),
            np.asarray([mapper.categorical[f] for f in entry_feat], dtype=bool),
            np.asarray(chunks, dtype=np.int64), tuple(packed))

    def _padded_bins(self, feature: int) -> int:
        """The bin count a candidate is sent with: this client's largest bin count, the same for
        every feature, the bins above the feature's own count empty (encryptions of zero), so
        that the label holder cannot name a candidate by its bin count (it learns that one number
        per client).  ``best_splits`` reports the same split: the empty bins repeat the partition
        of the last real bin, and ties go to the lowest bin."""
        del feature
        if self._mapper is None:
            raise UnexpectedMessage(f"{self.name} has no features")
        return int(max(self._mapper.n_bins))

    @handles(m.ScoreRequest)
    def on_score_request(self, sender: str, msg: m.ScoreRequest) -> m.ScoreReply:
        """Layer step 2b (label holder): decrypt the packed statistics, score each node's
        candidates with ``best_splits`` (Reveals: the per-bin label statistics of the sender's
        candidates, their number and bin counts; not which features they are).

        One request per sender, tree and layer: the scoring oracle is single-use.  A resend
        (the sender or the master restarted) is answered from the kept reply if it is byte
        for byte the request already answered, and refused otherwise."""
        if self._sk is None or self._layout is None or self._criterion is None:
            raise UnexpectedMessage(f"{self.name} cannot score encrypted statistics")
        setup = self._require_setup()
        state = self._require_tree(msg.tree)
        if msg.layer != state.depth:
            raise UnexpectedMessage("score request for another layer")
        digest = _digest(msg)
        answered = self._answered.get((msg.tree, msg.layer, sender))
        if answered is not None:
            if answered.digest != digest:
                raise UnexpectedMessage(f"{sender} already sent other candidates for this layer "
                                        "(a resend must repeat them byte for byte)")
            return answered.reply
        node = np.asarray(msg.entry_node, dtype=np.int64)
        nbins = np.asarray(msg.entry_bins, dtype=np.int64)
        cat = np.asarray(msg.entry_categorical, dtype=bool)
        chunks = np.asarray(msg.chunks, dtype=np.int64)
        n_entries = node.size
        if not (nbins.shape == cat.shape == chunks.shape == (n_entries,)) or n_entries == 0:
            raise ProtocolError("malformed score request")
        max_bins = setup.max_bins
        per_ct = self._layout.bins_per_plaintext(self._sk.public_key.bits)
        if nbins.min() < 1 or nbins.max() > max_bins or np.any(chunks != -(-(nbins + 1) // per_ct)):
            raise ProtocolError("a candidate's bin count or chunk count is out of range")
        if int(chunks.sum()) != len(msg.ciphertexts):
            raise ProtocolError("wrong number of packed ciphertexts")
        if node.min() < 0 or node.max() >= state.frontier.size or np.any(np.diff(node) < 0):
            raise ProtocolError("candidates must be grouped by increasing node position")
        pk = self._sk.public_key
        plain: list[int] = []
        for v in msg.ciphertexts:
            plain.append(self._sk.decrypt_residue(Ciphertext(pk, v)))  # raises InvalidCiphertext
        self.counters.decryptions += len(plain)
        positions, hist, table = candidate_histograms(plain, self._layout, node, nbins, chunks, per_ct, max_bins)
        res = best_splits(hist, self._criterion, categorical=cat, n_bins=nbins, features=table,
                          min_samples_leaf=setup.min_samples_leaf)
        found, gain, feat = res.found.copy(), res.gain.copy(), res.feature.astype(np.int64)
        bins, mleft = res.bin.astype(np.int64), res.missing_left.copy()
        first = np.ones(table.shape, dtype=bool)  # each entry's first slot (shorter nodes repeat their last)
        first[:, 1:] = table[:, 1:] != table[:, :-1]
        self._cover(hist, first, nbins[table], cat[table], positions, found, gain, bins, mleft,
                    lambda k, j: int(table[k, j]), feat, f"{msg.layer}/{sender}")
        reply = m.ScoreReply(positions.astype(np.int64), found, feat, bins, mleft)
        self._answered[(msg.tree, msg.layer, sender)] = _Answer(
            digest, reply, positions[found].astype(np.int64), gain[found].astype(np.float64))
        return reply

    @handles(m.WinnersRequest)
    def on_winners_request(self, sender: str, msg: m.WinnersRequest) -> m.Winners:
        """Layer step 2c (label holder, ``encrypted``): name each offered node's winning client:
        where the central forest splits (not pure, in the reference tree, a positive gain) the
        client of the best gain, ties to the earliest in the master's order (increasing feature
        id, the central tie-break); elsewhere a uniformly random offering client, a cover split
        whose subtree is not part of the model (Reveals: to the master, the winner only: no
        gain, no purity, no reference flag; to the label holder, which clients offered a
        candidate at each node and the order of their proposed feature ids).

        The offers must be exactly those the label holder saw: its own valid candidates and
        those it reported found in each client's score reply."""
        setup = self._require_setup()
        state = self._require_tree(msg.tree)
        if not self.is_label_holder or setup.label_protection != "encrypted" or self._criterion is None:
            raise UnexpectedMessage(f"{self.name} names no winners")
        if msg.layer != state.depth:
            raise UnexpectedMessage("winners requested for another layer")
        positions = np.asarray(msg.positions, dtype=np.int64)
        check_positions(positions, state.frontier.size)
        counts = np.asarray(msg.counts, dtype=np.int64)
        clients = np.asarray(msg.clients, dtype=np.int64)
        names = setup.client_names
        if clients.max() >= len(names):
            raise ProtocolError("unknown client in the offers")
        starts = np.concatenate([[0], np.cumsum(counts)]).tolist()
        offers = {p: clients[starts[k]:starts[k + 1]].tolist() for k, p in enumerate(positions.tolist())}
        if any(len(set(o)) != len(o) for o in offers.values()):
            raise ProtocolError("a client offered twice at one node")
        gains: dict[int, dict[int, float]] = {self._index: self._own_gains}
        for i, name in enumerate(names):
            if i != self._index:
                answer = self._answered.get((msg.tree, msg.layer, name))
                gains[i] = {} if answer is None else dict(zip(answer.positions.tolist(), answer.gains.tolist(),
                                                              strict=True))
        for i, g in gains.items():
            if {p for p, o in offers.items() if i in o} != set(g):
                raise ProtocolError(f"the offers of {names[i]} differ from the candidates the label holder saw")
        pure = np.asarray(self._criterion.is_pure(self._frontier_totals()), dtype=bool)
        real = ~pure & np.asarray(self._ref, dtype=bool)[state.frontier]
        won: list[int] = []
        self._kept = {}
        for p, o in offers.items():
            top = max(gains[i][p] for i in o)
            if real[p] and top > 0:
                won.append(next(i for i in o if gains[i][p] == top))
                self._kept[p] = True
            else:
                choice = KeyedRandom(self._cover_key, f"winner/{msg.tree}/{int(state.frontier[p])}")
                won.append(o[choice.randbelow(len(o))])
                self._kept[p] = False
        return m.Winners(np.asarray(won, dtype=np.int64))

    @handles(m.ApplySplit)
    def on_apply_split(self, sender: str, msg: m.ApplySplit) -> m.Partition:
        """Layer step 3 (Algorithm 1 line 19): split the nodes this client won
        (Reveals: the master learns the partition of each)."""
        state = self._require_tree(msg.tree)
        positions = np.asarray(msg.positions, dtype=np.int64)
        check_positions(positions, state.frontier.size)
        if msg.layer != state.depth or not set(positions.tolist()) <= set(self._candidates):
            raise UnexpectedMessage("apply_split for a node without a local candidate")
        groups = state.samples_of(positions)
        cands = [self._candidates[p] for p in positions.tolist()]
        left = self._goes_left(cands, groups, state)
        self._won = dict(zip(positions.tolist(), cands, strict=True))
        self._won_left = left
        return m.Partition(left)

    def _goes_left(self, cands: list[_Candidate], groups: list[IntArray], state: LayerState) -> BoolArray:
        """Which samples of each node go left under the node's own split (the grower's binned
        rule), concatenated over the nodes."""
        if self._binned is None or self._mapper is None:
            raise UnexpectedMessage("no features")
        if not groups:
            return np.zeros(0, dtype=bool)
        mapper = self._mapper
        sizes = [g.size for g in groups]
        rows = state.rows[np.concatenate(groups)]
        feat = np.repeat([c.feature for c in cands], sizes)
        return goes_left_binned(self._binned[rows, feat], np.repeat([c.bin for c in cands], sizes),
                                np.asarray(mapper.categorical, dtype=bool)[feat],
                                np.repeat([c.missing_left for c in cands], sizes), mapper.missing_bin)

    @handles(m.LayerPartition)
    def on_layer_partition(self, sender: str, msg: m.LayerPartition) -> m.Ack:
        """Layer step 4: apply the broadcast partitions; store feature and threshold only at
        the nodes this client won (paper Section 4.1, "Model Storage")."""
        state = self._require_tree(msg.tree)
        if msg.layer != state.depth or self._skeleton is None:
            raise UnexpectedMessage("partition for another layer")
        positions = np.asarray(msg.positions, dtype=np.int64)
        check_positions(positions, state.frontier.size)
        if not set(self._won) <= set(positions.tolist()):
            raise ProtocolError("a split this client applied is missing from the broadcast")
        skeleton, mapper, won = self._skeleton, self._mapper, self._won
        own: list[OwnSplit] = []  # feature and threshold only at the nodes this client won
        if won:
            if mapper is None:
                raise UnexpectedMessage("no features")
            own = [OwnSplit(int(state.frontier[p]), c.feature, mapper.threshold(c.feature, c.bin),
                            mapper.categorical[c.feature], c.missing_left) for p, c in sorted(won.items())]
        provider = np.where(np.isin(positions, list(won)), self._index, -1).astype(np.int64)
        pos_list = positions.tolist()

        if won:  # the broadcast must carry this client's own partitions unchanged
            groups = state.samples_of(positions)
            offsets = np.cumsum([0] + [g.size for g in groups])
            broadcast = np.asarray(msg.left)
            mine = [broadcast[offsets[i]:offsets[i + 1]] for i, p in enumerate(pos_list) if p in won]
            if sum(x.size for x in mine) != self._won_left.size or \
                    not np.array_equal(np.concatenate(mine), self._won_left):
                raise ProtocolError("the broadcast partition differs from this client's split")
        setup = self._require_setup()
        encrypted = setup.label_protection == "encrypted"
        if self.is_label_holder and encrypted and set(pos_list) != set(self._kept):
            raise ProtocolError("the nodes split differ from those the label holder named winners for")
        state.advance(positions, np.asarray(msg.left), self._weights,
                      lambda nodes, lw, rw: skeleton.split_layer(nodes, lw, rw, provider=provider, own=own))
        if self.is_label_holder:  # children in split order, left then right
            for p in pos_list:
                kept = self._kept[p] if encrypted else True
                self._ref += [kept, kept]
            if encrypted:
                self._record_values()
        self._candidates, self._won, self._kept, self._own_gains = {}, {}, {}, {}
        return m.Ack()

    @handles(m.TreeEnd)
    def on_tree_end(self, sender: str, msg: m.TreeEnd) -> m.Ack:
        """Tree end (Algorithm 1 line 31): keep the partial tree ``T_i``."""
        self._require_tree(msg.tree)
        if self._skeleton is None:
            raise UnexpectedMessage("no tree")
        self.trees.append(self._skeleton.build())
        if self.is_label_holder:
            self.reference.append(np.asarray(self._ref, dtype=bool))
        self._state, self._skeleton, self._weighted = None, None, []
        return m.Ack()

    # ------------------------------------------------------------------ model part
    def model_state(self) -> ClientModel:
        """What this client keeps of the fitted forest: its partial trees (its own splits'
        features and thresholds), the run's settings and, label holder, the reference flags (local)."""
        setup = self._require_setup()
        if not self.trees:
            raise UnexpectedMessage(f"{self.name} holds no trained trees")
        return ClientModel(setup, self._feature_ids, tuple(TreeState.of(t) for t in self.trees),
                           tuple(self.reference), self.is_label_holder)

    def restore_model(self, model: ClientModel) -> None:
        """Adopt a saved part instead of training (a predict-only run, built without rows; local)."""
        setup = model.setup
        if not np.array_equal(np.asarray(model.feature_ids, dtype=np.int64), self._feature_ids) \
                or self.name not in setup.client_names:
            raise ProtocolError(f"the saved part is not {self.name}'s over its columns")
        trees = [t.tree() for t in model.trees]
        reference = [np.asarray(r, dtype=bool) for r in model.reference]
        holder = setup.label_holder == self.name
        if not trees or model.label_holder != holder or any(t.n_features != self._feature_ids.size for t in trees) \
                or (holder and (len(reference) != len(trees) or any(
                    r.shape != (t.n_nodes,) for r, t in zip(reference, trees, strict=True)))):
            raise DecodeError("inconsistent partial trees in a model file")
        self._setup, self._index = setup, setup.client_names.index(self.name)
        self._criterion = make_criterion(setup.criterion)
        self.trees, self.reference, self._holds_labels = trees, reference, holder

    # ------------------------------------------------------------------ prediction
    def load_test(self, X: npt.ArrayLike, ids: Sequence[object]) -> None:
        """Local: the own columns of the test rows (same column order as training)."""
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape != (len(ids), self._feature_ids.size):
            raise ParameterError("test X must have one row per id and the client's columns")
        hashed = hash_ids(self._id_key, ids)
        self._test_hashed = hashed
        self._X_test = Xa[:, self._cols][canonical_order(hashed)]

    @handles(m.TestIds)
    def on_test_ids(self, sender: str, msg: m.TestIds) -> m.ClientTestIds:
        return m.ClientTestIds(b"".join(self._test_hashed))

    @handles(m.PredictRequest)
    def on_predict(self, sender: str, msg: m.PredictRequest) -> m.LeafSets:
        """One-round prediction (Algorithm 3): per tree, the leaves each test sample can reach
        in the partial tree, both branches at withheld nodes (Reveals: to the master, the side
        of each of this client's splits every test sample takes)."""
        n_test = self._X_test.shape[0]
        bits, n_leaves = [], []
        for t in self.trees:
            reach = t.reachable_leaves(self._X_test)
            n_leaves.append(reach.shape[1])
            bits.append(np.packbits(reach, axis=None))
        return m.LeafSets(n_test, np.asarray(n_leaves, dtype=np.int64), tuple(bits))

    @handles(m.LeafValuesRequest)
    def on_leaf_values(self, sender: str, msg: m.LeafValuesRequest) -> m.ForestOutput:
        """Prediction's last step (label holder, ``encrypted``): map each leaf to the reference
        leaf it grew from (cover subtrees are not part of the model) and answer the forest output
        of each test sample from the values it kept (Reveals: the label holder learns the leaf,
        cover leaves included, each test sample reaches in each tree; the master learns the
        forest output only)."""
        setup = self._require_setup()
        if not self.is_label_holder or setup.label_protection != "encrypted":
            raise UnexpectedMessage(f"{self.name} keeps no leaf values")
        leaves = np.asarray(msg.leaves)
        n_test = self._X_test.shape[0]
        if not self.trees or leaves.dtype.kind not in "iu" or leaves.shape != (len(self.trees), n_test):
            raise ProtocolError("leaf values requested for the wrong trees or test rows")
        mapped = np.empty(leaves.shape, dtype=np.int64)
        for k, (t, r, row) in enumerate(zip(self.trees, self.reference, leaves, strict=True)):
            if row.size and (row.min() < 0 or row.max() >= t.n_nodes or np.any(t.left[row] != -1)):
                raise ProtocolError("leaf values requested for a node that is not a leaf")
            mapped[k] = reference_ancestor(t, r)[row]
        return m.ForestOutput(forest_output(self.trees, mapped, classification=bool(setup.n_classes)))

    @handles(m.RouteRequest)
    def on_route(self, sender: str, msg: m.RouteRequest) -> m.RouteReply:
        """Classical prediction: one node's test, by :meth:`securetrees.trees.Tree.goes_left`."""
        if not 0 <= msg.tree < len(self.trees):
            raise ProtocolError("unknown tree")
        t = self.trees[msg.tree]
        k = msg.node
        if not 0 <= k < t.n_nodes or t.left[k] == -1 or t.withheld[k]:
            raise ProtocolError(f"{self.name} does not hold the split of node {k}")
        idx = np.asarray(msg.samples, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self._X_test.shape[0]):
            raise ProtocolError("test sample index out of range")
        return m.RouteReply(t.goes_left(self._X_test[idx, t.feature[k]], k))
