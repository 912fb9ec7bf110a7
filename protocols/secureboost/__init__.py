"""SecureBoost (Cheng et al., 2019): vertical federated GBDT (``specs/secureboost.md``).

One active party holds the labels and some columns; one or more passive parties hold the
other columns of the same (aligned) rows.  The active party encrypts each instance's packed
``(1, g, h)`` with Paillier; the passive parties return packed encrypted bucket sums; the
active party chooses every split and only the owner of a split keeps its threshold.

* :class:`SecureBoostClassifier`, :class:`SecureBoostRegressor`: the one-process facade;
* :class:`ActiveParty`, :class:`PassiveParty`: the runtime roles;
* :class:`PackingLayout`: the public slot layout; :class:`SecureBoostParams`.
"""

from __future__ import annotations

from securetrees.protocols.secureboost.active import ActiveParty, SecureBoostModel, TreeRecord
from securetrees.protocols.secureboost.estimators import SecureBoostClassifier, SecureBoostRegressor
from securetrees.protocols.secureboost.packing import PackingLayout, pack_ciphertexts, quantize
from securetrees.protocols.secureboost.params import SecureBoostParams
from securetrees.protocols.secureboost.passive import LookupRecord, PassiveParty

__all__ = [
    "ActiveParty",
    "LookupRecord",
    "PackingLayout",
    "PassiveParty",
    "SecureBoostClassifier",
    "SecureBoostModel",
    "SecureBoostParams",
    "SecureBoostRegressor",
    "TreeRecord",
    "pack_ciphertexts",
    "quantize",
]
