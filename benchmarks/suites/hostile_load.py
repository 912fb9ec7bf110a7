"""Hostile load against a running role (issue 28, part 4): frames refused per second and peak memory.

``python benchmarks/run.py hostile_load [--quick] [--json PATH]``

Each repeat is one ``securetrees.protocols.histogram_forest.hostile_load.run``: a histogram forest (a server and two
clients on gRPC with mutual TLS over loopback, all in this process) fits while ``sloth`` opens 4 x 16
stalled HTTP/2 streams at ``client0`` (8 held, the rest refused) and ``mallory`` sends it, 4 calls
in flight, each load below.
Frames per second refused: the load's calls over the wall time from its first call to its last
status (the attacker, the role and the fit share this process and its cores), median over repeats.
Peak memory: the rise of this process's peak RSS over its RSS before the attack, median and
maximum over repeats, against the bound of ``specs/deployment.md`` ("Hostile peers").

Then the size limit's share of that bound: ``client0`` alone, sent 8 frames of 64 MiB (quick: 16 MiB),
4 in flight, by ``mallory`` from a child process (so that only the role's memory is in this process's
peak), once with the load's 1 MiB limit and once with the default 256 MiB (the frames fit under it).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import grpc
from harness import Report

from securetrees.net import GrpcNetwork, Peer, TransportOptions
from securetrees.net.control import peak_rss_bytes
from securetrees.protocols.histogram_forest import hostile_load as hr
from securetrees.protocols.histogram_forest.client import Client
from securetrees.protocols.histogram_forest.messages import LayerRequest
from securetrees.testing.hostile import nested_frames

_LOADS = ("random", "at_limit", "over_limit", "nested", "out_of_order")
_WHAT = {"random": "random bytes", "at_limit": "at the size limit", "over_limit": "1 byte over the limit",
         "nested": "nested bodies", "out_of_order": "valid, out of order"}


def run(report: Report, quick: bool) -> None:
    if quick:
        plan = hr.LoadPlan(random=1000, at_limit=100, over_limit=2, nested=100, out_of_order=100)
        repeats = 1
    else:
        plan, repeats = hr.LoadPlan(), 3
    reference = hr.reference_trees()
    runs = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as folder:
            runs.append(hr.run(Path(folder), plan))
    tab = report.table("Hostile frames refused by a running role",
                       ["load", "frames", "bytes each", "refused / s (median)", "status"],
                       note=f"median of {repeats} run(s); loopback, attacker, role and fit in one process "
                            "on a shared machine")
    sizes = {"random": plan.random_bytes, "at_limit": plan.limit_bytes, "over_limit": plan.limit_bytes + 1,
             "nested": len(next(nested_frames(1, plan.nested_depth, LayerRequest.wire_type))), "out_of_order": None}
    sent = plan.sent()
    for load in _LOADS:
        rate = statistics.median(sent[load] / r.seconds[load] for r in runs)
        codes = sorted({code.name for r in runs for code in r.codes[load]})
        tab.add(f"{load} ({_WHAT[load]})", sent[load], sizes[load] or "-", f"{rate:,.0f}", ", ".join(codes))
        refused = sum(n for r in runs for code, n in r.codes[load].items() if code != grpc.StatusCode.OK)
        report.check(f"{load}: calls refused / sent", refused / (sent[load] * repeats), ">=", 1.0)
    growth = [r.peak_growth for r in runs]
    mem = report.table("Peak memory over the attack", ["median MiB", "max MiB", "bound MiB", "slots held by sloth"])
    bound = hr.memory_bound(plan)
    mem.add(f"{statistics.median(growth) / 2**20:.1f}", f"{max(growth) / 2**20:.1f}", f"{bound / 2**20:.0f}",
            max(r.slots_held for r in runs))
    report.check("peak memory growth / bound", max(growth) / bound, "<=", 1.0)
    report.check("fits with the unattacked trees", sum(hr.same_trees(r.trees, reference) for r in runs) / repeats,
                 ">=", 1.0)
    run_size_limit(report, quick)


def _flooded_alone(limit: int, size: int) -> tuple[dict[str, int], int]:
    """``client0`` alone with ``limit``, sent 8 frames of ``size`` bytes from a child; the status
    counts and the peak RSS growth of this process."""
    with tempfile.TemporaryDirectory() as folder:
        ids = hr.identities(Path(folder))
        roster = {n: Peer("127.0.0.1:0", role=r) for n, r in hr.ROLES.items()}
        net = GrpcNetwork(ids[hr.ATTACKED], roster, options=TransportOptions(deadline=120.0, retries=0,
                                                                             max_message_bytes=limit))
        X, y = hr.parts()[0]
        Client(hr.ATTACKED, net, X, y, seed=1)
        address = f"127.0.0.1:{net.start()}"
        try:
            base = hr.reset_peak()
            codes = hr.flood_from_child(Path(folder), address, frames=8, size=size, in_flight=4)
            return codes, peak_rss_bytes() - base
        finally:
            net.close()


def run_size_limit(report: Report, quick: bool) -> None:
    size = (16 if quick else 64) << 20
    plan = hr.LoadPlan()
    tab = report.table(f"8 frames of {size >> 20} MiB at client0 alone, 4 in flight",
                       ["max_message_bytes", "status", "peak growth MiB", "bound MiB"],
                       note="one run each; the bound is the load's (1 MiB limit)")
    limits = {"1 MiB (the load's)": plan.limit_bytes,
              f"{TransportOptions().max_message_bytes >> 20} MiB (the default)": TransportOptions().max_message_bytes}
    for label, limit in limits.items():
        codes, growth = _flooded_alone(limit, size)
        tab.add(label, ", ".join(f"{k} x {v}" for k, v in codes.items()), f"{growth / 2**20:.0f}",
                f"{hr.memory_bound(plan) / 2**20:.0f}")
        if limit == plan.limit_bytes:
            report.check("1 MiB limit: peak growth / bound", growth / hr.memory_bound(plan), "<=", 1.0)
