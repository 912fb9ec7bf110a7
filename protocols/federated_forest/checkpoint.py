"""Resumable training: each party's own state, sealed at rest, pickle-free
(``specs/federated_forest.md``, "Checkpoints"; the paper's "recovered from the break point").

File format, version 1 (the shared store's, :mod:`securetrees.runtime.checkpoint`): ``b"FFCK"``,
the version byte ``0x01``, a 12-byte nonce, then AES-256-GCM under the party's 32-byte key, with
associated data ``b"securetrees/federated_forest/checkpoint/v1/" + party name``, of one state
message encoded by the runtime's strict codec (:mod:`securetrees.runtime.codec`).  Loading never
unpickles; a wrong key, another party's file or any modified byte raises ``DecodeError``.

State is the progress marker ``(tree, layer)`` (``layer == 0``: tree ``tree`` not yet
started; ``layer >= 1``: tree ``tree`` grown to that depth), the finished trees, and the
tree in progress.  Inputs (data, labels, encrypted labels, keys) are not stored: a
restarted run repeats the setup, which is deterministic in the data and the id key.

A client also keeps a journal, ``<party>.journal.ckpt`` (same format, associated data
``b"securetrees/federated_forest/checkpoint/v1/journal/" + party name``): the score requests
it sent the label holder in the tree in progress, written before each leaves, so that after a
restart the same request can be sent again byte for byte (the label holder answers a
repeated request only if it is identical: its scoring oracle stays single-use).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from securetrees.errors import DecodeError, ParameterError, ProtocolError
from securetrees.protocols.federated_forest.messages import ScoreRequest
from securetrees.protocols.federated_forest.skeleton import LayerState, TreeSkeleton
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, message
from securetrees.runtime.checkpoint import CheckpointFormat
from securetrees.runtime.checkpoint import CheckpointStore as SealedStore
from securetrees.trees import Tree

__all__ = ["FORMAT", "CheckpointStore", "ClientState", "MasterState", "ScoreJournal", "SentScore", "TreeState",
           "WorkState"]

FORMAT = CheckpointFormat(b"FFCK", "federated_forest")
"""Federated Forest's checkpoint format (version 1, unchanged since before the shared store)."""
_JOURNAL = "journal"
S = TypeVar("S", bound=Message)


@message("federated_forest.state.tree")
@dataclass(frozen=True)
class TreeState(Message):
    """A :class:`Tree`'s arrays (the model data of one party)."""

    n_features: int
    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    categorical: np.ndarray
    missing_left: np.ndarray
    provider: np.ndarray
    withheld: np.ndarray
    weight: np.ndarray
    value: np.ndarray

    @classmethod
    def of(cls, t: Tree) -> TreeState:
        return cls(t.n_features, t.left, t.right, t.feature, t.threshold, t.categorical, t.missing_left,
                   t.provider, t.withheld, t.weight, t.value)

    def tree(self) -> Tree:
        n = self.left.shape
        arrays = (self.right, self.feature, self.threshold, self.categorical, self.missing_left,
                  self.provider, self.withheld, self.weight)
        if self.left.ndim != 1 or any(a.shape != n for a in arrays) or self.value.ndim != 2 \
                or self.value.shape[0] != n[0]:
            raise DecodeError("inconsistent tree arrays in a checkpoint")
        return Tree(self.n_features, self.left.astype(np.int64), self.right.astype(np.int64),
                    self.feature.astype(np.int64), self.threshold.astype(np.float64), self.categorical.astype(bool),
                    self.missing_left.astype(bool), self.provider.astype(np.int64), self.withheld.astype(bool),
                    self.weight.astype(np.float64), self.value.astype(np.float64))


@message("federated_forest.state.work")
@dataclass(frozen=True)
class WorkState(Message):
    """The tree in progress: skeleton, bootstrap weights, rows, positions, frontier, depth."""

    skeleton: TreeState
    weights: np.ndarray
    rows: np.ndarray
    pos: np.ndarray
    frontier: np.ndarray
    depth: int

    @classmethod
    def of(cls, skeleton: TreeSkeleton, weights: np.ndarray, state: LayerState) -> WorkState:
        return cls(TreeState.of(skeleton.build()), weights, state.rows, state.pos, state.frontier, state.depth)

    def restore(self) -> tuple[TreeSkeleton, np.ndarray, LayerState]:
        sk = TreeSkeleton.from_tree(self.skeleton.tree())
        rows, pos, frontier = (np.asarray(a, dtype=np.int64) for a in (self.rows, self.pos, self.frontier))
        if rows.shape != pos.shape or (pos.size and (pos.min() < 0 or pos.max() >= frontier.size)):
            raise DecodeError("inconsistent layer state in a checkpoint")
        return sk, np.asarray(self.weights, dtype=np.int64), LayerState(rows, pos, frontier, self.depth)


@message("federated_forest.state.master")
@dataclass(frozen=True)
class MasterState(Message):
    """The master's progress, finished trees, tree in progress and random state (PCG64 integers).
    Nothing about cover splits: which nodes belong to the model is the label holder's."""

    tree: int
    layer: int
    trees: tuple[TreeState, ...]
    work: WorkState | None
    rng_state: tuple[int, int, int, int]
    tree_features: np.ndarray


@message("federated_forest.state.client")
@dataclass(frozen=True)
class ClientState(Message):
    """A client's progress, partial trees and tree in progress; the key of its cover choices,
    and (label holder) per finished tree and for the tree in progress which nodes belong to
    the central forest's tree (the others are cover splits)."""

    tree: int
    layer: int
    trees: tuple[TreeState, ...]
    work: WorkState | None
    cover_key: bytes
    reference: tuple[np.ndarray, ...]
    work_reference: np.ndarray


@message("federated_forest.state.sent_score")
@dataclass(frozen=True)
class SentScore(Message):
    """A score request as it left: for tree and layer, the SHA-256 of the master's
    ``find_splits`` it answers and of the label holder's public key it is encrypted under."""

    tree: int
    layer: int
    asked: bytes
    public_key: bytes
    request: ScoreRequest


@message("federated_forest.state.journal")
@dataclass(frozen=True)
class ScoreJournal(Message):
    """A client's score requests of the tree in progress (see the module docstring)."""

    sent: tuple[SentScore, ...]


def rng_state(g: np.random.Generator) -> tuple[int, int, int, int]:
    st = g.bit_generator.state
    if st.get("bit_generator") != "PCG64":
        raise ParameterError("only PCG64 generators can be checkpointed")
    return (int(st["state"]["state"]), int(st["state"]["inc"]), int(st["has_uint32"]), int(st["uinteger"]))


def set_rng_state(g: np.random.Generator, s: tuple[int, int, int, int]) -> None:
    g.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": s[0], "inc": s[1]},
                             "has_uint32": s[2], "uinteger": s[3]}


class CheckpointStore(SealedStore):
    """``<directory>/<party>.ckpt``, the previous one ``<party>.prev.ckpt`` and the journal
    ``<party>.journal.ckpt``, sealed under ``key`` (the shared store,
    :class:`securetrees.runtime.checkpoint.CheckpointStore`, in Federated Forest's format)."""

    def __init__(self, directory: str | os.PathLike[str], party: str, key: bytes, *,
                 rng: RandomSource = SYSTEM_RANDOM) -> None:
        super().__init__(directory, party, key, FORMAT, rng=rng)

    @property
    def journal(self) -> Path:
        return self.side(_JOURNAL)

    def save_journal(self, state: Message) -> None:
        """Replace the journal atomically (it is written before the message it records leaves)."""
        self.save_side(_JOURNAL, state)

    def load_journal(self, expect: type[S]) -> S | None:
        """The journal, or None when this party has not written one."""
        return self.load_side(_JOURNAL, expect)

    def load(self, expect: type[S], marker: tuple[int, int] | None = None) -> S:
        """The latest checkpoint, or the one (current or previous) with progress ``marker``."""
        state = self.latest(expect, None if marker is None else
                            lambda s: (getattr(s, "tree", None), getattr(s, "layer", None)) == marker)
        if state is None:
            raise ProtocolError(f"{self.party} has no checkpoint" + (f" at {marker}" if marker else ""))
        return state
