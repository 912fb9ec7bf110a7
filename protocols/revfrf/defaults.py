"""RevFRF's default parameters: fixed point with 2^-32 precision (``specs/encoding.md``) and HoLT's
ℓ = 128, σ = 256 (``specs/dtpkc.md``, "HoLT"; ``specs/parameters.md``)."""

from __future__ import annotations

from typing import Final

from securetrees.dtpkc.twoserver import HoLTParams
from securetrees.encoding import FixedPoint

__all__ = ["DEFAULT_CODEC", "DEFAULT_HOLT"]

DEFAULT_CODEC: Final = FixedPoint(32)
DEFAULT_HOLT: Final = HoLTParams()
