"""RevFRF's checkpoints (``specs/revfrf.md``, "Checkpoints"): each party's own state, sealed in
the shared store (:mod:`securetrees.runtime.checkpoint`, format ``b"RFCK"`` version 2, protocol
``revfrf``).  Only construction is checkpointed; the CC takes no part in it.

* The CS (:class:`ServerState`), after every layer of the whole forest: its round counter and
  epoch, every node (structure, sample selection μ, statistics, value, provider, column, the
  uploaded ``[[s]]`` with its epoch and signature, missing side), the frontier still to expand and
  the state of each tree's feature-draw generator.  Keys and labels are its inputs, not stored.
* A participant (:class:`ParticipantState`): its epoch, the state of its candidate generator (the proposer's draws
  continue where they stopped), the nodes it provided (column, plaintext threshold, missing side),
  the candidate sets of the rounds whose split request is still to come, and its journal.
* The journal (a :class:`~securetrees.runtime.journal.SingleUseJournal`, slots ``(kind, round)``,
  kinds :data:`EXPAND` and :data:`SPLIT`): every expansion and split reply of the current CS round
  with the SHA-256 of its request.  The same request again (a resumed CS repeats it byte for byte)
  gets the same reply back, the same ciphertext and signature, never a fresh draw; another request
  of the same kind for an answered round is refused, and so is any request for an earlier round.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.errors import DecodeError
from securetrees.runtime import Message, message
from securetrees.runtime.checkpoint import CheckpointFormat
from securetrees.runtime.journal import JournalState

__all__ = ["EXPAND", "FORMAT", "SPLIT", "NodeState", "ParticipantState", "Pending", "ServerState", "generator",
           "generator_state"]

FORMAT = CheckpointFormat(b"RFCK", "revfrf", version=2)
"""RevFRF's checkpoint format (version 2: the shared single-use journal record; version 1 files are refused)."""
EXPAND, SPLIT = 0, 1
"""The kinds of journalled replies."""


def generator_state(gen: np.random.Generator) -> tuple[int, int, int, int]:
    """A PCG64 generator's state as four integers (state, increment, buffered flag, buffer)."""
    st = gen.bit_generator.state
    if st.get("bit_generator") != "PCG64":
        raise DecodeError("only a PCG64 generator's state can be checkpointed")
    return (int(st["state"]["state"]), int(st["state"]["inc"]), int(st["has_uint32"]), int(st["uinteger"]))


def generator(state: tuple[int, int, int, int]) -> np.random.Generator:
    """The generator whose state :func:`generator_state` recorded."""
    bits = np.random.PCG64()
    try:
        bits.state = {"bit_generator": "PCG64", "state": {"state": state[0], "inc": state[1]},
                      "has_uint32": state[2], "uinteger": state[3]}
    except (ValueError, TypeError, OverflowError) as exc:
        raise DecodeError("a malformed generator state in a checkpoint") from exc
    return np.random.Generator(bits)


@message("revfrf.state.pending")
@dataclass(frozen=True)
class Pending(Message):
    """The candidate sets of one round (its expansion answered, its split request not yet seen):
    per task the column, and the thresholds and codes concatenated with their offsets."""

    round: int
    columns: np.ndarray
    threshold_offsets: np.ndarray
    thresholds: np.ndarray
    code_offsets: np.ndarray
    codes: np.ndarray


@message("revfrf.state.participant")
@dataclass(frozen=True)
class ParticipantState(Message):
    """A participant after its last handled construction request (see the module docstring);
    ``node_keys`` holds ``(tree, node)`` per provided node, aligned with the three arrays after it."""

    epoch: int
    generator: tuple[int, int, int, int]
    node_keys: np.ndarray
    node_columns: np.ndarray
    node_thresholds: np.ndarray
    node_missing_left: np.ndarray
    pending: tuple[Pending, ...]
    journal: JournalState


@message("revfrf.state.node")
@dataclass(frozen=True)
class NodeState(Message):
    """One node of the CS's forest (:class:`~securetrees.protocols.revfrf.forest.Node`); a leaf
    has ``provider`` ``""`` and ``t1 == t2 == 0``."""

    tree: int
    id: int
    depth: int
    parent: int
    left: int
    right: int
    samples: np.ndarray
    stats: np.ndarray
    weight: float
    value: np.ndarray
    provider: str
    column: int
    t1: int
    t2: int
    epoch: int
    signature: bytes
    missing_left: bool


@message("revfrf.state.server")
@dataclass(frozen=True)
class ServerState(Message):
    """The CS after ``layers`` layers: see the module docstring; ``roots`` and ``next_ids`` per
    tree, ``frontier`` the ``(tree, node)`` pairs still to expand."""

    layers: int
    round: int
    epoch: int
    roots: np.ndarray
    next_ids: np.ndarray
    nodes: tuple[NodeState, ...]
    frontier: np.ndarray
    draws: tuple[tuple[int, int, int, int], ...]
