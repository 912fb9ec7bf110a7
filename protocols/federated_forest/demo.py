"""``securetrees demo federated-forest``: Adult split between clients, against scikit-learn.

Trains a Federated Forest on Adult's official training split with the columns dealt
round-robin to ``--clients`` organisations (labels at client 0), predicts the test
split with the one-round method, and prints accuracy next to scikit-learn's random
forest on the joined data, with the bytes and rounds from the transcript.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from securetrees.datasets import load_adult
from securetrees.progress import phase
from securetrees.protocols.federated_forest.estimators import FederatedForestClassifier

ABOUT = "Federated Forest on Adult, vertical clients"
"""One line for ``securetrees demo --list``."""


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="securetrees demo federated-forest", description=__doc__)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--rows", type=int, default=0, help="use only the first ROWS training rows (0: all)")
    parser.add_argument("--labels", choices=["shared", "encrypted"], default="shared",
                        help="label protection (encrypted uses a 2048-bit key and takes minutes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars or lines on stderr")
    args = parser.parse_args(list(argv))
    with phase("loading UCI Adult", enabled=not args.no_progress):
        data = load_adult()
    X, y = data.X_train, data.y_train
    if args.rows:
        X, y = X[:args.rows], y[:args.rows]
    n_features = X.shape[1]
    partition = [list(range(i, n_features, args.clients)) for i in range(args.clients)]
    for i, cols in enumerate(partition):
        print(f"client{i}: {', '.join(data.feature_names[c] for c in cols)}" + ("  (labels)" if i == 0 else ""))
    ff = FederatedForestClassifier(args.trees, max_depth=args.depth, random_state=args.seed,
                                   label_protection=args.labels, categorical_features=list(data.categorical),
                                   progress=not args.no_progress)
    t0 = time.perf_counter()
    ff.set_params(partition=partition).fit(X, y)
    t_fit = time.perf_counter() - t0
    tr = ff.transcript_
    train_bytes, train_rounds = tr.total_bytes, tr.rounds
    t0 = time.perf_counter()
    acc = float((ff.predict(data.X_test) == data.y_test).mean())
    t_pred = time.perf_counter() - t0
    print(f"Federated Forest ({args.labels} labels): accuracy {acc:.4f}, training {t_fit:.1f} s, "
          f"{train_bytes / 1e6:.1f} MB in {train_rounds} rounds; one-round prediction {t_pred:.2f} s, "
          f"{(tr.total_bytes - train_bytes) / 1e6:.2f} MB in {tr.rounds - train_rounds} rounds (incl. id alignment)")
    with phase("scikit-learn on the joined data", enabled=not args.no_progress):
        print(_sklearn(X, y, data.X_test, data.y_test, args))
    return 0


def _sklearn(X: npt.NDArray[np.float64], y: npt.NDArray[np.int64], X_test: npt.NDArray[np.float64],
             y_test: npt.NDArray[np.int64], args: argparse.Namespace) -> str:
    try:
        from sklearn.ensemble import RandomForestClassifier
    except ImportError:
        return "scikit-learn is not installed: no comparison"
    t0 = time.perf_counter()
    rf = RandomForestClassifier(args.trees, max_depth=args.depth, n_jobs=1, random_state=args.seed).fit(X, y)
    t_sk = time.perf_counter() - t0
    return (f"scikit-learn RandomForestClassifier (joined data): accuracy "
            f"{float((rf.predict(X_test) == y_test).mean()):.4f}, training {t_sk:.1f} s")
