"""RevFRF: revocable federated random forest (Liu et al.; ``specs/revfrf.md``).

FLE-Expan and FOS-Find (construction, one layer of the forest per round pair),
FRF-Predict / FT-Predict (encrypted requests, HoLT per node, provider consent),
FRF-Test / FT-Test and plain vertical prediction, FRF-Revoc (two levels) with
forest epochs.  :class:`RevFRFClassifier` and :class:`RevFRFRegressor` run every
role in one process over the in-process network.
"""

from __future__ import annotations

from securetrees.protocols.revfrf.candidates import QuantileBins, RandomRange
from securetrees.protocols.revfrf.cc import ComputationServer
from securetrees.protocols.revfrf.cs import CentralServer
from securetrees.protocols.revfrf.errors import ConsentRefused, RevocationRefused, StaleEpochError
from securetrees.protocols.revfrf.facade import RevFRFClassifier, RevFRFRegressor
from securetrees.protocols.revfrf.kgc import KeyCentre
from securetrees.protocols.revfrf.participant import Participant
from securetrees.protocols.revfrf.requester import Requester
from securetrees.protocols.revfrf.revocation import RevocationRecord

__all__ = [
    "CentralServer",
    "ComputationServer",
    "ConsentRefused",
    "KeyCentre",
    "Participant",
    "QuantileBins",
    "RandomRange",
    "Requester",
    "RevFRFClassifier",
    "RevFRFRegressor",
    "RevocationRecord",
    "RevocationRefused",
    "StaleEpochError",
]
