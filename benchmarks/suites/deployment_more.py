"""HybridTree, the histogram forest and SecureBoost deployed (issues 16, 17): one process per role over
gRPC with mutual TLS on loopback against the one-process facade on the same data, settings and
(HybridTree, SecureBoost) key.
HybridTree's parties read their own CSV tables and align them by PSI (part of the deployed job); the
facade is fitted on the rows they aligned, joined.

Each run is what the deployment's ``run_job`` does: HybridTree trains, the guests load their test rows
and the host predicts them; the histogram forest trains, the server hands the model to the clients and
each predicts its own test rows (each client reads its own CSV tables); SecureBoost aligns its three
parties' CSV tables by PSI (every party holds every id, so the agreed rows are the facade's), trains,
saves the model parts and predicts the test rows at the active party (its job time includes the PSI and
the three sealed model files).  The facade side times ``fit`` plus the predictions (the histogram
forest's on the clients' tables pooled, read beforehand).  The networked
figure is the operator's job after every role is up (``launch``'s ``job_seconds``), so process
start-up is excluded.  Bytes: the protocol messages of both transcripts (control messages, among them
the model handed to the clients, excluded; SecureBoost's alignment phase runs on its own network and
is not counted).  The outputs are checked equal to the facade's (the runs
are deterministic without DP).  Medians over repeats; ``--quick``: one repeat, smaller runs.

The roles find the deployments through the installed entry points: run it from an install whose
metadata lists ``hybridtree``, ``histogram-forest`` and ``secureboost``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from harness import Report

from securetrees.datasets import load_adult
from securetrees.errors import InsecureParameterWarning
from securetrees.net.config import load_config
from securetrees.net.service import launch
from securetrees.paillier import generate_keypair
from securetrees.protocols.histogram_forest import deploy as hf_deploy
from securetrees.protocols.histogram_forest.experiment import stratified_clients
from securetrees.protocols.histogram_forest.testing import fit_tables, pooled_tables
from securetrees.protocols.hybridtree import deploy as ht_deploy
from securetrees.protocols.hybridtree.demo import MAX_BINS, adult_hybrid
from securetrees.protocols.hybridtree.estimators import HybridTreeClassifier
from securetrees.protocols.hybridtree.testing import joined_view
from securetrees.protocols.secureboost import SecureBoostClassifier
from securetrees.protocols.secureboost import deploy as sb_deploy
from securetrees.protocols.secureboost.demo import MAX_BINS as SB_MAX_BINS
from securetrees.protocols.secureboost.demo import adult_partition

Run = Callable[[Path], Callable[[Path], tuple[float, int, bool]]]
"""Prepare a trial in the folder; return what, after the launch, runs the facade on the same rows: its
seconds, its protocol bytes and whether the deployed outputs equal its own."""


def _hybridtree(rows: int, trees: int, bits: int) -> Run:
    data = adult_hybrid(n_guests=3, rows=rows)
    s = data.split
    keys = generate_keypair(bits, allow_insecure=bits < 2048)
    settings: dict[str, Any] = {"n_estimators": trees, "learning_rate": 0.5, "max_bins": MAX_BINS, "min_node_size": 20,
                                "key_bits": bits, "allow_insecure": bits < 2048}

    def run(tmp: Path) -> Callable[[Path], tuple[float, int, bool]]:
        ht_deploy.prepare(tmp, data.X_train, np.where(data.y_train == 1, ">50K", "<=50K"), s.host_features,
                          s.guest_features, s.train_rows, X_test=data.X_test, test_rows=s.test_rows, params=settings,
                          keypair=keys, names=data.names, categories=load_adult().categories, lacking=rows // 100)

        def facade(out: Path) -> tuple[float, int, bool]:
            """The facade on the rows the parties aligned (each party's own CSV table, joined)."""
            config = load_config(tmp / "run.toml")
            view = joined_view(config)
            test = joined_view(config, test=True, host_schema=view.host_schema)
            t0 = time.perf_counter()
            clf = HybridTreeClassifier(**settings, **view.settings(), keypair=keys)  # type: ignore[arg-type]
            clf.fit(view.X, view.y)
            want = clf.predict_proba(test.X)
            seconds = time.perf_counter() - t0
            return seconds, clf.network_.transcript.total_bytes, bool(np.array_equal(np.load(out / "host.proba.npy"),
                                                                                     want))

        return facade

    return run


def _histogram_forest(rows: int, trees: int) -> Run:
    ad = load_adult()
    X, y = ad.X_train[:rows], np.where(ad.y_train[:rows] == 1, ">50K", "<=50K")
    splits = stratified_clients(X, y, 3, seed=0)
    params: dict[str, Any] = {"n_estimators": trees, "max_depth": 6, "random_state": 0, "secure_aggregation": True,
                              "histogram": "fixed"}

    def run(tmp: Path) -> Callable[[Path], tuple[float, int, bool]]:
        cfg = hf_deploy.prepare(tmp, [(c.X_train, c.y_train) for c in splits],
                                tests=[(c.X_test, c.y_test) for c in splits], params=params,
                                names=ad.feature_names, categories=ad.categories)

        def facade(out: Path) -> tuple[float, int, bool]:
            pooled = pooled_tables(cfg)  # each client's CSV tables, read as the roles read theirs at start-up
            t0 = time.perf_counter()
            clf, _ = fit_tables(cfg, pooled)
            want = {c: clf.predict_proba(t) for c, t in pooled.tests.items()}
            seconds = time.perf_counter() - t0
            return seconds, clf.transcript_.total_bytes, all(
                np.array_equal(np.load(out / f"{c}.proba.npy"), w) for c, w in want.items())

        return facade

    return run


def _secureboost(rows: int, trees: int, bits: int) -> Run:
    ad = load_adult()
    X, Xt = ad.X_train[:rows], ad.X_test[:rows // 2]
    y = np.where(ad.y_train[:rows] == 1, ">50K", "<=50K")
    part = adult_partition(2)
    keys = generate_keypair(bits, allow_insecure=bits < 2048)
    settings: dict[str, Any] = {"n_estimators": trees, "max_depth": 3, "learning_rate": 0.3, "max_bins": SB_MAX_BINS,
                                "key_bits": bits, "allow_insecure": bits < 2048}
    cats = [j for j, name in enumerate(ad.feature_names) if name in ad.categories]

    def run(tmp: Path) -> Callable[[Path], tuple[float, int, bool]]:
        sb_deploy.prepare(tmp, X, y, part, X_test=Xt, params=settings, keypair=keys, names=ad.feature_names,
                          categories=ad.categories, lacking=0)

        def facade(out: Path) -> tuple[float, int, bool]:
            """The facade on the same rows (every party holds every id); the active party's output rows
            are in the agreed order, named by its own ids."""
            t0 = time.perf_counter()
            clf = SecureBoostClassifier(part, **settings, keypair=keys, categorical_features=cats).fit(X, y)
            want = clf.predict_proba(Xt)
            seconds = time.perf_counter() - t0
            order = [int(i.removeprefix("test-")) for i in np.load(out / "active.test_ids.npy").tolist()]
            return seconds, clf.network_.transcript.total_bytes, bool(
                np.array_equal(np.load(out / "active.proba.npy"), want[order]))

        return facade

    return run


def run(report: Report, quick: bool) -> None:
    bits, repeats, rows, trees = (1024, 1, 300, 2) if quick else (2048, 3, 1000, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParameterWarning)
        runs = {"HybridTree (host + 3 guests)": (_hybridtree(rows, trees, bits),
                                                 f"{rows} Adult rows, {trees} trees, {bits}-bit key"),
                "histogram forest (server + 3 clients)": (_histogram_forest(2 * rows, 2 * trees - 1),
                                                          f"{2 * rows} Adult rows, {2 * trees - 1} trees of depth 6, "
                                                          "secure aggregation"),
                "SecureBoost (active + 2 passive parties)": (_secureboost(rows, trees, bits),
                                                             f"{rows} Adult rows (CSV, PSI-aligned), {trees} trees "
                                                             f"of depth 3, {bits}-bit key")}
    tab = report.table("Deployed (one process per role, gRPC + mutual TLS, loopback) vs the one-process facade",
                       ["run", "facade (s)", "deployed job (s)", "time ratio", "facade protocol bytes",
                        "deployed protocol bytes", "bytes ratio"],
                       note=f"median of {repeats}; the deployed job excludes process start-up; outputs checked equal")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParameterWarning)
        for name, (one, about) in runs.items():
            local, remote, local_b, remote_b = [], [], 0, 0
            for _ in range(repeats):
                with tempfile.TemporaryDirectory() as tmp:
                    facade = one(Path(tmp))
                    info: dict[str, Any] = {}
                    launch(Path(tmp) / "run.toml", Path(tmp) / "pki", report=info)
                    seconds, local_b, same = facade(Path(tmp) / "out")
                    if not same:
                        raise RuntimeError(f"{name}: the deployed outputs differ from the facade's")
                local.append(seconds)
                remote.append(info["job_seconds"])
                remote_b = sum(int(s.get("protocol_bytes", 0)) for r, s in info["stats"].items() if r != "operator")
            lt, nt = statistics.median(local), statistics.median(remote)
            tab.add(f"{name}: {about}", round(lt, 3), round(nt, 3), round(nt / lt, 2), local_b, remote_b,
                    round(remote_b / local_b, 3))
            report.data[name] = {"facade_seconds": local, "deployed_seconds": remote, "facade_bytes": local_b,
                                 "deployed_protocol_bytes": remote_b}
            report.check(f"{name}: deployed vs facade protocol bytes, |ratio - 1|", abs(remote_b / local_b - 1),
                         "<=", 0.01)
