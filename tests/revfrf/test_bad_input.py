"""Bad input: each refusal raises its one typed error and changes nothing."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.errors import InsecureParameterWarning, NotFittedError, ParameterError
from securetrees.protocols.revfrf import ConsentRefused, RevFRFClassifier, RevFRFRegressor
from securetrees.trees import check_partition

from .helpers import PARTITION, classifier, make_data


@pytest.mark.parametrize("partition", [
    [[0, 1], [2]],                 # columns 3-5 belong to nobody
    [[0, 1, 2], [2, 3, 4, 5]],     # column 2 twice
    [[0, 1, 2, 3, 4, 5, 6]],       # column 6 does not exist
    [[0, 1, 2], []],               # a participant without columns
    [],                            # no participant
    [[0, 1, 2, 3, 4, -1]],         # negative column
])
def test_mismatched_partitions(partition: list[list[int]]) -> None:
    X, y = make_data()
    with pytest.raises(ParameterError):
        classifier().set_params(partition=partition).fit(X, y)
    with pytest.raises(ParameterError):
        check_partition(partition, X.shape[1])


def test_infinite_features_refused_in_fit_and_predict(fitted: RevFRFClassifier) -> None:
    """NaN is a missing value (``test_missing.py``); an infinite value is refused."""
    X, y = make_data()
    bad = X.copy()
    bad[3, 2] = np.inf
    with pytest.raises(ParameterError):
        classifier().set_params(partition=PARTITION).fit(bad, y)
    rounds = fitted.transcript_.rounds
    for method in ("vertical", "test", "encrypted"):
        with pytest.raises(ParameterError):
            fitted.predict(bad[:5], method=method)
    assert fitted.transcript_.rounds == rounds


def test_bad_labels_shapes_and_methods(fitted: RevFRFClassifier) -> None:
    X, y = make_data()
    with pytest.raises(ParameterError):
        classifier().set_params(partition=PARTITION).fit(X, np.zeros_like(y))  # a single class
    with pytest.raises(ParameterError):
        classifier().set_params(partition=PARTITION).fit(X, y[:-1])
    with pytest.raises(ParameterError):
        RevFRFRegressor(kgc_factory=classifier().kgc_factory).set_params(partition=PARTITION).fit(X,
                np.full(y.shape, np.nan))
    with pytest.raises(ParameterError):
        fitted.predict(X[:, :4])
    with pytest.raises(ParameterError):
        fitted.predict(X, method="telepathy")
    with pytest.raises(ParameterError):
        classifier(splitter="exact").set_params(partition=PARTITION).fit(X, y)


def test_not_fitted() -> None:
    with pytest.raises(NotFittedError):
        RevFRFClassifier().predict(np.zeros((1, 3)))
    with pytest.raises(NotFittedError):
        RevFRFClassifier().revoke("u1")


def test_key_size_policy() -> None:
    X, y = make_data(n=20)
    with pytest.raises(ParameterError):
        RevFRFClassifier(key_bits=512).set_params(partition=PARTITION).fit(X, y)
    with pytest.raises(ParameterError):
        RevFRFClassifier(key_bits=1024).set_params(partition=PARTITION).fit(X, y)
    with pytest.warns(InsecureParameterWarning):
        clf = RevFRFClassifier(n_estimators=1, max_depth=1, key_bits=1024,
                allow_insecure=True).set_params(partition=PARTITION).fit(X, y)
    assert clf.cs_.params.bits == 1024


def test_unknown_participant(fitted: RevFRFClassifier) -> None:
    with pytest.raises(ParameterError):
        fitted.revoke("u9")
    assert fitted.cs_.epoch == 0


def test_refused_consent_changes_nothing(fitted: RevFRFClassifier) -> None:
    X, _ = make_data(seed=1)
    before = fitted.predict(X[:2], method="encrypted", requester="alice")
    root_providers = {t.nodes[t.root].provider for t in fitted.cs_.trees}
    for u in root_providers:
        fitted.participants_[u or ""].refused_requesters.add("mallory")
    with pytest.raises(ConsentRefused):
        fitted.predict(X[:2], method="encrypted", requester="mallory")
    np.testing.assert_array_equal(fitted.predict(X[:2], method="encrypted", requester="alice"), before)
    assert fitted.cs_.epoch == 0


@pytest.mark.parametrize("k", [0, 1, -3, 65535, 2.5, True, "8"])
def test_bad_code_resolution_refused(k: object) -> None:
    """``code_resolution`` is None or an int in [2, 65534]; anything else is refused before key set-up."""
    X, y = make_data()
    with pytest.raises(ParameterError):
        classifier(code_resolution=k).set_params(partition=PARTITION).fit(X, y)


def test_coarse_codes_refuse_fewer_than_two_codes() -> None:
    from securetrees.protocols.revfrf.candidates import CoarseCodes, RandomRange, coarsen

    with pytest.raises(ParameterError):
        CoarseCodes(RandomRange(), 1)
    full = RandomRange(8, 4).propose(0, np.arange(10.0), np.random.default_rng(0))
    with pytest.raises(ParameterError):
        coarsen(full, 1)
