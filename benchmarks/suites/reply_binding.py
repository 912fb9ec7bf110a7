"""What binding replies to their requests costs (specs/runtime.md, "Reply binding").

Per call: a 16-byte request id drawn from the library's CSPRNG, and SHA-256 over the request
frame computed twice (the replier binds, the caller checks); 16 bytes more per request and 32
per reply on the wire.  Reported: the primitives' times (median over repeats), and, for a
Federated Forest fit on Adult and on scikit-learn's breast-cancer table (shipped with
scikit-learn, no download), all parties in one process, the time the run spent drawing ids and
hashing (measured inside the run by wrapping the two functions), its share of the fit's time
(medians over 3 fits), and the 48 bytes per call against the run's frame bytes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from harness import Report, measure

import securetrees.runtime.network as network_module
from securetrees.datasets import load_adult
from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.runtime.network import BINDING_BYTES, REQUEST_ID_BYTES, new_request_id, reply_binding


def _primitives(report: Report) -> None:
    tab = report.table("Primitives", ["what", "time (median)"], note="loaded two-core machine")
    tab.add(f"request id ({REQUEST_ID_BYTES} bytes, securetrees.rand)", measure(new_request_id))
    for size in (100, 64 * 1024, 4 * 1024 * 1024):
        frame = bytes(size)
        timing = measure(lambda f=frame: reply_binding("u1", "cs", bytes(16), f))
        tab.add(f"binding over a {size:,}-byte request frame", timing)


class _Meter:
    """Counts and times every id drawn and every binding computed while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.bindings = 0
        self.ids = 0
        self.hashed = 0

    def install(self) -> Callable[[], None]:
        bind, draw = network_module.reply_binding, network_module.new_request_id

        def timed_bind(caller: str, replier: str, request_id: bytes, request: bytes) -> bytes:
            t0 = time.perf_counter()
            try:
                return bind(caller, replier, request_id, request)
            finally:
                self.seconds += time.perf_counter() - t0
                self.bindings += 1
                self.hashed += len(request)

        def timed_id(*args: Any) -> bytes:
            t0 = time.perf_counter()
            try:
                return draw(*args)
            finally:
                self.seconds += time.perf_counter() - t0
                self.ids += 1

        network_module.reply_binding, network_module.new_request_id = timed_bind, timed_id

        def uninstall() -> None:
            network_module.reply_binding, network_module.new_request_id = bind, draw

        return uninstall


def _breast_cancer() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    return np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.int64)


def run(report: Report, quick: bool) -> None:
    _primitives(report)
    adult = load_adult()
    rows = 2000 if quick else 8000
    bc_X, bc_y = _breast_cancer()
    datasets = {
        "Adult": (adult.X_train[:rows], adult.y_train[:rows], [bool(c) for c in adult.categorical]),
        "breast cancer": (bc_X, bc_y, [False] * bc_X.shape[1]),
    }
    n_trees, depth = (3, 5) if quick else (10, 8)
    tab = report.table(f"Federated Forest fit, shared labels, 2 clients, {n_trees} trees of depth {depth}",
                       ["data", "rows", "calls", "fit time", "ids + bindings", "share", "frame MB", "+48 B/call"],
                       note="in process; medians over repeated fits; ids + bindings timed inside the run "
                            "(both ends' bindings)")
    repeats = 1 if quick else 3
    for name, (X, y, cat) in datasets.items():
        part = [list(range(0, X.shape[1], 2)), list(range(1, X.shape[1], 2))]
        runs = []
        for _ in range(repeats):
            meter = _Meter()
            uninstall = meter.install()
            try:
                t0 = time.perf_counter()
                model = FederatedForestClassifier(n_trees, max_depth=depth, random_state=0, label_protection="shared",
                                                  categorical_features=cat, record_payloads=False,
                                                  partition=part).fit(X, y)
                elapsed = time.perf_counter() - t0
            finally:
                uninstall()
            runs.append((elapsed, meter))
        fit_s = statistics.median(e for e, _ in runs)
        bind_s = statistics.median(m.seconds for _, m in runs)
        share = statistics.median(m.seconds / e for e, m in runs)
        frames = model.transcript_.total_bytes
        extra = REQUEST_ID_BYTES * meter.ids + BINDING_BYTES * (meter.bindings // 2)
        tab.add(name, X.shape[0], meter.ids, f"{fit_s:.2f} s", f"{bind_s * 1e3:.1f} ms", f"{100 * share:.2f}%",
                f"{frames / 1e6:.2f}", f"{100 * extra / frames:.2f}%")
        report.data[f"fit_{name}"] = {"calls": meter.ids, "bindings": meter.bindings, "hashed_bytes": meter.hashed,
                                      "binding_seconds": bind_s, "fit_seconds": fit_s, "share": share,
                                      "frame_bytes": frames, "extra_bytes": extra, "repeats": repeats}
