"""HybridTree's checkpoints (``specs/hybridtree.md``, "Checkpoints"): each party's own state at the
tree boundary, sealed in the shared store (:mod:`securetrees.runtime.checkpoint`, format ``b"HTCK"``
version 2, protocol ``hybridtree``).

* The host (:class:`HostState`): after every boosting round (one tree per output), the trees so far
  with the guests still active (the model part it would save,
  :class:`~securetrees.protocols.hybridtree.model.HostModel`) and the raw scores of the training
  rows.  Gradients follow from the scores and the labels; the Paillier key stays in the key file.
* A guest (:class:`GuestState`): when the gradients of tree ``t`` arrive, before it acknowledges
  them, its split tables of the trees before ``t`` (the model part it would save,
  :class:`~securetrees.protocols.hybridtree.model.GuestModel`, without bins).  And in the slot
  ``journal`` (a :class:`~securetrees.runtime.journal.SingleUseJournal`, slots ``(tree, layer,
  attempt)``) the SHA-256 of every histogram request it has answered, written before the reply
  leaves: the same request again (a resumed host repeats it byte for byte) is answered, any other
  request for an answered ``(tree, layer, attempt)`` is refused, across restarts.  A resumed run
  sets up again (a fresh session, fresh agreement keys), so no mask is ever applied to two
  different histograms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.protocols.hybridtree.model import GuestModel, HostModel
from securetrees.runtime import Message, message
from securetrees.runtime.checkpoint import CheckpointFormat

__all__ = ["FORMAT", "GuestState", "HostState"]

FORMAT = CheckpointFormat(b"HTCK", "hybridtree", version=2)
"""HybridTree's checkpoint format (version 2: the shared single-use journal record; version 1 files are refused)."""


@message("hybridtree.state.host")
@dataclass(frozen=True)
class HostState(Message):
    """The host after ``trees`` trees (whole boosting rounds): those trees, the guests still
    active, and the raw scores of the training rows, one column per output."""

    trees: int
    model: HostModel
    raw: np.ndarray


@message("hybridtree.state.guest")
@dataclass(frozen=True)
class GuestState(Message):
    """A guest when the gradients of tree ``trees`` arrived: its splits of the trees before."""

    trees: int
    model: GuestModel

