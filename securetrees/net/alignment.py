"""Rows aligned by private set intersection before a vertical deployment's roles start.

A vertical protocol (Federated Forest, RevFRF) needs every data-holding party's rows in one
order over the ids they all hold.  Each data-holding process first serves an *alignment
phase*: the same certificate, address and operator, but the run's roster gives the
:class:`AlignmentPlan`'s leader the role ``psi_leader`` and the other data holders
``psi_member`` (so only the leader may start a PSI, ``specs/psi.md``).  The operator runs one
PSI per id set (``train``, then ``test`` for the rows to predict), then tells every data holder
``align_done``: each reorders its tables to the agreed order, writes its row indices to
``out/NAME.rows.npz`` on its own machine, stops the phase's server and starts its protocol role
on the same address.  A party that keeps checkpoints also seals them, with the SHA-256 of its
data files, into its checkpoint store's ``alignment`` slot (:class:`AlignmentRecord`): restarted,
it skips the phase and takes its rows from there, after checking that its files are unchanged
(:class:`~securetrees.errors.DataChangedError` otherwise).  No party ever receives another's ids; what each learns is in
``specs/deployment.md`` ("Your own data").
"""

from __future__ import annotations

import hashlib
import io
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from securetrees.errors import (
    DataChangedError,
    DecodeError,
    DuplicateIdError,
    ParameterError,
    PartyUnavailable,
    PeerTimeout,
    ProtocolError,
    RunStopped,
)
from securetrees.files import write_private
from securetrees.net.config import RunConfig
from securetrees.net.control import FIT_ONCE, Controllable, ControlReply, Operator
from securetrees.net.tables import PartyTable, party_tables
from securetrees.net.transport import GrpcNetwork, Peer
from securetrees.psi.messages import LEADER_ROLE, MEMBER_ROLE, Result
from securetrees.psi.roles import DEFAULT_CHUNK_SIZE, DEFAULT_MAX_SET_SIZE, IntArray, PsiLeader, PsiMember
from securetrees.runtime import Message, message
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.runtime.network import Network

__all__ = [
    "ALIGNMENTS",
    "ALIGNMENT_SLOT",
    "NO_COMMON_TEST_IDS",
    "PARAMETERS",
    "AlignLeader",
    "AlignMember",
    "AlignmentPlan",
    "AlignmentRecord",
    "align",
    "align_party",
    "align_pending",
    "align_test",
    "aligned_rows",
    "aligned_tables",
    "alignment_mode",
    "check_test_rows",
    "finish_alignment",
    "in_alignment",
    "record_alignment",
    "resumed_alignment",
    "rows_path",
    "run_alignment",
    "serve_alignment",
]

ALIGNMENTS = ("psi", "hmac-trusted")
"""``[protocol] alignment``: ``psi`` (the default) or the trusted setting's shared-key HMAC."""

PARAMETERS = frozenset({"alignment", "max_set_size", "chunk_size"})
"""The ``[protocol]`` keys the alignment phase reads (a deployment that aligns declares them too)."""


NO_COMMON_TEST_IDS: Final = ("the parties hold no test id in common: training goes on, but there is no row to "
                             "predict (give every data holder test rows with shared ids, e.g. in a predict-only run)")
"""What an empty intersection of the test ids tells: in a fit run, the leader's log at the alignment and
the operator's ``predict`` (:func:`check_test_rows`); the training ids' intersection alone must not be empty."""


def check_test_rows(rows: int) -> None:
    """Refuse to predict ``rows`` = 0 aligned test rows (:class:`ParameterError`, :data:`NO_COMMON_TEST_IDS`).
    Reveals that the intersection of the test ids is empty, which the operator learns at the alignment."""
    if rows == 0:
        raise ParameterError(NO_COMMON_TEST_IDS)


def alignment_mode(config: RunConfig) -> str:
    mode = str(config.params.get("alignment", "psi"))
    if mode not in ALIGNMENTS:
        raise ParameterError(f"[protocol] alignment is one of {ALIGNMENTS}, not {mode!r}")
    return mode


@dataclass(frozen=True)
class AlignmentPlan:
    """Who aligns what: ``sets`` maps an id set's name to the parties holding it (the leader
    holds every set).  ``disjoint`` (optional) lists groups of set names whose intersections must
    not share a leader's row (HybridTree: one set per guest, and a row belongs to one guest); the
    leader refuses an overlap with :class:`DuplicateIdError` at the set that makes it.  A set in
    ``may_be_empty`` may have an empty intersection (HybridTree's test rows: a guest may hold none
    of a batch), and so may ``test`` beside ``train`` (training goes on, ``predict`` refuses:
    :data:`NO_COMMON_TEST_IDS`); any other empty intersection stops the run."""

    leader: str
    sets: Mapping[str, tuple[str, ...]]
    disjoint: tuple[tuple[str, ...], ...] = ()
    may_be_empty: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, holders in self.sets.items():
            if self.leader not in holders or len(holders) < 2 or len(set(holders)) != len(holders):
                raise ParameterError(f"the id set {name!r} needs the leader and one or more other parties")
        if any(name not in self.sets for group in (*self.disjoint, self.may_be_empty) for name in group):
            raise ParameterError("a disjoint group or may_be_empty names a set the plan does not hold")

    @property
    def parties(self) -> list[str]:
        return sorted({p for holders in self.sets.values() for p in holders})


def rows_path(config: RunConfig, name: str) -> Path:
    """Where party ``name`` writes its row indices of each set in the agreed order."""
    return config.path.parent / "out" / f"{name}.rows.npz"


class _Aligning(Controllable):
    """The control actions both alignment roles share."""

    name: str
    _sets: Mapping[str, Sequence[str]]
    rows: dict[str, IntArray]
    finished: threading.Event

    def _setup(self, sets: Mapping[str, Sequence[str]]) -> None:
        self._sets, self.rows, self.finished = sets, {}, threading.Event()

    def _set_ids(self, name: str) -> Sequence[str]:
        ids = self._sets.get(name)
        if ids is None:
            raise ParameterError(f"{self.name!r} holds no id set {name!r}")
        return ids

    def control_align_done(self, args: dict[str, str]) -> ControlReply:
        """End the alignment phase (after this reply has gone out)."""
        missing = sorted(set(self._sets) - set(self.rows))
        if missing:
            raise ProtocolError(f"{self.name!r} has not aligned {missing}")
        threading.Timer(0.2, self.finished.set).start()
        return ControlReply(info={name: str(len(r)) for name, r in self.rows.items()})


class AlignLeader(_Aligning, PsiLeader):
    """The leader of the alignment phase: runs the PSI of each set with that set's holders."""

    def __init__(self, name: str, network: Network, sets: Mapping[str, Sequence[str]], plan: AlignmentPlan, *,
                 max_set_size: int = DEFAULT_MAX_SET_SIZE, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        self._setup(sets)
        self.plan = plan
        members = [p for p in plan.parties if p != name]
        super().__init__(name, network, [], members, max_set_size=max_set_size, chunk_size=chunk_size)

    def control_align_run(self, args: dict[str, str]) -> ControlReply:
        """The PSI of set ``set`` with its holders.  Learns each pairwise intersection; the
        operator's reply holds the global intersection's size only."""
        name = args.get("set", "")
        holders = self.plan.sets.get(name)
        if holders is None:
            raise ParameterError(f"no id set {name!r} in the alignment plan")
        self.use_ids(self._set_ids(name), [p for p in holders if p != self.name])
        rows = self.run().rows
        if rows.size == 0 and name == "test" and "train" in self.plan.sets:
            self.logger.warning("%s: %s", self.name, NO_COMMON_TEST_IDS)  # training goes on; predict refuses
        elif rows.size == 0 and name not in self.plan.may_be_empty:
            raise ParameterError(f"the parties hold no {name} id in common: nothing to align")
        self._check_disjoint(name, rows)
        self.rows[name] = rows
        return ControlReply(info={"size": str(rows.size)})


    def _check_disjoint(self, name: str, rows: IntArray) -> None:
        """Refuse a row of this set that an earlier set of one of its disjoint groups holds too
        (local: the leader compares its own row indices)."""
        for group in self.plan.disjoint:
            if name not in group:
                continue
            for other in group:
                if other != name and other in self.rows:
                    shared = np.intersect1d(rows, self.rows[other]).size
                    if shared:
                        self.logger.error("%d of %s's ids are in both %s and %s", shared, self.name, other, name)
                        raise DuplicateIdError(f"an id of {self.name!r} is held in both {other!r} and {name!r}, "
                                               "which must be disjoint")


class AlignMember(_Aligning, PsiMember):
    """A member of the alignment phase: intersects the set the operator names next."""

    def __init__(self, name: str, network: Network, sets: Mapping[str, Sequence[str]], *,
                 max_set_size: int = DEFAULT_MAX_SET_SIZE) -> None:
        self._setup(sets)
        self._current = ""
        super().__init__(name, network, [], max_set_size=max_set_size)

    def control_align_use(self, args: dict[str, str]) -> ControlReply:
        """Intersect set ``set`` in the leader's next run.  Reveals nothing."""
        name = args.get("set", "")
        self.use_ids(self._set_ids(name))
        self._current = name
        return ControlReply()

    def on_result(self, sender: str, msg: Result) -> None:
        """The agreed order of the current set (``PsiMember.on_result``), kept under its name."""
        super().on_result(sender, msg)
        if self.result is not None and self._current:
            self.rows[self._current] = self.result.rows


def _phase_roster(config: RunConfig, plan: AlignmentPlan) -> dict[str, Peer]:
    roles = {p: MEMBER_ROLE for p in plan.parties}
    roles[plan.leader] = LEADER_ROLE
    return {n: Peer(p.address, p.fingerprint, p.issuer, roles.get(n, p.role)) for n, p in config.parties.items()}


def serve_alignment(config: RunConfig, role: str, network: Network, plan: AlignmentPlan,
                    sets: Mapping[str, Sequence[str]]) -> dict[str, IntArray]:
    """The alignment phase of party ``role`` (blocks until the operator ends it): its row indices
    of each set in the agreed order, also written to :func:`rows_path`.  ``network`` is the
    party's protocol network (its TLS identity is reused); the phase has its own server."""
    if not isinstance(network, GrpcNetwork):
        raise ParameterError("the alignment phase runs over gRPC (a deployment's network)")
    cap = int(config.params.get("max_set_size", DEFAULT_MAX_SET_SIZE))
    net = GrpcNetwork(network.identity, _phase_roster(config, plan), options=config.transport)
    party: AlignLeader | AlignMember
    if role == plan.leader:
        party = AlignLeader(role, net, sets, plan, max_set_size=cap,
                            chunk_size=int(config.params.get("chunk_size", DEFAULT_CHUNK_SIZE)))
    else:
        party = AlignMember(role, net, sets, max_set_size=cap)
    net.start()
    try:
        while not party.finished.wait(0.2):
            if not net.serving:  # the operator's shutdown closed the phase's server
                raise RunStopped(f"{role!r} was stopped during the alignment phase, before its protocol role")
    finally:
        net.close(grace=2.0)
    buffer = io.BytesIO()
    np.savez(buffer, **party.rows)  # type: ignore[arg-type]
    write_private(rows_path(config, role), buffer.getvalue())  # its rows' order is its own
    return dict(party.rows)


def run_alignment(operator: Operator, plan: AlignmentPlan) -> dict[str, int]:
    """The operator's side: one PSI per set; returns each intersection's size (all it learns)."""
    sizes: dict[str, int] = {}
    for name, holders in plan.sets.items():
        members = [p for p in holders if p != plan.leader]
        operator.control_many(members, "align_use", {m: {"set": name} for m in members})
        sizes[name] = int(operator.control(plan.leader, "align_run", set=name).info["size"])
    return sizes


def in_alignment(operator: Operator, party: str) -> bool:
    """Whether ``party`` still serves the alignment phase (as its leader or a member) rather than
    its protocol role: its ``role`` control action."""
    return operator.control(party, "role").info.get("role") in (LEADER_ROLE, MEMBER_ROLE)


def align(operator: Operator, plan: AlignmentPlan) -> dict[str, int]:
    """The operator's alignment step: every set's PSI, then the end of the phase (each data
    holder then serves its protocol role); returns each intersection's size.  Refused with
    :class:`ParameterError` once the phase is over (a second ``fit``: the parties serve their roles)."""
    if not in_alignment(operator, plan.leader):
        raise ParameterError(f"the alignment phase is over ({plan.leader!r} serves its protocol role): {FIT_ONCE}")
    return _align(operator, plan)


def align_pending(operator: Operator, plan: AlignmentPlan) -> dict[str, int]:
    """:func:`align` unless it ran already (the leader then serves its protocol role): a
    predict-only run's first ``predict`` aligns its new rows, a later one reuses them."""
    return _align(operator, plan) if in_alignment(operator, plan.leader) else {}


def _align(operator: Operator, plan: AlignmentPlan) -> dict[str, int]:
    with operator.step("align"):
        sizes = run_alignment(operator, plan)
        finish_alignment(operator, plan)
    return sizes


def finish_alignment(operator: Operator, plan: AlignmentPlan, timeout: float = 60.0) -> None:
    """End the phase and wait until every data holder serves its protocol role."""
    operator.control_many(plan.parties, "align_done")
    end = time.monotonic() + timeout
    for party in plan.parties:
        while True:
            try:
                if not in_alignment(operator, party):
                    break
            except PartyUnavailable:
                pass
            if time.monotonic() > end:
                raise PeerTimeout(f"{party!r} did not start its protocol role within {timeout:g} s after the "
                                  f"alignment phase: its log (logs/{party}.log on its machine) says why, e.g. a "
                                  "table that does not match run.toml")
            time.sleep(0.1)



ALIGNMENT_SLOT = "alignment"
"""The checkpoint store's slot of a party's :class:`AlignmentRecord`."""


@message("securetrees.alignment.record")
@dataclass(frozen=True)
class AlignmentRecord(Message):
    """What a party keeps of its alignment, sealed in its checkpoint store (never sent): its row
    indices of each id set in the agreed order (``sets[i]`` → ``rows[i]``), and the SHA-256 of each
    of its data files (``files[i]``, as ``run.toml`` names it, → ``digests[i]``)."""

    sets: tuple[str, ...]
    rows: tuple[np.ndarray, ...]
    files: tuple[str, ...]
    digests: tuple[bytes, ...]


def _data_files(config: RunConfig, role: str) -> dict[str, Path]:
    party = config.party(role)
    return {str(p): p for p in (party.data, party.test_data) if p is not None}


def _digest(path: Path) -> bytes:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.digest()


def record_alignment(store: CheckpointStore, config: RunConfig, role: str, rows: Mapping[str, IntArray]) -> None:
    """Seal ``role``'s aligned rows and its data files' digests into its checkpoint store."""
    files = _data_files(config, role)
    store.save_side(ALIGNMENT_SLOT, AlignmentRecord(
        tuple(rows), tuple(np.asarray(r, dtype=np.int64) for r in rows.values()), tuple(files),
        tuple(_digest(p) for p in files.values())))


def resumed_alignment(store: CheckpointStore | None, config: RunConfig, role: str) -> dict[str, IntArray] | None:
    """The aligned rows of a restarted party (its checkpoint store's :class:`AlignmentRecord`), or
    ``None`` when it has none (it then serves the alignment phase).  Refuses with
    :class:`DataChangedError`, naming the file, a data file whose digest changed since."""
    record = None if store is None else store.load_side(ALIGNMENT_SLOT, AlignmentRecord)
    if record is None:
        return None
    if len(record.sets) != len(record.rows) or len(record.files) != len(record.digests):
        raise DecodeError("a malformed alignment record in a checkpoint")
    files = _data_files(config, role)
    if sorted(record.files) != sorted(files):
        raise DataChangedError(f"{role!r} was aligned on {sorted(record.files)}, but its configuration names "
                               f"{sorted(files)}: the run cannot resume on other data files")
    for name, digest in zip(record.files, record.digests, strict=True):
        if _digest(files[name]) != digest:
            raise DataChangedError(f"{name} changed since {role!r} aligned its rows (its SHA-256 is not the one in "
                                   "its checkpoint): the run cannot resume on it")
    rows = {}
    for name, r in zip(record.sets, record.rows, strict=True):
        if r.ndim != 1 or r.dtype.kind not in "iu":
            raise DecodeError("a malformed alignment record in a checkpoint")
        rows[name] = np.asarray(r, dtype=np.int64)
    return rows


def aligned_rows(config: RunConfig, role: str, network: Network, plan: AlignmentPlan,
                 sets: Mapping[str, Sequence[str]], store: CheckpointStore | None = None) -> dict[str, IntArray]:
    """Party ``role``'s row indices of each of its id ``sets`` in the agreed order: the alignment phase
    (:func:`serve_alignment`), its rows then recorded in ``store`` (:func:`record_alignment`); or, for
    a party restarted with a record there, the recorded rows (:func:`resumed_alignment`: its data files
    checked, no phase).  A record that lacks one of ``sets``, or whose rows do not index its ids, is
    refused (:class:`DecodeError`)."""
    rows = resumed_alignment(store, config, role)
    if rows is None:
        rows = serve_alignment(config, role, network, plan, sets)
        if store is not None:
            record_alignment(store, config, role, rows)
    missing = sorted(set(sets) - set(rows))
    if missing:
        raise DecodeError(f"{role!r}'s recorded rows hold no {missing}")
    for name, ids in sets.items():
        r = rows[name]
        if r.size and (r.min() < 0 or r.max() >= len(ids)):
            raise DecodeError(f"{role!r}'s recorded {name} rows do not fit its data")
    return {name: rows[name] for name in sets}


def align_party(config: RunConfig, role: str, network: Network, plan: AlignmentPlan, train: PartyTable,
                test: PartyTable | None, store: CheckpointStore | None = None
                ) -> tuple[PartyTable, PartyTable | None]:
    """Party ``role``'s tables in the agreed order (:func:`aligned_rows` of its training ids and, when
    the plan aligns its test ids, of those: with a checkpoint ``store``, recorded once aligned, or
    taken from there when restarted)."""
    sets: dict[str, Sequence[str]] = {"train": train.ids}
    if role in plan.sets.get("test", ()):
        if test is None:
            raise ParameterError(f"{role!r} aligns test rows but names no test_data")
        sets["test"] = test.ids
    rows = aligned_rows(config, role, network, plan, sets, store)
    return train.take(rows["train"]), (test.take(rows["test"]) if test is not None and "test" in rows else None)


def align_test(config: RunConfig, role: str, network: Network, plan: AlignmentPlan, test: PartyTable) -> PartyTable:
    """Party ``role``'s test rows in the agreed order, alone (a predict-only run: the plan's only
    set is ``test``; :func:`serve_alignment`)."""
    if set(plan.sets) != {"test"}:
        raise ParameterError("a predict-only alignment aligns the test ids only")
    return test.take(serve_alignment(config, role, network, plan, {"test": test.ids})["test"])


def aligned_tables(config: RunConfig, name: str) -> tuple[PartyTable, PartyTable | None]:
    """Party ``name``'s tables in the agreed order of its last alignment: its own files and the
    row indices it wrote (:func:`rows_path`), on its own machine."""
    train, test = party_tables(config.party(name))
    with np.load(rows_path(config, name), allow_pickle=False) as rows:
        return train.take(rows["train"]), (test.take(rows["test"]) if test is not None and "test" in rows.files
                                           else None)
