"""What each Federated Forest party keeps of a fitted forest (``specs/deployment.md``, "Model files").

The master keeps the skeleton it built: every tree's shape and, per internal node, which client
holds its split (``provider``; the feature and threshold are withheld from it), plus the values of
the leaves when the labels were shared with it.  A client keeps its partial trees: the feature
and threshold of each split it holds, the rest withheld, and (the label holder, ``encrypted``
mode) the leaf values and which nodes are cover splits (``reference``).  Messages of the runtime's
strict codec, so a part round-trips exactly and decodes without pickle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.protocols.federated_forest.checkpoint import TreeState
from securetrees.protocols.federated_forest.messages import Setup
from securetrees.runtime import Message, message

__all__ = ["ClientModel", "MasterModel"]


@message("federated_forest.model.master")
@dataclass(frozen=True)
class MasterModel(Message):
    """The master's skeleton: the run's layout and its trees (no client's threshold)."""

    clients: tuple[str, ...]
    label_holder: str
    n_classes: int
    n_features: int
    label_protection: str
    criterion: str
    owner: np.ndarray
    trees: tuple[TreeState, ...]


@message("federated_forest.model.client")
@dataclass(frozen=True)
class ClientModel(Message):
    """A client's partial trees over its own columns (global ids ``feature_ids``, in the local
    order the trees index), the run's public settings, and (label holder) the reference flags."""

    setup: Setup
    feature_ids: np.ndarray
    trees: tuple[TreeState, ...]
    reference: tuple[np.ndarray, ...]
    label_holder: bool
