"""What each HybridTree party keeps of a fitted model (``specs/deployment.md``, "Model files").

The host keeps, per tree, its own layers in full (a :class:`~securetrees.trees.Tree` as the
library's JSON document), the guest layers' shape with every guest split withheld (the feature
and bin the host chose, never a threshold), the leaf values, the base score and the classes.
A guest keeps the guest splits (feature of the guest space, threshold, categorical group) that
every guest stores alike, or in paper mode its own subtrees, and the agreed bins, so that it can
be rebuilt without its training rows.  Messages of the runtime's strict codec; trees as checked
JSON (``securetrees.trees.persistence``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.runtime import Message, message

__all__ = ["GuestModel", "HostModel", "RecordState", "SplitState"]


@message("hybridtree.model.record")
@dataclass(frozen=True)
class RecordState(Message):
    """One tree as the host sees it (:class:`~securetrees.protocols.hybridtree.host.TreeRecord`)."""

    host_tree: str
    left: np.ndarray
    right: np.ndarray
    missing_left: np.ndarray
    guest_feature: np.ndarray
    guest_bin: np.ndarray
    value: np.ndarray
    host_leaf: np.ndarray
    paper: bool


@message("hybridtree.model.host")
@dataclass(frozen=True)
class HostModel(Message):
    """The host's model: its trees, the base score per output, the loss, the classes (numbers in
    ``classes``, or names in ``class_names``; neither for regression) and the guests still active."""

    records: tuple[RecordState, ...]
    base: np.ndarray
    loss: str
    classes: np.ndarray | None
    class_names: tuple[str, ...]
    active: tuple[str, ...]


@message("hybridtree.model.split")
@dataclass(frozen=True)
class SplitState(Message):
    """One guest split of tree ``tree`` at node ``node`` (a guest's ``GuestSplit``)."""

    tree: int
    node: int
    feature: int
    threshold: float
    categorical: bool
    missing_left: bool
    left: int
    right: int
    low: float | None


@message("hybridtree.model.guest")
@dataclass(frozen=True)
class GuestModel(Message):
    """A guest's model: the guest splits (secure mode), its own subtrees per host leaf (paper
    mode: ``paper_keys[i] = (tree, leaf)`` of the JSON tree ``paper_trees[i]``), the agreed bins."""

    splits: tuple[SplitState, ...]
    paper_keys: np.ndarray
    paper_trees: tuple[str, ...]
    bins: dict[str, np.ndarray]
