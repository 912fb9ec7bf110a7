"""RevFRF's CS (``specs/revfrf.md``, "Roles"): the label owner, FLE-Expan/FOS-Find driver
(:mod:`~securetrees.protocols.revfrf.cs_training`), FRF-Predict, FRF-Test and vertical prediction
(:mod:`~securetrees.protocols.revfrf.cs_prediction`) and FRF-Revoc (:mod:`~securetrees.protocols.revfrf.revocation`),
over what it holds (:mod:`~securetrees.protocols.revfrf.cs_state`)."""

from __future__ import annotations

from securetrees.protocols.revfrf.cs_prediction import CSPrediction
from securetrees.protocols.revfrf.revocation import CSRevocation

__all__ = ["CentralServer"]


class CentralServer(CSRevocation, CSPrediction):
    """The CS: label owner, FLE-Expan/FOS-Find driver, FT-Predict/FT-Test, FRF-Revoc."""
