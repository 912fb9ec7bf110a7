"""SecureBoost's checkpoints (``specs/secureboost.md``, "Checkpoints"): each party's own state
after every boosting round, sealed in the shared store (:mod:`securetrees.runtime.checkpoint`,
format ``b"SBCK"`` version 2, protocol ``secureboost``).

* The active party (:class:`ActiveState`): the trees so far with their record ids (the model part
  it would save, :class:`~securetrees.protocols.secureboost.model.ActiveModel`) and the raw scores
  (margins) of the training rows after them.  Gradients follow from the scores and the labels, so
  the next round needs nothing else; the Paillier key stays in the key file.
* A passive party (:class:`PassiveState`): its lookup table after those trees (the model part it
  would save, :class:`~securetrees.protocols.secureboost.model.PassiveModel`); and in the slot
  ``journal`` (a :class:`~securetrees.runtime.journal.SingleUseJournal`, slots ``(kind, tree,
  index)``: kind 0 a histogram request and its layer, 1 a split request and its first node) the
  SHA-256 of every histogram and split request it has answered, written before the reply leaves:
  the same request again is answered, another one for the same tree and layer (or nodes) is
  refused, across restarts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.protocols.secureboost.model import ActiveModel, PassiveModel
from securetrees.runtime import Message, message
from securetrees.runtime.checkpoint import CheckpointFormat

__all__ = ["FORMAT", "ActiveState", "PassiveState"]

FORMAT = CheckpointFormat(b"SBCK", "secureboost", version=2)
"""SecureBoost's checkpoint format (version 2: the shared single-use journal record; version 1 files are refused)."""


@message("secureboost.state.active")
@dataclass(frozen=True)
class ActiveState(Message):
    """The active party after ``trees`` trees (whole boosting rounds): those trees and the raw
    scores of the training rows, one column per output."""

    trees: int
    model: ActiveModel
    raw: np.ndarray


@message("secureboost.state.passive")
@dataclass(frozen=True)
class PassiveState(Message):
    """A passive party after ``trees`` trees: its lookup table."""

    trees: int
    table: PassiveModel

