"""The host role: labels, host layers, the Paillier key, split search on masked aggregates.

``specs/hybridtree.md``: per tree the host grows its layers alone (H1), packs
and encrypts each instance's count, gradient and hessian (H2, H3), and for each
guest layer asks every guest for masked encrypted histograms (G1), decrypts only
their aggregate, chooses the splits with the central trainer's code (G2) and
collects the routing (G3).  Inference follows Section 4.2.

The host drives the whole run: :meth:`Host.fit` bins its own columns, sets up the
guests, and runs every boosting round (gradients, host layers, guest layers,
score update); :meth:`Host.predict` runs inference.  It needs only its own data
(host columns, labels, which guest holds which instance ID) and the network, so
it runs alone in its own process.  Progress goes to the logger
``securetrees.hybridtree.host`` and to an optional callback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees._nt import mpz
from securetrees.encoding import FixedPoint
from securetrees.errors import (
    DecodeError,
    EncodingOverflowError,
    NotFittedError,
    ParameterError,
    PartyUnavailable,
    ProtocolError,
    UnexpectedMessage,
)
from securetrees.paillier import Ciphertext, Mode, PrivateKey, PublicKey
from securetrees.paillier.batch import decrypt_residues, encrypt_many, owner_encrypt_many
from securetrees.paillier.prefill import BackgroundPool, role_pool
from securetrees.protocols.hybridtree.boosting import (
    FitProgress,
    Loss,
    Targets,
    gradients,
    probabilities,
    sigmoid,
    softmax,
    targets,
)
from securetrees.protocols.hybridtree.checkpoint import HostState
from securetrees.protocols.hybridtree.coarsen import base_ends, coarsen_hist, group_bounds, node_groups
from securetrees.protocols.hybridtree.layout import SlotLayout
from securetrees.protocols.hybridtree.messages import (
    Ack,
    BuildNode,
    Checkpoint,
    Directory,
    GradientBlock,
    Gradients,
    HistogramRequest,
    MaskedHistogram,
    PlainGradients,
    PredictLeaves,
    PredictRequest,
    PredictValues,
    Routing,
    Setup,
    SetupReply,
    SplitChoice,
    SplitDecision,
    Values,
)
from securetrees.protocols.hybridtree.model import HostModel, RecordState
from securetrees.protocols.hybridtree.params import HybridTreeParams
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, Network, Party
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.trees import BinMapper, GradientGain, GrowParams, Tree, best_splits, grow_tree, persistence

__all__ = ["ENCRYPT_CHUNK", "Host", "TreeRecord", "owners", "sigmoid", "softmax"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
STATS = 3  # (count, G·2^f, H·2^f)
Ends = tuple[int, ...]  # a grouping of a feature's bins: each group's last bin
#: Gradients encrypted between two progress events (about 1.5 s of CPU at 2048 bits).
ENCRYPT_CHUNK = 2048
_log = logging.getLogger("securetrees.hybridtree.host")
ProgressCallback = Callable[[FitProgress], None]


@dataclass
class TreeRecord:
    """The host's view of one tree: host layers in full, guest splits withheld.

    Node ids: the host subtree's ids first (``host_tree``), guest nodes appended
    breadth first.  ``value[k]`` is the Eq. 8 value (meaningful at leaves);
    ``host_leaf[k]`` the host leaf above node ``k`` (-1 inside the host layers).
    """

    host_tree: Tree
    left: list[int]
    right: list[int]
    missing_left: list[bool]
    guest_feature: list[int]
    guest_bin: list[int]
    value: list[float]
    host_leaf: list[int]
    paper: bool = False

    @classmethod
    def from_host_tree(cls, tree: Tree, paper: bool = False) -> TreeRecord:
        n = tree.n_nodes
        leaves = set(tree.leaves.tolist())
        return cls(tree, tree.left.tolist(), tree.right.tolist(), [False] * n, [-1] * n,
                   [-1] * n, [0.0] * n, [k if k in leaves else -1 for k in range(n)], paper)

    def add_children(self, node: int, feature: int, bin_: int, missing_left: bool) -> tuple[int, int]:
        ids = []
        for _ in range(2):
            ids.append(len(self.left))
            self.left.append(-1)
            self.right.append(-1)
            self.missing_left.append(False)
            self.guest_feature.append(-1)
            self.guest_bin.append(-1)
            self.value.append(0.0)
            self.host_leaf.append(self.host_leaf[node])
        self.left[node], self.right[node] = ids
        self.missing_left[node] = missing_left
        self.guest_feature[node], self.guest_bin[node] = feature, bin_
        return ids[0], ids[1]

    def is_leaf(self, node: int) -> bool:
        return self.left[node] < 0

    def follow_missing(self, node: int) -> int:
        """The leaf reached from ``node`` by an instance with no guest values."""
        while self.left[node] >= 0:
            node = self.left[node] if self.missing_left[node] else self.right[node]
        return node

    @property
    def n_guest_splits(self) -> int:
        return sum(1 for f in self.guest_feature if f >= 0)


@dataclass
class _Layer:
    """Working state of one guest layer."""

    frontier: list[int]
    hist: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict)
    #: The guest features whose histogram the host holds, per node (the others were withheld).
    known: dict[int, BoolArray] = field(default_factory=dict)
    #: Per node and built feature, its groups of bins (their last bins).
    groups: dict[int, dict[int, Ends]] = field(default_factory=dict)


def owners(n_rows: int, guest_rows: Sequence[npt.ArrayLike]) -> IntArray:
    """The owning guest of each instance ID ``0..n_rows-1`` from the ID linkage (which IDs each
    guest holds): the lowest-numbered guest holding it, or -1 (spec, "Roles")."""
    owner = np.full(n_rows, -1, dtype=np.int64)
    for u in range(len(guest_rows) - 1, -1, -1):
        owner[np.asarray(guest_rows[u], dtype=np.int64)] = u
    return owner


def check_matrix(X: npt.ArrayLike) -> FloatArray:
    """``X`` as a float matrix; NaN (missing) kept, infinities refused with :class:`ParameterError`."""
    Xa = np.asarray(X, dtype=np.float64)
    if Xa.ndim != 2:
        raise ParameterError("X must be two-dimensional")
    if np.isinf(Xa).any():
        raise ParameterError("X holds infinite values (NaN means missing; infinities are refused)")
    return Xa


class Host(Party):
    """The label holder.  ``owner[i]`` is the index (into ``guests``) of the guest that owns
    training instance ``i`` (ID ``i``), or -1 if no guest holds it (see :func:`owners`).

    The host bins its own columns ``X`` (quantile bins, ``params.max_bins``; ``categorical``
    flags per column) unless given ``mapper``.  Secure mode needs the host's Paillier key
    pair ``keypair``; :meth:`fit` then trains and :meth:`predict` infers.

    ``executor`` (optional) runs H3's encryptions (the public key's obfuscators, or key-owner
    CRT with ``trusted_workers``) and, only with ``trusted_workers``, G2's decryptions
    (``specs/batch_executors.md``, "Roles").

    ``local_ids``: the instance IDs sent to guest ``u`` are its own numbering, the rank of each
    row among the rows guest ``u`` owns (``0, 1, ...``; at inference among the test rows it owns),
    instead of the host's row positions, which a guest then never learns.  A deployment numbers
    each guest's rows by their place in its PSI order and orders the host's rows so that each
    guest's rows follow that order (``deploy.arrange``).

    ``background_pool`` (opt-in) has H3's obfuscators computed ahead, during the previous tree, by
    the executor's workers or a dedicated process (``specs/batch_executors.md``, "Randomness pools
    in the roles")."""

    role = "host"

    def __init__(
        self, name: str, network: Network, *, params: HybridTreeParams, guests: Sequence[str],
        X: npt.ArrayLike, owner: npt.ArrayLike, mapper: BinMapper | None = None,
        categorical: Sequence[bool] | None = None,
        keypair: tuple[PublicKey, PrivateKey] | None = None, rng: RandomSource = SYSTEM_RANDOM,
        executor: Executor | None = None, trusted_workers: bool = False, local_ids: bool = False,
        background_pool: bool = False, checkpoint: CheckpointStore | None = None,
    ) -> None:
        super().__init__(name, network)
        self._store = checkpoint
        self.params = params
        self.executor = executor
        self.trusted_workers = bool(trusted_workers)
        self.local_ids = bool(local_ids)
        self.background_pool = bool(background_pool)
        self._prefill: BackgroundPool | None = None
        self._trees_left = 0
        self.guests = tuple(guests)
        if len(set(self.guests)) != len(self.guests):
            raise ParameterError("guest names must be distinct")
        if params.mode != "paper" and len(self.guests) < params.min_guests:
            raise ParameterError(
                f"HybridTree's masked aggregation needs at least {params.min_guests} guests, "
                f"got {len(self.guests)}"
            )
        self._X = check_matrix(X)
        self._owner = np.asarray(owner, dtype=np.int64)
        if self._owner.shape != (self._X.shape[0],) or self._owner.max(initial=-1) >= len(guests):
            raise ParameterError("owner must give one guest index (or -1) per instance")
        if mapper is None:
            mapper = BinMapper.fit(self._X, max_bins=params.max_bins, categorical=categorical)
        elif categorical is not None:
            raise ParameterError("give the host's bins (mapper) or its categorical flags, not both")
        self._mapper = mapper
        self._binned = mapper.transform(self._X)
        self._rng = rng
        if params.mode == "secure" and keypair is None:
            raise ParameterError("secure mode needs the host's Paillier key pair")
        self._pk: PublicKey | None = keypair[0] if keypair is not None else None
        self._sk: PrivateKey | None = keypair[1] if keypair is not None else None
        self._active = set(self.guests)
        self._crit = GradientGain(params.reg_lambda, params.second_order)
        self._guest_n_bins = np.zeros(0, dtype=np.int64)
        self._guest_cat = np.zeros(0, dtype=bool)
        self._held = np.zeros((len(self.guests), 0), dtype=bool)  # guest u holds feature f
        self.records: list[TreeRecord] = []
        #: Operation counts for the benchmark's floor: encryptions and decryptions.
        self.op_counts = {"encrypt": 0, "decrypt": 0}
        #: Nodes left as leaves: no guest feature with ``min_guests`` contributing guests
        #: (``fallback_nodes``), or none with ``min_node_size`` instances (``small_nodes``).
        self.fallback_nodes = 0
        self.small_nodes = 0
        self.dropped: list[str] = []
        self._batch = 0
        self._set_up = False
        self._progress: ProgressCallback | None = None
        self._position = (0, 0)  # (tree, trees) of the run in progress, for the progress events
        self._targets: Targets | None = None
        self._loss: Loss = "logistic"
        #: CPU seconds of this process per tree (in one process: every party's work).
        self.tree_cpu_seconds: list[float] = []

    # -- setup -----------------------------------------------------------------------------
    def setup(self) -> None:
        """Setup steps 1-2: send the key and roster, relay the guests' agreement keys."""
        self._set_up = True
        session = self._rng.token_bytes(16)
        pk_bytes = self._pk.to_bytes() if self._pk is not None else b""
        replies = self.call_many(
            {g: Setup(session, pk_bytes, self.guests, self.params.mode) for g in self.guests},
            expect=SetupReply,
        )
        schemas = {(r.n_bins, r.categorical) for r in replies.values()}
        if any(len(r.held) != len(r.n_bins) for r in replies.values()):
            raise ProtocolError("a guest declared held features outside the guest space")
        if len(schemas) != 1:
            raise ProtocolError("the guests do not agree on the guest feature space and its bins")
        n_bins, cat = schemas.pop()
        if len(n_bins) == 0:
            raise ProtocolError("the guests hold no features")
        self._guest_n_bins = np.asarray(n_bins, dtype=np.int64)
        self._guest_cat = np.asarray(cat, dtype=bool)
        self._held = np.array([replies[g].held for g in self.guests], dtype=bool)
        if self.params.mode == "secure":
            publics = tuple(replies[g].public for g in self.guests)
            self.call_many({g: Directory(self.guests, publics) for g in self.guests}, expect=Ack)

    # -- helpers ---------------------------------------------------------------------------
    def _live(self, replies: dict[str, Message], asked: Sequence[str]) -> None:
        for g in asked:
            if g not in replies and g in self._active:
                self._active.discard(g)
                self.dropped.append(g)
        if self.params.mode != "paper" and len(self._active) < self.params.min_guests:
            raise PartyUnavailable(  # restart the guests that dropped out, then resume (checkpoints)
                f"only {len(self._active)} guests remain ({', '.join(self.dropped)} did not answer); masked "
                f"aggregation needs {self.params.min_guests}"
            )

    def _wire_ids(self, rows: IntArray, owner: IntArray, guest: int) -> IntArray:
        """The instance IDs guest ``guest`` is sent for its rows ``rows`` (sorted host positions):
        the positions themselves, or with ``local_ids`` their ranks among the rows ``owner`` gives
        that guest (sorted too, so the guest's sorted-ID order is the host's order)."""
        if not self.local_ids:
            return rows
        return np.searchsorted(np.flatnonzero(owner == guest), rows).astype(np.int64)

    def _effective_owner(self) -> IntArray:
        active = np.array([g in self._active for g in self.guests] + [False])
        return np.where(active[self._owner], self._owner, -1)

    def _feature_rules(self, ids: IntArray, owner: IntArray) -> tuple[BoolArray, BoolArray, IntArray]:
        """Per guest feature f of a node: (at least ``min_guests`` contributing guests, i.e.
        guests owning instances of the node and holding f; at least ``min_node_size`` of the
        node's instances owned by guests holding f; that number of instances).  Spec: "Too few
        guests", "Subset-sum inference"; the host knows both counts (ownership and the declared
        held features)."""
        o = owner[ids]
        o = o[o >= 0]
        contributors = self._held[np.unique(o)].sum(axis=0)
        held_rows = np.asarray(self._held[o].sum(axis=0), dtype=np.int64)
        return (contributors >= self.params.min_guests, held_rows >= self.params.min_node_size,
                held_rows)

    def _withheld(self, rules: tuple[BoolArray, BoolArray], known: BoolArray) -> None:
        """Count a node left as a leaf: 1 in ``small_nodes`` if no (known) feature has enough
        instances, else 1 in ``fallback_nodes`` (``few_guests="raise"`` refuses)."""
        if not (rules[1] & known).any():
            self.small_nodes += 1
        else:
            self._count_fallback(1)

    # -- progress --------------------------------------------------------------------------
    def _report(self, step: str, done: int = 1, total: int = 1) -> None:
        """One progress event: to the logger (INFO when a tree is done, DEBUG otherwise) and to
        the callback of :meth:`fit`, if any."""
        event = FitProgress(self._position[0], self._position[1], step, done, total)
        _log.log(logging.INFO if step == "tree done" else logging.DEBUG, "%s", event.describe())
        if self._progress is not None:
            self._progress(event)

    # -- the boosting loop -----------------------------------------------------------------
    def fit(
        self, y: npt.ArrayLike, *, n_estimators: int, loss: Loss = "logistic",
        base_score: str = "prior", progress: ProgressCallback | None = None,
    ) -> Host:
        """Train: set up the guests, then ``n_estimators`` rounds of one tree per output (H1-G3),
        each adding ``learning_rate`` times its leaf values to the scores.  ``y`` holds the label
        of each training instance (ID ``i`` in row ``i``); ``loss`` is ``"logistic"`` (classes,
        softmax for more than two) or ``"squared"``.  ``progress`` receives a
        :class:`FitProgress` after each step (and during encryption)."""
        if isinstance(n_estimators, bool) or not isinstance(n_estimators, int) or n_estimators < 1:
            raise ParameterError("n_estimators must be a positive integer")
        if self.records:
            raise ParameterError("this host has already trained a model")
        if self._store is not None and self._store.latest(HostState) is not None:
            # the guests would refuse the new run's requests for the (tree, layer) slots they answered
            raise ParameterError(f"{self.name}'s checkpoint folder holds a fit already: finish it with resume "
                                 "(securetrees operator resume); a new fit needs an empty checkpoint_dir")
        t = targets(y, self._X.shape[0], loss, base_score)  # type: ignore[arg-type]
        return self._run(t, loss, n_estimators, progress, None)

    def resume(
        self, y: npt.ArrayLike, *, n_estimators: int, loss: Loss = "logistic",
        base_score: str = "prior", progress: ProgressCallback | None = None,
    ) -> Host:
        """Finish an interrupted :meth:`fit` (same arguments) from this host's latest checkpoint, or
        from the start without one: set up again (a fresh session and fresh agreement keys), then
        the remaining rounds.  The model equals an uninterrupted fit's (``specs/hybridtree.md``,
        "Checkpoints")."""
        if self._store is None:
            raise ParameterError("this host keeps no checkpoints")
        if isinstance(n_estimators, bool) or not isinstance(n_estimators, int) or n_estimators < 1:
            raise ParameterError("n_estimators must be a positive integer")
        t = targets(y, self._X.shape[0], loss, base_score)  # type: ignore[arg-type]
        saved = self._store.latest(HostState)
        # what an interrupted attempt left in memory goes: every guest is set up again (a restarted
        # one too), the checkpoint says which were still active
        self.records, self._set_up, self._active, self.dropped = [], False, set(self.guests), []
        return self._run(t, loss, n_estimators, progress, saved)

    def _run(self, t: Targets, loss: Loss, n_estimators: int, progress: ProgressCallback | None,
             saved: HostState | None) -> Host:
        self._progress = progress
        try:
            with self._role_pool() as self._prefill:
                if not self._set_up:
                    self.setup()
                raw = np.tile(t.base, (self._X.shape[0], 1))
                if saved is not None:
                    raw = self._restore_state(saved, t, loss, n_estimators)
                self._trees_left = n_estimators * t.n_outputs - len(self.records)
                self._boost(t, loss, n_estimators, raw)
        finally:
            self._progress = None
            self._prefill = None
        self._targets, self._loss = t, loss
        return self

    # -- checkpoints (``specs/hybridtree.md``, "Checkpoints") -------------------------------------
    def _checkpoint(self, t: Targets, loss: Loss, raw: FloatArray) -> None:
        """After a round: every active guest saves its state, then the host its own (so a guest's
        checkpoint is never behind the host's).  Reveals the round count only."""
        if self._store is None:
            return
        self.call_many({g: Checkpoint(len(self.records)) for g in sorted(self._active)}, expect=Ack)
        self._targets, self._loss = t, loss
        self._store.save(HostState(len(self.records), self.model_state(), raw.copy()))

    def _restore_state(self, saved: HostState, t: Targets, loss: Loss, n_estimators: int) -> FloatArray:
        """Adopt a checkpoint's trees and active guests; its scores.  :class:`ProtocolError` unless
        it belongs to this run."""
        self.restore_model(saved.model)
        self.dropped = [g for g in self.guests if g not in self._active]
        raw = np.asarray(saved.raw)
        k = t.n_outputs
        if (len(self.records) != saved.trees or saved.trees % k or saved.trees > n_estimators * k
                or saved.model.loss != loss or raw.dtype != np.float64 or raw.shape != (self._X.shape[0], k)
                or not np.array_equal(np.asarray(saved.model.base), t.base)):
            raise ProtocolError("the checkpoint does not belong to this run")
        return np.array(raw, dtype=np.float64)

    def _boost(self, t: Targets, loss: Loss, n_estimators: int, raw: FloatArray) -> None:
        k = t.n_outputs
        for r in range(len(self.records) // k, n_estimators):
            grad, hess = gradients(raw, t.target, loss)
            for j in range(k):
                self._position = (r * k + j, n_estimators * k)
                start = time.process_time()
                rec, values = self.grow(r * k + j, grad[:, j], hess[:, j])
                self.tree_cpu_seconds.append(time.process_time() - start)
                self.records.append(rec)
                raw[:, j] += self.params.learning_rate * values
                self._report("tree done")
            self._checkpoint(t, loss, raw)

    # -- training --------------------------------------------------------------------------
    def grow(self, tree_index: int, g: FloatArray, h: FloatArray) -> tuple[TreeRecord, FloatArray]:
        """One tree (H1-G3) on gradients ``g`` and hessians ``h``; returns the record and each
        training instance's new leaf value."""
        p = self.params
        stats = np.column_stack([np.ones_like(g), g, h])
        host_tree = grow_tree(self._binned, self._mapper, stats, self._crit,
                              GrowParams(max_depth=p.host_depth,
                                         min_samples_leaf=float(p.min_samples_leaf)))
        leaf_of = host_tree.apply(self._X)
        self._report("host layers")
        if p.mode == "paper":
            return self._grow_paper(tree_index, host_tree, leaf_of, g, h)
        rec = TreeRecord.from_host_tree(host_tree)
        fixed = FixedPoint(p.frac_bits)
        g_fix, h_fix = fixed.encode_int64(g), fixed.encode_int64(h)
        nodes: dict[int, IntArray] = {
            int(k): np.flatnonzero(leaf_of == k).astype(np.int64) for k in host_tree.leaves
        }
        owner = self._effective_owner()
        eligible = []
        every = np.ones(self._guest_n_bins.size, dtype=bool)
        for k in sorted(nodes):
            if not nodes[k].size:
                continue
            contrib, large, held = self._feature_rules(nodes[k], owner)
            large &= self._grouped(self._node_groups(held, large, None))
            if (contrib & large).any():
                eligible.append(k)
            else:
                self._withheld((contrib, large), every)
        layout = self._send_gradients(tree_index, nodes, eligible, g, h, g_fix, h_fix, owner)
        self._report("gradients sent")
        layer = _Layer(frontier=eligible, known={k: every for k in eligible})
        parents: dict[int, int] = {}
        for depth in range(1, p.guest_depth + 1):
            if not layer.frontier:
                break
            layer = self._guest_layer(tree_index, depth, rec, layer, parents, nodes, layout,
                                      g_fix, h_fix)
            self._report("guest layer", depth, p.guest_depth)
        values = np.zeros(g.size)
        for node, ids in nodes.items():
            if rec.is_leaf(node):
                v = self._leaf_value(ids, g_fix, h_fix)
                rec.value[node] = v
                values[ids] = v
        for k in range(len(rec.value)):  # values of internal nodes (not used by predictions)
            if not rec.is_leaf(k) and k in nodes:
                rec.value[k] = self._leaf_value(nodes[k], g_fix, h_fix)
        return rec, values

    def _count_fallback(self, count: int) -> None:
        if count and self.params.few_guests == "raise":
            raise ProtocolError(
                f"{count} node(s) have fewer than {self.params.min_guests} contributing guests"
            )
        self.fallback_nodes += count

    def _totals(self, ids: IntArray, g_fix: IntArray, h_fix: IntArray) -> npt.NDArray[np.int64]:
        return np.array([ids.size, int(g_fix[ids].sum()), int(h_fix[ids].sum())], dtype=np.int64)

    def _leaf_value(self, ids: IntArray, g_fix: IntArray, h_fix: IntArray) -> float:
        t = self._totals(ids, g_fix, h_fix).astype(np.float64)
        t[1:] /= float(1 << self.params.frac_bits)
        return float(self._crit.leaf_value(t)[0])

    def _send_gradients(
        self, tree: int, nodes: dict[int, IntArray], eligible: list[int], g: FloatArray,
        h: FloatArray, g_fix: IntArray, h_fix: IntArray, owner: IntArray,
    ) -> SlotLayout:
        """H2-H3: plan the slots, encode and encrypt ``P_i``, send each guest its blocks."""
        p = self.params
        g_bound = max(1, int(np.ceil(np.abs(g).max(initial=0.0))))
        h_bound = max(1, int(np.ceil(h.max(initial=0.0))))
        n = int(g.size)
        if (n * (2 * g_bound + 1)) << p.frac_bits >= 1 << 62:
            raise EncodingOverflowError("gradient sums would exceed 62 bits: lower frac_bits")
        capacity = (self._pk.bits - 3) if self._pk is not None else 1 << 20
        layout = SlotLayout.plan({k: int(nodes[k].size) for k in eligible}, frac_bits=p.frac_bits,
                                 g_bound=g_bound, h_bound=h_bound, capacity=capacity)
        per_guest: dict[str, list[GradientBlock]] = {gname: [] for gname in self._active}
        plain: list[tuple[str, int, IntArray, list[int]]] = []
        for k in eligible:
            ids = nodes[k]
            for gi in np.unique(owner[ids][owner[ids] >= 0]).tolist():
                sel = ids[owner[ids] == gi]
                plain.append((self.guests[gi], k, sel, layout.encode(k, g_fix[sel], h_fix[sel])))
        flat = [v for *_, vals in plain for v in vals]
        self.op_counts["encrypt"] += len(flat)
        wire = self._encrypt(flat)
        at = 0
        for gname, k, sel, vals in plain:
            chunk = tuple(wire[at : at + len(vals)])
            at += len(vals)
            wire_ids = self._wire_ids(sel, self._owner, self.guests.index(gname))
            per_guest[gname].append(GradientBlock(k, layout.slots[k].block, wire_ids, chunk))
        asked = sorted(self._active)
        replies = self.call_many({gn: Gradients(tree, tuple(per_guest[gn])) for gn in asked},
                                 expect=Ack, allow_missing=True)
        self._live(dict(replies), asked)
        return layout

    def _role_pool(self) -> AbstractContextManager[BackgroundPool | None]:
        """The background pool of a secure ``fit`` (``background_pool``), one obfuscator per
        training instance requested at once (a tree encrypts about that many)."""
        if self._pk is None or self._sk is None:
            return nullcontext()
        owner = self.params.encryption == "key-owner"
        mode: Mode = "djn-short" if self.params.encryption == "djn-short" else "djn"
        return role_pool(self.background_pool, self._sk if owner else self._pk, first=self._X.shape[0],
                         mode=mode, executor=self.executor,
                         trusted_workers=self.trusted_workers, rng=self._rng)

    def _encrypt(self, flat: list[int]) -> list[int]:
        """H3's encryptions (wire values), ``ENCRYPT_CHUNK`` at a time with a progress event after
        each chunk; the plaintexts themselves outside secure mode.  With the background pool the
        obfuscators are taken from it, and the next tree's are requested at the end."""
        p = self.params
        if self._pk is None or self._sk is None:
            return flat
        wire: list[int] = []
        self._trees_left -= 1
        for at in range(0, len(flat), ENCRYPT_CHUNK):
            chunk = flat[at : at + ENCRYPT_CHUNK]
            if self._prefill is not None:
                cts = encrypt_many(self._pk, chunk, pool=self._prefill.ready(len(chunk)))
            elif p.encryption == "key-owner":
                cts = owner_encrypt_many(self._sk, chunk, rng=self._rng, executor=self.executor,
                                         trusted_workers=self.trusted_workers)
            else:
                cts = encrypt_many(self._pk, chunk, mode=p.encryption, rng=self._rng,
                                   executor=self.executor)
            wire += [c.value for c in cts]
            self._report("encrypting", len(wire), len(flat))
        if self._prefill is not None and self._trees_left > 0:
            self._prefill.request(max(0, len(flat) - len(self._prefill.pool) - self._prefill.queued))
        return wire

    def _aggregate(self, replies: dict[str, MaskedHistogram], length: int) -> list[int]:
        """G2: multiply the guests' accumulators position-wise, decrypt each product once."""
        if any(len(r.values) != length for r in replies.values()):
            raise ProtocolError("a guest sent a histogram of the wrong length")
        if self._pk is None or self._sk is None:
            return [sum(col) for col in zip(*(r.values for r in replies.values()), strict=True)]
        pk, sk = self._pk, self._sk
        n2 = mpz(pk.n_square)
        self.op_counts["decrypt"] += length
        products = []
        for col in zip(*(r.values for r in replies.values()), strict=True):
            acc = mpz(1)
            for v in col:
                c = mpz(v)
                pk.check_ciphertext_value(c)
                acc = acc * c % n2
            products.append(Ciphertext(pk, int(acc)))
        return decrypt_residues(sk, products, executor=self.executor,
                                trusted_workers=self.trusted_workers)

    def _request_histograms(
        self, tree: int, depth: int, attempt: int, build: list[BuildNode], n_sets: int,
    ) -> list[int] | None:
        """G1, one attempt: every active guest answers, or None after recording the dropouts."""
        length = n_sets * int(self._guest_n_bins.sum())
        peers = tuple(sorted(self._active))
        req = HistogramRequest(tree, depth, attempt, peers, n_sets, tuple(build))
        replies = self.call_many({gn: req for gn in peers}, expect=MaskedHistogram,
                                 allow_missing=True)
        if len(replies) != len(peers):
            self._live(dict(replies), peers)
            return None
        for r in replies.values():
            if (r.tree, r.layer, r.attempt) != (tree, depth, attempt):
                raise UnexpectedMessage("a histogram for another request")
        return self._aggregate(replies, length)

    def _node_groups(
        self, held_rows: IntArray, mask: BoolArray, units: dict[int, Ends] | None,
    ) -> dict[int, Ends]:
        """The groups of each feature in ``mask`` for a node whose instances of guests holding f
        number ``held_rows[f]``: runs of ``units`` (the base groups at layer 1, the parent's
        groups below) merged to ``min_bin_size`` expected instances; features left with one
        group cannot be split and are dropped (spec, "Coarsened guest bins")."""
        p = self.params
        out: dict[int, Ends] = {}
        for f in np.flatnonzero(mask).tolist():
            nb = int(self._guest_n_bins[f])
            u = units[f] if units is not None else base_ends(nb, p.min_group_width)
            ends = node_groups(u, nb, float(held_rows[f]), float(p.min_bin_size))
            if len(ends) >= 2:
                out[f] = ends
        return out

    def _grouped(self, groups: dict[int, Ends]) -> BoolArray:
        mask = np.zeros(self._guest_n_bins.size, dtype=bool)
        mask[list(groups)] = True
        return mask

    def _plan_builds(
        self, depth: int, rec: TreeRecord, layer: _Layer, parents: dict[int, int],
        nodes: dict[int, IntArray], layout: SlotLayout,
    ) -> tuple[list[int], list[BuildNode], dict[int, int], int, dict[int, dict[int, Ends]],
               list[tuple[tuple[BoolArray, BoolArray], BoolArray]]]:
        """Which nodes to split and on which guest features (with each feature's groups), which to
        build, which to derive by subtraction; the last item lists the nodes left as leaves (their
        rules, for counting).

        A feature is built for a node only if it passes both rules of :meth:`_feature_rules` and
        keeps at least two groups; at layer >= 2 only if it passes them in both children and its
        histogram is known at the parent: both children take one grouping, a coarsening of the
        parent's, so the histogram of one child and the parent's give the sibling's."""
        owner = self._effective_owner()
        build_nodes: dict[int, dict[int, Ends]] = {}
        derive: dict[int, int] = {}  # node -> built sibling
        groups: dict[int, dict[int, Ends]] = {}
        withheld: list[tuple[tuple[BoolArray, BoolArray], BoolArray]] = []
        if depth == 1:
            for k in layer.frontier:
                contrib, large, held = self._feature_rules(nodes[k], owner)
                grp = self._node_groups(held, contrib & large & layer.known[k], None)
                if grp:
                    build_nodes[k] = groups[k] = grp
                else:
                    withheld.append(((contrib, large & self._grouped(
                        self._node_groups(held, large, None))), layer.known[k]))
        else:
            by_parent: dict[int, list[int]] = {}
            for k in layer.frontier:
                by_parent.setdefault(parents[k], []).append(k)
            for parent, kids in by_parent.items():
                a, b = sorted(kids)
                ra, rb = self._feature_rules(nodes[a], owner), self._feature_rules(nodes[b], owner)
                known = layer.known[parent]
                held = np.minimum(ra[2], rb[2])
                large = ra[1] & rb[1]
                grp = self._node_groups(held, ra[0] & rb[0] & large & known, layer.groups[parent])
                if not grp:  # both children stay leaves: a histogram of one reveals the other
                    size_ok = large & self._grouped(
                        self._node_groups(held, large & known, layer.groups[parent]))
                    withheld += [((ra[0], size_ok), known), ((rb[0], size_ok), known)]
                    continue
                small, big = (a, b) if nodes[a].size <= nodes[b].size else (b, a)
                build_nodes[small] = groups[a] = groups[b] = grp
                derive[big] = small
        sets: dict[tuple[int, int], int] = {}
        used: dict[int, int] = {}
        build: list[BuildNode] = []
        for k in sorted(build_nodes):
            hl = rec.host_leaf[k]
            sub = used.get(hl, 0)
            used[hl] = sub + 1
            key = (layout.slots[hl].block, sub)
            if key not in sets:
                sets[key] = len(sets)
            feats = sorted(build_nodes[k])
            build.append(BuildNode(k, sets[key], tuple(feats),
                                   tuple(build_nodes[k][f] for f in feats)))
        return sorted(groups), build, derive, len(sets), groups, withheld

    def _guest_layer(
        self, tree: int, depth: int, rec: TreeRecord, layer: _Layer, parents: dict[int, int],
        nodes: dict[int, IntArray], layout: SlotLayout, g_fix: IntArray, h_fix: IntArray,
    ) -> _Layer:
        p = self.params
        # Dropout rule (spec, "Dropouts"): a new attempt with fresh masks among the survivors,
        # after re-checking which nodes still have enough contributing guests.
        attempt = 0
        while True:
            frontier, build, derive, n_sets, groups, withheld = self._plan_builds(
                depth, rec, layer, parents, nodes, layout)
            residues = (self._request_histograms(tree, depth, attempt, build, n_sets)
                        if build else [])
            if residues is not None:
                break
            attempt += 1
        for rules, known in withheld:
            self._withheld(rules, known)
        if not build:
            return _Layer(frontier=[], hist=layer.hist)
        n_feat = self._guest_n_bins.size
        width = p.max_bins + 1
        a_len = int(self._guest_n_bins.sum())
        offsets = np.concatenate([[0], np.cumsum(self._guest_n_bins)[:-1]])
        limit = 1 << layout.capacity
        if any(not 0 <= r < limit for r in residues):
            raise ProtocolError("an aggregated histogram overflows its slots")
        for item in build:
            hl = rec.host_leaf[item.node]
            hist = np.zeros((n_feat, width, STATS), dtype=np.int64)
            base = item.acc_set * a_len
            for fi, ends in groups[item.node].items():
                for b in ends:  # a group's sum sits at its last bin; the other bins stay zero
                    hist[fi, b] = layout.unpack(residues[base + int(offsets[fi]) + b], hl)
            total = self._totals(nodes[item.node], g_fix, h_fix)
            hist[:, p.max_bins] = total[None, :] - hist[:, : p.max_bins].sum(axis=1)
            layer.hist[item.node] = hist
        for big, small in derive.items():
            parent = layer.hist[parents[big]]
            hist = parent - layer.hist[small]
            for fi, ends in groups[big].items():
                hist[fi] = coarsen_hist(parent[fi], ends) - layer.hist[small][fi]
            layer.hist[big] = hist
        order = frontier
        feats = {k: self._grouped(groups[k]) for k in order}
        for k in order:
            layer.known[k] = feats[k]
            layer.groups[k] = groups[k]
        self._observe_layer(tree, depth, {k: (nodes[k], layer.hist[k], groups[k]) for k in order})
        choices: list[SplitChoice] = []
        split_nodes: list[int] = []
        left_counts: dict[int, int] = {}
        for k in order:
            found = self._best_group_split(layer.hist[k], groups[k])
            if found is None:
                continue
            fi, j, ml, left_count = found
            lo, hi = group_bounds(groups[k][fi], j)
            lid, rid = rec.add_children(k, fi, hi, ml)
            choices.append(SplitChoice(k, False, fi, hi, ml, lid, rid, hi - lo + 1))
            split_nodes.append(k)
            left_counts[k] = left_count
        if not choices:
            return _Layer(frontier=[], hist=layer.hist, known=layer.known, groups=layer.groups)
        owner = self._effective_owner()
        asked = sorted(self._active)
        replies = self.call_many({gn: SplitDecision(tree, depth, tuple(choices)) for gn in asked},
                                 expect=Routing, allow_missing=True)
        self._live(dict(replies), asked)
        owner_after = self._effective_owner()
        go_left: dict[int, npt.NDArray[np.bool_]] = {}
        for k, ch in zip(split_nodes, choices, strict=True):
            go_left[k] = np.full(nodes[k].size, ch.missing_left)
        by_name = {gn: i for i, gn in enumerate(self.guests)}
        for gn, reply in replies.items():
            if (reply.tree, reply.layer) != (tree, depth):
                raise UnexpectedMessage("routing for another layer")
            gi = by_name[gn]
            for nr in reply.nodes:
                if nr.node not in go_left:
                    raise ProtocolError("routing for a node that was not split")
                ids = nodes[nr.node]
                mine = np.flatnonzero(owner_after[ids] == gi)
                if nr.left.shape != (mine.size,):
                    raise ProtocolError("routing does not match the guest's instances")
                go_left[nr.node][mine] = nr.left
        next_frontier: list[int] = []
        consistent = len(replies) == len(asked) and np.array_equal(owner, owner_after)
        for k, ch in zip(split_nodes, choices, strict=True):
            ids = nodes[k]
            lid, rid = rec.left[k], rec.right[k]
            if consistent and int(go_left[k].sum()) != left_counts[k]:
                raise ProtocolError("the guests' routing disagrees with the aggregated counts")
            self._observe_split(tree, ids, ch, go_left[k])
            nodes[lid], nodes[rid] = ids[go_left[k]], ids[~go_left[k]]
            parents[lid] = parents[rid] = k
            if depth < p.guest_depth:
                next_frontier += [lid, rid]
        return _Layer(frontier=next_frontier, hist=layer.hist, known=layer.known,
                      groups=layer.groups)

    def _best_group_split(
        self, hist: npt.NDArray[np.int64], groups: dict[int, Ends],
    ) -> tuple[int, int, bool, int] | None:
        """G2's split search on one node's grouped histogram (one candidate bin per group, with
        the central trainer's ``best_splits``): (feature, group index, missing_left, left count)
        or None."""
        p = self.params
        n_feat, width, _ = hist.shape
        compact = np.zeros((1, n_feat, width, STATS), dtype=np.float64)
        n_bins = np.ones(n_feat, dtype=np.int64)
        for fi, ends in groups.items():
            compact[0, fi, : len(ends)] = hist[fi, list(ends)]
            compact[0, fi, -1] = hist[fi, -1]
            n_bins[fi] = len(ends)
        compact[..., 1:] /= float(1 << p.frac_bits)
        res = best_splits(compact, self._crit, categorical=self._guest_cat, n_bins=n_bins,
                          feature_mask=self._grouped(groups)[None, :],
                          min_samples_leaf=float(p.min_samples_leaf))
        if not res.found[0]:
            return None
        return (int(res.feature[0]), int(res.bin[0]), bool(res.missing_left[0]),
                round(float(res.left_stats[0][0])))

    def _observe_layer(
        self, tree: int, layer: int,
        view: dict[int, tuple[IntArray, npt.NDArray[np.int64], dict[int, Ends]]],
    ) -> None:
        """What the host learns from one guest layer's aggregates, for the leakage measurement
        (``securetrees.protocols.hybridtree.attack``): per node, its instance IDs, its histogram
        ``(feature, bin, (count, G·2^f, H·2^f))`` (each group's sum at the group's last bin,
        missing bin implied by the totals) and the groups of the features built (the others
        withheld).  The protocol itself does nothing here."""

    def _observe_split(self, tree: int, ids: IntArray, choice: SplitChoice, left: BoolArray) -> None:
        """What the host learns from one guest split's routing: which of the node's instances
        ``ids`` went left.  For the leakage measurement only, like :meth:`_observe_layer`."""

    # -- paper mode ------------------------------------------------------------------------
    def _grow_paper(
        self, tree: int, host_tree: Tree, leaf_of: IntArray, g: FloatArray, h: FloatArray,
    ) -> tuple[TreeRecord, FloatArray]:
        """The authors' simulation: plaintext gradients, each guest grows its own layers."""
        rec = TreeRecord.from_host_tree(host_tree, paper=True)
        owner = self._effective_owner()
        values = np.zeros(g.size)
        for k in host_tree.leaves.tolist():
            ids = np.flatnonzero(leaf_of == k)
            rec.value[k] = float(self._crit.leaf_value(
                np.array([ids.size, g[ids].sum(), h[ids].sum()]))[0])
            values[ids] = rec.value[k]
        requests: dict[str, PlainGradients] = {}
        sent: dict[str, list[IntArray]] = {}
        for gi, gname in enumerate(self.guests):
            if gname not in self._active:
                continue
            leaves, ids_l = [], []
            for k in host_tree.leaves.tolist():
                sel = np.flatnonzero((leaf_of == k) & (owner == gi)).astype(np.int64)
                if sel.size:
                    leaves.append(k)
                    ids_l.append(sel)
            requests[gname] = PlainGradients(tree, tuple(leaves), tuple(self._wire_ids(s, self._owner, gi)
                                                                        for s in ids_l),
                                             tuple(g[s] for s in ids_l), tuple(h[s] for s in ids_l))
            sent[gname] = ids_l
        replies = self.call_many(requests, expect=Values, allow_missing=True)
        self._live(dict(replies), list(requests))
        for gname, reply in replies.items():
            if len(reply.values) != len(sent[gname]):
                raise ProtocolError("paper-mode values do not match the request")
            for sel, v in zip(sent[gname], reply.values, strict=True):
                if v.shape != sel.shape:
                    raise ProtocolError("paper-mode values do not match the request")
                values[sel] = v
        return rec, values

    # -- model part ------------------------------------------------------------------------
    def model_state(self) -> HostModel:
        """What the host keeps of the fitted model (local; see :mod:`.model`)."""
        if self._targets is None:
            raise NotFittedError("fit the host first")
        classes = self._targets.classes
        numeric = classes is None or classes.dtype.kind in "biuf"
        i64 = np.int64
        records = tuple(RecordState(persistence.dumps(r.host_tree), np.asarray(r.left, dtype=i64),
                                    np.asarray(r.right, dtype=i64), np.asarray(r.missing_left, dtype=bool),
                                    np.asarray(r.guest_feature, dtype=i64), np.asarray(r.guest_bin, dtype=i64),
                                    np.asarray(r.value, dtype=np.float64), np.asarray(r.host_leaf, dtype=i64),
                                    r.paper) for r in self.records)
        return HostModel(records, self._targets.base, self._loss, classes if numeric else None,
                         () if numeric or classes is None else tuple(str(c) for c in classes.tolist()),
                         tuple(g for g in self.guests if g in self._active))

    def restore_model(self, model: HostModel) -> None:
        """Adopt a saved model instead of training (a predict-only run; local)."""
        if model.loss not in ("logistic", "squared") or not set(model.active) <= set(self.guests):
            raise DecodeError("inconsistent HybridTree host model")
        records = []
        for r in model.records:
            tree = persistence.loads(r.host_tree)
            arrays = [np.asarray(a) for a in (r.left, r.right, r.missing_left, r.guest_feature, r.guest_bin,
                                              r.value, r.host_leaf)]
            n = arrays[0].shape
            if not isinstance(tree, Tree) or len(n) != 1 or any(a.shape != n for a in arrays) \
                    or n[0] < tree.n_nodes:
                raise DecodeError("inconsistent HybridTree tree record")
            records.append(TreeRecord(tree, arrays[0].astype(np.int64).tolist(), arrays[1].astype(np.int64).tolist(),
                                      arrays[2].astype(bool).tolist(), arrays[3].astype(np.int64).tolist(),
                                      arrays[4].astype(np.int64).tolist(), arrays[5].astype(np.float64).tolist(),
                                      arrays[6].astype(np.int64).tolist(), bool(r.paper)))
        base = np.asarray(model.base, dtype=np.float64)
        classes = model.classes if model.classes is not None else (
            np.asarray(model.class_names) if model.class_names else None)
        if base.ndim != 1 or base.size < 1:
            raise DecodeError("inconsistent HybridTree base score")
        self.records, self._loss = records, model.loss  # type: ignore[assignment]
        self._targets = Targets(np.zeros((0, base.size)), base, classes)
        self._active = set(model.active)

    # -- inference -------------------------------------------------------------------------
    def decision_function(self, X: npt.ArrayLike, owner: npt.ArrayLike) -> FloatArray:
        """Raw scores of test instances (row ``i`` of the host's columns ``X`` is test ID ``i``;
        ``owner`` as in training, see :func:`owners`): the base score plus ``learning_rate``
        times each tree's leaf value.  Shape ``(n,)`` for one output, else ``(n, outputs)``.
        The guests must have loaded their test rows (:meth:`Guest.load_test`)."""
        if self._targets is None:
            raise NotFittedError("fit the host before predicting")
        Xa = check_matrix(X)
        values = self.predict_values(Xa, owner)
        k = self._targets.n_outputs
        raw = np.tile(self._targets.base, (Xa.shape[0], 1))
        for j in range(k):
            raw[:, j] += self.params.learning_rate * values[:, j::k].sum(axis=1)
        return raw[:, 0] if k == 1 else raw

    def predict_proba(self, X: npt.ArrayLike, owner: npt.ArrayLike) -> FloatArray:
        """Class probabilities (logistic loss only), one column per class of :attr:`classes_`."""
        if self._loss != "logistic":
            raise ParameterError("predict_proba needs the logistic loss")
        return probabilities(self.decision_function(X, owner))

    def predict(self, X: npt.ArrayLike, owner: npt.ArrayLike) -> npt.NDArray[Any]:
        """Predicted class (logistic loss) or value (squared loss) of each test instance."""
        if self._loss == "squared":
            return np.asarray(self.decision_function(X, owner), dtype=np.float64)
        return np.asarray(self.classes_[np.argmax(self.predict_proba(X, owner), axis=1)])

    @property
    def classes_(self) -> npt.NDArray[Any]:
        """The class labels of a logistic-loss model."""
        if self._targets is None or self._targets.classes is None:
            raise NotFittedError("no classes: not fitted, or fitted with the squared loss")
        return self._targets.classes

    @property
    def base_score_(self) -> FloatArray:
        if self._targets is None:
            raise NotFittedError("fit the host first")
        return self._targets.base

    @property
    def n_outputs_(self) -> int:
        if self._targets is None:
            raise NotFittedError("fit the host first")
        return self._targets.n_outputs

    def predict_values(self, X: npt.ArrayLike, owner: npt.ArrayLike) -> FloatArray:
        """Inference (Section 4.2): each tree's leaf value per test instance, shape (n, trees)."""
        Xa = np.asarray(X, dtype=np.float64)
        own = np.asarray(owner, dtype=np.int64)
        if Xa.ndim != 2 or own.shape != (Xa.shape[0],):
            raise ParameterError("X and owner disagree on the number of instances")
        n_trees = len(self.records)
        host_leaves = np.stack([r.host_tree.apply(Xa) for r in self.records], axis=1)
        out = np.empty((Xa.shape[0], n_trees))
        for t, rec in enumerate(self.records):
            out[:, t] = [rec.value[rec.follow_missing(k)] if not rec.paper else rec.value[k]
                         for k in host_leaves[:, t].tolist()]
        self._batch += 1
        requests: dict[str, PredictRequest] = {}
        rows_of: dict[str, IntArray] = {}
        for gi, gname in enumerate(self.guests):
            rows = np.flatnonzero(own == gi).astype(np.int64)
            if rows.size and gname in self._active:
                requests[gname] = PredictRequest(self._batch, self._wire_ids(rows, own, gi), host_leaves[rows])
                rows_of[gname] = rows
        if not requests:
            return out
        reply_type: type[PredictLeaves] | type[PredictValues] = (
            PredictValues if self.params.mode == "paper" else PredictLeaves
        )
        replies = self.call_many(requests, expect=reply_type, allow_missing=True)
        for gname, reply in replies.items():
            rows = rows_of[gname]
            if isinstance(reply, PredictValues):
                vals = np.asarray(reply.values, dtype=np.float64)
                if vals.shape != (rows.size, n_trees):
                    raise ProtocolError("prediction reply has the wrong shape")
                out[rows] = np.where(np.isnan(vals), out[rows], vals)
                continue
            leaves = np.asarray(reply.leaves)
            if leaves.shape != (rows.size, n_trees) or leaves.dtype != np.int64:
                raise ProtocolError("prediction reply has the wrong shape")
            for t, rec in enumerate(self.records):
                col = leaves[:, t]
                if col.size and (col.min() < 0 or col.max() >= len(rec.left)):
                    raise ProtocolError("a guest named an unknown leaf")
                hl = np.asarray(rec.host_leaf)[col]
                leaf_ok = np.asarray(rec.left)[col] < 0
                if not (np.all(leaf_ok) and np.array_equal(hl, host_leaves[rows, t])):
                    raise ProtocolError("a guest returned a leaf outside the instance's host leaf")
                out[rows, t] = np.asarray(rec.value)[col]
        return out
