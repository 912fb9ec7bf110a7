"""Cross-silo histogram forest (Kalloori and Klingler, SAC 2022) with DP and secure aggregation.

Spec: ``specs/histogram_forest.md``.  Roles :class:`Server` and :class:`Client`;
one-process facades :class:`HistogramForestClassifier` and :class:`HistogramForestRegressor`.
"""

from securetrees.protocols.histogram_forest.accountant import PrivacyAccountant, Release
from securetrees.protocols.histogram_forest.classifier import HistogramForestClassifier
from securetrees.protocols.histogram_forest.client import Client
from securetrees.protocols.histogram_forest.facade import stack_parts
from securetrees.protocols.histogram_forest.mechanisms import geometric_noise, geometric_pmf
from securetrees.protocols.histogram_forest.regressor import HistogramForestRegressor
from securetrees.protocols.histogram_forest.server import ForestConfig, Server
from securetrees.protocols.histogram_forest.usefulness import DPUsefulnessWarning, signal_to_noise, suggest_forest

__all__ = [
    "Client",
    "DPUsefulnessWarning",
    "ForestConfig",
    "HistogramForestClassifier",
    "HistogramForestRegressor",
    "PrivacyAccountant",
    "Release",
    "Server",
    "geometric_noise",
    "geometric_pmf",
    "signal_to_noise",
    "stack_parts",
    "suggest_forest",
]
