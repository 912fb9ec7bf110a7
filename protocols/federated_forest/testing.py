"""Test-only helpers for Federated Forest runs: small Paillier keys and small data.

``small_key_options()`` gives the facade (``securetrees.protocols.federated_forest``) a cached
512-bit key pair and a loader that accepts it; never protect data with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.paillier import PublicKey
from securetrees.testing.paillier import load_test_public_key, small_keypair

__all__ = ["mixed_data", "small_key_options"]


def small_key_options(bits: int = 512) -> dict[str, Any]:
    """Keyword arguments ``paillier_keys`` and ``public_key_loader`` for small test keys."""
    loader: Callable[[bytes], PublicKey] = load_test_public_key
    return {"paillier_keys": small_keypair(bits), "public_key_loader": loader}


def mixed_data(n: int, *, seed: int, n_classes: int = 2
               ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], list[bool]]:
    """Six columns (four numeric with 5 % missing, one categorical code column, one
    low-cardinality numeric) and class labels that depend on several of them."""
    g = np.random.default_rng(seed)
    X = g.normal(size=(n, 6)).round(2)
    X[g.random((n, 6)) < 0.05] = np.nan
    X[:, 4] = g.integers(0, 5, n)
    X[:, 5] = g.integers(0, 3, n)
    score = np.nan_to_num(X[:, 0]) + 0.8 * (X[:, 4] == 2) - 0.5 * np.nan_to_num(X[:, 2]) + 0.3 * X[:, 5]
    cuts = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    y = np.searchsorted(cuts, score).astype(np.int64)
    flip = g.random(n) < 0.1
    y[flip] = g.integers(0, n_classes, int(flip.sum()))
    return X, y, [False, False, False, False, True, False]
