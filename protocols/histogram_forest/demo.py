"""``securetrees demo histogram-forest``: the paper's experiment (Section 4) on UCI Adult.

For 2, 5 and 10 clients holding stratified shares of Adult, it trains the
federated forest with the paper's histograms, each client's local forest and a
central forest on the joined rows, and prints F1 and AUC per client on that
client's test set.  Then it runs the 5-client federation once more with fixed
bins and secure aggregation (and, with ``--epsilon``, with DP noise) and prints
what the server received.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np

from securetrees.datasets import load_adult
from securetrees.progress import phase
from securetrees.protocols.histogram_forest.classifier import HistogramForestClassifier
from securetrees.protocols.histogram_forest.experiment import (
    adult_schema,
    compare_federated_local_central,
    f1_score,
    stratified_clients,
)
from securetrees.protocols.histogram_forest.testing import fit_parts

ABOUT = "Cross-silo histogram forest on Adult"
"""One line for ``securetrees demo --list``."""

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="securetrees demo histogram-forest", description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="2,5,10", help="comma-separated client counts (default 2,5,10)")
    parser.add_argument("--trees", type=int, default=20)
    parser.add_argument("--depth", type=int, default=14)
    parser.add_argument("--bins", type=int, default=32)
    parser.add_argument("--epsilon", type=float, default=None, help="also run the secure federation with DP noise")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a 6000-row sample and small forests (smoke test)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars or lines on stderr")
    args = parser.parse_args(list(argv))
    counts = [int(c) for c in args.clients.split(",") if c.strip()]

    with phase("loading UCI Adult", enabled=not args.no_progress):
        data = load_adult()
    X = np.vstack([data.X_train, data.X_test])
    y = np.concatenate([data.y_train, data.y_test])
    schema = adult_schema(X, list(data.categorical), [len(data.categories.get(n, ())) for n in data.feature_names])
    if args.quick:
        keep = np.random.default_rng(args.seed).choice(y.size, 6000, replace=False)
        X, y = X[keep], y[keep]
        args.trees, args.depth = min(args.trees, 3), min(args.depth, 5)

    def model(**extra: object) -> HistogramForestClassifier:
        params: dict[str, object] = dict(
            n_estimators=args.trees, max_depth=args.depth, n_bins=args.bins, random_state=args.seed,
            categorical_features=schema["categorical"], progress=not args.no_progress,
        )
        params.update(extra)
        return HistogramForestClassifier(**params)  # type: ignore[arg-type]

    print(f"Adult: {y.size} rows, {X.shape[1]} features; forests of {args.trees} trees, depth {args.depth}, "
          f"b = {args.bins} bins (the paper's streaming histograms); one random split per client count "
          "(python benchmarks/run.py histogram_forest averages 5)")
    for n in counts:
        t0 = time.perf_counter()
        splits = stratified_clients(X, y, n, seed=args.seed)
        with phase(f"{n} clients: federated, local and central forests", enabled=not args.no_progress):
            res = compare_federated_local_central(splits, model)
        print(f"\n{n} clients ({time.perf_counter() - t0:.1f} s): F1 / AUC on each client's own test set")
        print(f"  {'client':>6}  {'local F1':>8}  {'fed. F1':>8}  {'local AUC':>9}  {'fed. AUC':>8}")
        for i in range(n):
            print(f"  {i:>6}  {res.local_f1[i]:8.3f}  {res.federated_f1[i]:8.3f}  "
                  f"{res.local_auc[i]:9.3f}  {res.federated_auc[i]:8.3f}")
        wins = sum(f > loc for f, loc in zip(res.federated_f1, res.local_f1, strict=True))
        print(f"  federated F1 above local for {wins}/{n} clients; accuracy on all test rows: "
              f"federated {res.federated_accuracy:.4f}, central {res.central_accuracy:.4f}")

    n = 5 if 5 in counts or not counts else max(3, counts[0])
    splits = stratified_clients(X, y, n, seed=args.seed)
    parts = [(s.X_train, s.y_train) for s in splits]
    X_test = np.vstack([s.X_test for s in splits])
    y_test = np.concatenate([s.y_test for s in splits])
    print(f"\n{n} clients with fixed bins over declared ranges:")
    runs: list[tuple[str, dict[str, object]]] = [
        ("plain", dict(histogram="fixed", feature_ranges=schema["feature_ranges"])),
        ("secure aggregation", dict(secure_aggregation=True, feature_ranges=schema["feature_ranges"])),
    ]
    if args.epsilon is not None:
        runs.append((f"secure + DP (ε = {args.epsilon})", dict(
            secure_aggregation=True, epsilon=args.epsilon, sampling="subsample",
            feature_ranges=schema["feature_ranges"], categories=schema["categories"], classes=schema["classes"],
        )))
    for label, extra in runs:
        t0 = time.perf_counter()
        with phase(f"{n} clients, {label}", enabled=not args.no_progress):
            fitted = fit_parts(model(**extra), parts)
        tr = fitted.transcript_
        received = sorted(tr.types_received("server"))
        print(f"  {label:<28} F1 {f1_score(y_test, fitted.predict(X_test)):.3f}  "
              f"{time.perf_counter() - t0:5.1f} s  {tr.total_bytes / 1e6:6.2f} MB  {tr.rounds} rounds  "
              f"ε spent {fitted.epsilon_spent_:g}")
        print(f"  {'':<28} server received: {', '.join(received)}")
    return 0
