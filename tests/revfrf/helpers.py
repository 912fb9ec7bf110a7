"""RevFRF test helpers: small data, 512-bit cached test keys (``securetrees.testing.dtpkc``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from protocols.revfrf import RevFRFClassifier, RevFRFRegressor
from securetrees.testing.dtpkc import dtpkc_test_kgc

TEST_BITS = 512


def small_kgc():  # type: ignore[no-untyped-def]
    return dtpkc_test_kgc(TEST_BITS)


def make_data(n: int = 240, d: int = 6, n_classes: int = 2, seed: int = 0
              ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Integer-valued features (distinct canary-free ties) and labels that depend on them."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 60, size=(n, d)).astype(np.float64)
    score = X[:, 0] + 0.7 * X[:, 2] - 0.5 * X[:, 4] + rng.normal(0, 6, n)
    cuts = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.searchsorted(cuts, score).astype(np.int64)


PARTITION = [[0, 3], [1], [2, 4, 5]]


def classifier(**kw: object) -> RevFRFClassifier:
    params: dict[str, object] = {"n_estimators": 3, "max_depth": 4, "random_state": 7, "kgc_factory": small_kgc}
    params.update(kw)
    return RevFRFClassifier(**params)  # type: ignore[arg-type]


def regressor(**kw: object) -> RevFRFRegressor:
    params: dict[str, object] = {"n_estimators": 3, "max_depth": 4, "random_state": 7, "kgc_factory": small_kgc}
    params.update(kw)
    return RevFRFRegressor(**params)  # type: ignore[arg-type]
