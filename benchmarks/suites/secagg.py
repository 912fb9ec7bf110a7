"""Secure aggregation (issue 5): Bonawitz double masking with dropouts, all parties in one process.

For n parties, vectors of d uint64 values (mod 2^64) and k dropouts, one run is
session setup plus one aggregation round over an InProcessNetwork (every
message encoded and decoded).  Reported per configuration: the median total,
the median time one client spends in its handlers, the rest (server work plus
message encoding, "server+transport"), and bytes sent plus received per client.

The floor is the mask material the protocol must expand: each client expands
one self mask and one pairwise mask per other participant; the server expands
one self mask per contributor and, for each party that dropped before sending
its masked input, one pairwise mask per contributor.  Each mask costs one
keystream expansion at the PRG rate measured in this run plus one in-place
vector addition.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import defaultdict
from typing import Any

import numpy as np
from harness import Report, Timing, measure

from securetrees.runtime import InProcessNetwork
from securetrees.secagg import MaskExpander, Stage, build_simulation

FLOWER_SECAGGPLUS_S = 2.43  # Flower 1.41 SecAgg+, n=10, d=10^6, full graph, dropouts; same machines


def prg_rates(d: int) -> tuple[Timing, Timing]:
    """Seconds to expand one d-word mask, and to add one d-word vector in place."""
    ex = MaskExpander()
    key = os.urandom(32)
    stream = measure(lambda: ex.stream(key, d), repeats=9)
    acc = np.zeros(d, np.uint64)
    other = np.ones(d, np.uint64)
    add = measure(lambda: np.add(acc, other, out=acc), repeats=9)
    return stream, add


def one_run(n: int, d: int, dropped: int, stage: Stage) -> dict[str, Any]:
    names = [f"c{i:02d}" for i in range(n)]
    drops = {name: stage for name in names[1 : 1 + dropped]}
    net = InProcessNetwork(keep_payloads=False)
    sim = build_simulation(names, drops=drops, network=net)
    gen = np.random.default_rng(n * 1000 + d)  # benchmark inputs only, never masks
    for name in names:
        sim.clients[name].provide(1, gen.integers(0, 1 << 63, size=d, dtype=np.uint64))
    busy: dict[str, float] = defaultdict(float)
    for name, client in sim.clients.items():
        original = client.dispatch

        def timed(sender: str, msg: Any, _orig: Any = original, _name: str = name) -> Any:
            t0 = time.perf_counter()
            try:
                return _orig(sender, msg)
            finally:
                busy[_name] += time.perf_counter() - t0

        client.dispatch = timed  # type: ignore[method-assign]
    t0 = time.perf_counter()
    sim.server.setup()
    t1 = time.perf_counter()
    result = sim.server.aggregate(1, d)
    t2 = time.perf_counter()
    contributors = len(result.contributors)
    u2 = contributors + len(result.dropped)
    masks = u2 * u2  # every client of U2: one self mask and u2 - 1 pairwise masks
    masks += contributors + len(result.dropped) * contributors  # server
    client_times = [busy[c] for c in names]
    sizes = [net.transcript.bytes_sent(c) + net.transcript.bytes_received(c) for c in names]
    return {
        "setup": t1 - t0,
        "round": t2 - t1,
        "total": t2 - t0,
        "client": statistics.median(client_times),
        "server": (t2 - t0) - sum(client_times),
        "bytes": statistics.median(sizes),
        "masks": masks,
        "rounds": net.transcript.rounds,
    }


def summarise(runs: list[dict[str, Any]], key: str) -> Timing:
    values = sorted(r[key] for r in runs)
    q = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return Timing(statistics.median(values), q[0], q[-1], len(values), 1)


def run(report: Report, quick: bool) -> None:
    sizes = [10**4, 10**5] if quick else [10**4, 10**5, 10**6]
    parties = [5, 10] if quick else [5, 10, 20]
    stream_1m, add_1m = prg_rates(10**6)
    rate = 8 * 10**6 / stream_1m.median
    per_mask = {d: prg_rates(d) for d in sizes}
    rates = report.table(
        "Mask PRG (AES-256-CTR keystream read as uint64) and vector addition",
        ["d", "expand one mask", "GB/s", "add one vector"],
        note="one core; keystream into a reused buffer, no per-element Python work",
    )
    for d in sizes:
        s, a = per_mask[d]
        rates.add(d, s, f"{8 * d / s.median / 1e9:.2f}", a)
    report.check("PRG expansion rate (GB/s)", rate / 1e9, ">=", 3.0)

    table = report.table(
        "Setup + one round, dropouts after the masked-input stage",
        ["n", "d", "drops", "total", "setup", "client (median)", "server+transport",
         "bytes/client", "floor", "ratio"],
        note="drops = n/4 rounded down; floor = masks x (expand + add) at this run's rates",
    )
    results: dict[str, Any] = {}
    for n in parties:
        for d in sizes:
            for k in sorted({0, 1, n // 4}):
                repeats = 1 if quick else (5 if (n, d) == (10, 10**6) else 3)
                runs = [one_run(n, d, k, Stage.CONSISTENCY) for _ in range(repeats)]
                s, a = per_mask[d]
                floor = runs[0]["masks"] * (s.median + a.median)
                total = summarise(runs, "total")
                table.add(n, d, k, total, summarise(runs, "setup"), summarise(runs, "client"),
                          summarise(runs, "server"), f"{statistics.median(r['bytes'] for r in runs):,.0f}",
                          Timing(floor, floor, floor, 1, 1), f"{total.median / floor:.2f}")
                results[f"n={n},d={d},drops={k}"] = {"total": total, "floor": floor,
                                                     "masks": runs[0]["masks"], "rounds": runs[0]["rounds"]}

    before = report.table(
        "Dropouts before the masked-input stage (server reconstructs their pairwise masks)",
        ["n", "d", "drops", "total", "client (median)", "server+transport", "floor", "ratio"],
    )
    for n, d in ([(10, 10**4)] if quick else [(10, 10**5), (10, 10**6)]):
        k = n // 4
        runs = [one_run(n, d, k, Stage.MASKED_INPUT) for _ in range(1 if quick else 3)]
        s, a = per_mask[d]
        floor = runs[0]["masks"] * (s.median + a.median)
        total = summarise(runs, "total")
        before.add(n, d, k, total, summarise(runs, "client"), summarise(runs, "server"),
                   Timing(floor, floor, floor, 1, 1), f"{total.median / floor:.2f}")

    # The target: n=10, d=10^6, 2 dropouts after the masked-input stage.
    load_before = os.getloadavg()
    runs = [one_run(10, 10**6, 2, Stage.CONSISTENCY) for _ in range(2 if quick else 5)]
    load_after = os.getloadavg()
    total = summarise(runs, "total")
    floor = runs[0]["masks"] * (stream_1m.median + add_1m.median)
    # Not used by the check: the same rates timed again just after the target runs, to show
    # whether the suite-start rates were representative (other jobs share the 2 cores).
    stream_again, add_again = prg_rates(10**6)
    floor_again = runs[0]["masks"] * (stream_again.median + add_again.median)
    target = report.table(
        "The issue's target: n=10, d=10^6, 2 dropouts after the masked-input stage",
        ["total", "setup", "client (median)", "server+transport", "masks", "floor", "ratio",
         "floor (re-timed)", "ratio (re-timed)", "load avg before", "load avg after"],
        note="floor = masks x (expand + add one 10^6-word mask) at the rates timed at the start of "
             "the suite (the check); re-timed = the same rates timed again after the target runs; "
             "load = 1/5/15-minute load averages (2 cores, shared machine)",
    )
    target.add(total, summarise(runs, "setup"), summarise(runs, "client"), summarise(runs, "server"),
               runs[0]["masks"], Timing(floor, floor, floor, 1, 1), f"{total.median / floor:.2f}",
               Timing(floor_again, floor_again, floor_again, 1, 1), f"{total.median / floor_again:.2f}",
               "/".join(f"{x:.2f}" for x in load_before), "/".join(f"{x:.2f}" for x in load_after))
    report.check("n=10, d=10^6, 2 drops: total seconds", total.median, "<=", 0.8)
    report.check("n=10, d=10^6, 2 drops: ratio to floor", total.median / floor, "<=", 1.5)
    report.data["target_run"] = {"total": total, "floor": floor, "masks": runs[0]["masks"],
                                 "prg_bytes_per_s": rate,
                                 "load_average_before": load_before, "load_average_after": load_after,
                                 "floor_retimed_after": floor_again,
                                 "flower_secaggplus_s_theirs": FLOWER_SECAGGPLUS_S,
                                 "speedup_vs_flower_figure": FLOWER_SECAGGPLUS_S / total.median}
    report.data["grid"] = results
