"""RevFRF's server roles, by the names they had when they shared this module: the CS
(:mod:`protocols.revfrf.cs`), the CC (:mod:`protocols.revfrf.cc`) and the KGC
(:mod:`protocols.revfrf.kgc`)."""

from __future__ import annotations

from protocols.revfrf.cc import ComputationServer
from protocols.revfrf.cs import CentralServer
from protocols.revfrf.kgc import KeyCentre
from protocols.revfrf.revocation import RevocationRecord

__all__ = ["CentralServer", "ComputationServer", "KeyCentre", "RevocationRecord"]
