"""The histogram forest's checkpoints (``specs/histogram_forest.md``, "Checkpoints"): each party's
own state after the setup and after every tree, sealed in the shared store
(:mod:`securetrees.runtime.checkpoint`, format ``b"HFCK"`` version 1, protocol ``histogram_forest``).

* The server (:class:`ServerState`): the trees so far, the next step, the setup it sent (with the
  session id), the agreed ranges and bin edges, and its privacy ledger (every release charged).
* A client (:class:`ClientState`): the setup it received, its X25519 agreement secret and the peers'
  public keys (secure mode: the same pairwise masks after a restart), the agreed bin edges, its
  perturbed inputs (input noise: perturbed once, never again), its privacy ledger and progress.
* A client's slot ``journal`` (:class:`ReplyJournal`): every layer reply it sent since the checkpoint
  before last, with the SHA-256 of its request and the tree's row weights, written before the reply
  leaves.  A resumed server repeats those requests byte for byte and gets the same replies back: a
  noisy release is re-used, never drawn again, so no ε is spent twice; any other request for a step
  already answered is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.errors import DecodeError
from securetrees.protocols.federated_forest.checkpoint import TreeState
from securetrees.protocols.histogram_forest.accountant import Release
from securetrees.protocols.histogram_forest.messages import SetupRequest
from securetrees.runtime import Message, message
from securetrees.runtime.checkpoint import CheckpointFormat

__all__ = ["FORMAT", "JOURNAL", "ClientState", "Ledger", "ReplyJournal", "SentReply", "ServerState", "TreeState"]

FORMAT = CheckpointFormat(b"HFCK", "histogram_forest")
"""The histogram forest's checkpoint format (version 1)."""
JOURNAL = "journal"
"""A client's slot of sent layer replies."""


@message("histogram_forest.state.ledger")
@dataclass(frozen=True)
class Ledger(Message):
    """A privacy ledger: per release, ``(tree, layer, nodes, features_per_node, sensitivity)`` and ε."""

    shape: np.ndarray
    epsilon: np.ndarray

    @classmethod
    def of(cls, releases: list[Release]) -> Ledger:
        return cls(np.asarray([[r.tree, r.layer, r.nodes, r.features_per_node, r.sensitivity] for r in releases],
                              dtype=np.int64).reshape(-1, 5),
                   np.asarray([r.epsilon for r in releases], dtype=np.float64))

    def releases(self) -> list[Release]:
        shape, eps = np.asarray(self.shape), np.asarray(self.epsilon)
        if shape.ndim != 2 or shape.shape[1:] != (5,) or eps.shape != (shape.shape[0],) or shape.dtype.kind != "i" \
                or eps.dtype.kind != "f":
            raise DecodeError("a malformed privacy ledger in a checkpoint")
        return [Release(int(t), int(layer), int(n), int(k), int(d), float(e))
                for (t, layer, n, k, d), e in zip(shape.tolist(), eps.tolist(), strict=True)]


@message("histogram_forest.state.server")
@dataclass(frozen=True)
class ServerState(Message):
    """The server with ``trees`` trees grown, before step ``step``."""

    trees: int
    step: int
    grown: tuple[TreeState, ...]
    setup: SetupRequest
    edges: list[np.ndarray]
    ledger: Ledger | None


@message("histogram_forest.state.client")
@dataclass(frozen=True)
class ClientState(Message):
    """A client with ``trees`` trees answered, before step ``step`` (the fields are empty where the
    session has no such thing: no secure mode, no grid round, no input noise, no histogram noise)."""

    trees: int
    step: int
    setup: SetupRequest
    key_secret: bytes
    peers: dict[str, bytes]
    edges: list[np.ndarray]
    X: np.ndarray
    y: np.ndarray
    ledger: Ledger | None
    grid_done: bool
    ranges_sent: bool


@message("histogram_forest.state.sent_reply")
@dataclass(frozen=True)
class SentReply(Message):
    """One layer reply as it left: its step, the SHA-256 of the request, the tree's row weights
    (the request of layer 0 draws them) and the reply's encoding."""

    step: int
    digest: bytes
    weights: np.ndarray
    reply: bytes


@message("histogram_forest.state.journal")
@dataclass(frozen=True)
class ReplyJournal(Message):
    """A client's sent layer replies (see the module docstring)."""

    sent: tuple[SentReply, ...]
