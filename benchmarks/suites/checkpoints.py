"""Checkpoints (issue 28): the time a SecureBoost fit spends on its per-round checkpoints and their size.

The demo's vertical split of Adult (an active party with 5 columns, two passive parties with the
other 9), every party in this process on the in-process network, the cached 1024-bit test key, a
fit with a checkpoint store per party (sealed files in a temporary folder, ``specs/secureboost.md``,
"Checkpoints") and one without, interleaved so the machine's load hits both alike.  Reported: the
median wall-clock and CPU time of each (CPU time: this process's, so not the encryption workers'
the key-owner mode may start), their ratios, and each party's checkpoint size (the latest
file, and the passive parties' journal) after the fit.

``--quick``: 1000 rows, 3 rounds, one repeat; else 4000 rows, 5 rounds, 3 repeats.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from harness import Report, measure_interleaved

from securetrees.datasets import load_adult
from securetrees.protocols.secureboost import ActiveParty, PassiveParty, SecureBoostParams
from securetrees.protocols.secureboost.checkpoint import FORMAT
from securetrees.protocols.secureboost.demo import MAX_BINS, adult_partition
from securetrees.runtime import InProcessNetwork
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.testing.paillier import small_keypair


def _fit(X: np.ndarray, y: np.ndarray, part: list[list[int]], params: SecureBoostParams, keys: Any,
         folder: Path | None) -> None:
    net = InProcessNetwork()
    names = [f"passive{u}" for u in range(len(part) - 1)]

    def store(name: str) -> CheckpointStore | None:
        return None if folder is None else CheckpointStore(folder, name, bytes(32), FORMAT)

    for name, cols in zip(names, part[1:], strict=True):
        PassiveParty(name, net, X=X[:, cols], allow_insecure=True, checkpoint=store(name))
    ActiveParty("active", net, X=X[:, part[0]], y=y, passives=names, params=params, keypair=keys,
                checkpoint=store("active")).fit()


def run(report: Report, quick: bool) -> None:
    import warnings

    warnings.simplefilter("ignore")  # the 1024-bit test key
    rows, rounds, repeats = (1000, 3, 1) if quick else (4000, 5, 3)
    data = load_adult()
    X, y = data.X_train[:rows], data.y_train[:rows].astype(np.float64)
    part = adult_partition(2, X.shape[1])
    params = SecureBoostParams(loss="logistic", n_classes=2, n_estimators=rounds, max_depth=3, learning_rate=0.3,
                               max_bins=MAX_BINS)
    keys = small_keypair(1024)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        times = measure_interleaved({"without": lambda: _fit(X, y, part, params, keys, None),
                                     "with": lambda: _fit(X, y, part, params, keys, folder)}, repeats=repeats)
        sizes = {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if not p.name.startswith(".")}
    table = report.table(f"SecureBoost fit with and without checkpoints ({rows} rows, {rounds} rounds, "
                         f"1024-bit key, median of {repeats})", ["run", "wall s", "CPU s"])
    for name, (wall, cpu) in times.items():
        table.add(f"{name} checkpoints", round(wall.median, 3), round(cpu.median, 3))
    ratio = times["with"][1].median / times["without"][1].median
    wall_ratio = times["with"][0].median / times["without"][0].median
    table.add("ratio with / without", round(wall_ratio, 4), round(ratio, 4))
    files = report.table("checkpoint files after the fit", ["file", "bytes"])
    for name, size in sizes.items():
        files.add(name, size)
    report.data["checkpoint_cpu_ratio"] = ratio
    report.data["checkpoint_wall_ratio"] = wall_ratio
    report.data["checkpoint_bytes"] = sizes
