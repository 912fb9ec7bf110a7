"""What each SecureBoost party keeps of a fitted model (``specs/secureboost.md``, "Model parts").

The active party keeps its boosted trees as one checked JSON document of the library
(``securetrees.trees.persistence``, kind ``boosted``: every tree's structure, the feature and
threshold of each of its own splits, every passive split withheld with its owner's index as
provider, the leaf weights, the base score, the learning rate, the loss and the class codes),
and per tree the record id each owner handed out for each of its splits.  A passive party keeps
its lookup table: per record id, the feature, threshold, kind and missing-value direction of the
split it owns (nothing else: it never held a leaf weight).  Messages of the runtime's strict
codec, so a part round-trips exactly and decodes without pickle.  The Paillier key pair is not
part of any model: it stays in the active party's key file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.runtime import Message, message

__all__ = ["ActiveModel", "PassiveModel"]


@message("secureboost.model.active")
@dataclass(frozen=True)
class ActiveModel(Message):
    """The active party's trees (``forest``: a boosted-forest JSON document whose passive splits
    are withheld), per tree the passive split nodes (``nodes[t]``) and their owners' record ids
    (``records[t]``, aligned), and the number of its own columns (the first features)."""

    forest: str
    nodes: tuple[np.ndarray, ...]
    records: tuple[np.ndarray, ...]
    n_own: int


@message("secureboost.model.passive")
@dataclass(frozen=True)
class PassiveModel(Message):
    """A passive party's lookup table (record id = index) over its ``n_features`` columns."""

    n_features: int
    feature: np.ndarray
    threshold: np.ndarray
    categorical: np.ndarray
    missing_left: np.ndarray
