"""RevFRF on UCI Adult: equality with the central reference (default run, small) and accuracy
against scikit-learn on the official split (slow); the demo end to end."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.datasets import load_adult
from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.revfrf.demo import main as demo_main
from securetrees.trees import BinningParams, GrowParams, train_forest

from .helpers import assert_same_up_to_gaps, small_kgc


def _adult() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ad = load_adult()
    return (np.nan_to_num(ad.X_train, nan=-1.0), ad.y_train, np.nan_to_num(ad.X_test, nan=-1.0), ad.y_test)


def _compare(n_rows: int | None, trees: int, depth: int) -> tuple[float, float, float, float]:
    X, y, Xt, yt = _adult()
    if n_rows is not None:
        X, y, Xt, yt = X[:n_rows], y[:n_rows], Xt[:n_rows], yt[:n_rows]
    part = [[c] for c in range(X.shape[1])]
    # bins at full resolution (its candidates are then the central reference's); random_range at the default
    extra: dict[str, dict[str, None]] = {"bins": {"code_resolution": None}, "random_range": {}}
    fed = {s: RevFRFClassifier(n_estimators=trees, max_depth=depth, splitter=s, random_state=0, kgc_factory=small_kgc,
                               **kw).set_params(partition=part).fit(X, y) for s, kw in extra.items()}
    ref, _ = train_forest(X, y, n_classes=2, n_estimators=trees, criterion="gini", grow=GrowParams(max_depth=depth),
                          max_features="sqrt", binning=BinningParams(max_bins=255), random_state=0,
                          providers=list(range(X.shape[1])), classes=np.arange(2))
    for a, b in zip(fed["bins"].plaintext_forest().trees, ref.trees, strict=True):
        assert_same_up_to_gaps(a, b, X)
    acc = {s: float((c.predict(Xt) == yt).mean()) for s, c in fed.items()}
    acc_ref = float((ref.predict(Xt) == yt).mean())
    from sklearn.ensemble import RandomForestClassifier

    sk = RandomForestClassifier(n_estimators=trees, max_depth=depth, max_features="sqrt", random_state=0, n_jobs=1)
    acc_sk = float((sk.fit(X, y).predict(Xt) == yt).mean())
    return acc["bins"], acc["random_range"], acc_ref, acc_sk


def test_adult_subset_equals_central_reference() -> None:
    bins, rr, ref, sk = _compare(2000, 3, 6)
    assert bins == ref
    assert min(rr, bins) > 0.78 and sk > 0.78


@pytest.mark.slow
def test_adult_accuracy_within_one_point_of_scikit_learn() -> None:
    """Done-when: official split, same trees, depth and per-node features."""
    bins, rr, ref, sk = _compare(None, 20, 10)
    assert bins == ref
    assert abs(bins - sk) <= 0.01
    assert abs(rr - sk) <= 0.01


def test_demo_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code = demo_main(["--bits", "1024", "--insecure", "--rows", "400", "--trees", "2", "--depth", "3",
                      "--requests", "1", "--participants", "4", "--test-rows", "1000", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    assert "same as the plaintext model: True" in out
    assert "Revocation of u1" in out and "Accuracy after revocation" in out
