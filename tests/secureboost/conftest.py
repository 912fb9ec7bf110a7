"""Fixtures for the SecureBoost tests: small seeded vertical data and the cached 1024-bit test key."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.secureboost import SecureBoostClassifier, SecureBoostRegressor
from securetrees.testing.paillier import small_keypair

#: Three parties: the active party owns columns 0-1, passive 1 columns 2-3, passive 2 columns 4-5.
PARTITION = [[0, 1], [2, 3], [4, 5]]


def vertical_data(n: int = 160, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Six seeded features (5% missing) and a regression target depending on every party."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = 2 * X[:, 0] + X[:, 2] - X[:, 4] ** 2 + 0.5 * X[:, 5] + 0.1 * rng.normal(size=n)
    X[rng.random((n, 6)) < 0.05] = np.nan
    return X, y


@pytest.fixture(scope="session")
def keypair() -> tuple[PublicKey, PrivateKey]:
    return small_keypair(1024)


@pytest.fixture(scope="session")
def data() -> tuple[np.ndarray, np.ndarray]:
    return vertical_data()


def make(kind: str, partition: list[list[int]], keys: tuple[PublicKey, PrivateKey], **kw: Any) -> Any:
    """A facade with small trees and the test key (1024 bits, allowed as insecure for tests)."""
    cls = SecureBoostClassifier if kind == "clf" else SecureBoostRegressor
    params: dict[str, Any] = {"n_estimators": 3, "max_depth": 3, "max_bins": 16, "keypair": keys,
                              "allow_insecure": True}
    params.update(kw)
    return cls(partition, **params)
