"""RevFRF's server roles, by the names they had when they shared this module: the CS
(:mod:`securetrees.protocols.revfrf.cs`), the CC (:mod:`securetrees.protocols.revfrf.cc`) and the KGC
(:mod:`securetrees.protocols.revfrf.kgc`)."""

from __future__ import annotations

from securetrees.protocols.revfrf.cc import ComputationServer
from securetrees.protocols.revfrf.cs import CentralServer
from securetrees.protocols.revfrf.kgc import KeyCentre
from securetrees.protocols.revfrf.revocation import RevocationRecord

__all__ = ["CentralServer", "ComputationServer", "KeyCentre", "RevocationRecord"]
