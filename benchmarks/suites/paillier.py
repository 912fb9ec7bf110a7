"""Paillier: securetrees against phe 1.5.0 and the raw gmpy2 floor, in one run.

``python benchmarks/run.py paillier [--quick] [--json PATH]``

Each operation of ours and its phe counterpart are timed in interleaved
rounds (phe, ours, phe, ours, ...), so that drift of a shared machine hits
both; every figure is the median over the rounds, and every ratio is
``median(phe) / median(ours)`` from this run.  ``--quick`` keeps 2048 bits
but uses 3 rounds and small batches, and skips 3072 bits.
"""

from __future__ import annotations

import secrets
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import gmpy2
import phe
from harness import Report, Timing

from securetrees.paillier import RandomnessPool, generate_keypair
from securetrees.paillier.batch import encrypt_many

SAMPLE_SECONDS = {True: 0.05, False: 0.1}
ROUNDS = {True: 5, False: 15}


def _calibrate(fn: Callable[[], object], target: float) -> int:
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    return max(1, int(target / once))


def interleaved(fns: dict[str, Callable[[], object]], rounds: int, target: float) -> dict[str, Timing]:
    """Seconds per call of each function, sampled in alternating rounds."""
    numbers = {k: _calibrate(f, target) for k, f in fns.items()}
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            n = numbers[k]
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            samples[k].append((time.perf_counter() - t0) / n)
    out = {}
    for k, s in samples.items():
        q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0], s[0], s[0]]
        out[k] = Timing(statistics.median(s), q[0], q[2], rounds, numbers[k])
    return out


def keygen_times(bits: int, repeats: int) -> dict[str, Timing]:
    samples: dict[str, list[float]] = {"phe": [], "ours": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        phe.generate_paillier_keypair(n_length=bits)
        samples["phe"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        generate_keypair(bits)
        samples["ours"].append(time.perf_counter() - t0)
    out = {}
    for k, s in samples.items():
        q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0], s[0], s[0]]
        out[k] = Timing(statistics.median(s), q[0], q[2], repeats, 1)
    return out


def bench_size(report: Report, bits: int, quick: bool) -> dict[str, float]:
    rounds, target = ROUNDS[quick], SAMPLE_SECONDS[quick]
    kg = keygen_times(bits, 3 if quick else 7)
    ppk, psk = phe.generate_paillier_keypair(n_length=bits)
    pk, sk = generate_keypair(bits)
    t0 = time.perf_counter()
    pk.comb_table()
    sk.comb_tables()
    table_build = time.perf_counter() - t0

    m = secrets.randbits(31)
    k32 = secrets.randbits(32) | 1
    pc, pd = ppk.encrypt(m), ppk.encrypt(m + 1)
    c, d = pk.encrypt(m), pk.encrypt(m + 1)
    raw_a, raw_b, n2 = gmpy2.mpz(c.value), gmpy2.mpz(d.value), gmpy2.mpz(pk.n_square)
    r_raw = gmpy2.mpz(secrets.randbelow(pk.n))
    n_raw = gmpy2.mpz(pk.n)

    pool = RandomnessPool(pk, mode="djn-short")
    pool_calls = 60 if quick else 400
    pool.fill(pool_calls * (rounds + 2))

    t = interleaved(
        {
            "phe enc": lambda: ppk.encrypt(m),
            "djn": lambda: pk.encrypt(m),
            "djn-short": lambda: pk.encrypt(m, mode="djn-short"),
            "classic": lambda: pk.encrypt(m, mode="classic"),
            "owner": lambda: sk.encrypt(m),
            "owner classic": lambda: sk.encrypt(m, mode="classic"),
        },
        rounds, target,
    )
    online = interleaved({"phe enc": lambda: ppk.encrypt(m)}, rounds, target)
    online_samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(pool_calls):
            pk.encrypt(m, pool=pool)
        online_samples.append((time.perf_counter() - t0) / pool_calls)
    q = statistics.quantiles(online_samples, n=4, method="inclusive")
    t["pooled"] = Timing(statistics.median(online_samples), q[0], q[2], rounds, pool_calls)
    t["phe enc (pooled rounds)"] = online["phe enc"]
    sp, sq, sp2, sq2 = sk._p, sk._q, sk._p2, sk._q2
    raw_c = gmpy2.mpz(c.value)
    t.update(interleaved(
        {
            "phe dec": lambda: psk.decrypt(pc),
            "dec ct": lambda: sk.decrypt(c),
            "dec fast": lambda: sk.decrypt(c, constant_time=False),
            "raw dec": lambda: (gmpy2.powmod(raw_c, sp - 1, sp2), gmpy2.powmod(raw_c, sq - 1, sq2)),
            "raw dec sec": lambda: (gmpy2.powmod_sec(raw_c, sp - 1, sp2),
                                    gmpy2.powmod_sec(raw_c, sq - 1, sq2)),
        },
        rounds, target,
    ))
    t.update(interleaved(
        {
            "phe add": lambda: pc + pd,
            "add": lambda: c + d,
            "mulmod": lambda: raw_a * raw_b % n2,
            "phe add int": lambda: pc + 12345,
            "add int": lambda: c + 12345,
            "phe mul": lambda: pc * k32,
            "mul": lambda: c * k32,
            "powmod": lambda: gmpy2.powmod(r_raw, n_raw, n2),
        },
        rounds, target,
    ))

    batch = 48 if quick else 400
    values = [secrets.randbits(31) for _ in range(batch)]
    with ProcessPoolExecutor(2) as ex:
        encrypt_many(pk, values[:8], executor=ex)  # warm the workers (imports, comb table)
        t.update(interleaved(
            {
                "batch 1 process": lambda: encrypt_many(pk, values),
                "batch 2 processes": lambda: encrypt_many(pk, values, executor=ex),
            },
            rounds, target,
        ))

    def ratio(base: str, ours: str) -> float:
        return t[base].median / t[ours].median

    tab = report.table(
        f"Paillier at {bits} bits: phe 1.5.0 and securetrees, interleaved rounds",
        ["operation", "phe 1.5.0", "securetrees", "speed-up vs phe", "notes"],
        note=(f"Medians of {rounds} interleaved rounds; speed-up = phe median / our median. "
              f"Comb tables for hs (public, and mod p², q²) built once in {table_build:.2f} s. "
              "Pooled: online part only (the pool was filled before timing)."),
    )
    tab.add("key generation", kg["phe"], kg["ours"], kg["phe"].median / kg["ours"].median,
            f"median of {kg['ours'].repeats}; ours: DJN primes + hs")
    tab.add("encrypt, DJN |N|/2-bit exponent (default)", t["phe enc"], t["djn"],
            ratio("phe enc", "djn"), "public key, comb table w=8")
    tab.add("encrypt, DJN short exponent (opt-in)", t["phe enc"], t["djn-short"],
            ratio("phe enc", "djn-short"), "2κ-bit exponent, extra assumption")
    tab.add("encrypt, classic r^N", t["phe enc"], t["classic"], ratio("phe enc", "classic"),
            "same algorithm as phe")
    tab.add("encrypt, key owner, DJN by CRT (default)", t["phe enc"], t["owner"],
            ratio("phe enc", "owner"), "comb tables mod p², q²")
    tab.add("encrypt, key owner, classic r^N by CRT", t["phe enc"], t["owner classic"],
            ratio("phe enc", "owner classic"), "powmod_sec r^p mod p², r^q mod q²")
    tab.add("encrypt, pooled (online part)", t["phe enc (pooled rounds)"], t["pooled"],
            ratio("phe enc (pooled rounds)", "pooled"), "one multiplication mod N²")
    tab.add("decrypt, constant time (default)", t["phe dec"], t["dec ct"],
            ratio("phe dec", "dec ct"), "CRT, powmod_sec")
    tab.add("decrypt, constant_time=False", t["phe dec"], t["dec fast"],
            ratio("phe dec", "dec fast"), "CRT, powmod (as phe)")
    tab.add("add ciphertexts (+)", t["phe add"], t["add"], ratio("phe add", "add"),
            f"{t['add'].median / t['mulmod'].median:.2f}x one raw mulmod")
    tab.add("add plaintext int", t["phe add int"], t["add int"], ratio("phe add int", "add int"), "")
    tab.add("multiply by 32-bit int", t["phe mul"], t["mul"], ratio("phe mul", "mul"), "")
    tab.add(f"batch encrypt {batch}, per item, 1 process", "", t["batch 1 process"].per(batch),
            "", "DJN mode")
    tab.add(f"batch encrypt {batch}, per item, 2 processes", "",
            t["batch 2 processes"].per(batch),
            ratio("batch 1 process", "batch 2 processes"), "speed-up vs 1 process")
    tab.add("floor: gmpy2 powmod r^N mod N²", "", t["powmod"], "", "raw, same run")
    tab.add("floor: gmpy2 mulmod mod N²", "", t["mulmod"], "", "raw, same run")
    tab.add("floor: CRT decryption powmods, gmpy2 powmod", "", t["raw dec"], "",
            "c^(p-1) mod p², c^(q-1) mod q²")
    tab.add("floor: the same with gmpy2 powmod_sec", "", t["raw dec sec"], "",
            f"{t['raw dec sec'].median / t['raw dec'].median:.2f}x powmod")
    report.data[f"timings_{bits}"] = t
    report.data[f"keygen_{bits}"] = kg
    return {
        "djn": ratio("phe enc", "djn"),
        "owner": ratio("phe enc", "owner"),
        "pooled": ratio("phe enc (pooled rounds)", "pooled"),
        "dec ct": ratio("phe dec", "dec ct"),
        "dec fast": ratio("phe dec", "dec fast"),
        "add/mulmod": t["add"].median / t["mulmod"].median,
        "batch": ratio("batch 1 process", "batch 2 processes"),
    }


def run(report: Report, quick: bool) -> None:
    r = bench_size(report, 2048, quick)
    report.check("2048: DJN public-key encryption speed-up vs phe", r["djn"], ">=", 10)
    report.check("2048: key-owner encryption (default mode) speed-up vs phe", r["owner"], ">=", 3)
    report.check("2048: pooled encryption (online) speed-up vs phe", r["pooled"], ">=", 500)
    report.check("2048: constant-time decryption speed vs phe", r["dec ct"], ">=", 0.75)
    report.check("2048: decryption (constant_time=False) speed vs phe", r["dec fast"], ">=", 1.0)
    report.check("2048: ciphertext + / raw gmpy2 mulmod", r["add/mulmod"], "<=", 1.3)
    report.check("2048: batch encryption, 2 processes vs 1", r["batch"], ">=", 1.7)
    if not quick:
        bench_size(report, 3072, quick)
