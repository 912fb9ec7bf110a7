"""Plaintext trees on UCI Adult against scikit-learn (issue 3), single-threaded.

Rows: our random forest on the native columns (categorical codes, NaN) and on the
one-hot encoding (`securetrees.testing.trees.one_hot`); scikit-learn's RandomForestClassifier on the one-hot
encoding (it has no native categorical splits); our GBDT and scikit-learn's
HistGradientBoostingClassifier on the native columns.  Fit and predict times are
medians of repeated runs in this process (scikit-learn n_jobs=1, BLAS/OpenMP limited
to one thread); accuracy is on the official test split from the last fit.
Full: 100 trees of depth 10 with sqrt features; GBDT 50 rounds, depth 7, lr 0.1.
Quick (a CI smoke run): the same data and settings with 10 trees, one run per figure.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
from harness import Report, measure, measure_each
from threadpoolctl import threadpool_limits

from securetrees.datasets import load_adult
from securetrees.testing.trees import one_hot
from securetrees.trees import GradientBoostingClassifier, RandomForestClassifier

GAP = 0.005  # 0.5 percentage points


def _fit_and_time(make: Callable[[], Any], X: np.ndarray, y: np.ndarray, X_test: np.ndarray,
                  y_test: np.ndarray, repeats: int) -> tuple[Any, Any, float]:
    fitted: list[Any] = []

    def fit() -> None:
        fitted.append(make().fit(X, y))

    fit_t = measure_each(fit, repeats=repeats)
    model = fitted[-1]
    predict_t = measure(lambda: model.predict(X_test), repeats=repeats, number=1)
    acc = float(np.mean(model.predict(X_test) == y_test))
    return fit_t, predict_t, acc


def run(report: Report, quick: bool) -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.ensemble import RandomForestClassifier as SkForest

    d = load_adult()
    X, y, X_test, y_test = d.X_train, d.y_train, d.X_test, d.y_test
    A, A_test = one_hot(X, X_test, d.categorical)
    n_trees, rounds, repeats = (10, 50, 1) if quick else (100, 50, 3)
    rf_kw: dict[str, Any] = {"max_depth": 10, "max_features": "sqrt"}
    gb_kw: dict[str, Any] = {"max_depth": 7, "learning_rate": 0.1}
    cat = d.categorical
    runs = {
        "securetrees RF, native columns": (
            lambda: RandomForestClassifier(n_trees, categorical_features=cat, random_state=0,
                                           **rf_kw), X, X_test),
        "securetrees RF, one-hot": (
            lambda: RandomForestClassifier(n_trees, random_state=0, **rf_kw), A, A_test),
        "scikit-learn RF, one-hot": (
            lambda: SkForest(n_trees, n_jobs=1, random_state=0, **rf_kw), A, A_test),
        "securetrees GBDT, native columns": (
            lambda: GradientBoostingClassifier(rounds, categorical_features=cat, **gb_kw),
            X, X_test),
        "scikit-learn HGB, native columns": (
            lambda: HistGradientBoostingClassifier(max_iter=rounds, categorical_features=cat,
                                                   early_stopping=False, **gb_kw), X, X_test),
    }
    results: dict[str, tuple[Any, Any, float]] = {}
    with threadpool_limits(limits=1):
        for name, (make, Xf, Xt) in runs.items():
            results[name] = _fit_and_time(make, Xf, y, Xt, y_test, repeats)

    size = f"{X.shape[0]} training rows, {X_test.shape[0]} test rows"
    table = report.table(
        f"Adult: fit, predict and accuracy ({size}; {n_trees} trees depth 10 sqrt; "
        f"{rounds} boosting rounds depth 7 lr 0.1)",
        ["model", "fit (median)", "predict (median)", "test accuracy", "fit vs scikit-learn"],
        note=(f"Medians of {repeats} run(s) in one process, one thread (n_jobs=1, threadpoolctl). "
              "The RF baseline is scikit-learn's forest on the one-hot columns; the GBDT "
              "baseline is HistGradientBoostingClassifier (default max_leaf_nodes=31)."),
    )
    sk_rf = results["scikit-learn RF, one-hot"][0].median
    sk_gb = results["scikit-learn HGB, native columns"][0].median
    for name, (fit_t, pred_t, acc) in results.items():
        base = sk_gb if "GBDT" in name or "HGB" in name else sk_rf
        table.add(name, fit_t, pred_t, f"{acc:.4f}", f"{fit_t.median / base:.2f}x")

    acc = {name: r[2] for name, r in results.items()}
    report.check("RF fit time, ours (native) / scikit-learn (one-hot)",
                 results["securetrees RF, native columns"][0].median / sk_rf, "<=", 5)
    report.check("RF fit time, ours / scikit-learn, same one-hot input",
                 results["securetrees RF, one-hot"][0].median / sk_rf, "<=", 5)
    report.check("RF accuracy |gap| vs scikit-learn, same one-hot input",
                 abs(acc["securetrees RF, one-hot"] - acc["scikit-learn RF, one-hot"]), "<=", GAP)
    report.check("RF accuracy, ours (native) minus scikit-learn (one-hot)",
                 acc["securetrees RF, native columns"] - acc["scikit-learn RF, one-hot"],
                 ">=", -GAP)
    report.check("GBDT accuracy |gap| vs HistGradientBoosting",
                 abs(acc["securetrees GBDT, native columns"]
                     - acc["scikit-learn HGB, native columns"]), "<=", GAP)
    report.data["load_average_at_start"] = os.getloadavg()[0]
    report.data["accuracy"] = acc
    report.data["reference_figures_source_md"] = {"rf_100_depth10_sqrt": 0.858,
                                                  "hgb_50_depth7_lr0.1": 0.874}
