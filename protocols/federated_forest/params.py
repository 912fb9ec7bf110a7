"""The settings of one Federated Forest run, validated once (``specs/federated_forest.md``, "Parameters")."""

from __future__ import annotations

from dataclasses import dataclass

from securetrees.errors import ParameterError
from securetrees.trees import GrowParams, resolve_max_features

__all__ = ["LABEL_MODES", "ForestParams"]

LABEL_MODES = ("encrypted", "shared")
FEATURE_SAMPLING = ("node", "tree")
CHECKPOINT_MODES = ("tree", "layer")


@dataclass(frozen=True)
class ForestParams:
    """What the master needs to drive training; the random draws follow ``train_forest``."""

    n_estimators: int = 100
    max_depth: int | None = None
    min_samples_split: int = 2
    min_samples_leaf: int = 1
    max_features: int | float | str | None = "sqrt"
    feature_sampling: str = "node"
    bootstrap: bool = True
    random_state: int | None = None
    checkpoint: str = "tree"

    def __post_init__(self) -> None:
        if isinstance(self.n_estimators, bool) or not isinstance(self.n_estimators, int) or self.n_estimators < 1:
            raise ParameterError("n_estimators must be a positive int")
        if self.feature_sampling not in FEATURE_SAMPLING:
            raise ParameterError(f"feature_sampling must be one of {FEATURE_SAMPLING}")
        if self.checkpoint not in CHECKPOINT_MODES:
            raise ParameterError(f"checkpoint must be one of {CHECKPOINT_MODES}")
        _ = self.grow  # validates depth and sample limits

    @property
    def grow(self) -> GrowParams:
        return GrowParams(max_depth=self.max_depth, min_samples_split=float(self.min_samples_split),
                          min_samples_leaf=float(self.min_samples_leaf))

    def feature_counts(self, n_features: int) -> tuple[int | None, int]:
        """``(max_features_tree, max_features)`` as ``train_forest`` resolves them: per-node
        sampling draws ``max_features`` per node from all features; per-tree sampling (the
        paper's Algorithms 2/6) draws them once per tree."""
        k = resolve_max_features(self.max_features, n_features)
        if self.feature_sampling == "tree":
            return k, k
        return None, k
