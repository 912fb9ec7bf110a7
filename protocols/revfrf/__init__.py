"""RevFRF: revocable federated random forest (Liu et al.; ``specs/revfrf.md``).

FLE-Expan and FOS-Find (construction, one layer of the forest per round pair),
FRF-Predict / FT-Predict (encrypted requests, HoLT per node, provider consent),
FRF-Test / FT-Test and plain vertical prediction, FRF-Revoc (two levels) with
forest epochs.  :class:`RevFRFClassifier` and :class:`RevFRFRegressor` run every
role in one process over the in-process network.
"""

from __future__ import annotations

from protocols.revfrf.candidates import QuantileBins, RandomRange
from protocols.revfrf.cc import ComputationServer
from protocols.revfrf.cs import CentralServer
from protocols.revfrf.errors import ConsentRefused, RevocationRefused, StaleEpochError
from protocols.revfrf.facade import RevFRFClassifier, RevFRFRegressor, check_partition
from protocols.revfrf.kgc import KeyCentre
from protocols.revfrf.participant import Participant
from protocols.revfrf.requester import Requester
from protocols.revfrf.revocation import RevocationRecord

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
    "check_partition",
]
