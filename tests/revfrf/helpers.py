"""RevFRF test helpers: small data, 512-bit cached test keys (``securetrees.testing.dtpkc``)."""

from __future__ import annotations

from securetrees.protocols.revfrf import RevFRFClassifier, RevFRFRegressor
from securetrees.protocols.revfrf.attack import integer_data
from securetrees.testing.dtpkc import dtpkc_test_kgc

TEST_BITS = 512


def small_kgc():  # type: ignore[no-untyped-def]
    return dtpkc_test_kgc(TEST_BITS)


make_data = integer_data
"""Integer-valued features (ties, no canaries) and labels that depend on them."""

PARTITION = [[0, 3], [1], [2, 4, 5]]


def classifier(**kw: object) -> RevFRFClassifier:
    params: dict[str, object] = {"n_estimators": 3, "max_depth": 4, "random_state": 7, "kgc_factory": small_kgc}
    params.update(kw)
    return RevFRFClassifier(**params)  # type: ignore[arg-type]


def regressor(**kw: object) -> RevFRFRegressor:
    params: dict[str, object] = {"n_estimators": 3, "max_depth": 4, "random_state": 7, "kgc_factory": small_kgc}
    params.update(kw)
    return RevFRFRegressor(**params)  # type: ignore[arg-type]
