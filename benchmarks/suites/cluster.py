"""Batch encryption on a 2-worker local Dask cluster against one process (issue 10, item 3).

``python benchmarks/run.py cluster [--quick] [--json PATH]``

Paillier at 2048 bits, public-key DJN mode (the default): ``encrypt_many(pk, values)``
in this process, and the same call with ``executor=client.get_executor()`` on a
``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)`` on loopback,
timed in interleaved rounds (one process, cluster, one process, ...) so that drift of
a shared machine hits both; the figures are medians over the rounds and the speed-up
is ``median(one process) / median(cluster)`` from this run.  A 2-process
``ProcessPoolExecutor`` is timed in the same rounds for reference.  The workers are
warmed first (imports, comb table).  ``--quick`` uses fewer values and rounds.

Needs the ``dask`` extra (``dask``, ``distributed``; part of the ``bench`` extra).
"""

from __future__ import annotations

import os
import secrets
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from harness import Report

from securetrees.executors import worker_count
from securetrees.paillier import generate_keypair
from securetrees.paillier.batch import encrypt_many
from suites.paillier import interleaved

VALUES = {True: 160, False: 1600}
ROUNDS = {True: 3, False: 9}
TARGET = 1.5


def _distributed() -> Any:
    """The ``distributed`` module, or exit with what to install."""
    try:
        import distributed
    except ImportError:
        raise SystemExit(
            "the cluster suite needs Dask: pip install -e '.[bench]' (or the 'dask' extra: dask, distributed)"
        ) from None
    return distributed


def run(report: Report, quick: bool) -> None:
    distributed = _distributed()
    load_start = os.getloadavg()
    pk, _ = generate_keypair(2048)
    pk.comb_table()
    values = [secrets.randbits(31) for _ in range(VALUES[quick])]
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    )
    with cluster, distributed.Client(cluster) as client, ProcessPoolExecutor(2) as procs:
        dask = client.get_executor()
        workers = worker_count(dask)
        for ex in (dask, procs):  # warm the workers: imports and the comb table, once per worker
            encrypt_many(pk, values[:16], executor=ex, chunk_size=1)
        t = interleaved(
            {
                "one process": lambda: encrypt_many(pk, values),
                "dask": lambda: encrypt_many(pk, values, executor=dask),
                "processes": lambda: encrypt_many(pk, values, executor=procs),
            },
            ROUNDS[quick], 0.0,
        )
    load_end = os.getloadavg()
    n = len(values)
    speedup = t["one process"].median / t["dask"].median
    tab = report.table(
        f"Batch encryption of {n} values, Paillier 2048 bits, DJN mode: one process vs a local Dask cluster",
        ["executor", "batch (median)", "per value", "speed-up vs one process"],
        note=(f"Medians of {ROUNDS[quick]} interleaved rounds (wall clock). Dask: LocalCluster with "
              f"{workers} worker processes x 1 thread on 127.0.0.1, client.get_executor(), default "
              f"chunking ({4 * workers} chunks). {os.cpu_count()} CPUs; load average (1, 5, 15 min) "
              f"{load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} at the start, "
              f"{load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f} at the end (this run itself keeps "
              "about 2 cores busy). If the ProcessPoolExecutor row is also near 1, another job held a "
              "core and no executor could show a speed-up: rerun on an idle machine."),
    )
    tab.add("one process (no executor)", t["one process"], t["one process"].per(n), 1.0)
    tab.add(f"Dask LocalCluster, {workers} workers", t["dask"], t["dask"].per(n), speedup)
    tab.add("ProcessPoolExecutor(2), reference", t["processes"], t["processes"].per(n),
            t["one process"].median / t["processes"].median)
    report.data["timings"] = t
    report.data["values"] = n
    report.data["dask_workers"] = workers
    report.data["load_average"] = {"start": load_start, "end": load_end}
    report.check("batch encryption, 2-worker local Dask cluster vs one process", speedup, ">=", TARGET)
