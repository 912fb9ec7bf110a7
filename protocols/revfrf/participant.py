"""A RevFRF participant: owns feature columns, proposes candidate splits, uploads its
winning splits encrypted under its own key, and serves the nodes it provided.

Steps (``specs/revfrf.md``): FLE-Expan lines 7-11 (:meth:`Participant.on_expand`),
FOS-Find line 8 (:meth:`Participant.on_split`), FT-Predict line 6 (:meth:`on_parhdec`,
consent and epoch checks), FT-Test (:meth:`on_test`), ``predict(X)`` path bits
(:meth:`on_path`), FRF-Revoc line 1 (:meth:`request_revocation`) and line 16 with the
epoch re-signing (:meth:`on_epoch`).  Missing values (NaN) are routed as the shared trees
route them (:mod:`securetrees.protocols.revfrf.missing`): the provider keeps each split's missing side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from securetrees.dtpkc import Ciphertext, PublicKey, WeakSecretKey, parhdec1
from securetrees.dtpkc.batch import encrypt_many
from securetrees.dtpkc.twoserver import HoLTParams
from securetrees.encoding import FixedPoint
from securetrees.errors import ParameterError, RevokedError, UnexpectedMessage
from securetrees.protocols.revfrf.candidates import CandidateSet, Proposer
from securetrees.protocols.revfrf.checkpoint import (
    EXPAND,
    SPLIT,
    ParticipantState,
    Pending,
    generator,
    generator_state,
)
from securetrees.protocols.revfrf.defaults import DEFAULT_CODEC, DEFAULT_HOLT
from securetrees.protocols.revfrf.errors import ConsentRefused, RevocationRefused, StaleEpochError
from securetrees.protocols.revfrf.messages import (
    EpochAck,
    EpochNotice,
    ExpandReply,
    ExpandRequest,
    NodeRef,
    ParHDecReply,
    ParHDecRequest,
    PathReply,
    PathRequest,
    RevokeReply,
    RevokeRequest,
    SplitReply,
    SplitRequest,
    TestReply,
    TestRequest,
)
from securetrees.protocols.revfrf.missing import threshold_plaintext, value_plaintext
from securetrees.protocols.revfrf.signing import node_message, revocation_message, verify_revocation
from securetrees.protocols.revfrf.thresholds import ColumnGrid
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, Network, Party, handles
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.runtime.codec import decode
from securetrees.runtime.journal import SingleUseJournal
from securetrees.signing import SigningKey, verify

__all__ = ["BatchValues", "OwnNode", "Participant"]

FloatArray = npt.NDArray[np.float64]
R = TypeVar("R", bound=Message)


def _replayed(data: bytes, cls: type[R]) -> R:
    """A journalled reply, decoded and checked to be a ``cls``."""
    reply = decode(data)
    if not isinstance(reply, cls):
        raise UnexpectedMessage(f"the journal holds {reply.wire_type}, expected {cls.wire_type}")
    return reply


@dataclass(frozen=True)
class OwnNode:
    """What a provider keeps about a node it provided: its column, plaintext threshold
    (``+inf`` for a split that isolates the missing values) and where missing values go."""

    column: int
    threshold: float
    missing_left: bool = False


class BatchValues(NamedTuple):
    """This participant's side of the (row, node) pairs of a prediction request."""

    x: FloatArray
    threshold: FloatArray
    missing_left: npt.NDArray[np.bool_]


class Participant(Party):
    """Participant ``u`` holding columns ``columns`` of the training data (dimension extension).

    Its handlers serve the CS role only (the message declarations; the network refuses any
    other sender before a handler runs)."""

    role = "participant"

    def __init__(
        self,
        name: str,
        network: Network,
        *,
        columns: Sequence[int],
        X_own: FloatArray,
        weak_key: WeakSecretKey,
        signing_key: SigningKey,
        session: bytes,
        verify_keys: Mapping[str, bytes],
        cs_key: PublicKey,
        proposer: Proposer,
        ml_seed: int | None = None,
        codec: FixedPoint = DEFAULT_CODEC,
        holt_params: HoLTParams = DEFAULT_HOLT,
        cs: str = "cs",
        rng: RandomSource = SYSTEM_RANDOM,
        executor: Executor | None = None,
        checkpoint: CheckpointStore | None = None,
    ) -> None:
        X = np.asarray(X_own, dtype=np.float64)
        cols = tuple(int(c) for c in columns)
        if X.ndim != 2 or X.shape[1] != len(cols) or not cols:
            raise ParameterError("X_own must have one column per owned feature")
        if np.any(np.isinf(X)):
            raise ParameterError("RevFRF refuses infinite feature values (NaN is a missing value)")
        super().__init__(name, network)
        self.columns = cols
        self._col = {c: j for j, c in enumerate(cols)}
        self._X = X
        self._weak = weak_key
        self._sign = signing_key
        self._session = session
        self._verify_keys = dict(verify_keys)
        self._cs_key = cs_key
        self._joint = cs_key.joint(weak_key.public)
        self._proposer = proposer
        self._ml = np.random.default_rng(ml_seed)
        self._fx = codec
        self._grids = [ColumnGrid.fit(X[:, j], codec) for j in range(X.shape[1])]
        self._range = holt_params.inputs(int(weak_key.public.n))
        self._cs = cs
        self._rng = rng
        #: Runs HoEnc's exponentiations (workers receive public values and exponents only).
        self.executor = executor
        self.epoch = 0
        self.revoked = False
        self.refused_requesters: set[str] = set()
        self._pending: dict[int, list[CandidateSet]] = {}
        self._pending_cols: dict[int, npt.NDArray[np.int64]] = {}
        self._nodes: dict[tuple[int, int], OwnNode] = {}
        self._batches: dict[str, FloatArray] = {}
        #: Sealed state written before each construction reply leaves (``None``: no checkpoints).
        self.checkpoint = checkpoint
        #: The construction replies of the current round, per (kind, round) (kept with checkpoints only).
        self._journal = SingleUseJournal(
            lambda slot: UnexpectedMessage(f"round {slot[1]} was answered for another request"))
        if checkpoint is not None:
            state = checkpoint.latest(ParticipantState)
            if state is not None:
                self._restore(state)

    @property
    def public_key(self) -> PublicKey:
        return self._weak.public

    def _check_active(self) -> None:
        if self.revoked:
            raise RevokedError(f"participant {self.name!r} has been revoked")

    # ------------------------------------------------------------------ checkpoints

    def _state(self) -> ParticipantState:
        keys = sorted(self._nodes)
        pending = []
        for rnd in sorted(self._pending):
            sets = self._pending[rnd]
            pending.append(Pending(
                rnd, self._pending_cols[rnd],
                np.cumsum([0] + [s.thresholds.size for s in sets]).astype(np.int64),
                np.concatenate([s.thresholds for s in sets]) if sets else np.zeros(0),
                np.cumsum([0] + [s.codes.size for s in sets]).astype(np.int64),
                np.concatenate([s.codes for s in sets]) if sets else np.zeros(0, dtype=np.uint16)))
        return ParticipantState(
            self.epoch, generator_state(self._ml), np.array(keys, dtype=np.int64).reshape(-1, 2),
            np.array([self._nodes[k].column for k in keys], dtype=np.int64),
            np.array([self._nodes[k].threshold for k in keys], dtype=np.float64),
            np.array([self._nodes[k].missing_left for k in keys], dtype=bool),
            tuple(pending), self._journal.state())

    def _restore(self, state: ParticipantState) -> None:
        """This participant as its checkpoint left it (its own file: data and keys are its inputs)."""
        keys = np.asarray(state.node_keys)
        if keys.ndim != 2 or keys.shape[1:] != (2,) or not (
                keys.shape[0] == np.asarray(state.node_columns).size == np.asarray(state.node_thresholds).size
                == np.asarray(state.node_missing_left).size):
            raise UnexpectedMessage("a malformed participant checkpoint")
        self.epoch = state.epoch
        self._ml = generator(state.generator)
        self._nodes = {(int(t), int(n)): OwnNode(int(c), float(thr), bool(ml)) for (t, n), c, thr, ml in zip(
            keys.tolist(), np.asarray(state.node_columns).tolist(), np.asarray(state.node_thresholds).tolist(),
            np.asarray(state.node_missing_left).tolist(), strict=True)}
        self._pending, self._pending_cols = {}, {}
        for p in state.pending:
            to, co = np.asarray(p.threshold_offsets), np.asarray(p.code_offsets)
            self._pending[p.round] = [CandidateSet(np.asarray(p.thresholds)[to[i]:to[i + 1]],
                                                   np.asarray(p.codes)[co[i]:co[i + 1]])
                                      for i in range(to.size - 1)]
            self._pending_cols[p.round] = np.asarray(p.columns, dtype=np.int64)
        self._journal.restore(state.journal)

    def _answered(self, kind: int, rnd: int, msg: Message) -> bytes | None:
        """The journalled reply to ``msg`` if this request was answered before; a different
        request of the same kind and round is refused, and so is any request for a round before
        the journal's (a single-use query stays single-use: the CS resumes at its latest layer,
        never before it)."""
        last = max((slot[1] for slot in self._journal.slots()), default=rnd)
        if rnd < last:
            raise UnexpectedMessage(f"round {rnd} is over: {self.name} has answered round {last}")
        kept = self._journal.lookup((kind, rnd), msg)
        if kept is not None:
            self.logger.info("%s: round %d asked again, answered from its journal", self.name, rnd)
        return kept

    def _journal_reply(self, kind: int, rnd: int, msg: Message, reply: Message) -> None:
        """Record the reply and write the checkpoint before the reply leaves; the journal keeps
        the current round only (:meth:`_answered` refuses an older one)."""
        if self.checkpoint is None:
            return
        self._journal.prune(lambda slot: slot[1] >= rnd)
        self._journal.record((kind, rnd), msg, reply)
        self.checkpoint.save(self._state())

    # ------------------------------------------------------------------ construction

    @handles(ExpandRequest)
    def on_expand(self, sender: str, msg: ExpandRequest) -> ExpandReply:
        """FLE-Expan lines 7-11 for every task: candidates from the node's own values, and
        each sample's candidate code.  Learns: μ of the nodes its columns were drawn for."""
        self._check_active()
        done = self._answered(EXPAND, msg.round, msg)
        if done is not None:
            return _replayed(done, ExpandReply)
        offsets = np.asarray(msg.offsets, dtype=np.int64)
        samples = np.asarray(msg.samples, dtype=np.int64)
        n_nodes = int(np.asarray(msg.node).size)
        if offsets.shape != (n_nodes + 1,) or offsets[0] != 0 or offsets[-1] != samples.size:
            raise UnexpectedMessage("malformed sample selection")
        if np.any(np.diff(offsets) < 1) or (samples.size and (samples.min() < 0 or samples.max() >= self._X.shape[0])):
            raise UnexpectedMessage("sample selection out of range")
        sets: list[CandidateSet] = []
        for k, c in zip(np.asarray(msg.task_node).tolist(), np.asarray(msg.task_column).tolist(), strict=True):
            if c not in self._col or not 0 <= k < n_nodes:
                raise UnexpectedMessage(f"task for column {c} which {self.name} does not own")
            x = self._X[samples[offsets[k]:offsets[k + 1]], self._col[c]]
            sets.append(self._proposer.propose(c, x, self._ml))
        for old in [r for r in self._pending if r < msg.round]:  # never asked for: the CS moved on
            del self._pending[old], self._pending_cols[old]
        self._pending[msg.round] = sets
        self._pending_cols[msg.round] = np.asarray(msg.task_column, dtype=np.int64)
        codes = np.concatenate([s.codes for s in sets]) if sets else np.zeros(0, dtype=np.uint16)
        reply = ExpandReply(msg.round, codes, np.array([s.n_codes for s in sets], dtype=np.int64))
        self._journal_reply(EXPAND, msg.round, msg, reply)
        return reply

    def _sign_node(self, tree: int, node: int, epoch: int, c: Ciphertext) -> bytes:
        return self._sign.sign(node_message(self._session, tree, node, epoch, int(c.t1), int(c.t2)))

    @handles(SplitRequest)
    def on_split(self, sender: str, msg: SplitRequest) -> SplitReply:
        """FOS-Find line 8: ``HoEnc(pk_u, s)`` of each winning candidate, moved to the middle
        of its gap on the column's grid (:class:`ColumnGrid`: the same training split, no
        tie), signed with the epoch; keeps the threshold and the split's missing side.  Candidate ``n_codes - 1`` (every
        present value left) has threshold ``+inf``.  Learns: which candidates won, and where
        missing values go at each of its nodes."""
        self._check_active()
        if msg.epoch != self.epoch:
            raise StaleEpochError("split request for another epoch")
        done = self._answered(SPLIT, msg.round, msg)
        if done is not None:
            return _replayed(done, SplitReply)
        sets = self._pending.pop(msg.round, None)
        cols = self._pending_cols.pop(msg.round, None)
        if sets is None or cols is None:
            raise UnexpectedMessage("split request for an unknown round")
        missing_left = np.asarray(msg.missing_left)
        if missing_left.shape != np.asarray(msg.task).shape or missing_left.dtype != np.bool_:
            raise UnexpectedMessage("one missing side per split")
        thresholds: list[float] = []
        for t, b in zip(msg.task.tolist(), msg.candidate.tolist(), strict=True):
            if not 0 <= t < len(sets) or not 0 <= b < sets[t].n_codes:
                raise UnexpectedMessage("split request names an unknown candidate")
            s = float(sets[t].thresholds[b]) if b < sets[t].thresholds.size else float("inf")
            thresholds.append(self._grids[self._col[int(cols[t])]].centre(s))
        cts = encrypt_many(self._weak.public, [threshold_plaintext(self._fx, self._range, thr) for thr in thresholds],
                           rng=self._rng, signed=self._range, executor=self.executor)
        sig = []
        for t, thr, tree, node, ml, c in zip(msg.task.tolist(), thresholds, msg.tree.tolist(), msg.node.tolist(),
                                             missing_left.tolist(), cts, strict=True):
            self._nodes[(tree, node)] = OwnNode(int(cols[t]), thr, bool(ml))
            sig.append(self._sign_node(tree, node, msg.epoch, c))
        reply = SplitReply(tuple(int(c.t1) for c in cts), tuple(int(c.t2) for c in cts), tuple(sig))
        self._journal_reply(SPLIT, msg.round, msg, reply)
        return reply

    # ------------------------------------------------------------------ serving nodes

    def _live(self, ref: NodeRef) -> OwnNode:
        """The node if it is one of ours, signed by us in the current epoch and still live."""
        verify(self._verify_keys[self.name], ref.signature,
               node_message(self._session, ref.tree, ref.node, ref.epoch, ref.t1, ref.t2),
               StaleEpochError, f"node ({ref.tree}, {ref.node})")
        if ref.epoch != self.epoch:
            raise StaleEpochError(f"node ({ref.tree}, {ref.node}) is from epoch {ref.epoch}, now {self.epoch}")
        own = self._nodes.get((ref.tree, ref.node))
        if own is None:
            raise StaleEpochError(f"node ({ref.tree}, {ref.node}) is not live")
        return own

    @handles(ParHDecRequest)
    def on_parhdec(self, sender: str, msg: ParHDecRequest) -> ParHDecReply:
        """FT-Predict line 6: ParHDec1 of each ``[[l]]``, only for an accepted requester and live
        nodes of the current epoch.  Learns: the requester and which of its nodes were reached."""
        self._check_active()
        if msg.requester in self.refused_requesters:
            raise ConsentRefused(f"{self.name} does not serve requester {msg.requester!r}")
        if not len(msg.nodes) == len(msg.t1) == len(msg.t2):
            raise UnexpectedMessage("one ciphertext per node")
        for ref in msg.nodes:
            self._live(ref)
        out1, out2 = [], []
        for a, b in zip(msg.t1, msg.t2, strict=True):
            c = parhdec1(self._weak, Ciphertext.from_ints(self._joint, a, b)).rerandomize(rng=self._rng)
            out1.append(int(c.t1))
            out2.append(int(c.t2))
        return ParHDecReply(tuple(out1), tuple(out2))

    def load_rows(self, batch: str, X_own: FloatArray) -> None:
        """Hold this participant's columns of rows to predict (its own data, not a message)."""
        X = np.asarray(X_own, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != len(self.columns):
            raise ParameterError("rows must have one column per owned feature")
        if np.any(np.isinf(X)):
            raise ParameterError("RevFRF refuses infinite feature values (NaN is a missing value)")
        self._batches[batch] = X

    def drop_rows(self, batch: str) -> None:
        self._batches.pop(batch, None)

    def _batch_values(self, msg: PathRequest | TestRequest) -> BatchValues:
        """This participant's values, thresholds and missing sides for the (row, node) pairs
        of a request."""
        X = self._batches.get(msg.batch)
        if X is None:
            raise UnexpectedMessage(f"unknown batch {msg.batch!r}")
        rows = np.asarray(msg.rows, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= X.shape[0]):
            raise UnexpectedMessage("row out of range")
        trees, nodes = np.asarray(msg.tree, dtype=np.int64), np.asarray(msg.node, dtype=np.int64)
        if not rows.shape == trees.shape == nodes.shape:
            raise UnexpectedMessage("one tree and node per row")
        keys = np.unique(np.stack([trees, nodes], axis=1), axis=0) if rows.size else np.zeros((0, 2), np.int64)
        col = np.empty(rows.size, dtype=np.int64)
        thr = np.empty(rows.size, dtype=np.float64)
        miss = np.zeros(rows.size, dtype=bool)
        for t, n in keys.tolist():
            own = self._nodes.get((t, n))
            if own is None:
                raise StaleEpochError(f"node ({t}, {n}) is not live")
            at = (trees == t) & (nodes == n)
            col[at] = self._col[own.column]
            thr[at] = own.threshold
            miss[at] = own.missing_left
        return BatchValues(np.asarray(X[rows, col], dtype=np.float64), thr, miss)

    @handles(PathRequest)
    def on_path(self, sender: str, msg: PathRequest) -> PathReply:
        """``predict(X)``: ``x ≤ s`` on its own column and threshold, a missing value to the
        split's missing side.  Learns: which of its nodes each row reaches."""
        self._check_active()
        v = self._batch_values(msg)
        return PathReply(np.asarray(np.where(np.isnan(v.x), v.missing_left, v.x <= v.threshold), dtype=bool))

    @handles(TestRequest)
    def on_test(self, sender: str, msg: TestRequest) -> TestReply:
        """FT-Test (erratum 7): ``[[x]]_{pk_u}`` of its own value for each (row, node); a
        missing value as the stand-in of the node's missing side (:mod:`~securetrees.protocols.revfrf.missing`)."""
        self._check_active()
        v = self._batch_values(msg)
        cts = encrypt_many(self._weak.public, [value_plaintext(self._fx, self._range, x, ml)
                                               for x, ml in zip(v.x.tolist(), v.missing_left.tolist(), strict=True)],
                           rng=self._rng, signed=self._range, executor=self.executor)
        return TestReply(tuple(int(c.t1) for c in cts), tuple(int(c.t2) for c in cts))

    # ------------------------------------------------------------------ revocation

    def request_revocation(self, *, level: int = 2) -> RevokeReply:
        """FRF-Revoc line 1: a signed request for its own revocation, sent to the CS."""
        self._check_active()
        if level not in (1, 2):
            raise ParameterError("revocation level is 1 or 2")
        nonce = self._rng.token_bytes(16)
        sig = self._sign.sign(revocation_message(self._session, self.name, self.epoch, level, nonce))
        req = RevokeRequest(self.name, self.epoch, level, nonce, sig)
        self.logger.info("%s asks for its revocation (level %d)", self.name, level)
        reply = self.call(self._cs, req, expect=RevokeReply)
        self.revoked = True
        self._nodes.clear()
        self._batches.clear()
        return reply

    @handles(EpochNotice)
    def on_epoch(self, sender: str, msg: EpochNotice) -> EpochAck:
        """FRF-Revoc line 16 and forest epochs: check the revocation, adopt the new epoch,
        forget destroyed nodes, re-sign the surviving ones."""
        self._check_active()
        rev = msg.revocation
        verify_revocation(self._verify_keys, self._session, rev)
        if rev.epoch != self.epoch or msg.epoch != self.epoch + 1:
            raise RevocationRefused("epoch notice out of order")
        self.logger.info("%s: epoch %d after revoking %s, %d nodes to re-sign", self.name, msg.epoch,
                         rev.participant, len(msg.nodes))
        for ref in msg.nodes:
            self._live(ref)
        keep = {(ref.tree, ref.node) for ref in msg.nodes}
        self._nodes = {k: v for k, v in self._nodes.items() if k in keep}
        self.epoch = msg.epoch
        return EpochAck(tuple(
            self._sign.sign(node_message(self._session, r.tree, r.node, self.epoch, r.t1, r.t2)) for r in msg.nodes
        ))

    def own_nodes(self) -> dict[tuple[int, int], OwnNode]:
        """This participant's live nodes (for tests and the facade's plaintext view)."""
        return dict(self._nodes)
