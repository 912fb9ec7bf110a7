"""Histogram forest bin edges (issue 15 part 7): uniform against quantile fixed edges, 10 clients.

With secure aggregation (or DP) the histogram forest needs bins agreed before training.  Equal-width
edges over ``[min, max]`` of a heavy-tailed feature put almost every row in the first bins; quantile
edges from the grid round follow the pooled marginal.  For a skewed synthetic task
(:func:`securetrees.protocols.histogram_forest.experiment.skewed_dataset`) and for Adult, dealt to 10 stratified
clients (80/20 train/test per client), the table gives the accuracy on the union of the clients' test
rows of: each client's local forest (the default classifier on its own rows, mean of the clients'
accuracies on their own test rows), the federated forest with the paper's streaming bins (no secure
aggregation), and fixed bins with uniform or quantile edges, with and without secure aggregation.  No
ranges are declared: the fixed modes learn the feature ranges from the ``ranges`` round, as a default
user would.  Figures are means over repetitions (data deal and forest seed vary together).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from harness import Report

from securetrees.datasets import load_adult
from securetrees.protocols.histogram_forest import HistogramForestClassifier
from securetrees.protocols.histogram_forest.experiment import skewed_dataset, stratified_clients
from securetrees.protocols.histogram_forest.testing import fit_parts

MODES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("streaming (no secure agg.)", {}),
    ("fixed, uniform edges", {"histogram": "fixed", "bin_edges": "uniform"}),
    ("fixed, uniform edges, secure agg.", {"secure_aggregation": True, "bin_edges": "uniform"}),
    ("fixed, quantile edges (new default)", {"histogram": "fixed"}),
    ("fixed, quantile edges, secure agg. (new default)", {"secure_aggregation": True}),
)


def _datasets(quick: bool) -> list[tuple[str, np.ndarray, np.ndarray, list[bool]]]:
    n = 4000 if quick else 20000
    Xs, ys = skewed_dataset(n, seed=1)
    data = load_adult()
    Xa = np.vstack([data.X_train, data.X_test])
    ya = np.concatenate([data.y_train, data.y_test])
    if quick:
        keep = np.random.default_rng(0).choice(ya.size, 6000, replace=False)
        Xa, ya = Xa[keep], ya[keep]
    return [("skewed synthetic", Xs, ys, [False] * Xs.shape[1]), ("Adult", Xa, ya, list(data.categorical))]


def run(report: Report, quick: bool) -> None:
    trees, depth = (4, 6) if quick else (20, 10)
    reps = 1 if quick else 3
    n_clients = 10
    report.data["setup"] = dict(trees=trees, depth=depth, bins=32, clients=n_clients, repetitions=reps)
    results: dict[str, Any] = {}
    for name, X, y, categorical in _datasets(quick):
        table = report.table(
            f"{name}: accuracy, {n_clients} stratified clients ({y.size} rows; {trees} trees, depth {depth}, "
            f"b = 32; mean of {reps} repetitions)",
            ["forest", "accuracy", "difference to quantile + secure (pp)", "fit time per repetition"],
            note="local = each client's own forest on its own test rows (mean over clients); the others on the "
                 "union of the test rows",
        )
        acc: dict[str, list[float]] = {"local forests (mean)": []}
        secs: dict[str, float] = {"local forests (mean)": 0.0}
        for rep in range(reps):
            splits = stratified_clients(X, y, n_clients, seed=rep)
            parts = [(s.X_train, s.y_train) for s in splits]
            X_test = np.vstack([s.X_test for s in splits])
            y_test = np.concatenate([s.y_test for s in splits])

            def model(rep: int = rep, categorical: list[bool] = categorical, **extra: Any
                      ) -> HistogramForestClassifier:
                return HistogramForestClassifier(n_estimators=trees, max_depth=depth, random_state=rep,
                                                 categorical_features=categorical, **extra)

            t0 = time.perf_counter()
            local = [float(np.mean(fit_parts(model(), [p]).predict(s.X_test) == s.y_test))
                     for p, s in zip(parts, splits, strict=True)]
            secs["local forests (mean)"] += (time.perf_counter() - t0) / reps
            acc["local forests (mean)"].append(float(np.mean(local)))
            for label, extra in MODES:
                t0 = time.perf_counter()
                fitted = fit_parts(model(**extra), parts)
                secs[label] = secs.get(label, 0.0) + (time.perf_counter() - t0) / reps
                acc.setdefault(label, []).append(float(np.mean(fitted.predict(X_test) == y_test)))
        ref = float(np.mean(acc[MODES[-1][0]]))
        for label, values in acc.items():
            mean = float(np.mean(values))
            table.add(label, round(mean, 4), round(100 * (mean - ref), 2), f"{secs[label]:.1f} s")
        results[name] = {label: float(np.mean(v)) for label, v in acc.items()}
        if not quick:
            report.check(f"{name}: quantile + secure within 1 pp of streaming",
                         abs(100 * (ref - results[name][MODES[0][0]])), "<=", 1.0)
    report.data["accuracy"] = results
