"""A start-up failure at the operator (issue 27, part 2): how long ``securetrees operator fit`` takes
to report a role that could not start.

``python benchmarks/run.py operator_failures [--quick]``

A two-party PSI run (``securetrees.psi.deploy.prepare``) whose party ``b`` has a corrupt data file:
both roles are started as ``securetrees party`` processes; once ``b`` serves its stand-in (the
operator's ``status`` sweep reports it FAILED), ``operator fit`` runs in this process and is timed.
Before the stand-in, ``b`` exited and ``fit`` waited its whole ``--timeout`` (30 s by default) for a
``PeerTimeout``; the target is the typed error within 5 s.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import Report

from securetrees.cli import main
from securetrees.log import reset
from securetrees.net.config import load_config
from securetrees.net.operate import status
from securetrees.net.service import spawn_role
from securetrees.psi import deploy as psi_deploy

TARGET_SECONDS = 5.0


def _one(folder: Path) -> tuple[float, int]:
    cfg = psi_deploy.prepare(folder, {"a": np.arange(30), "b": np.arange(10, 40)})
    (folder / "data" / "b.npz").write_bytes(b"not a data file")
    config = load_config(cfg)
    pki = folder / "pki"
    procs = {r: spawn_role(config, r, pki / f"{r}.pass") for r in config.roles}
    try:
        while status(config, pki / "operator.pass", timeout=30).get("b", {}).get("failed") is None:
            time.sleep(0.2)  # b has not failed yet: still starting
        t0 = time.perf_counter()
        code = main(["operator", "fit", "--config", str(cfg), "--passphrase-file", str(pki / "operator.pass")])
        return time.perf_counter() - t0, code
    finally:
        reset()
        for proc in procs.values():
            proc.terminate()
            proc.wait(timeout=30)


def run(report: Report, quick: bool) -> None:
    runs = []
    for _ in range(1 if quick else 5):
        with tempfile.TemporaryDirectory() as tmp:
            runs.append(_one(Path(tmp)))
    seconds = statistics.median(s for s, _ in runs)
    table = report.table("operator fit with a role that failed at start-up",
                         ["runs", "exit status", "median seconds to the typed error"],
                         note="every role on this machine; a start-up failure is ParameterError raised by 'b'")
    table.add(len(runs), ",".join(str(c) for _, c in runs), round(seconds, 3))
    report.data["seconds"] = [s for s, _ in runs]
    report.check("operator fit reports a role that failed at start-up (s)", seconds, "<=", TARGET_SECONDS)
