"""Cost curves at scale (issue 17, part 2): rows 10^4 .. 10^6, parties 2 .. 16, trees and depth.

``python benchmarks/run.py scale [--quick] [--json PATH] [--strict]``

Data: ``securetrees.testing.synthetic.make_table`` (50 columns: 40 standard-normal numeric, 10
categorical with 8 codes; a binary label from five numeric columns and one categorical column plus
logistic noise; seed 0).  Every model is fitted through its public one-process facade (all parties
in this process, in-process network whose transcript counts bytes and rounds per party), with one
BLAS/OpenMP thread.

1. Rows sweep (10^4, 10^5, 10^6; quick: 500, 1,000, 2,000), plaintext and shared modes: the
   reference random forest and GBDT (``securetrees.trees``), scikit-learn's RandomForestClassifier
   (``n_jobs=1``, categorical codes as numbers), Federated Forest with shared labels (2 clients,
   columns dealt round-robin), the histogram forest without DP (3 clients, rows dealt in parts) and
   HybridTree's plaintext mode (host: even columns of every row; 3 guests: odd columns of a third of
   the rows each).  Time is the CPU time of a fit (every party's work: this process and any
   worker processes it waited for, user + system; a full garbage collection before each fit), the
   median of ``repeats`` fits (3 at every size: the first fit at 10^6 runs up to a quarter slower
   than the next ones, so a single run there is not a median); every fit's CPU time is kept in the
   JSON, wall time beside it.  Per-row cost = CPU / rows.
   CPU time, not wall time, so that the ratios hold on a loaded machine.
2. Crypto modes (Federated Forest encrypted, HybridTree secure, SecureBoost): one tree (depth 4;
   quick 3) on two small row counts (4,000 and 8,000, so that HybridTree's guest layers, which need
   nodes of 1,000 guest instances, run in both; quick: 300 and 600); each operation's count is
   fitted as ``a + b * rows`` from the two runs (a count that does not grow with the rows is held
   constant) and priced at the unit cost measured in this run on the same key.  Above the subset
   the CPU time is EXTRAPOLATED: counted floor at that size x (measured CPU / counted floor at the
   larger measured size); bytes are extrapolated the same way (per party), rounds are the larger
   measured run's (fixed depth).  Keys: 2048 bits (quick: a 512-bit test key, never for data).
3. Parties sweep (2 .. 16; HybridTree needs 3 guests at least) at 20,000 rows (quick 1,000; SecureBoost
   at the crypto mode's larger subset), trees and depth sweeps at 20,000 rows (quick 1,000).
4. Per party: bytes sent and received and the rounds the party took part in, from the transcript.
   Modelled wide-area time, for a party: its rounds x RTT + its bytes (sent + received) / bandwidth;
   for a run: all rounds x RTT + all bytes / bandwidth (one link, nothing overlapped; compute
   excluded), at 1 Gbit/s with 20 ms RTT and at 100 Mbit/s with 50 ms RTT.
5. Peak memory per party: every protocol's deployment (``securetrees.net``: every role its own
   process, gRPC with mutual TLS on loopback, rows aligned by PSI; each party's tables written as
   Parquet) on 10^6 x 50 rows (quick: 2,000); each role reports its own high-water mark (VmHWM).
   Federated Forest (shared labels, 2 clients) and the histogram forest (secure aggregation, 3
   clients): one tree of the sweep's depth.  The crypto deployments run a stated subset: HybridTree
   secure (3 guests, host depth 1 and one guest layer) and SecureBoost (1 passive party, depth 2),
   one tree each, serial roles (``n_jobs=1``), a ``memory_key_bits`` Paillier key (1024 bits,
   behind each deployment's ``allow_insecure``: a ciphertext's bytes in memory are reported so the
   figures scale to 2048 bits).  RevFRF runs at two sizes below 10^6 (``revfrf_rows``, the larger
   chosen to take under 5 minutes): its job is dominated by its three PSI alignments (the CS and
   two participants, each with the leading participant) and its DT-PKC cost is per predicted value
   (FRF-Predict encrypts every value of a row to predict), so its rows to predict are held at 20;
   each role's peak memory is EXTRAPOLATED to 10^6 on the line through the two runs
   (bytes per row = its slope), and marked so.  Alone:
   ``cd benchmarks && PYTHONPATH=.. python -m suites.scale memory [--quick]``.
6. PNG plots beside the JSON (``--json``): cost per row against rows, time and bytes against
   parties, time against trees and depth.
7. Largest message (alone: ``cd benchmarks && PYTHONPATH=.. python -m suites.scale messages``): each
   protocol's largest codec frame of one fit, by message type, at the crypto subset sizes with the
   crypto modes' key and depth, EXTRAPOLATED to the largest size on the line through them, against
   the transport's default ``max_message_bytes`` (``specs/deployment.md``, "The message limit").

Targets: per-row CPU at the largest size / at the one before <= 1.3 for every plaintext and shared
mode; Federated Forest shared / scikit-learn's forest at the largest size <= 5; peak memory of every
party <= 4 GB.  Quick mode checks the same ratios at its tiny sizes (a smoke run).
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness import Report, Table, Timing, measure
from threadpoolctl import threadpool_limits

from securetrees.errors import InsecureParameterWarning
from securetrees.net.control import peak_rss_bytes
from securetrees.paillier import PrivateKey, PublicKey, generate_keypair
from securetrees.runtime import Transcript
from securetrees.testing.synthetic import SyntheticTable, make_table

CPU = time.process_time
N_FEATURES = 50
GB = 1 << 30
WAN: dict[str, tuple[float, float]] = {"1 Gbit/s, 20 ms": (1e9, 0.020), "100 Mbit/s, 50 ms": (1e8, 0.050)}


@dataclass(frozen=True)
class Setting:
    rows: tuple[int, ...]
    repeats: tuple[int, ...]
    trees: int
    depth: int
    crypto_rows: tuple[int, int]
    crypto_depth: int
    sweep_rows: int
    parties: tuple[int, ...]
    trees_sweep: tuple[int, ...]
    depth_sweep: tuple[int, ...]
    memory_rows: int
    memory_key_bits: int
    """Paillier / DT-PKC key of the memory stage's crypto deployments (1024: behind allow_insecure)."""
    memory_jobs: int
    revfrf_rows: tuple[int, int]
    """RevFRF's memory runs, the larger under 5 minutes (its alignment and per-value DT-PKC prediction)."""


FULL = Setting(rows=(10_000, 100_000, 1_000_000), repeats=(3, 3, 3), trees=2, depth=8,
               crypto_rows=(4000, 8000), crypto_depth=4,
               sweep_rows=20_000, parties=(2, 4, 8, 16), trees_sweep=(1, 2, 4, 8), depth_sweep=(4, 6, 8, 10),
               memory_rows=1_000_000, memory_key_bits=1024, memory_jobs=1, revfrf_rows=(100_000, 250_000))
QUICK = Setting(rows=(500, 1000, 2000), repeats=(1, 1, 1), trees=2, depth=4, crypto_rows=(300, 600), crypto_depth=3,
                sweep_rows=1000, parties=(2, 4), trees_sweep=(1, 2), depth_sweep=(3, 4), memory_rows=2000,
                memory_key_bits=1024, memory_jobs=1, revfrf_rows=(40, 80))


# -- traffic and the wide-area model --------------------------------------------------------------------

@dataclass(frozen=True)
class PartyTraffic:
    party: str
    sent: int
    received: int
    rounds: int
    """Rounds in which the party sent or received at least one message."""


def traffic(tr: Transcript) -> list[PartyTraffic]:
    """Bytes sent and received and rounds taken part in, per party of a transcript."""
    parties = sorted({r.sender for r in tr} | {r.receiver for r in tr})
    out = []
    for p in parties:
        rounds = {r.round for r in tr if p in (r.sender, r.receiver)}
        out.append(PartyTraffic(p, tr.bytes_sent(p), tr.bytes_received(p), len(rounds)))
    return out


def wan_seconds(rounds: float, nbytes: float, bandwidth: float, rtt: float) -> float:
    """Modelled wide-area time: ``rounds x RTT + bytes x 8 / bandwidth`` (bits per second)."""
    return rounds * rtt + nbytes * 8.0 / bandwidth


def _transcript(model: Any) -> Transcript:
    t = getattr(model, "transcript_", None)
    return t if isinstance(t, Transcript) else model.network_.transcript  # type: ignore[no-any-return]


# -- the plaintext and shared modes --------------------------------------------------------------------

Fit = Callable[[SyntheticTable, int, int, int], Any]
"""Fit one model on a table with (trees, depth, parties); returns the fitted model."""


def _split(n_features: int, m: int) -> list[list[int]]:
    return [list(range(i, n_features, m)) for i in range(m)]


def _reference_rf(d: SyntheticTable, trees: int, depth: int, parties: int) -> Any:
    from securetrees.trees import RandomForestClassifier

    return RandomForestClassifier(trees, max_depth=depth, categorical_features=d.categorical,
                                  random_state=0).fit(d.X, d.y)


def _reference_gbdt(d: SyntheticTable, trees: int, depth: int, parties: int) -> Any:
    from securetrees.trees import GradientBoostingClassifier

    return GradientBoostingClassifier(trees, max_depth=depth, categorical_features=d.categorical).fit(d.X, d.y)


def _sklearn_rf(d: SyntheticTable, trees: int, depth: int, parties: int) -> Any:
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(trees, max_depth=depth, max_features="sqrt", n_jobs=1,
                                  random_state=0).fit(d.X, d.y)


def _ff_shared(d: SyntheticTable, trees: int, depth: int, parties: int) -> Any:
    from securetrees.protocols.federated_forest import FederatedForestClassifier

    return FederatedForestClassifier(trees, max_depth=depth, label_protection="shared", random_state=0,
                                     categorical_features=d.categorical, record_payloads=False,
                                     partition=_split(d.X.shape[1], parties)).fit(d.X, d.y)


def _histogram_forest(d: SyntheticTable, trees: int, depth: int, parties: int) -> Any:
    from securetrees.protocols.histogram_forest import HistogramForestClassifier

    return HistogramForestClassifier(trees, max_depth=depth, n_clients=parties, random_state=0,
                                     categorical_features=d.categorical).fit(d.X, d.y)


def _hybridtree(d: SyntheticTable, trees: int, depth: int, guests: int, **kw: Any) -> Any:
    """Even columns to the host, odd ones to the guests; row ``i`` to guest ``i mod guests`` (the
    facade's simulation default without ``guest_column``)."""
    from securetrees.protocols.hybridtree import HybridTreeClassifier

    f = d.X.shape[1]
    cat = [j for j, c in enumerate(d.categorical) if c]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParameterWarning)
        model = HybridTreeClassifier(trees, host_features=list(range(0, f, 2)), guest_features=list(range(1, f, 2)),
                                     n_guests=max(3, guests), host_depth=max(1, depth - 2), guest_depth=2,
                                     categorical_features=cat, **kw)
        return model.fit(d.X, d.y)


def _hybridtree_plain(d: SyntheticTable, trees: int, depth: int, parties: int) -> Any:
    return _hybridtree(d, trees, depth, parties, mode="plaintext", allow_insecure=True)


PLAIN: dict[str, tuple[Fit, int]] = {  # name: (fit, parties in the rows sweep)
    "reference RF": (_reference_rf, 1),
    "reference GBDT": (_reference_gbdt, 1),
    "scikit-learn RF": (_sklearn_rf, 1),
    "Federated Forest shared": (_ff_shared, 2),
    "histogram forest (no DP)": (_histogram_forest, 3),
    "HybridTree plaintext": (_hybridtree_plain, 3),
}
SWEPT = ("reference RF", "reference GBDT", "Federated Forest shared", "histogram forest (no DP)",
         "HybridTree plaintext")
PARTY_SWEPT = ("Federated Forest shared", "histogram forest (no DP)", "HybridTree plaintext")


@dataclass
class Point:
    """One measured (or extrapolated) fit."""

    cpu: float
    wall: float
    parties: list[PartyTraffic]
    rounds: int
    extrapolated: bool = False
    cpu_samples: tuple[float, ...] = ()
    """Every fit's CPU time (``cpu`` is their median); empty for an extrapolated point."""

    @property
    def total_bytes(self) -> int:
        return sum(p.sent for p in self.parties)

    def row(self) -> dict[str, Any]:
        wan = {k: wan_seconds(self.rounds, self.total_bytes, bw, rtt) for k, (bw, rtt) in WAN.items()}
        return {"cpu_s": self.cpu, "cpu_samples_s": list(self.cpu_samples), "wall_s": self.wall,
                "bytes": self.total_bytes, "rounds": self.rounds, "extrapolated": self.extrapolated, "wan_s": wan,
                "parties": [{"party": p.party, "sent": p.sent, "received": p.received, "rounds": p.rounds,
                             "wan_s": {k: wan_seconds(p.rounds, p.sent + p.received, bw, rtt)
                                       for k, (bw, rtt) in WAN.items()}} for p in self.parties]}


def cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (user + system): the work of a fit
    whatever else runs on the machine, including any worker processes it started."""
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return CPU() + ch.ru_utime + ch.ru_stime


def fit_point(fit: Fit, d: SyntheticTable, trees: int, depth: int, parties: int, repeats: int) -> tuple[Point, Any]:
    """Median CPU and wall time of ``repeats`` fits (each after a full garbage collection, so that
    no fit pays for the previous one's garbage); traffic from the last one."""
    cpu, wall = [], []
    model: Any = None
    for _ in range(repeats):
        model = None
        gc.collect()
        w0, c0 = time.perf_counter(), cpu_seconds()
        model = fit(d, trees, depth, parties)
        cpu.append(cpu_seconds() - c0)
        wall.append(time.perf_counter() - w0)
    tr = _transcript(model) if hasattr(model, "network_") or hasattr(model, "transcript_") else None
    party = traffic(tr) if tr is not None else []
    point = Point(statistics.median(cpu), statistics.median(wall), party, tr.rounds if tr is not None else 0,
                  cpu_samples=tuple(cpu))
    name = getattr(fit, "__name__", "fit").strip("_")
    print(f"[scale]   {name}: {d.X.shape[0]} rows, {trees} trees, depth {depth}, {parties} parties: "
          f"CPU {point.cpu:.3g} s, wall {point.wall:.3g} s, {point.total_bytes} bytes, {point.rounds} rounds",
          flush=True)  # a long run cut off still leaves its figures
    return point, model


# -- the crypto modes: counted operations, priced and extrapolated ----------------------------------

@dataclass(frozen=True)
class CryptoMode:
    fit: Callable[[SyntheticTable, tuple[PublicKey, PrivateKey], int, int], Any]  # (data, keys, parties, depth)
    counts: Callable[[Any], dict[str, float]]
    units: Callable[[tuple[PublicKey, PrivateKey], int], dict[str, Timing]]  # (keys, rows)
    parties: int


def _ff_encrypted(d: SyntheticTable, keys: tuple[PublicKey, PrivateKey], parties: int, depth: int) -> Any:
    from securetrees.protocols.federated_forest import FederatedForestClassifier
    from securetrees.testing.paillier import load_test_public_key

    small = keys[0].bits < 2048
    extra: dict[str, Any] = {"public_key_loader": load_test_public_key} if small else {}
    return FederatedForestClassifier(1, max_depth=depth, label_protection="encrypted", random_state=0,
                                     categorical_features=d.categorical, record_payloads=False, paillier_keys=keys,
                                     partition=_split(d.X.shape[1], parties), **extra).fit(d.X, d.y)


def _ff_counts(model: Any) -> dict[str, float]:
    ops = {"encrypt (djn)": "encryptions", "weight": "weightings", "add": "additions", "shift": "shifts",
           "rerandomize": "rerandomizations", "decrypt": "decryptions"}
    return {k: float(sum(getattr(c.counters, a) for c in model.clients_)) for k, a in ops.items()}


_UNITS: dict[tuple[int, int], dict[str, Timing]] = {}


def _base_units(keys: tuple[PublicKey, PrivateKey], rows: int) -> dict[str, Timing]:
    """SecureBoost's unit costs on this key at its slot width for ``rows`` (measured once per run)."""
    from suites.secureboost import unit_costs

    n = rows.bit_length()
    key = (keys[0].n, rows)
    if key not in _UNITS:
        _UNITS[key] = unit_costs(*keys, n + (24 + 2 + n) + (24 + 1 + n))
    return _UNITS[key]


def _ff_units(keys: tuple[PublicKey, PrivateKey], rows: int) -> dict[str, Timing]:
    from securetrees.paillier import Ciphertext

    pk, _ = keys
    base = _base_units(keys, rows)
    c = pk.encrypt(12345)
    shift = 1 << (2 * (rows.bit_length() + 1))  # two class-count slots per bin
    ct = Ciphertext(pk, c.value)
    return {"encrypt (djn)": measure(lambda: pk.encrypt(1), repeats=5, clock=CPU),
            "weight": measure(lambda: c * 3, repeats=5, clock=CPU),
            "add": base["add"], "shift": measure(lambda: ct * shift, repeats=5, clock=CPU),
            "rerandomize": base["rerandomize"], "decrypt": base["decrypt"]}


def _ht_secure(d: SyntheticTable, keys: tuple[PublicKey, PrivateKey], parties: int, depth: int) -> Any:
    small = keys[0].bits < 2048  # the quick run's test key and tiny subsets: guest nodes of >= 50 instances
    extra: dict[str, Any] = {"min_node_size": 50} if small else {}
    return _hybridtree(d, 1, depth, parties, mode="secure", keypair=keys, encryption="djn", allow_insecure=small,
                       **extra)


def _ht_counts(model: Any) -> dict[str, float]:
    from suites.hybridtree import counts_per_tree

    return counts_per_tree(model)


def _ht_units(keys: tuple[PublicKey, PrivateKey], rows: int) -> dict[str, Timing]:
    from suites.hybridtree import unit_costs

    return unit_costs(*keys, "djn", peers=2)


def _secureboost(d: SyntheticTable, keys: tuple[PublicKey, PrivateKey], parties: int, depth: int) -> Any:
    from securetrees.protocols.secureboost import SecureBoostClassifier

    cat = [j for j, c in enumerate(d.categorical) if c]
    return SecureBoostClassifier(_split(d.X.shape[1], parties), 1, max_depth=depth, keypair=keys,
                                 categorical_features=cat, allow_insecure=keys[0].bits < 2048,
                                 record_payloads=False).fit(d.X, d.y)


def _sb_counts(model: Any) -> dict[str, float]:
    from suites.secureboost import counts

    return counts(model)


def _sb_units(keys: tuple[PublicKey, PrivateKey], rows: int) -> dict[str, Timing]:
    return _base_units(keys, rows)


CRYPTO: dict[str, CryptoMode] = {
    "Federated Forest encrypted": CryptoMode(_ff_encrypted, _ff_counts, _ff_units, 2),
    "HybridTree secure": CryptoMode(_ht_secure, _ht_counts, _ht_units, 3),
    "SecureBoost": CryptoMode(_secureboost, _sb_counts, _sb_units, 3),
}


def _linear(x: Sequence[float], y: Sequence[float], at: float) -> float:
    """The line through two points, evaluated at ``at``.  A count that does not grow with the rows
    (per-node work at a fixed depth: it varies only with the tree's shape) is held at the larger
    run's value rather than extrapolated downwards."""
    slope = max(0.0, (y[1] - y[0]) / (x[1] - x[0]))
    return y[1] + slope * (at - x[1])


def crypto_points(name: str, mode: CryptoMode, keys: tuple[PublicKey, PrivateKey], s: Setting,
                  report: Report) -> dict[int, Point]:
    """Measured points at the two subset sizes; extrapolated points at the sweep's larger sizes."""
    measured: dict[int, tuple[Point, dict[str, float]]] = {}
    for n in s.crypto_rows:
        d = make_table(n, N_FEATURES)
        p, model = fit_point(lambda dd, _t, dep, m: mode.fit(dd, keys, m, dep), d, 1, s.crypto_depth, mode.parties, 1)
        measured[n] = (p, mode.counts(model))
    n1, n2 = s.crypto_rows
    units = mode.units(keys, max(s.rows))
    floor = {n: sum(c.get(k, 0.0) * units[k].median for k in units) for n, (_, c) in measured.items()}
    calib = measured[n2][0].cpu / floor[n2] if floor[n2] > 0 else 1.0
    tab = report.table(f"{name}: one tree of depth {s.crypto_depth}, counted operations "
                       f"(measured at {n1} and {n2} rows, extrapolated to {max(s.rows)}), {keys[0].bits}-bit key",
                       ["operation", f"count at {n1}", f"count at {n2}", f"count at {max(s.rows)} (extrap.)",
                        "unit cost (CPU)", f"seconds at {max(s.rows)} (extrap.)"],
                       note=f"counts fitted as a + b x rows; measured CPU / counted floor at {n2} rows = {calib:.2f}, "
                            "applied to the extrapolated floor")
    for k in units:
        c = [measured[n][1].get(k, 0.0) for n in s.crypto_rows]
        big = _linear(s.crypto_rows, c, max(s.rows))
        tab.add(k, round(c[0]), round(c[1]), round(big), units[k], round(big * units[k].median, 2))
    out = {n: p for n, (p, _) in measured.items()}
    for n in s.rows:
        if n in out or n < n2:
            continue
        fl = sum(_linear(s.crypto_rows, [measured[m][1].get(k, 0.0) for m in s.crypto_rows], n) * units[k].median
                 for k in units)
        parties = [PartyTraffic(p.party,
                                round(_linear(s.crypto_rows, [_party(measured[m][0], p.party).sent
                                                              for m in s.crypto_rows], n)),
                                round(_linear(s.crypto_rows, [_party(measured[m][0], p.party).received
                                                              for m in s.crypto_rows], n)), p.rounds)
                   for p in measured[n2][0].parties]
        out[n] = Point(fl * calib, fl * calib, parties, measured[n2][0].rounds, extrapolated=True)
    return out


def _party(p: Point, name: str) -> PartyTraffic:
    return next(q for q in p.parties if q.party == name)


# -- peak memory per party: deployments, one process per role ------------------------------------

@dataclass(frozen=True)
class Deployed:
    """One protocol's deployment for the memory stage: ``prepare(folder, train, test, setting)``
    writes its trial (``run.toml``) and ``subset`` says what was run."""

    prepare: Callable[[Path, SyntheticTable, SyntheticTable, Setting], Path]
    subset: Callable[[Setting], str]
    key_bits: Callable[[Setting], int | None]
    rows: Callable[[Setting], int]
    test_rows: int | None = None
    """Rows to predict (default: a twentieth of the rows, 20 to 1,000)."""


def _crypto_key(s: Setting) -> tuple[PublicKey, PrivateKey]:
    """The memory stage's Paillier key: ``s.memory_key_bits`` (below 2048 only behind each
    deployment's explicit insecure flag); a cached key from fixed primes below 2048 bits."""
    if s.memory_key_bits < 2048:
        from securetrees.testing.paillier import small_keypair

        return small_keypair(s.memory_key_bits)
    return generate_keypair(s.memory_key_bits)


def _ff_trial(out: Path, d: SyntheticTable, test: SyntheticTable, s: Setting) -> Path:
    from securetrees.protocols.federated_forest.deploy import prepare

    params = {"n_estimators": 1, "max_depth": s.depth, "random_state": 0, "n_classes": 2,
              "label_protection": "shared"}
    return prepare(out, d.X, d.y, _split(N_FEATURES, 2), X_test=test.X, params=params)


def _hf_trial(out: Path, d: SyntheticTable, test: SyntheticTable, s: Setting) -> Path:
    """Three clients, each a third of the rows (every column), pairwise-masked histograms."""
    from securetrees.protocols.histogram_forest.deploy import prepare

    def parts(t: SyntheticTable) -> list[tuple[Any, Any]]:
        return [(t.X[r], t.y[r]) for r in (slice(u, None, 3) for u in range(3))]

    params = {"n_estimators": 1, "max_depth": s.depth, "random_state": 0, "secure_aggregation": True}
    return prepare(out, parts(d), tests=parts(test), params=params)


def _ht_trial(out: Path, d: SyntheticTable, test: SyntheticTable, s: Setting) -> Path:
    """The host: even columns of every row and the labels; 3 guests: odd columns, row ``i`` at guest
    ``i mod 3`` (the rows sweep's layout); secure mode (the default key-owner encryption), host depth 1
    then 1 guest layer."""
    from securetrees.protocols.hybridtree.deploy import prepare

    keys = _crypto_key(s)
    params = {"n_estimators": 1, "host_depth": 1, "guest_depth": 1, "min_node_size": min(1000, d.X.shape[0] // 30),
              "key_bits": keys[0].bits, "allow_insecure": keys[0].bits < 2048, "n_jobs": s.memory_jobs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParameterWarning)
        return prepare(out, d.X, d.y, list(range(0, N_FEATURES, 2)), list(range(1, N_FEATURES, 2)),
                       [range(u, d.X.shape[0], 3) for u in range(3)], X_test=test.X,
                       test_rows=[range(u, test.X.shape[0], 3) for u in range(3)], params=params, keypair=keys)


def _sb_trial(out: Path, d: SyntheticTable, test: SyntheticTable, s: Setting) -> Path:
    """The active party (even columns, the labels) and one passive party (odd columns)."""
    from securetrees.protocols.secureboost.deploy import prepare

    keys = _crypto_key(s)
    params = {"n_estimators": 1, "max_depth": 2, "key_bits": keys[0].bits,
              "allow_insecure": keys[0].bits < 2048, "n_jobs": s.memory_jobs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParameterWarning)
        return prepare(out, d.X, d.y, _split(N_FEATURES, 2), X_test=test.X, params=params, keypair=keys)


def _rf_trial(out: Path, d: SyntheticTable, test: SyntheticTable, s: Setting) -> Path:
    """Three participants (columns dealt in turn), the CS with the labels, the CC, the KGC and a
    requester; DT-PKC at ``s.memory_key_bits``."""
    from securetrees.protocols.revfrf.deploy import prepare

    settings = {"n_estimators": 1, "max_depth": 2, "random_state": 0, "n_classes": 2}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParameterWarning)
        return prepare(out, d.X, d.y, _split(N_FEATURES, 3), X_test=test.X, settings=settings,
                       key_bits=s.memory_key_bits, allow_insecure=s.memory_key_bits < 2048)


DEPLOYED: dict[str, Deployed] = {
    "Federated Forest": Deployed(_ff_trial, lambda s: f"1 tree depth {s.depth}, shared labels, 2 clients",
                                 lambda s: None, lambda s: s.memory_rows),
    "histogram forest": Deployed(_hf_trial, lambda s: f"1 tree depth {s.depth}, no DP, secure aggregation, "
                                                      "3 clients", lambda s: None, lambda s: s.memory_rows),
    "HybridTree": Deployed(_ht_trial, lambda s: f"1 tree, host depth 1 + 1 guest layer, secure (key-owner), 3 guests, "
                                                f"n_jobs={s.memory_jobs}",
                           lambda s: s.memory_key_bits, lambda s: s.memory_rows),
    "SecureBoost": Deployed(_sb_trial, lambda s: f"1 tree depth 2, 1 passive party, n_jobs={s.memory_jobs}",
                            lambda s: s.memory_key_bits, lambda s: s.memory_rows),
    "RevFRF": Deployed(_rf_trial, lambda s: "1 tree depth 2, 3 participants, 20 rows to predict (below "
                                            f"{s.memory_rows}: extrapolated)",
                       lambda s: s.memory_key_bits, lambda s: s.revfrf_rows[1], test_rows=20),
}


def _as_parquet(cfg: Path, deadline: float = 3600.0) -> None:
    """Every party's CSV tables rewritten as Parquet (numbers typed, categories as text; the tables'
    loader reads either), ``run.toml`` pointed at them: far faster for a role to read at 10^6 rows.
    The per-call ``deadline`` is raised from the trial's 600 s: one protocol call on 10^6 rows (a
    passive party's encrypted histograms) may run longer on a loaded machine."""
    import pandas as pd

    from securetrees.net.config import dump_toml

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    doc = tomllib.loads(cfg.read_text(encoding="utf-8"))
    for entry in doc["parties"].values():
        for key in ("data", "test_data"):
            name = entry.get(key)
            if isinstance(name, str) and name.endswith(".csv"):
                src = cfg.parent / name
                frame = pd.read_csv(src, keep_default_na=False, na_values=[""], dtype={"id": str})
                frame.to_parquet(src.with_suffix(".parquet"), index=False)
                src.unlink()
                entry[key] = str(Path(name).with_suffix(".parquet"))
    doc["run"].pop("deadline", None)  # an older trial's place for it
    doc.setdefault("transport", {})["deadline"] = deadline
    cfg.write_text(dump_toml(doc), encoding="utf-8")


def deployment_memory(name: str, s: Setting) -> dict[str, dict[str, float]]:
    """Protocol ``name`` deployed with every role in its own process on loopback (gRPC + mutual
    TLS; rows aligned by PSI as a deployment does); each role's peak resident memory (bytes) and
    its received bytes, the job's seconds and the run's rows."""
    from securetrees.net.service import launch

    dep = DEPLOYED[name]
    rows = dep.rows(s)
    with tempfile.TemporaryDirectory() as tmp:
        d = make_table(rows, N_FEATURES)
        test = make_table(dep.test_rows or min(1000, max(20, rows // 20)), N_FEATURES, seed=1)  # rows to predict
        t0 = time.perf_counter()
        cfg = dep.prepare(Path(tmp), d, test, s)
        del d, test
        _as_parquet(cfg)
        prep = time.perf_counter() - t0
        info: dict[str, Any] = {}
        launch(cfg, Path(tmp) / "pki", report=info, startup_timeout=900.0, log_dir=Path(tmp) / "logs")
    out = {role: {"peak_rss_bytes": float(st.get("peak_rss_bytes", "nan")),
                  "bytes_received": float(st.get("bytes_received", "nan"))}
           for role, st in info["stats"].items() if role != "operator"}
    return out | {"job": {"seconds": float(info["job_seconds"]), "prepare_seconds": prep, "rows": float(rows)}}


def ciphertext_bytes(key_bits: int) -> int:
    """Bytes of one Paillier (or DT-PKC) ciphertext held in memory: an integer modulo ``n^2`` of
    ``2 x key_bits`` bits, as a Python int (its object header included)."""
    return sys.getsizeof((1 << (2 * key_bits)) - 1)


# -- the run ---------------------------------------------------------------------------------------------

def _stage(report: Report, name: str, t0: float) -> float:
    """Record the wall time of one stage of the suite; returns the new start."""
    now = time.perf_counter()
    report.data.setdefault("stage_seconds", {})[name] = now - t0
    print(f"[scale] {name}: {now - t0:.1f} s", flush=True)
    return now


def run(report: Report, quick: bool) -> None:
    s = QUICK if quick else FULL
    t0 = time.perf_counter()
    report.data["load_average_at_start"] = os.getloadavg()
    report.data["setting"] = {k: getattr(s, k) for k in Setting.__dataclass_fields__}
    report.data["generator"] = ("securetrees.testing.synthetic.make_table(rows, 50): 40 numeric + 10 categorical "
                                "(8 codes), seed 0")
    report.data["wan_settings"] = {k: {"bits_per_second": bw, "rtt_s": rtt} for k, (bw, rtt) in WAN.items()}
    curves: dict[str, dict[int, Point]] = {}
    _reader(report, s.memory_rows)
    _memory(report, s)  # first: the largest table of the run, while this process is still small
    t0 = _stage(report, "deployment memory", t0)
    with threadpool_limits(limits=1):
        _rows_sweep(report, s, curves)
        t0 = _stage(report, "rows sweep", t0)
        keys = _crypto_keys(quick)
        for name, mode in CRYPTO.items():
            curves[name] = crypto_points(name, mode, keys, s, report)
            t0 = _stage(report, name, t0)
        _rows_tables(report, s, curves)
        _party_sweep(report, s, keys)
        t0 = _stage(report, "parties sweep", t0)
        _trees_depth(report, s)
        t0 = _stage(report, "trees and depth sweeps", t0)
    # every party of every in-process run shares this process: an upper bound, not a per-party figure
    report.data["in_process_peak_rss_bytes"] = peak_rss_bytes()
    _plots(report, s, curves)


def _crypto_keys(quick: bool) -> tuple[PublicKey, PrivateKey]:
    if quick:
        from securetrees.testing.paillier import small_keypair

        return small_keypair(512)
    return generate_keypair(2048)


def _rows_sweep(report: Report, s: Setting, curves: dict[str, dict[int, Point]],
                modes: Sequence[str] = tuple(PLAIN)) -> None:
    warm = make_table(300, N_FEATURES)
    for name in modes:  # imports and first-call costs out of the timings
        fit, parties = PLAIN[name]
        fit(warm, 1, 3, parties)
        curves[name] = {}
    for n, repeats in zip(s.rows, s.repeats, strict=True):
        d = make_table(n, N_FEATURES)
        for name in modes:
            fit, parties = PLAIN[name]
            curves[name][n], _ = fit_point(fit, d, s.trees, s.depth, parties, repeats)
        del d


def _rows_tables(report: Report, s: Setting, curves: dict[str, dict[int, Point]]) -> None:
    big, prev = s.rows[-1], s.rows[-2]
    tab = report.table(
        f"Rows sweep: CPU per fit and per row ({s.trees} trees, depth {s.depth}; crypto modes: 1 tree, "
        f"depth {s.crypto_depth})",
        ["mode", "rows", "CPU", "wall", "CPU per row", "bytes", "rounds",
         *[f"WAN {k}" for k in WAN], "measured"],
        note=f"CPU = this process (all parties), median of {'/'.join(map(str, s.repeats))} fits by size; "
             "EXTRAPOLATED rows are priced operation counts, not runs (see the crypto tables).")
    for name, pts in curves.items():
        for n in sorted(pts):
            p = pts[n]
            r = p.row()
            tab.add(name, n, f"{p.cpu:.3g} s", f"{p.wall:.3g} s", f"{p.cpu / n * 1e6:.3g} µs", p.total_bytes, p.rounds,
                    *[f"{r['wan_s'][k]:.3g} s" for k in WAN], "EXTRAPOLATED" if p.extrapolated else "measured")
    report.data["rows_sweep"] = {name: {str(n): pts[n].row() for n in sorted(pts)} for name, pts in curves.items()}

    per = report.table(f"Per party at {big} rows: bytes, rounds and modelled WAN time",
                       ["mode", "party", "sent", "received", "rounds", *[f"WAN {k}" for k in WAN], "measured"],
                       note="WAN per party = its rounds x RTT + its bytes sent and received / bandwidth")
    for name, pts in curves.items():
        p = pts.get(big)
        if p is None:
            continue
        for q in p.parties:
            per.add(name, q.party, q.sent, q.received, q.rounds,
                    *[f"{wan_seconds(q.rounds, q.sent + q.received, bw, rtt):.3g} s" for bw, rtt in WAN.values()],
                    "EXTRAPOLATED" if p.extrapolated else "measured")

    ratio = _ratio_table(report, curves, big, prev)
    ff, sk = curves["Federated Forest shared"][big], curves["scikit-learn RF"][big]
    ratio.add("Federated Forest shared / scikit-learn RF, CPU at the largest size", f"{ff.cpu / sk.cpu:.2f}",
              "", "", "", "<= 5" if big >= 1_000_000 else "- (fixed costs dominate below 10^6 rows)")
    if big >= 1_000_000:  # the target is at 10^6 rows; the quick run's sizes are all overhead
        report.check(f"Federated Forest shared / scikit-learn RF CPU at {big} rows", ff.cpu / sk.cpu, "<=", 5.0)
    report.data["ff_shared_over_sklearn"] = {"cpu": ff.cpu / sk.cpu, "wall": ff.wall / sk.wall}


def _ratio_table(report: Report, curves: dict[str, dict[int, Point]], big: int, prev: int) -> Table:
    """Per-row CPU at ``big`` rows / at ``prev`` rows of every plaintext and shared mode measured,
    with the number of fits and their spread at each size; a check (<= 1.3) for each but scikit-learn."""
    ratio = report.table(f"Scaling ratios: per-row CPU at {big} rows / at {prev} rows",
                         ["mode", "ratio", "fits", f"CPU range at {prev}", f"CPU range at {big}", "target"],
                         note="CPU time (process + children), the median of the fits at each size; a "
                              "size with one fit is a single run (no spread)")
    for name in (m for m in PLAIN if m in curves):
        lo, hi = curves[name][prev], curves[name][big]
        r = (hi.cpu / big) / (lo.cpu / prev)
        ratio.add(name, f"{r:.2f}", f"{len(lo.cpu_samples)} / {len(hi.cpu_samples)}", _spread(lo), _spread(hi),
                  "<= 1.3" if name != "scikit-learn RF" else "-")
        if name != "scikit-learn RF":
            report.check(f"{name}: per-row CPU at {big} / at {prev} rows", r, "<=", 1.3)
    return ratio


def _spread(p: Point) -> str:
    xs = p.cpu_samples
    return f"{min(xs):.3g}-{max(xs):.3g} s" if len(xs) > 1 else "one run"


def _party_sweep(report: Report, s: Setting, keys: tuple[PublicKey, PrivateKey]) -> None:
    tab = report.table(f"Parties sweep ({s.sweep_rows} rows, {s.trees} trees depth {s.depth}; SecureBoost: "
                       f"{s.crypto_rows[0]} rows, 1 tree depth {s.crypto_depth}, {keys[0].bits}-bit key)",
                       ["mode", "parties", "CPU", "total bytes", "max bytes of a party", "rounds",
                        *[f"WAN {k}" for k in WAN]],
                       note="parties = clients (Federated Forest, histogram forest), guests (HybridTree, "
                            "at least 3), all parties with the active one (SecureBoost)")
    d = make_table(s.sweep_rows, N_FEATURES)
    small = make_table(s.crypto_rows[0], N_FEATURES)
    sweep: dict[str, list[dict[str, Any]]] = {}
    runs: list[tuple[str, Callable[[int], Point]]] = [
        (name, lambda m, f=PLAIN[name][0]: fit_point(f, d, s.trees, s.depth, m, 1)[0]) for name in PARTY_SWEPT]
    runs.append(("SecureBoost", lambda m: fit_point(lambda dd, _t, dep, mm: _secureboost(dd, keys, mm, dep), small, 1,
                                                    s.crypto_depth, m, 1)[0]))
    for name, fn in runs:
        sweep[name] = []
        for m in s.parties:
            if name.startswith("HybridTree") and m < 3:
                continue
            p = fn(m)
            r = p.row()
            tab.add(name, m, f"{p.cpu:.3g} s", p.total_bytes, max((q.sent + q.received for q in p.parties), default=0),
                    p.rounds, *[f"{r['wan_s'][k]:.3g} s" for k in WAN])
            sweep[name].append({**r, "n_parties": m})
    report.data["parties_sweep"] = sweep


def _trees_depth(report: Report, s: Setting) -> None:
    d = make_table(s.sweep_rows, N_FEATURES)
    for what, values in (("trees", s.trees_sweep), ("depth", s.depth_sweep)):
        tab = report.table(f"{what.capitalize()} sweep ({s.sweep_rows} rows; "
                           f"{'depth ' + str(s.depth) if what == 'trees' else str(s.trees) + ' trees'})",
                           ["mode", what, "CPU", "bytes", "rounds", *[f"WAN {k}" for k in WAN]])
        out: dict[str, list[dict[str, Any]]] = {}
        for name in SWEPT:
            fit, parties = PLAIN[name]
            out[name] = []
            for v in values:
                trees, depth = (v, s.depth) if what == "trees" else (s.trees, v)
                p, _ = fit_point(fit, d, trees, depth, parties, 1)
                r = p.row()
                tab.add(name, v, f"{p.cpu:.3g} s", p.total_bytes, p.rounds, *[f"{r['wan_s'][k]:.3g} s" for k in WAN])
                out[name].append({**r, what: v})
        report.data[f"{what}_sweep"] = out


READER_SCRIPT = """
import resource, sys, time
from securetrees.net.tables import read_table
t0 = time.perf_counter()
table = read_table(sys.argv[1])
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, table.X.shape[0])
"""


def _reader(report: Report, rows: int) -> None:
    """What reading one party's table costs, each file read by ``read_table`` in a fresh process:
    ``rows`` x 25 columns of the generator (20 numeric, 5 categorical written as text) plus an id
    column, as Parquet and as CSV; peak memory (VmHWM of that process) and seconds."""
    import pandas as pd

    d = make_table(rows, N_FEATURES)
    half = list(range(0, N_FEATURES, 2))
    cols = {f"x{j}": (d.X[:, j] if not d.categorical[j] else [f"c{int(v)}" for v in d.X[:, j]]) for j in half}
    frame = pd.DataFrame({"id": [f"r{i}" for i in range(rows)], **cols})
    tab = report.table(f"Reading one party's table ({rows} rows x {len(half)} columns + ids), a fresh process each",
                       ["format", "file (MB)", "peak RSS (MB)", "seconds"],
                       note="securetrees.net.tables.read_table on the file; the process's high-water mark")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="scale-reader-") as tmp:
        for fmt in ("parquet", "csv"):
            path = Path(tmp) / f"t.{fmt}"
            if fmt == "parquet":
                frame.to_parquet(path)
            else:
                frame.to_csv(path, index=False)
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            done = subprocess.run([sys.executable, "-c", READER_SCRIPT, str(path)],  # noqa: S603 - no shell
                                  capture_output=True, text=True, check=True, env=env)
            seconds, peak, n = done.stdout.split()
            if int(n) != rows:
                raise RuntimeError(f"read {n} rows of {rows}")
            tab.add(fmt, f"{path.stat().st_size / 1e6:.0f}", f"{int(peak) / 1e6:.0f}", f"{float(seconds):.1f}")
            out[fmt] = {"peak_rss_bytes": int(peak), "seconds": float(seconds), "file_bytes": path.stat().st_size}
    report.data["reader"] = out


def _memory(report: Report, s: Setting, names: Sequence[str] = tuple(DEPLOYED)) -> None:
    """Each protocol's deployment: a table of every role's peak memory, one check per protocol that
    its largest party stays <= 4 GB at ``s.memory_rows`` rows (RevFRF: extrapolated, marked so)."""
    tab = report.table(f"Peak memory per party, every role its own process (gRPC + mTLS on loopback, "
                       f"PSI alignment), {N_FEATURES} columns",
                       ["protocol", "role", "rows", "peak RSS (MB)", "bytes received", "key bits", "measured"],
                       note=f"each role reads its own VmHWM when the operator asks for its stats (roles run "
                            f"with n_jobs={s.memory_jobs}: no worker processes); one ciphertext in memory: "
                            f"{ciphertext_bytes(s.memory_key_bits)} bytes at {s.memory_key_bits} bits "
                            f"({ciphertext_bytes(2048)} at 2048: about 2 x key bits / 8 + a 28-byte header)")
    subsets = report.table("Peak memory: what each deployment ran",
                           ["protocol", "run", "rows", "job (s)", "prepare (s)"])
    out: dict[str, Any] = {}
    for name in names:
        dep = DEPLOYED[name]
        bits = dep.key_bits(s)
        if name == "RevFRF":
            out[name] = _revfrf_memory(report, s, tab, subsets)
            continue
        mem = deployment_memory(name, s)
        job = mem.pop("job")
        subsets.add(name, dep.subset(s), int(job["rows"]), f"{job['seconds']:.1f}", f"{job['prepare_seconds']:.1f}")
        for role, st in mem.items():
            tab.add(name, role, int(job["rows"]), f"{st['peak_rss_bytes'] / 1e6:.0f}", int(st["bytes_received"]),
                    bits or "-", "measured")
        peak = max(st["peak_rss_bytes"] for st in mem.values())
        report.check(f"{name}: largest party's peak memory at {int(job['rows'])} x {N_FEATURES}, GB "
                     "(one process per role)", peak / GB, "<=", 4.0)
        out[name] = mem | {"job": job}
        print(f"[scale]   memory {name}: largest party {peak / 1e6:.0f} MB, job {job['seconds']:.1f} s", flush=True)
    report.data["deployment_memory"] = out
    report.data["ciphertext_bytes"] = {str(b): ciphertext_bytes(b) for b in (s.memory_key_bits, 2048)}


def _revfrf_memory(report: Report, s: Setting, tab: Table, subsets: Table) -> dict[str, Any]:
    """RevFRF at two sizes below ``s.memory_rows`` (the module's docstring says why); each role's
    peak memory EXTRAPOLATED to ``s.memory_rows`` on the line through the two runs
    (per-row bytes = its slope)."""
    dep = DEPLOYED["RevFRF"]
    runs = {}
    for n in s.revfrf_rows:
        mem = deployment_memory("RevFRF", replace(s, revfrf_rows=(n, n)))
        job = mem.pop("job")
        subsets.add("RevFRF", dep.subset(s), n, f"{job['seconds']:.1f}", f"{job['prepare_seconds']:.1f}")
        for role, st in mem.items():
            tab.add("RevFRF", role, n, f"{st['peak_rss_bytes'] / 1e6:.0f}", int(st["bytes_received"]),
                    s.memory_key_bits, "measured")
        runs[n] = mem | {"job": job}
        print(f"[scale]   memory RevFRF at {n} rows: job {job['seconds']:.1f} s", flush=True)
    n1, n2 = s.revfrf_rows
    big = s.memory_rows
    extrap: dict[str, dict[str, float]] = {}
    for role in (r for r in runs[n2] if r != "job"):
        # bytes received follow which participant's columns win the splits, not the rows: not extrapolated
        e = {"peak_rss_bytes": _linear((n1, n2), [runs[n1][role]["peak_rss_bytes"], runs[n2][role]["peak_rss_bytes"]],
                                       big)}
        e["peak_bytes_per_row"] = max(0.0, (runs[n2][role]["peak_rss_bytes"] - runs[n1][role]["peak_rss_bytes"])
                                      / (n2 - n1))
        extrap[role] = e
        tab.add("RevFRF", role, big, f"{e['peak_rss_bytes'] / 1e6:.0f}", "-", s.memory_key_bits,
                f"EXTRAPOLATED ({e['peak_bytes_per_row']:.0f} B/row)")
    peak = max(e["peak_rss_bytes"] for e in extrap.values())
    report.check(f"RevFRF: largest party's peak memory at {big} x {N_FEATURES}, GB, EXTRAPOLATED from {n1} and "
                 f"{n2} rows", peak / GB, "<=", 4.0)
    return {str(n): r for n, r in runs.items()} | {"extrapolated": {"rows": big, "roles": extrap}}


def _plots(report: Report, s: Setting, curves: dict[str, dict[int, Point]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
    for name, pts in curves.items():
        ns = sorted(pts)
        meas = [n for n in ns if not pts[n].extrapolated]
        line = ax.plot(meas, [pts[n].cpu / n * 1e6 for n in meas], "o-", label=name)[0]
        ext = [n for n in ns if pts[n].extrapolated]
        if ext:
            ax.plot([meas[-1], *ext], [pts[n].cpu / n * 1e6 for n in [meas[-1], *ext]], "x--",
                    color=line.get_color(), label=f"{name} (extrapolated)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows")
    ax.set_ylabel("CPU per row (µs)")
    ax.set_title(f"Cost per row ({s.trees} trees depth {s.depth}; crypto modes 1 tree)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    report.save_figure("rows", fig)

    sweep = report.data["parties_sweep"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for name, pts in sweep.items():
        xs = [p["n_parties"] for p in pts]
        axes[0].plot(xs, [p["cpu_s"] for p in pts], "o-", label=name)
        axes[1].plot(xs, [p["bytes"] / 1e6 for p in pts], "o-", label=name)
    for ax, lab in zip(axes, ("CPU (s)", "MB on the wire"), strict=True):
        ax.set_xlabel("parties")
        ax.set_ylabel(lab)
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    report.save_figure("parties", fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for ax, what in zip(axes, ("trees", "depth"), strict=True):
        for name, pts in report.data[f"{what}_sweep"].items():
            ax.plot([p[what] for p in pts], [p["cpu_s"] for p in pts], "o-", label=name)
        ax.set_xlabel(what)
        ax.set_ylabel("CPU (s)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    report.save_figure("trees-depth", fig)


MESSAGE_MODES = ("Federated Forest shared", "histogram forest (no DP)", "HybridTree plaintext", *CRYPTO)
"""The protocols whose largest message :func:`_messages` measures (RevFRF's and PSI's are bounded apart:
``specs/deployment.md``, "Hostile peers")."""


def _messages(report: Report, s: Setting, keys: tuple[PublicKey, PrivateKey]) -> None:
    """The largest message of each protocol's fit (one tree of the crypto modes' depth), by type: its
    size at the two crypto subset sizes, and on the line through them at the sweep's largest size
    (EXTRAPOLATED), against the transport's default ``max_message_bytes``."""
    from securetrees.net.transport import DEFAULT_MAX_MESSAGE_BYTES

    n1, n2 = s.crypto_rows
    at = max(s.rows)
    tab = report.table(f"largest message of one fit, by protocol ({keys[0].bits}-bit key; 1 tree of depth "
                       f"{s.crypto_depth}; measured at {n1} and {n2} rows, EXTRAPOLATED to {at})",
                       ["protocol", "message type", f"bytes at {n1}", f"bytes at {n2}", f"MiB at {at}",
                        "of the default limit"],
                       note=f"codec frame bytes; default max_message_bytes {DEFAULT_MAX_MESSAGE_BYTES >> 20} MiB")
    out: dict[str, Any] = {}
    for name in MESSAGE_MODES:
        largest: list[dict[str, int]] = []
        for n in (n1, n2):
            d = make_table(n, N_FEATURES)
            if name in CRYPTO:
                model = CRYPTO[name].fit(d, keys, CRYPTO[name].parties, s.crypto_depth)
            else:
                fit, parties = PLAIN[name]
                model = fit(d, 1, s.crypto_depth, parties)
            sizes: dict[str, int] = {}
            for r in _transcript(model):
                sizes[r.type_name] = max(sizes.get(r.type_name, 0), r.size)
            largest.append(sizes)
        extrapolated = {t: _linear((n1, n2), [largest[0].get(t, 0), largest[1].get(t, 0)], at) for t in largest[1]}
        kind = max(extrapolated, key=lambda t: extrapolated[t])
        big = extrapolated[kind]
        tab.add(name, kind, largest[0].get(kind, 0), largest[1][kind], round(big / 2**20, 1),
                f"{big / DEFAULT_MAX_MESSAGE_BYTES:.2f}")
        out[name] = {"type": kind, "bytes": [largest[0].get(kind, 0), largest[1][kind]], "extrapolated": big}
    report.data["largest_messages"] = out


def main(argv: Sequence[str] | None = None) -> int:
    """One stage alone (the full suite takes over an hour; its memory stage alone 45-60 min at 10^6 rows).

    The rows ratio for some modes: ``cd benchmarks && PYTHONPATH=.. python -m suites.scale
    "histogram forest (no DP)" "HybridTree plaintext" [--rows 100000 1000000] [--repeats 3 1]``.
    The deployments' peak memory: ``cd benchmarks && PYTHONPATH=.. python -m suites.scale memory
    [--quick] [--protocols "SecureBoost" ...] [--json PATH]``; reading one party's table:
    ``... python -m suites.scale reader [--memory-rows N]``; the largest message of each protocol
    (2048-bit key; quick: the test key): ``... python -m suites.scale messages [--quick]``.  Exits 1 if a
    target is missed."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("modes", nargs="+", choices=[*PLAIN, "memory", "reader", "messages"])
    parser.add_argument("--rows", type=int, nargs=2, default=list(FULL.rows[-2:]))
    parser.add_argument("--repeats", type=int, nargs=2, default=list(FULL.repeats[-2:]))
    parser.add_argument("--quick", action="store_true", help="memory: the quick run's sizes")
    parser.add_argument("--protocols", nargs="+", choices=list(DEPLOYED), default=list(DEPLOYED))
    parser.add_argument("--memory-rows", type=int, help="memory: rows of the deployments (default: the run's)")
    parser.add_argument("--revfrf-rows", type=int, nargs=2, help="memory: RevFRF's two sizes (default: the run's)")
    parser.add_argument("--json", type=Path, metavar="PATH")
    args = parser.parse_args(argv)
    if "messages" in args.modes:
        if args.modes != ["messages"]:
            parser.error("the messages stage runs alone")
        report = Report(suite="scale (largest messages)", quick=args.quick)
        report.data["load_average_at_start"] = os.getloadavg()
        s = QUICK if args.quick else FULL
        with threadpool_limits(limits=1):
            _messages(report, s, _crypto_keys(args.quick))
    elif "reader" in args.modes:
        if args.modes != ["reader"]:
            parser.error("the reader stage runs alone")
        report = Report(suite="scale (table reader)", quick=args.quick)
        report.data["load_average_at_start"] = os.getloadavg()
        _reader(report, args.memory_rows or (QUICK if args.quick else FULL).memory_rows)
    elif "memory" in args.modes:
        if args.modes != ["memory"]:
            parser.error("the memory stage runs alone")
        report = Report(suite="scale (deployment memory)", quick=args.quick)
        report.data["load_average_at_start"] = os.getloadavg()
        s = QUICK if args.quick else FULL
        s = replace(s, memory_rows=args.memory_rows or s.memory_rows,
                    revfrf_rows=tuple(args.revfrf_rows or s.revfrf_rows))
        _memory(report, s, args.protocols)
    else:
        s = replace(FULL, rows=tuple(args.rows), repeats=tuple(args.repeats))
        report = Report(suite="scale (rows ratio)", quick=False)
        report.data["load_average_at_start"] = os.getloadavg()
        curves: dict[str, dict[int, Point]] = {}
        with threadpool_limits(limits=1):
            _rows_sweep(report, s, curves, args.modes)
        _ratio_table(report, curves, s.rows[-1], s.rows[-2])
    print(report.render())
    print(f"load average at start {report.data['load_average_at_start']}, at end {os.getloadavg()}")
    if args.json:
        report.write_json(args.json)
    return 1 if any(not c.met for c in report.checks) else 0


if __name__ == "__main__":
    raise SystemExit(main())
