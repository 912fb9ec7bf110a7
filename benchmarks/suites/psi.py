"""Private set intersection over mutual TLS (issue 16): per-id costs and whole two-party runs.

Per-id costs, measured in this run on a batch of ids (median of repeats), just before each set
size's runs: hashing to the group (SHA-512, two Elligator 2 maps added on Ed25519 and libsodium's
map to the X25519 u-coordinate, whose subgroup check is included), blinding (one X25519
``crypto_scalarmult``), matching (the leader's table of ``a·b·H(y)`` and one lookup per id).

Whole run: two processes on loopback over gRPC with mutual TLS (``securetrees.psi.net``), the
leader here and the member in a child process, ``n`` ids each with half shared, in chunks of at
most 8192 points per message (at least 32 chunks); timed from the first message to the leader's
result (the member already listening).  The floor counted from the per-id costs: each party
hashes and blinds its own ids and blinds the other's, the two in parallel on this machine's two
cores, then the leader matches: ``n·(hash + 2·blind) + n·match``.  Each party's CPU time in the
run, against the same count for one party from the costs in CPU time, shows the overhead of chunking, serialisation and
TLS apart from other users' load; "busy cores" is both parties' CPU time over the wall time
(2 when both cores work throughout).  ``--quick``: 10^3 ids, a smoke run (the ratio is
reported, not checked: each round trip's fixed cost outweighs so little crypto); full: 10^5
(median of 3 runs) and 10^6 (one run); ``PSI_SIZES=1000000`` (comma-separated) runs only the sizes
given.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import nacl.bindings as sodium
from harness import Report, measure

from securetrees.psi.group import blind, encode_id, hash_ids, random_scalar
from securetrees.psi.net import TwoProcessRun, run_two_process

BATCH = 2000
CHUNK = 8192
TARGETS = {10**5: 20.0, 10**6: 200.0}


def per_id_costs(clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Seconds per id of each step on one core, by ``clock`` (wall or this process's CPU time)."""
    session = bytes(16)
    ids = [encode_id(i) for i in range(BATCH)]
    pts = hash_ids(session, ids)
    a, b = random_scalar(), random_scalar()
    ab = blind(b, blind(a, pts))
    ba = list(reversed(ab))

    def match() -> int:
        where = {p: k for k, p in enumerate(ba)}
        return sum(1 for p in ab if p in where)

    return {
        "hash": measure(lambda: hash_ids(session, ids), repeats=5, number=1, clock=clock).median / BATCH,
        "blind": measure(lambda: blind(a, pts), repeats=5, number=1, clock=clock).median / BATCH,
        "match": measure(match, repeats=5, number=1, clock=clock).median / BATCH,
    }


def former_per_party(clock: Callable[[], float] = time.process_time) -> dict[str, float]:
    """Seconds per id and party, by ``clock``, of the Ed25519 construction X25519 replaced (the
    two-halves hash without the map to Montgomery form, two ``crypto_scalarmult_ed25519_noclamp``)
    and of the current one, timed here on the same points: the baseline of the change."""
    h = [hashlib.sha512(encode_id(i)).digest() for i in range(BATCH)]
    from_uniform, add = sodium.crypto_core_ed25519_from_uniform, sodium.crypto_core_ed25519_add
    edwards = [add(from_uniform(d[:32]), from_uniform(d[32:])) for d in h]
    s = random_scalar()
    ed_hash = measure(lambda: [add(from_uniform(d[:32]), from_uniform(d[32:])) for d in h],
                      repeats=5, number=1, clock=clock).median / BATCH
    ed_blind = measure(lambda: [sodium.crypto_scalarmult_ed25519_noclamp(s, p) for p in edwards],
                       repeats=5, number=1, clock=clock).median / BATCH
    now = per_id_costs(clock)
    return {"former": ed_hash + 2 * ed_blind, "current": now["hash"] + 2 * now["blind"]}


def _median_run(runs: list[TwoProcessRun]) -> TwoProcessRun:
    return sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]


def run(report: Report, quick: bool) -> None:
    sizes = [10**3] if quick else [10**5, 10**6]
    if os.environ.get("PSI_SIZES"):  # e.g. PSI_SIZES=1000000: one point alone, in a quiet moment
        sizes = [int(v) for v in os.environ["PSI_SIZES"].split(",")]
    costs_tab = report.table("PSI per-id costs (one core, libsodium through PyNaCl)",
                             ["ids per party (runs that follow)", "clock", "hash (µs)", "blind (µs)",
                              "match (µs)"],
                             note=f"median of 5 runs on {BATCH} ids, measured just before those runs: wall "
                                  "clock (the floor) and this process's CPU time (the CPU counts)")
    runs_tab = report.table(
        "Two-party PSI, two processes over gRPC + mutual TLS (loopback), half the ids shared",
        ["ids per party", "run (s)", "floor (s)", "run / floor", "leader CPU / count", "member CPU / count",
         "busy cores", "leader bytes in / id", "target (s)"],
        note="floor = n·(hash + 2·blind) + n·match from the wall-clock per-id costs measured just before; "
             "count = the same for one party from the CPU-time costs (the leader's with the match); "
             "median run of the repeats")
    results: dict[str, Any] = {"runs": {}, "load_average_before": os.getloadavg()}
    change = former_per_party()
    base = report.table("One party's work per id, CPU time: the former Ed25519 construction and X25519",
                        ["former (µs)", "current (µs)", "current / former"],
                        note="former: two-halves hash + 2 crypto_scalarmult_ed25519_noclamp; current: the same "
                             "hash mapped to Montgomery form + 2 X25519; median of 5 runs each")
    base.add(round(change["former"] * 1e6, 1), round(change["current"] * 1e6, 1),
             round(change["current"] / change["former"], 3))
    results["per_party_cpu_seconds"] = change
    for n in sizes:
        costs, cpu_costs = per_id_costs(), per_id_costs(time.process_time)
        for clock, c in (("wall", costs), ("cpu", cpu_costs)):
            costs_tab.add(n, clock, *(round(c[k] * 1e6, 2) for k in ("hash", "blind", "match")))
        repeats = 3 if n <= 10**5 else 1
        chunk = min(CHUNK, max(64, n // 32))  # at least 32 rounds: the pipeline's fill and drain stay small
        runs: list[TwoProcessRun] = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as tmp:
                out = run_two_process(list(range(n)), list(range(n // 2, n + n // 2)), tmp, chunk_size=chunk)
            if len(out.leader.rows) != n // 2 or len(out.member_rows) != n // 2:
                raise RuntimeError(f"the run found {len(out.leader.rows)} shared ids, not {n // 2}")
            runs.append(out)
        mid = _median_run(runs)
        wall = statistics.median(r.seconds for r in runs)
        floor = n * (costs["hash"] + 2 * costs["blind"] + costs["match"])
        party = n * (cpu_costs["hash"] + 2 * cpu_costs["blind"])  # one party's counted CPU time
        target = TARGETS.get(n)
        busy = (mid.leader_cpu_seconds + mid.member_cpu_seconds) / mid.seconds
        runs_tab.add(n, round(wall, 2), round(floor, 2), round(wall / floor, 3),
                     round(mid.leader_cpu_seconds / (party + n * cpu_costs["match"]), 3),
                     round(mid.member_cpu_seconds / party, 3),
                     round(busy, 2), round(mid.bytes_received / n, 1), target if target is not None else "")
        results["runs"][str(n)] = {
            "per_id_seconds": costs, "per_id_cpu_seconds": cpu_costs, "seconds": [r.seconds for r in runs],
            "floor_seconds": floor,
            "leader_cpu_seconds": [r.leader_cpu_seconds for r in runs],
            "member_cpu_seconds": [r.member_cpu_seconds for r in runs],
            "leader_received_bytes": mid.bytes_received, "chunk_size": chunk,
            "load_average_after": os.getloadavg()}
        if n >= 10**5:  # at 10^3 ids the fixed cost of each gRPC round trip outweighs the crypto
            report.check(f"{n} ids: run / counted floor", wall / floor, "<=", 1.3)
        if target is not None:
            report.check(f"{n} ids per party: wall seconds", wall, "<=", target)
    report.data.update(results)
