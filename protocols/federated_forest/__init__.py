"""Federated Forest (Liu et al.): vertical federated random forest with partial trees,
protected labels, one-round prediction and resumable training.

Roles: :class:`Master` and :class:`Client` (the label holder is the client given
``labels``).  One-process facade: :class:`FederatedForestClassifier`,
:class:`FederatedForestRegressor`.  Spec: ``specs/federated_forest.md``.
"""

from __future__ import annotations

from securetrees.protocols.federated_forest.checkpoint import CheckpointStore
from securetrees.protocols.federated_forest.client import Client, CryptoCounters, LabelSpec
from securetrees.protocols.federated_forest.estimators import FederatedForestClassifier, FederatedForestRegressor
from securetrees.protocols.federated_forest.master import Master
from securetrees.protocols.federated_forest.params import ForestParams
from securetrees.protocols.federated_forest.skeleton import assemble_tree, model_tree

__all__ = [
    "CheckpointStore",
    "Client",
    "CryptoCounters",
    "FederatedForestClassifier",
    "FederatedForestRegressor",
    "ForestParams",
    "LabelSpec",
    "Master",
    "assemble_tree",
    "model_tree",
]
