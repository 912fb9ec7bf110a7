"""The gRPC transport's overhead on one RevFRF run (issue 10).

The same run twice, on the same data and settings: every role in this process on the
in-process network, then every role in its own process over gRPC with mutual TLS on
loopback (``securetrees.net``).  The run is what ``securetrees.protocols.revfrf.deploy.run_job`` does:
train, predict three ways (vertical, FRF-Test, FRF-Predict by a requester), revoke the
last participant at level 2 (a new forest epoch), predict again.

Time: the in-process figure is the facade's growth plus each prediction and the
revocation (key set-up excluded on both sides: the networked run's keys are made offline
by ``prepare``); the networked figure is the operator's job, after every role is up.
Bytes: the protocol messages both transcripts recorded (identical by construction when
the runs agree, up to the variable length of random ciphertext integers), and the bytes
that crossed the loopback interface during the job (``/proc/net/dev``: IP and TCP
headers, TLS records, HTTP/2 frames and the control traffic; run it on a quiet machine,
since any other loopback traffic adds to it).
Each organisation's rows come from its own CSV file, in its own order and lacking a few of the
others' ids: the networked job first aligns them by private set intersection (timed apart:
the PSI of the training and test ids and the data holders' switch to their protocol roles),
and the in-process run is fitted on the intersected rows in the agreed order.
Medians over repeats; results are checked equal to the in-process run's.
``--quick``: 1024-bit keys (insecure flag), smaller run, one repeat.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from harness import Report

from securetrees.datasets import load_adult
from securetrees.dtpkc import KGC
from securetrees.errors import InsecureParameterWarning
from securetrees.net.config import load_config
from securetrees.net.service import launch
from securetrees.net.tables import party_tables
from securetrees.protocols.revfrf import RevFRFClassifier, deploy
from securetrees.protocols.revfrf.deploy import prepare
from securetrees.testing.alignment import joined_view


@contextlib.contextmanager
def timed_alignment() -> Iterator[list[float]]:
    """Time the operator's alignment phase of ``deploy.run_job`` (run in this process by ``launch``)."""
    seconds = [0.0]
    align = deploy.align

    def align_timed(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return align(*a, **k)
        finally:
            seconds[0] += time.perf_counter() - t0

    deploy.align = align_timed  # type: ignore[assignment]
    try:
        yield seconds
    finally:
        deploy.align = align  # type: ignore[assignment]


def in_process(X: Any, y: Any, Xt: Any, part: list[list[int]], settings: dict[str, Any], bits: int,
               X_req: Any) -> tuple[float, int, dict[str, Any]]:
    clf = RevFRFClassifier(n_estimators=settings["n_estimators"], max_depth=settings["max_depth"],
                           random_state=settings["random_state"], key_bits=bits, allow_insecure=bits < 2048)
    clf.set_params(partition=part).fit(X, y)
    clf.requester()  # the requester's key set-up, outside the timed run (offline in the networked one)
    t0 = time.perf_counter()
    out = {"vertical": clf.predict_proba(Xt), "test": clf.predict_proba(Xt, method="test"),
           "encrypted": clf.predict_proba(X_req, method="encrypted")}
    clf.revoke(f"u{len(part)}", level=2)
    out["after_revocation"] = clf.predict_proba(Xt)
    seconds = clf.timings_["grow"] + time.perf_counter() - t0
    return seconds, clf.transcript_.total_bytes, out


def run(report: Report, quick: bool) -> None:
    bits = 1024 if quick else 2048
    n, n_test, trees, depth, repeats = (150, 6, 2, 3, 1) if quick else (500, 10, 3, 4, 3)
    ad = load_adult()
    X = np.nan_to_num(ad.X_train[:n], nan=-1.0)
    y, Xt = ad.y_train[:n], np.nan_to_num(ad.X_test[:n_test], nan=-1.0)
    part = [list(range(i, X.shape[1], 3)) for i in range(3)]
    settings = {"n_estimators": trees, "max_depth": depth, "random_state": 0, "n_classes": 2}
    local_t, net_t, psi_t, wire = [], [], [], []
    local_bytes = net_bytes = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParameterWarning)
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as tmp:
                cfg = prepare(tmp, X, y, part, X_test=Xt, settings=settings,
                              kgc=KGC.setup(bits, allow_insecure=bits < 2048), lacking=max(1, n // 50))
                info: dict[str, Any] = {}
                with timed_alignment() as align_seconds:
                    got = launch(cfg, Path(tmp) / "pki", report=info)
                config = load_config(cfg)
                view = joined_view(config, ["u1", "u2", "u3", "cs"], part, X.shape[1])
                requester, _ = party_tables(config.party("requester"))
            seconds, local_bytes, want = in_process(view.X, view.y, view.X_test, part, settings, bits, requester.X)
            local_t.append(seconds)
            for k in want:
                if not np.array_equal(got[k], want[k]):
                    raise RuntimeError(f"the networked run's {k} differs from the in-process run's")
            net_t.append(info["job_seconds"] - align_seconds[0])
            psi_t.append(align_seconds[0])
            stats = info["stats"]
            net_bytes = sum(int(s.get("protocol_bytes", 0)) for r, s in stats.items() if r != "operator")
            wire.append(info["loopback_bytes"])
    lt, nt, w = statistics.median(local_t), statistics.median(net_t), statistics.median(wire)
    tab = report.table(f"One RevFRF run at {bits} bits: in-process network vs gRPC + mutual TLS (loopback)",
                       ["measure", "in-process", "gRPC, one process per role", "ratio"],
                       note=f"{n} Adult rows, 3 participants, {trees} trees of depth {depth}, {n_test} test "
                            f"rows; train, 3 predictions, level-2 revocation, predict; median of {repeats}")
    tab.add("time (s), alignment excluded", round(lt, 3), round(nt, 3), round(nt / lt, 2))
    tab.add("alignment phase (s): PSI of train and test ids, roles restarted", "",
            round(statistics.median(psi_t), 3), "")
    tab.add("protocol message bytes", local_bytes, net_bytes, round(net_bytes / local_bytes, 3))
    tab.add("bytes on the loopback interface (IP, TCP, TLS, HTTP/2, control)", "", int(w),
            round(w / local_bytes, 3))
    report.data.update(in_process_seconds=local_t, grpc_seconds=net_t, alignment_seconds=psi_t,
                       in_process_bytes=local_bytes,
                       grpc_protocol_bytes=net_bytes, grpc_written_bytes=wire)
    # equal up to the variable byte length of random ciphertext integers (one byte in 256 is shorter)
    report.check("networked vs in-process protocol bytes, |ratio - 1|", abs(net_bytes / local_bytes - 1), "<=", 0.01)
