"""RevFRF test helpers: small data, 512-bit cached test keys (``securetrees.testing.dtpkc``)."""

from __future__ import annotations

import numpy as np

from securetrees.protocols.revfrf import RevFRFClassifier, RevFRFRegressor
from securetrees.protocols.revfrf.attack import integer_data
from securetrees.testing.dtpkc import dtpkc_test_kgc
from securetrees.trees import Tree

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


def assert_same_up_to_gaps(a: Tree, b: Tree, X: np.ndarray) -> None:
    """``a`` equals ``b`` field by field except the thresholds, and each threshold of ``a``
    splits its column's training values (``X``) as ``b``'s does: RevFRF moves a threshold
    within its gap (``protocols/revfrf/thresholds.py``), which changes no training split."""
    for name in ("left", "right", "feature", "categorical", "missing_left", "provider", "withheld"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for name in ("weight", "value"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12, err_msg=name)
    assert a.n_features == b.n_features
    for k in np.flatnonzero(a.feature >= 0).tolist():
        col = X[:, int(a.feature[k])]
        col = col[~np.isnan(col)]
        ta, tb = float(a.threshold[k]), float(b.threshold[k])
        if np.isinf(ta) or np.isinf(tb):
            assert ta == tb
            continue
        assert np.array_equal(col <= ta, col <= tb), f"node {k}: thresholds {ta} and {tb} split the column apart"
