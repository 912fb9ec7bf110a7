"""Federated Forest ``encrypted`` prediction: the cost of keeping the output at the label holder
(issue 26 part 1), against the step it replaced, on Adult and on the mixed dataset.

``python benchmarks/run.py federated_forest_prediction [--quick] [--json PATH]``

One fit per dataset (two clients, columns alternating, labels at client 0, 512-bit test key:
prediction uses no encryption, so the key's size does not enter these figures); then the same
one-round prediction of the test rows, before (the label holder answers the master the output:
``attacks.outputs_to_master``) and now (the master hands the leaves and gets an ``Ack``; the label
holder keeps the output).  Bytes are the prediction's messages in the transcript, the test ids'
alignment included; CPU is the process time of one prediction (every party runs in this process),
median over repeats; accuracy is the predicted class against the test labels.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from harness import Report

from securetrees.datasets import load_adult
from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.protocols.federated_forest.attacks import outputs_to_master
from securetrees.protocols.federated_forest.testing import mixed_data, small_key_options


def _cpu_and_bytes(ff: FederatedForestClassifier, X: np.ndarray, repeats: int) -> tuple[float, int, np.ndarray]:
    """Median process time of one prediction, its bytes on the wire, and the predicted classes."""
    tr = ff.transcript_
    times, sizes, pred = [], [], np.zeros(0)
    for _ in range(repeats):
        mark = tr.mark()
        t0 = time.process_time()
        pred = ff.predict(X)
        times.append(time.process_time() - t0)
        sizes.append(tr.since(mark).bytes)
    return statistics.median(times), int(statistics.median(sizes)), pred


def _datasets(quick: bool) -> dict[str, Callable[[], tuple[Any, ...]]]:
    def adult() -> tuple[Any, ...]:
        d = load_adult()
        n, n_test = (2000, 1000) if quick else (10000, 5000)
        return d.X_train[:n], d.y_train[:n], d.X_test[:n_test], d.y_test[:n_test], [bool(c) for c in d.categorical]

    def mixed() -> tuple[Any, ...]:
        X, y, cat = mixed_data(600, seed=1, n_classes=3)
        return X[:300], y[:300], X[300:], y[300:], cat

    return {"Adult": adult, "mixed (3 classes)": mixed}


def run(report: Report, quick: bool) -> None:
    trees, depth, repeats = (5, 6, 3) if quick else (10, 8, 5)
    tab = report.table(f"Encrypted prediction, {trees} trees of depth {depth}, one-round",
                       ["dataset", "train / test rows", "KB before", "KB now", "CPU ms before", "CPU ms now",
                        "accuracy before", "accuracy now"],
                       note=f"medians of {repeats} predictions; before: the label holder answers the master "
                            "the output; now: the master gets an ack")
    for name, load in _datasets(quick).items():
        X, y, Xt, yt, cat = load()
        ff = FederatedForestClassifier(trees, max_depth=depth, random_state=0, categorical_features=cat,
                                       **small_key_options())
        ff.set_params(partition=[list(range(0, X.shape[1], 2)), list(range(1, X.shape[1], 2))]).fit(X, y)
        with outputs_to_master():
            cpu_before, kb_before, pred_before = _cpu_and_bytes(ff, Xt, repeats)
        cpu_now, kb_now, pred_now = _cpu_and_bytes(ff, Xt, repeats)
        acc_before, acc_now = float(np.mean(pred_before == yt)), float(np.mean(pred_now == yt))
        tab.add(name, f"{X.shape[0]} / {Xt.shape[0]}", f"{kb_before / 1e3:.1f}", f"{kb_now / 1e3:.1f}",
                f"{cpu_before * 1e3:.0f}", f"{cpu_now * 1e3:.0f}", f"{acc_before:.4f}", f"{acc_now:.4f}")
        report.check(f"{name}: accuracy now - before", abs(acc_now - acc_before), "<=", 0.0)
        report.check(f"{name}: bytes now / before", kb_now / kb_before, "<=", 1.0)
