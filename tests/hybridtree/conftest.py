"""Fixtures for the HybridTree tests: small data, a cached 512-bit test key, insecure modes."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from securetrees.protocols.hybridtree import HybridTreeClassifier, HybridTreeRegressor
from securetrees.protocols.hybridtree.testing import HybridData, fit_layout, hybrid_data
from securetrees.testing.paillier import small_keypair


@pytest.fixture(scope="session")
def data() -> HybridData:
    return hybrid_data()


def _make(kind: str = "clf", mode: str = "secure", **kw: Any) -> Any:
    """A facade with small trees and the cached 512-bit test key; no minimum node size (the
    data are too small for the default; ``tests/security/test_hybridtree_leakage.py`` tests it)."""
    cls = HybridTreeClassifier if kind == "clf" else HybridTreeRegressor
    params: dict[str, Any] = dict(host_depth=2, guest_depth=2, max_bins=8, keypair=small_keypair(512),
                                  min_node_size=0, min_bin_size=0, mode=mode,
                                  allow_insecure=mode != "secure")
    params.update(kw)
    return cls(kw.pop("n_estimators", 3), **{k: v for k, v in params.items() if k != "n_estimators"})


def _fit_quiet(model: Any, *args: Any) -> Any:
    """Fit, ignoring the InsecureParameterWarning of the insecure modes (tested separately):
    ``(X, y)``, or a row layout ``(X, y, host_features, guest_features, guest_rows)`` (:func:`fit_layout`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_layout(model, *args) if len(args) == 5 else model.fit(*args)


@pytest.fixture(scope="session")
def make() -> Any:
    return _make


@pytest.fixture(scope="session")
def fit_quiet() -> Any:
    return _fit_quiet
