"""DT-PKC primitives and the two-server protocols HoAdd and HoLT at 1024 and 2048 bits.

Every figure is a median over repeated runs in this process (one core).  HoAdd and HoLT
are also priced against their floor, the operations the protocol cannot avoid, each at
the cost of one such operation measured in the same run (specs/dtpkc.md "Costs"):

* HoAdd floor = 2 partial strong decryptions (λ1, λ2; constant-time) + 1 HoEnc under the
  joint key (comb tables) + 5 multiplications mod N²;
* HoLT floor = 2 partial strong decryptions + 1 exponentiation by the blinding 2ρ (ρ drawn
  as HoLT draws it: log-uniform over [2^(σ-1), 2^(σ-1+E)), so σ + E/2 bits on average) +
  1 HoEnc under h_CS·h_j (comb tables) + 1 re-randomisation + 4 multiplications + 2 inverses.

Quick mode (CI): 1024 bits only, few repeats.
"""

from __future__ import annotations

import os
import secrets
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

from harness import Report, Timing, measure_each

from securetrees._nt import invert, mpz, powmod_sec
from securetrees.dtpkc import (
    KGC,
    decrypt_weak,
    encrypt,
    hreenc,
    psdec1,
)
from securetrees.dtpkc.keys import PublicKey, SystemParams, TableCache
from securetrees.dtpkc.twoserver import CentralServer, ComputationServer, HoLTParams, draw_holt_blinding
from securetrees.errors import InsecureParameterWarning
from securetrees.runtime import InProcessNetwork

HOLT = HoLTParams()  # ℓ = 128, σ = 256, E = 96, κ = 60
BLIND = "D^(2ρ) (ρ drawn as HoLT does, powmod_sec)"


def _setup(bits: int) -> tuple[KGC, dict[str, Any]]:
    """KGC setup: safe primes, generator check, λ split, three weak keys, comb tables for g and each h."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParameterWarning)
        kgc = KGC.setup(bits, allow_insecure=bits < 2048)
    s1, s2 = kgc.strong_shares()
    weak = {name: kgc.issue_weak_key(name) for name in ("cs", "cc", "u1", "u2")}
    for sk in weak.values():
        sk.public.precompute()
    return kgc, {"cs_share": s1, "cc_share": s2, "weak": weak}


def _ms(t: Timing) -> float:
    return t.median * 1e3


def interleaved(
    fns: dict[str, Callable[[], object]], rounds: int, min_time: float = 0.01
) -> tuple[dict[str, Timing], dict[str, float]]:
    """Time every function once per round, round-robin, so that a change in machine load
    hits the protocol and the operations of its floor alike.  Returns wall-clock medians and
    quartiles over rounds, and the median process CPU time per call (both servers run in this
    process, so on an idle machine the two agree; on a shared one CPU time is what the code costs)."""
    number = {}
    for name, fn in fns.items():  # calibrate (and warm up)
        t0 = time.perf_counter()
        fn()
        one = time.perf_counter() - t0
        number[name] = max(1, min(1000, int(min_time / max(one, 1e-7))))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            k = number[name]
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(k):
                fn()
            samples[name].append((time.perf_counter() - t0) / k)
            cpu[name].append((time.process_time() - c0) / k)
    out = {}
    for name, xs in samples.items():
        q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0], xs[0], xs[0]]
        out[name] = Timing(statistics.median(xs), q[0], q[2], rounds, number[name])
    return out, {name: statistics.median(xs) for name, xs in cpu.items()}


def _bench_size(report: Report, bits: int, quick: bool, rows: dict[str, Any]) -> None:
    reps = 5 if quick else 15
    keygen_runs = 3 if quick else 5
    if bits == 2048 and quick:
        raise ValueError("quick mode runs 1024 bits only")
    # key generation (median over several full setups); the last setup is used below
    holder: list[tuple[KGC, dict[str, Any]]] = []

    def keygen() -> None:
        holder.clear()  # keep one system's tables in memory, not one per run
        holder.append(_setup(bits))

    t_keygen = measure_each(keygen, repeats=keygen_runs)
    kgc, k = holder[-1]
    params: SystemParams = kgc.params
    n2 = params.n2
    weak = k["weak"]
    s1, s2 = k["cs_share"], k["cc_share"]
    pk1, pk2 = weak["u1"].public, weak["u2"].public
    joint = weak["cs"].public.joint(pk2)
    joint.precompute()

    plain_params = SystemParams(params.n, params.g, TableCache(None))
    pk1_plain = PublicKey(plain_params, pk1.h)
    c = encrypt(pk1, 123456789)
    x = c.t1
    a, b = mpz(secrets.randbelow(int(n2))), mpz(secrets.randbelow(int(n2)))

    net = InProcessNetwork(keep_payloads=False)
    cs = CentralServer("cs", net, share=s1, weak_key=weak["cs"], holt_params=HOLT)
    ComputationServer("cc", net, share=s2, weak_key=weak["cc"], directory=kgc.directory(), holt_params=HOLT)
    ca, cb = encrypt(pk1, 31337), encrypt(pk2, -4242)
    batch = 8 if quick else 32
    pairs = [(encrypt(pk1, secrets.randbelow(1 << 64)), encrypt(pk2, secrets.randbelow(1 << 64)))
             for _ in range(batch)]
    for _ in range(2):  # warm the joint-key tables
        cs.hoadd(ca, cb)
        cs.holt(ca, cb)

    def traffic(fn: Callable[[], object]) -> tuple[int, int]:
        mark = net.transcript.mark()
        fn()
        stats = net.transcript.since(mark)
        return stats.bytes, stats.rounds

    t: dict[str, Timing] = {"keygen": t_keygen}
    wall, cpu = interleaved({
        "HoEnc (tables off, powmod_sec)": lambda: encrypt(pk1_plain, 5),
        "HoEnc (comb tables)": lambda: encrypt(pk1, 5),
        "HoEnc joint key (comb)": lambda: encrypt(joint, 5),
        "re-randomisation (comb)": lambda: c.rerandomize(),
        "weak decryption": lambda: decrypt_weak(weak["u1"], c),
        "PSDec share (T1^λ1, powmod_sec)": lambda: s1.t1_pow(x),
        "PSDec1 (CS)": lambda: psdec1(s1, c),
        "HReEnc (+ re-randomisation)": lambda: hreenc(weak["cs"], c),
        BLIND: lambda: powmod_sec(a, 2 * draw_holt_blinding(HOLT).rho, n2),
        "multiplication mod N²": lambda: a * b % n2,
        "inverse mod N²": lambda: invert(a, n2),
        "HoAdd": lambda: cs.hoadd(ca, cb),
        "HoLT": lambda: cs.holt(ca, cb),
        "HoLT batch": lambda: cs.holt_many(pairs),
    }, rounds=reps)
    t.update(wall)
    t["HoLT batched, per comparison"] = t.pop("HoLT batch").per(batch)
    cpu["HoLT batched, per comparison"] = cpu.pop("HoLT batch") / batch
    hoadd_bytes, hoadd_rounds = traffic(lambda: cs.hoadd(ca, cb))
    holt_bytes, holt_rounds = traffic(lambda: cs.holt(ca, cb))
    batch_bytes, batch_rounds = traffic(lambda: cs.holt_many(pairs))

    med = {name: tm.median for name, tm in t.items()}
    p, e, rr = med["PSDec share (T1^λ1, powmod_sec)"], med["HoEnc joint key (comb)"], med["re-randomisation (comb)"]
    mul, inv, dr = med["multiplication mod N²"], med["inverse mod N²"], med[BLIND]
    floors = {
        "HoAdd": 2 * p + e + 5 * mul,
        "HoLT": 2 * p + dr + e + rr + 4 * mul + 2 * inv,
    }
    floors["HoLT batched, per comparison"] = floors["HoLT"]
    c = cpu
    cpu_floors = {
        "HoAdd": 2 * c["PSDec share (T1^λ1, powmod_sec)"] + c["HoEnc joint key (comb)"]
        + 5 * c["multiplication mod N²"],
        "HoLT": 2 * c["PSDec share (T1^λ1, powmod_sec)"] + c[BLIND] + c["HoEnc joint key (comb)"]
        + c["re-randomisation (comb)"] + 4 * c["multiplication mod N²"] + 2 * c["inverse mod N²"],
    }
    cpu_floors["HoLT batched, per comparison"] = cpu_floors["HoLT"]
    traffic_of = {"HoAdd": (hoadd_bytes, hoadd_rounds), "HoLT": (holt_bytes, holt_rounds),
                  "HoLT batched, per comparison": (batch_bytes / batch, batch_rounds / batch)}
    rows[bits] = {"timings": t, "cpu": cpu, "cpu_floors": cpu_floors, "floors": floors,
                  "traffic": traffic_of, "batch": batch}


def run(report: Report, quick: bool) -> None:
    sizes = [1024] if quick else [1024, 2048]
    rows: dict[int, Any] = {}
    load_before = os.getloadavg()[0]
    for bits in sizes:
        _bench_size(report, bits, quick, rows)
    report.data["load_average_1min"] = {"start": load_before, "end": os.getloadavg()[0]}

    prim = report.table(
        "DT-PKC primitives (median per operation)",
        ["operation", *[f"{b} bits" for b in sizes]],
        note="keygen = KGC setup: safe primes (parallel sieve), generator order check, λ split, "
        "4 weak keys, comb tables (w = 6) for g and each h; median over "
        f"{3 if quick else 5} setups. Load average (1 min) at the start "
        f"of the run: {load_before:.2f} on {os.cpu_count()} cores.",
    )
    for name in rows[sizes[0]]["timings"]:
        if name.startswith("Ho") and name not in ("HoEnc (tables off, powmod_sec)", "HoEnc (comb tables)",
                                                   "HoEnc joint key (comb)"):
            continue
        prim.add(name, *[rows[b]["timings"][name] for b in sizes])

    proto = report.table(
        "HoAdd and HoLT: median, floor and traffic",
        ["protocol", "bits", "median", "floor", "ratio", "CPU median", "CPU ratio", "bytes", "rounds"],
        note="floor = the protocol's unavoidable operations priced at this run's medians "
        "(HoAdd: 2 PSDec shares + 1 HoEnc + 5 mult; HoLT: 2 PSDec shares + D^(2ρ) + 1 HoEnc + "
        "1 re-randomisation + 4 mult + 2 inv). CPU median = process CPU time per call (CS and CC "
        "share this process), which equals the wall time on an idle machine; CPU ratio = the same "
        "ratio on CPU times. Batched: "
        f"{rows[sizes[0]]['batch']} comparisons in one round trip, figures per comparison. "
        "For scale (others' figures, not measured here): RevFRF's Java prediction, 1024-bit N, "
        "133 ms per tree node; TNO's DGK comparison with 2048-bit Paillier, 262 ms (64-bit) / "
        "618 ms (128-bit) per comparison.",
    )
    for bits in sizes:
        r = rows[bits]
        for name in ("HoAdd", "HoLT", "HoLT batched, per comparison"):
            tm = r["timings"][name]
            floor = r["floors"][name]
            nbytes, rounds = r["traffic"][name]
            cpu_s = r["cpu"][name]
            proto.add(name, bits, tm, Timing(floor, floor, floor, 1, 1), tm.median / floor,
                      Timing(cpu_s, cpu_s, cpu_s, 1, 1), cpu_s / r["cpu_floors"][name],
                      f"{nbytes:,.0f}", f"{rounds:g}")
            report.data[f"{name} {bits}"] = {"median_s": tm.median, "floor_s": floor, "cpu_s": cpu_s,
                                             "bytes": nbytes, "rounds": rounds}

    for bits in sizes:
        r = rows[bits]
        holt, hoadd = r["timings"]["HoLT"].median, r["timings"]["HoAdd"].median
        if bits == 2048:
            report.check("HoLT 2048 bits, ms per comparison", holt * 1e3, "<=", 90)
            # the additive blinding's budget, on CPU time (wall time on a shared machine is load)
            report.check("HoLT 2048 bits, CPU ratio to floor", r["cpu"]["HoLT"] / r["cpu_floors"]["HoLT"],
                         "<=", 1.15)
            report.check("2048-bit key generation, s (median)", r["timings"]["keygen"].median, "<=", 20)
        if bits == 1024:
            report.check("HoLT 1024 bits, ms per comparison", holt * 1e3, "<=", 18)
        report.check(f"HoLT {bits} bits, ratio to floor", holt / r["floors"]["HoLT"], "<=", 1.3)
        report.check(f"HoAdd {bits} bits, ratio to floor", hoadd / r["floors"]["HoAdd"], "<=", 1.3)
    report.data["medians_ms"] = {
        str(bits): {k: _ms(v) for k, v in rows[bits]["timings"].items()} for bits in sizes
    }
