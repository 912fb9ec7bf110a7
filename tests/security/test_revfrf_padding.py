"""The CC's view of a RevFRF prediction depends only on the request's size and the forest
(``specs/revfrf.md``, "What the CC learns from a prediction request"): padded levels, every
bit under every live participant's key.  Planted leaks: an unpadded walk (batch sizes show each
path's depth) and bits under the node's provider's key alone (the keys trace the path); on
each the CC names the leaf above the prior."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

import numpy as np
import pytest

from securetrees.protocols.revfrf import RevFRFClassifier, cs_prediction
from securetrees.protocols.revfrf.attack import cc_prediction_profile, leaf_naming_experiment
from securetrees.protocols.revfrf.cs_prediction import CSPrediction

from ..revfrf.helpers import PARTITION, classifier, make_data

N_REQUESTS = 80
SETTINGS = {"n_estimators": 1, "max_depth": 8, "bootstrap": False}


@pytest.fixture(scope="module")
def deep_tree() -> tuple[RevFRFClassifier, np.ndarray]:
    """One tree of depth up to 8 on the test data (leaves at many depths)."""
    X, y = make_data()
    clf = classifier(**SETTINGS).set_params(partition=PARTITION).fit(X, y)
    return clf, X


@contextmanager
def unpadded() -> Iterator[None]:
    """Planted leak: the walk stops each path at its leaf (no padding)."""
    walk = CSPrediction._walk
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CSPrediction, "_walk", lambda self, n, decide, pad=False: walk(self, n, decide, pad=False))
        yield


@contextmanager
def provider_keys() -> Iterator[None]:
    """Planted leak: each bit comes back under its node's provider's key only (no fan-out)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CSPrediction, "_holt_keys", lambda self: [])
        yield


def cc_names_leaf(clf: RevFRFClassifier, X: np.ndarray, variant: Callable[[], AbstractContextManager[object]]
                  ) -> tuple[int, int, int]:
    """80 known and 80 target one-row encrypted requests (:func:`leaf_naming_experiment`)."""
    with variant():
        return leaf_naming_experiment(clf, X, N_REQUESTS)


def test_the_cc_names_the_leaf_no_better_than_the_prior(deep_tree: tuple[RevFRFClassifier, np.ndarray]) -> None:
    clf, X = deep_tree
    hits, prior, profiles = cc_names_leaf(clf, X, nullcontext)
    assert profiles == 1, "the CC's view differs between requests"
    assert hits == prior


@pytest.mark.parametrize("variant", [unpadded, provider_keys])
def test_planted_the_cc_names_the_leaf(deep_tree: tuple[RevFRFClassifier, np.ndarray],
                                       variant: Callable[[], AbstractContextManager[object]]) -> None:
    clf, X = deep_tree
    hits, prior, profiles = cc_names_leaf(clf, X, variant)
    assert profiles > 1
    assert hits >= prior + 10


def test_batch_sizes_are_rows_times_trees_at_every_level() -> None:
    """Requests of 1, 2 and 5 rows, FRF-Test and FRF-Predict: every HoLT batch has rows × trees
    comparisons, for the forest's depth in levels, under the same keys."""
    X, y = make_data()
    clf = classifier(n_estimators=3, max_depth=5).set_params(partition=PARTITION).fit(X, y)
    depth = clf.cs_.padded_depth
    for method in ("encrypted", "test"):
        for rows in (1, 2, 5):
            before = len(clf.transcript_.view("cc"))
            got = clf.predict(X[10:10 + rows], method=method, requester="req")
            profile = cc_prediction_profile(clf.transcript_.view("cc")[before:])
            per_request = 1 if method == "encrypted" else rows
            sizes = [b for b, _ in profile]
            assert sizes == [3 * per_request] * (depth * (rows if method == "encrypted" else 1))
            assert len({k for _, k in profile}) == 1
            np.testing.assert_array_equal(got, clf.plaintext_forest().predict(X[10:10 + rows]))


def test_large_levels_split_into_rounds_by_size_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A level of more comparisons × keys than one reply may carry goes in equal rounds (the last
    one shorter), a split that depends only on the level's size; the predictions are unchanged."""
    X, y = make_data()
    clf = classifier(n_estimators=3, max_depth=3).set_params(partition=PARTITION).fit(X, y)
    monkeypatch.setattr(cs_prediction, "MAX_HOLT_OUTPUTS", 4 * 3)  # 3 participants: 4 comparisons a round
    before = len(clf.transcript_.view("cc"))
    got = clf.predict(X[:5], method="test")
    sizes = [b for b, _ in cc_prediction_profile(clf.transcript_.view("cc")[before:])]
    assert sizes == [4, 4, 4, 3] * clf.cs_.padded_depth
    np.testing.assert_array_equal(got, clf.plaintext_forest().predict(X[:5]))
