"""What each RevFRF party sees (specs/revfrf.md): canaries for feature values, thresholds and
request values in every other party's view, and the message types each role receives."""

from __future__ import annotations

import numpy as np

from protocols.revfrf import RevFRFClassifier
from securetrees.testing.canaries import assert_no_canaries

from ..revfrf.helpers import classifier

PARTITION = [[0, 1], [2], [3]]


def _canary_data() -> tuple[np.ndarray, np.ndarray]:
    """Continuous features with entropy (every value a distinctive canary)."""
    rng = np.random.default_rng(99)
    X = rng.normal(0, 1, size=(120, 4)) * np.array([731.0, 91.0, 5.3, 1234.5]) + np.array([1e4, 500, 50, -7e3])
    y = (X[:, 0] - 1e4 + 8 * (X[:, 2] - 50) > 0).astype(np.int64)
    return X, y


def _fit_predict_revoke() -> tuple[RevFRFClassifier, np.ndarray, np.ndarray]:
    X, y = _canary_data()
    clf = classifier(n_estimators=2, max_depth=3).fit(X, y, PARTITION)
    request = X[:2] + 0.123456789
    clf.predict(request, method="encrypted", requester="req")
    clf.predict(X[:10], method="test")
    clf.predict(X[:10])
    return clf, X, request


def test_no_feature_value_threshold_or_request_value_leaves_its_owner() -> None:
    clf, X, request = _fit_predict_revoke()
    thresholds = {u: [n.threshold for n in p.own_nodes().values()] for u, p in clf.participants_.items()}
    clf.revoke("u3", level=2)
    tr = clf.transcript_
    parties = ["cs", "cc", "kgc", "req", *clf.participants_]
    for u, cols in zip(clf.participants_, PARTITION, strict=True):
        own_values = [float(v) for v in X[:40, cols].ravel()] + thresholds[u]
        assert own_values
        for other in parties:
            if other != u:
                assert_no_canaries(tr.view(other), own_values)
    for other in parties:
        if other != "req":
            assert_no_canaries(tr.view(other), [float(v) for v in request.ravel()])


def test_each_role_receives_only_its_spec_messages() -> None:
    clf, _, _ = _fit_predict_revoke()
    clf.revoke("u2", level=2)
    tr = clf.transcript_
    allowed = {
        "cs": {"revfrf.expand.reply", "revfrf.split.reply", "dtpkc.holt.reply", "revfrf.predict.parhdec.reply",
               "revfrf.predict.request", "revfrf.path.reply", "revfrf.test.reply", "revfrf.revoke.request",
               "revfrf.epoch.ack", "revfrf.revoke.cc.reply", "revfrf.ack"},
        "cc": {"dtpkc.holt.request", "revfrf.revoke.cc"},
        "kgc": {"revfrf.revoke.kgc"},
        "req": {"revfrf.predict.reply"},
    }
    participant = {"revfrf.expand.request", "revfrf.split.request", "revfrf.predict.parhdec",
                   "revfrf.path.request", "revfrf.test.request", "revfrf.epoch.notice", "revfrf.revoke.reply"}
    for u in clf.participants_:
        allowed[u] = participant
    for party, types in allowed.items():
        got = set(tr.types_received(party))
        assert got <= types, (party, got - types)
    # the CS never receives a plaintext threshold: split uploads are ciphertexts under the provider's key
    for rec in tr.view("cs"):
        if rec.type_name == "revfrf.split.reply":
            assert all(v > int(clf.cs_.params.n) for v in rec.payload.t1)  # type: ignore[attr-defined]


def test_participants_see_only_their_own_columns_tasks() -> None:
    clf, _, _ = _fit_predict_revoke()
    for u, cols in zip(clf.participants_, PARTITION, strict=True):
        for rec in clf.transcript_.view(u):
            if rec.type_name == "revfrf.expand.request":
                assert set(np.asarray(rec.payload.task_column).tolist()) <= set(cols)  # type: ignore[attr-defined]


def test_revoked_participant_receives_nothing_after_revocation() -> None:
    clf, X, _ = _fit_predict_revoke()
    clf.revoke("u2")
    mark = len(clf.transcript_.view("u2"))
    clf.predict(X[:5])
    clf.predict(X[:1], method="encrypted", requester="req")
    assert len(clf.transcript_.view("u2")) == mark
