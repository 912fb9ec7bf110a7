"""Parameters of a SecureBoost run, validated once (``specs/secureboost.md``, "Parameters")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal, get_args

from securetrees.errors import ParameterError
from securetrees.protocols.secureboost.packing import MAX_FRAC_BITS
from securetrees.trees import GrowParams

__all__ = ["ENCRYPTIONS", "Encryption", "Loss", "SecureBoostParams"]

Encryption = Literal["djn", "key-owner"]
ENCRYPTIONS: Final[tuple[str, ...]] = get_args(Encryption)
Loss = Literal["squared", "logistic"]


@dataclass(frozen=True)
class SecureBoostParams:
    """What the active party needs to run the boosting loop; the passive parties need none of it
    (they receive the bin budget and each tree's packing layout)."""

    loss: Loss = "squared"
    n_classes: int = 0
    n_estimators: int = 10
    learning_rate: float = 0.1
    reg_lambda: float = 1.0
    second_order: bool = True
    base_score: Literal["prior", "zero"] = "prior"
    max_depth: int = 3
    min_samples_leaf: float = 1.0
    min_samples_split: float = 2.0
    min_gain: float = 0.0
    max_bins: int = 32
    frac_bits: int = 24
    encryption: Encryption = "key-owner"

    def __post_init__(self) -> None:
        if self.loss not in ("squared", "logistic"):
            raise ParameterError(f"unknown loss {self.loss!r}")
        if self.loss == "logistic" and self.n_classes < 2:
            raise ParameterError("the logistic loss needs n_classes >= 2")
        if self.n_estimators < 1:
            raise ParameterError("n_estimators must be >= 1")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ParameterError("learning_rate must be positive")
        if self.base_score not in ("prior", "zero"):
            raise ParameterError("base_score must be 'prior' or 'zero'")
        if not 1 <= self.max_depth <= 30:
            raise ParameterError("max_depth must be in [1, 30]")
        if not 2 <= self.max_bins <= 255:
            raise ParameterError("max_bins must be in [2, 255]")
        if not 0 <= self.frac_bits <= MAX_FRAC_BITS:
            raise ParameterError(f"frac_bits must be in [0, {MAX_FRAC_BITS}]")
        if self.encryption not in ENCRYPTIONS:
            raise ParameterError(f"unknown encryption {self.encryption!r}; choose one of {ENCRYPTIONS}")
        self.grow  # validates the stopping rules  # noqa: B018

    @property
    def grow(self) -> GrowParams:
        return GrowParams(max_depth=self.max_depth, min_samples_leaf=self.min_samples_leaf,
                          min_samples_split=self.min_samples_split, min_gain=self.min_gain)
