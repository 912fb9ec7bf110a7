"""RevFRF's refusals, each a :class:`~securetrees.errors.ProtocolError` (``specs/revfrf.md``)."""

from __future__ import annotations

from securetrees.errors import ProtocolError

__all__ = ["ConsentRefused", "RevocationRefused", "StaleEpochError"]


class ConsentRefused(ProtocolError):
    """A node's provider refuses to serve this requester (FT-Predict line 6: consent)."""


class StaleEpochError(ProtocolError):
    """A node that is not live in the provider's current forest epoch (forest epochs)."""


class RevocationRefused(ProtocolError):
    """A revocation request with a bad signature, a wrong epoch or a replayed nonce (FRF-Revoc line 2)."""
