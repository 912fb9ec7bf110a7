"""The passive party: bins its own features, sums encrypted ``(1, g, h)`` per bucket, keeps its
thresholds in a lookup table (``specs/secureboost.md``, steps S0-S4 and P1).

A passive party never sees a gradient, a hessian or a label: it holds the active party's
ciphertexts only.  It learns the instance space of every node it is asked to build (the
rows of that node) and, for the splits it owns, the record ids it hands out.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees._nt import mpz
from securetrees.errors import DecodeError, ParameterError, ProtocolError, UnexpectedMessage
from securetrees.paillier import Ciphertext, PublicKey
from securetrees.paillier.batch import ciphertext_values, ciphertext_values_from_bytes, obfuscators
from securetrees.paillier.ciphertext import _make
from securetrees.protocols.secureboost.buckets import (
    Quotients,
    bucket_codes,
    bucket_counts,
    bucket_kinds,
    direct_sums,
    sibling_sums,
)
from securetrees.protocols.secureboost.checkpoint import PassiveState
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
from securetrees.protocols.secureboost.model import PassiveModel
from securetrees.protocols.secureboost.packing import PackingLayout, pack_ciphertexts
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, Network, Party, handles
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.runtime.journal import SingleUseJournal
from securetrees.trees import BinMapper

__all__ = ["LookupRecord", "PassiveParty"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class LookupRecord:
    """One row of the passive party's lookup table: the split it owns (kept, never sent)."""

    feature: int
    threshold: float
    categorical: bool
    missing_left: bool

    def goes_left(self, x: FloatArray) -> npt.NDArray[np.bool_]:
        """``x <= threshold`` (categorical ``x == threshold``); NaN follows ``missing_left``."""
        test = x == self.threshold if self.categorical else x <= self.threshold
        return np.asarray(np.where(np.isnan(x), self.missing_left, test))


class PassiveParty(Party):
    """A passive party holding columns ``X`` of the aligned training rows (row ``i`` is instance
    ``i`` for every party).  ``active_key`` pins the active party's public key (a setup with
    another key raises :class:`ProtocolError`); without it the received key must pass the
    size policy (1024 bits only with ``allow_insecure``)."""

    role = "passive"

    def __init__(
        self, name: str, network: Network, *, X: npt.ArrayLike, categorical: tuple[bool, ...] | None = None,
        active_key: PublicKey | None = None, allow_insecure: bool = False, rng: RandomSource = SYSTEM_RANDOM,
        executor: Executor | None = None, checkpoint: CheckpointStore | None = None,
    ) -> None:
        super().__init__(name, network)
        self.executor = executor
        self._store = checkpoint
        self._journal = SingleUseJournal(lambda slot: UnexpectedMessage(
            f"{self.name} already answered another request for tree {slot[1]} at {slot[2]}"), store=checkpoint)
        """Answered histogram (kind 0) and split (kind 1) requests, per (kind, tree, index); a restarted
        party holds them from the start, not only once the active party sends ``Resume``."""
        self._journal.reload()
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[0] < 1 or Xa.shape[1] < 1:
            raise ParameterError("a passive party holds a non-empty two-dimensional table")
        if np.isinf(Xa).any():
            raise ParameterError("feature values must be finite or NaN (missing)")
        self._X = Xa
        self._categorical = categorical
        self._pinned = active_key
        self._allow_insecure = allow_insecure
        self._rng = rng
        self._pk: PublicKey | None = None
        self._mapper: BinMapper | None = None
        self._codes: npt.NDArray[np.int16] | None = None
        self._widths: list[int] = []
        self._vals: list[mpz] = []
        self._layout: PackingLayout | None = None
        self._tree = -1
        self._cache: dict[int, list[mpz]] = {}  # node -> unpacked bucket sums (last layer)
        self._counts: dict[int, IntArray] = {}  # node -> its bucket counts (last layer)
        self._node_ids: dict[int, IntArray] = {}
        self.table: list[LookupRecord] = []
        """The lookup table: record id (its index) → the split's feature and threshold."""
        self._query: FloatArray | None = None
        self.op_counts = {"add": 0, "subtract": 0, "shift": 0, "rerandomize": 0}

    @property
    def table_width(self) -> int:
        """Number of this party's features."""
        return int(self._X.shape[1])

    # -- S0: setup ----------------------------------------------------------------------------
    @handles(Setup)
    def on_setup(self, sender: str, msg: Setup) -> SetupReply:
        """Bin the own columns with the agreed bin budget; reveals the bucket schema only."""
        if self._pinned is not None:
            if msg.public_key != self._pinned.to_bytes():
                raise ProtocolError("the setup carries another public key than the pinned active key")
            pk = self._pinned
        else:
            pk = PublicKey.from_bytes(msg.public_key, allow_insecure=self._allow_insecure)
        if msg.n_instances != self._X.shape[0]:
            raise ProtocolError(f"the active party has {msg.n_instances} instances, this party {self._X.shape[0]}")
        self._pk = pk
        self._mapper = BinMapper.fit(self._X, max_bins=msg.max_bins, categorical=self._categorical)
        self._codes = bucket_codes(self._mapper.transform(self._X), self._mapper.n_bins, self._mapper.missing_bin)
        self._widths = [nb + 1 for nb in self._mapper.n_bins]
        return SetupReply(tuple(self._mapper.n_bins), tuple(self._mapper.categorical))

    def _key(self) -> PublicKey:
        if self._pk is None:
            raise ProtocolError("no setup received")
        return self._pk

    # -- S1: encrypted gradients ----------------------------------------------------------------
    @handles(Gradients)
    def on_gradients(self, sender: str, msg: Gradients) -> Ack:
        """Store one tree's ciphertexts (validated under the active key); nothing is decrypted."""
        pk = self._key()
        vals = ciphertext_values_from_bytes(msg.ciphertexts, pk)
        if len(vals) != self._X.shape[0]:
            raise ProtocolError("one gradient ciphertext per instance expected")
        self._layout = PackingLayout(msg.frac_bits, msg.g_bound, msg.h_bound, self._X.shape[0], pk.n.bit_length() - 1)
        self._vals = vals
        self._tree = msg.tree
        self._cache, self._counts = {}, {}
        self._node_ids = {}
        return Ack()

    # -- S2: bucket sums with sibling subtraction -------------------------------------------------
    def _direct(self, ids: IntArray, codes: npt.NDArray[np.int16], counts: IntArray, pending: Quotients
                ) -> list[mpz]:
        """Encrypted ``(count, G, H)`` per (feature, bucket) of the instances ``ids`` (their
        bucket codes ``codes``; the most populous bucket of each feature but one left to
        ``pending``); an empty bucket is the trivial encryption of 0 (re-randomised when packed)."""
        vals = self._vals
        sums, mults = direct_sums([vals[i] for i in ids.tolist()], codes, self._widths,
                                  self._key()._n2, pending, self.executor, counts)
        self.op_counts["add"] += mults
        return sums

    def bucket_sums(self, jobs: tuple[NodeJob, ...]) -> list[list[Ciphertext]]:
        """Per job, its bucket sums: where the parent's sums are cached and the sibling is in the
        same request, the smaller child is summed directly and the larger is parent − smaller."""
        pk = self._key()
        sums, _ = self._sums_and_counts(jobs)
        return [[_make(pk, v, False) for v in node] for node in sums]

    def _sums_and_counts(self, jobs: tuple[NodeJob, ...]) -> tuple[list[list[mpz]], list[IntArray]]:
        """:meth:`bucket_sums` as raw values, with each job's bucket counts (a larger sibling's:
        its parent's minus the smaller child's, as its sums)."""
        n = self._X.shape[0]
        pk = self._key()
        codes = self._codes
        if codes is None:
            raise ProtocolError("no setup received")
        for job in jobs:
            if job.ids.size and (job.ids.min() < 0 or job.ids.max() >= n):
                raise ProtocolError("a node names instances that do not exist")
        by_node = {j.node: j for j in jobs}
        direct: list[NodeJob] = []
        pairs: list[tuple[int, int, int]] = []  # (large, small, parent)
        planned: set[int] = set()
        for job in jobs:
            if job.node in planned:
                continue
            sib = by_node.get(job.sibling)
            if sib is not None and job.parent in self._cache and sib.parent == job.parent:
                if not np.array_equal(np.sort(np.concatenate([job.ids, sib.ids])), np.sort(self._node_ids[job.parent])):
                    raise ProtocolError(f"nodes {job.node} and {sib.node} do not split their parent's instances")
                small, large = (job, sib) if (job.ids.size, job.node) <= (sib.ids.size, sib.node) else (sib, job)
                direct.append(small)
                pairs.append((large.node, small.node, job.parent))
                planned |= {small.node, large.node}
            else:
                direct.append(job)
                planned.add(job.node)
        pending = Quotients(pk._n2)
        done: dict[int, list[mpz]] = {}
        counts: dict[int, IntArray] = {}
        for job in direct:
            node_codes = codes[job.ids]
            counts[job.node] = bucket_counts(node_codes, self._widths)
            done[job.node] = self._direct(job.ids, node_codes, counts[job.node], pending)
        self.op_counts["subtract"] += pending.resolve()
        for large_node, small_node, parent in pairs:
            done[large_node] = sibling_sums(self._cache[parent], done[small_node], pending)
            counts[large_node] = self._counts[parent] - counts[small_node]
        self.op_counts["subtract"] += pending.resolve()
        self._cache, self._counts = done, counts
        self._node_ids = {j.node: j.ids for j in jobs}
        return [done[j.node] for j in jobs], [counts[j.node] for j in jobs]

    @handles(HistogramRequest)
    def on_histogram(self, sender: str, msg: HistogramRequest) -> HistogramReply:
        """The kind of every bucket (empty, the rest of its feature, or sent: a function of the
        counts, which the active party learns anyway) and the sent buckets' sums packed ``k`` per
        ciphertext, each packed ciphertext re-randomised before it leaves."""
        if msg.tree != self._tree or self._layout is None or self._codes is None:
            raise ProtocolError("a histogram request for a tree whose gradients were not received")
        self.answer_once(0, msg.tree, msg.layer, msg)
        sums, counts = self._sums_and_counts(msg.jobs)
        kinds = np.concatenate([bucket_kinds(c, self._widths) for c in counts]) if msg.jobs else np.zeros(
            0, dtype=np.uint8)
        flat = [c for node in sums for c in node]
        pk = self._key()
        sent = [_make(pk, c, False) for c, kind in zip(flat, kinds.tolist(), strict=True) if kind == BUCKET_SENT]
        packed = pack_ciphertexts(sent, self._layout, self.executor)
        self.op_counts["shift"] += len(sent) - len(packed)
        noise = obfuscators(pk, "djn", len(packed), executor=self.executor, rng=self._rng)
        self.op_counts["rerandomize"] += len(packed)
        return HistogramReply(len(flat), kinds,
                              tuple(int(v * r % pk._n2) for v, r in zip(ciphertext_values(packed), noise, strict=True)))

    # -- S4: the owner applies a split ----------------------------------------------------------
    def record_for(self, order: SplitOrder) -> int:
        """Store the split's feature and threshold in the lookup table; return its record id."""
        mapper = self._mapper
        if mapper is None:
            raise ProtocolError("no setup received")
        if not 0 <= order.feature < mapper.n_features or not 0 <= order.bin < mapper.n_bins[order.feature]:
            raise ProtocolError("a split order names a feature or bucket this party does not have")
        self.table.append(LookupRecord(order.feature, mapper.threshold(order.feature, order.bin),
                                       mapper.categorical[order.feature], order.missing_left))
        return len(self.table) - 1

    @handles(SplitRequest)
    def on_split(self, sender: str, msg: SplitRequest) -> SplitReply:
        """For each order: a lookup record, and the node's instances that go left (the instance
        space the active party needs to continue)."""
        if msg.tree != self._tree:
            raise ProtocolError("a split order for another tree")
        self.answer_once(1, msg.tree, min((o.node for o in msg.orders), default=-1), msg)
        records: list[int] = []
        lefts: list[IntArray] = []
        for order in msg.orders:
            ids = self._node_ids.get(order.node)
            if ids is None:
                raise ProtocolError(f"node {order.node} was not built in this layer")
            rec = self.record_for(order)
            row = self.table[-1]
            go = row.goes_left(self._X[ids, row.feature])
            records.append(rec)
            lefts.append(np.asarray(ids[go], dtype=np.int64))
        return SplitReply(tuple(records), tuple(lefts))

    @handles(End)
    def on_end(self, sender: str, msg: End) -> Ack:
        self._vals, self._cache, self._counts, self._node_ids = [], {}, {}, {}
        return Ack()

    # -- single-use requests and checkpoints (``specs/secureboost.md``, "Checkpoints") ------------
    def answer_once(self, kind: int, tree: int, index: int, msg: Message) -> None:
        """Admit a histogram or split request once per tree and layer (or nodes): the same request
        again (a resumed active party repeats it byte for byte) passes, any other is refused with
        :class:`UnexpectedMessage`.  Journaled before the reply leaves, so a restart remembers it."""
        if self._journal.lookup((kind, tree, index), msg) is None:
            self._journal.record((kind, tree, index), msg)

    @handles(Checkpoint)
    def on_checkpoint(self, sender: str, msg: Checkpoint) -> Ack:
        """Save the lookup table with ``msg.trees`` trees finished (local)."""
        if self._store is None:
            raise UnexpectedMessage(f"{self.name} keeps no checkpoints")
        if msg.trees != self._tree + 1:
            raise UnexpectedMessage("a checkpoint marker that is not the tree just finished")
        self._store.save(PassiveState(msg.trees, self.model_state()))
        return Ack()

    @handles(Resume)
    def on_resume(self, sender: str, msg: Resume) -> Ack:
        """Restore the lookup table of the checkpoint with ``msg.trees`` trees (current or previous
        file; ``0``: empty); its journal of answered requests was reloaded when it started (local)."""
        if self._store is None:
            raise UnexpectedMessage(f"{self.name} keeps no checkpoints")
        if msg.trees:
            saved = self._store.latest(PassiveState, lambda s: s.trees == msg.trees)
            if saved is None:
                raise ProtocolError(f"{self.name} has no checkpoint after {msg.trees} trees")
            self.restore_model(saved.table)
        else:
            self.table = []
        self._tree, self._vals, self._cache, self._counts, self._node_ids = -1, [], {}, {}, {}
        return Ack()

    # -- the model part (a predict-only run restores it instead of training) -------------------
    def model_state(self) -> PassiveModel:
        """What this party keeps of the fitted model (local; :mod:`.model`): its lookup table."""
        t = self.table
        return PassiveModel(self.table_width, np.asarray([r.feature for r in t], dtype=np.int64),
                            np.asarray([r.threshold for r in t], dtype=np.float64),
                            np.asarray([r.categorical for r in t], dtype=bool),
                            np.asarray([r.missing_left for r in t], dtype=bool))

    def restore_model(self, state: PassiveModel) -> None:
        """Adopt a saved lookup table (local).  :class:`DecodeError` unless it fits this party's
        columns: features in range, a number as every threshold, a category code as a categorical one."""
        arrays = [np.asarray(a) for a in (state.feature, state.threshold, state.categorical, state.missing_left)]
        if (state.n_features != self.table_width or any(a.ndim != 1 or a.shape != arrays[0].shape for a in arrays)
                or [a.dtype.kind for a in arrays] not in (["i", "f", "b", "b"], ["u", "f", "b", "b"])):
            raise DecodeError("the saved SecureBoost lookup table is malformed")
        feature, threshold, categorical, missing_left = arrays
        cat = threshold[categorical]
        if (np.any((feature < 0) | (feature >= self.table_width)) or np.any(np.isnan(threshold))
                or np.any(~np.isfinite(cat) | (cat < 0) | (cat != np.floor(cat)))):
            raise DecodeError("the saved SecureBoost lookup table does not fit this passive party's columns")
        self.table = [LookupRecord(int(f), float(v), bool(c), bool(m))
                      for f, v, c, m in zip(feature, threshold, categorical, missing_left, strict=True)]

    # -- P1: inference ---------------------------------------------------------------------------
    def load_queries(self, X: npt.ArrayLike) -> None:
        """This party's columns of the rows to predict (row ``r`` as the active party numbers it)."""
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[1] != self._X.shape[1]:
            raise ParameterError(f"queries must have {self._X.shape[1]} columns")
        self._query = Xa

    @handles(PredictRequest)
    def on_predict(self, sender: str, msg: PredictRequest) -> PredictReply:
        """Route each (record, row) with the lookup table; reveals one bit per query."""
        if self._query is None:
            raise ProtocolError("no prediction rows loaded")
        if msg.records.size and (msg.records.min() < 0 or msg.records.max() >= len(self.table)):
            raise ProtocolError("unknown lookup record")
        if msg.rows.size and (msg.rows.min() < 0 or msg.rows.max() >= self._query.shape[0]):
            raise ProtocolError("unknown prediction row")
        left = np.zeros(msg.rows.size, dtype=bool)
        for rec in np.unique(msg.records).tolist():
            sel = np.flatnonzero(msg.records == rec)
            row = self.table[rec]
            left[sel] = row.goes_left(self._query[msg.rows[sel], row.feature])
        return PredictReply(left)
