"""RevFRF on UCI Adult: construction, encrypted prediction, revocation, accuracy (issue 6).

Tables (the paper's figures are Java at 1024 bits on two laptops, quoted as theirs):

* Table 6 TC: time and bytes for the CS and the participants to build the forest's nodes on
  5,000 Adult samples, per 100 nodes; floor = one HoEnc per node (by its provider, priced as
  measured here) + the central reference's plaintext growth of the same trees
  (``securetrees.trees.train_forest``, the same splits as ``splitter="bins"``).
* Table 6 TP: one encrypted request (FRF-Predict) with 10 trees of depth 10; each party's time
  (exclusive time inside its handlers, from a timing network), bytes and rounds; floor = per
  padded comparison one HoLT with its bit under every participant's key, per visited node one
  ParHDec1 + one ParHDec2, each measured here.
* Table 7: one feature per participant (14 participants); 1-5 participants revoked in turn:
  nodes destroyed (fraction of the forest), splits rebuilt, rebuild time per rebuilt split
  against the full build's time per split.
* Leaf naming: what the CC's view of a prediction tells it about the leaf reached, before and
  after padding and every-key outputs (:func:`leaf_naming`).
* Ties: the CC's guess of a path bit from comparisons whose value equals the threshold, with
  thresholds where the splitter put them and centred in their gaps (:func:`ties`).
* Padding: what hiding the paths from the CC costs per encrypted request, on Adult and a
  skewed synthetic table (:func:`padding`).
* Table 2: accuracy on Adult's official test split with 0-5 revoked participants against
  scikit-learn's RandomForestClassifier with the same trees, depth and per-node features,
  trained on the remaining columns; and the central reference.

Adult's missing categorical values (``?``) get the code -1 before training (as in
the published figures; RevFRF also accepts NaN, ``specs/revfrf.md`` "Missing values").
Every party runs in this process on one core.  Times are CPU seconds (``time.thread_time``) of
each party's own code, so that the load other processes put on a shared machine does not
inflate them; the floors are timed with the same clock, and wall times are kept in the JSON.
``--quick``: 1024-bit keys (insecure flag), small data, one repeat, no target checks (a smoke
run for CI); the targets are checked in the full run at 2048 bits.
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from harness import Report, Timing

from securetrees.datasets import load_adult
from securetrees.dtpkc import (
    KGC,
    Ciphertext,
    StrongSecretKey,
    SystemParams,
    decrypt_weak,
    encrypt,
    hencref,
    parhdec1,
)
from securetrees.errors import InsecureParameterWarning
from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.revfrf.attack import (
    integer_data,
    leaf_naming_experiment,
    neighbour_comparisons,
    tie_guess_rate,
)
from securetrees.protocols.revfrf.cs_prediction import CSPrediction
from securetrees.protocols.revfrf.defaults import DEFAULT_CODEC, DEFAULT_HOLT
from securetrees.protocols.revfrf.thresholds import ColumnGrid
from securetrees.runtime import InProcessNetwork, Message
from securetrees.testing.dtpkc import dtpkc_test_kgc
from securetrees.trees import BinningParams, GrowParams, train_forest
from suites.revfrf_codes import skewed

PAPER_TC_CS, PAPER_TC_UD, PAPER_TP_CS, PAPER_TP_UD = 3.09, 2.27, 13.33, 0.08
PAPER_TABLE7 = {1: (16.1, 1.2), 2: (37.0, 2.7), 3: (50.1, 3.6), 4: (83.1, 6.1), 5: (136.3, 9.8)}
PAPER_TABLE7_FULL = (432.5, 31.1)
PAPER_ACC = {0: (85.63, 85.63), 1: (85.37, 85.28), 2: (85.11, 84.43), 3: (84.42, 83.91), 4: (83.53, 83.41),
             5: (83.15, 83.44)}


class TimedNetwork(InProcessNetwork):
    """An in-process network that also charges each party the wall time spent handling its
    messages (exclusive of the nested calls it makes), codec included."""

    def __init__(self, clock: Callable[[], float] = time.thread_time) -> None:
        super().__init__(keep_payloads=False)
        self.clock = clock
        self.busy: dict[str, float] = defaultdict(float)
        self._stack: list[list[Any]] = []

    def _deliver(self, round_: int, sender: str, receiver: str, msg: Message) -> Message | None:
        now = self.clock()
        if self._stack:
            top = self._stack[-1]
            self.busy[top[0]] += now - top[1]
        self._stack.append([receiver, now])
        try:
            return super()._deliver(round_, sender, receiver, msg)
        finally:
            end = self.clock()
            party, start = self._stack.pop()
            self.busy[party] += end - start
            if self._stack:
                self._stack[-1][1] = end

    def snapshot(self) -> dict[str, float]:
        return dict(self.busy)


def _since(net: TimedNetwork, before: dict[str, float]) -> dict[str, float]:
    return {p: net.busy[p] - before.get(p, 0.0) for p in net.busy}


def _med(xs: list[float]) -> Timing:
    if len(xs) > 1:
        q = statistics.quantiles(xs, n=4, method="inclusive")
        return Timing(statistics.median(xs), q[0], q[2], len(xs), 1)
    return Timing(xs[0], xs[0], xs[0], 1, 1)


def _adult(n_train: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ad = load_adult()
    Xtr, Xte = np.nan_to_num(ad.X_train, nan=-1.0), np.nan_to_num(ad.X_test, nan=-1.0)
    if n_train is not None:
        return Xtr[:n_train], ad.y_train[:n_train], Xte, ad.y_test
    return Xtr, ad.y_train, Xte, ad.y_test


class System:
    """One DT-PKC system; a fresh KGC over it for every fit (shares are issued once per KGC)."""

    def __init__(self, bits: int) -> None:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InsecureParameterWarning)
            kgc = KGC.setup(bits, allow_insecure=bits < 2048)
        self.keygen = time.perf_counter() - t0
        self.bits = bits
        self.params: SystemParams = kgc.params
        self._strong: StrongSecretKey = kgc.strong_key()

    def kgc(self) -> KGC:
        return KGC(self.params, self._strong)


def _fit(system: System, X: np.ndarray, y: np.ndarray, partition: list[list[int]], **kw: Any
         ) -> tuple[RevFRFClassifier, TimedNetwork, dict[str, float]]:
    net = TimedNetwork()
    clf = RevFRFClassifier(kgc_factory=system.kgc, random_state=0, **kw)
    clf.set_params(partition=partition).fit(X, y, network=net)
    busy = net.snapshot()
    return clf, net, busy


def _n_splits(clf: RevFRFClassifier) -> int:
    return sum(len(t.internal()) for t in clf.cs_.trees)


def construction(report: Report, system: System, quick: bool) -> dict[str, float]:
    """Table 6, TC: the CS's and the participants' time and bytes per 100 nodes."""
    X, y, _, _ = _adult(1000 if quick else 5000)
    part = [[c] for c in range(X.shape[1])]
    depth = 3 if quick else 4
    repeats = 1 if quick else 3
    table = report.table(
        f"Construction (Table 6, TC), {system.bits}-bit keys: {X.shape[0]} Adult samples, 10 trees of depth "
        f"{depth}, 14 participants, figures per 100 splits",
        ["splitter", "splits", "CS time", "participants time", "CS bytes in", "participants bytes in", "rounds",
         "floor (HoEnc + plaintext growth)", "all / floor"],
        note=f"paper (Java, 1024 bits): CS {PAPER_TC_CS} s, participants {PAPER_TC_UD} s, 1.07 MB. "
             "Floor: one HoEnc per split at the measured cost + train_forest growing the same trees.",
    )
    out: dict[str, float] = {}
    for splitter in ("random_range", "bins"):
        cs_t, ud_t, all_t = [], [], []
        clf = None
        for _ in range(repeats):
            clf, _, busy = _fit(system, X, y, part, n_estimators=10, max_depth=depth, splitter=splitter)
            grow = clf.timings_["grow_cpu"]
            ud = sum(v for p, v in busy.items() if p.startswith("u"))
            cs_t.append(grow - ud)
            ud_t.append(ud)
            all_t.append(grow)
        assert clf is not None
        n = _n_splits(clf)
        tr = clf.transcript_
        ud_bytes = sum(tr.bytes_received(p) for p in clf.participants_)
        # floor: HoEnc under a participant's key (tables built at set-up), and the plaintext growth
        pk = clf.participants_["u1"].public_key
        t_enc = _med([_timed(lambda pk=pk: encrypt(pk, 123456789)) for _ in range(20)]).median
        t0 = time.thread_time()
        train_forest(X, y, n_classes=2, n_estimators=10, criterion="gini", grow=GrowParams(max_depth=depth),
                     max_features="sqrt", binning=BinningParams(max_bins=255), random_state=0,
                     classes=np.arange(2))
        t_plain = time.thread_time() - t0
        floor = n * t_enc + t_plain
        per100 = 100.0 / n
        table.add(splitter, n, Timing(_med(cs_t).median * per100, 0, 0, 1, 1),
                  Timing(_med(ud_t).median * per100, 0, 0, 1, 1),
                  f"{tr.bytes_received('cs') * per100 / 1e6:.3f} MB", f"{ud_bytes * per100 / 1e6:.3f} MB",
                  tr.rounds, Timing(floor * per100, 0, 0, 1, 1), f"{_med(all_t).median / floor:.2f}")
        out[f"{splitter}_cs_per100"] = _med(cs_t).median * per100
        out[f"{splitter}_ratio"] = _med(all_t).median / floor
        out[f"{splitter}_per_split"] = _med(all_t).median / n
        report.data[f"construction_{system.bits}_{splitter}"] = {
            "splits": n, "cs_s": cs_t, "participants_s": ud_t, "all_s": all_t, "hoenc_s": t_enc,
            "plaintext_growth_s": t_plain, "cs_bytes_in": tr.bytes_received("cs"), "participant_bytes_in": ud_bytes,
            "rounds": tr.rounds,
        }
    return out


def _timed(fn: Callable[[], object]) -> float:
    """CPU seconds of one call (the clock of every protocol figure here)."""
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def prediction(report: Report, system: System, quick: bool) -> dict[str, float]:
    """Table 6, TP: one encrypted request, 10 trees of depth 10 (quick: 3 trees of depth 4)."""
    X, y, Xte, _ = _adult(1000 if quick else 5000)
    trees, depth = (3, 4) if quick else (10, 10)
    part = [[c] for c in range(X.shape[1])]
    clf, net, fit_busy = _fit(system, X, y, part, n_estimators=trees, max_depth=depth)
    n_splits = _n_splits(clf)
    req = clf.requester("requester")
    plain = clf.plaintext_forest()
    rows = Xte[: (2 if quick else 3)]
    parts: dict[str, list[float]] = defaultdict(list)
    visited = []
    mark = clf.transcript_.mark()
    for x in rows:
        before = net.snapshot()
        t0, w0 = time.thread_time(), time.perf_counter()
        out = req.request(x)
        cpu, wall = time.thread_time() - t0, time.perf_counter() - w0
        used = _since(net, before)
        if not np.allclose(out, plain.predict_proba(x[None, :])[0]):
            raise AssertionError("encrypted prediction differs from the plaintext model")
        parts["CS"].append(used.get("cs", 0.0))
        parts["CC"].append(used.get("cc", 0.0))
        parts["participants"].append(sum(v for p, v in used.items() if p.startswith("u")))
        parts["requester"].append(cpu - sum(used.values()))
        parts["all"].append(cpu)
        parts["all (wall)"].append(wall)
        visited.append(sum(int(t.depth[t.apply(x[None, :])[0]]) for t in plain.trees))
    stats = clf.transcript_.since(mark)
    # floor: per padded comparison one HoLT (CS + CC, every key), per visited node ParHDec1 and ParHDec2
    cs = clf.cs_
    u1 = clf.participants_["u1"]
    node = next(n for t in cs.trees for n in t.internal() if n.provider == "u1")
    assert node.split is not None
    cx = encrypt(req._weak.public, 1 << 40)
    split = node.split.add_constant(1)
    keys = cs._holt_keys()
    t_holt = _med([_timed(lambda: cs.holt_many([(cx, split)], fan_out=keys)) for _ in range(7)]).median
    bit = cs.holt(cx, split)
    t_p1 = _med([_timed(lambda: parhdec1(u1._weak, bit).rerandomize()) for _ in range(7)]).median
    stripped = Ciphertext.from_ints(cs.public_key, *parhdec1(u1._weak, bit).rerandomize().to_ints())
    t_p2 = _med([_timed(lambda: decrypt_weak(cs._weak, stripped)) for _ in range(7)]).median
    v = statistics.median(visited)
    compared = cs.padded_depth * sum(not t.nodes[t.root].is_leaf for t in cs.trees)
    floor = compared * t_holt + v * (t_p1 + t_p2)
    table = report.table(
        f"Encrypted prediction (FRF-Predict, Table 6, TP), {system.bits}-bit keys: one request, {trees} trees of "
        f"depth {depth} ({n_splits} splits), {compared} comparisons (padded), median {v:.0f} visited nodes",
        ["party", "time", "bytes per request", "rounds per request"],
        note=f"paper (Java, 1024 bits): CS {PAPER_TP_CS} s, participant {PAPER_TP_UD} s, 0.78 MB. "
             f"Floor = comparisons x HoLT under every participant's key ({t_holt * 1e3:.1f} ms) + visited x "
             f"(ParHDec1 {t_p1 * 1e3:.1f} ms + ParHDec2 {t_p2 * 1e3:.1f} ms) = "
             f"{floor:.2f} s; all / floor = {statistics.median(parts['all']) / floor:.2f}",
    )
    per_req = len(rows)
    for name in ("CS", "CC", "participants", "requester", "all", "all (wall)"):
        table.add(name, _med(parts[name]), f"{stats.bytes / per_req / 1e6:.3f} MB" if name == "all" else "",
                  f"{stats.rounds / per_req:.0f}" if name == "all" else "")
    res = {"cs": statistics.median(parts["CS"]), "all": statistics.median(parts["all"]),
           "ratio": statistics.median(parts["all"]) / floor}
    report.data[f"prediction_{system.bits}"] = {
        "parts": dict(parts), "visited": visited, "holt_s": t_holt, "parhdec1_s": t_p1, "parhdec2_s": t_p2,
        "floor_s": floor, "comparisons": compared, "bytes": stats.bytes, "rounds": stats.rounds, "requests": per_req,
        "fit_timings": clf.timings_, "fit_splits": n_splits, "fit_busy": fit_busy,
    }
    return res


def _destroyed_share(clf: RevFRFClassifier, revoked: set[str]) -> int:
    """Nodes of the current forest inside the subtree of a node provided by ``revoked``."""
    count = 0
    for t in clf.cs_.trees:
        for k in t.bfs():
            n = t.nodes[k]
            if not n.is_leaf and n.provider in revoked and not any(
                    t.nodes[a].provider in revoked for a in _ancestors(t, k)):
                count += len(t.subtree(k))
    return count


def _ancestors(t: Any, k: int) -> list[int]:
    out = []
    p = t.nodes[k].parent
    while p >= 0:
        out.append(p)
        p = t.nodes[p].parent
    return out


def revocation(report: Report, system: System, quick: bool) -> dict[str, float]:
    """Table 7: one feature per participant; u1..u5 revoked in turn (first level: destroy and
    rebuild, new epoch); the second level's refresh priced per destroyed split."""
    X, y, _, _ = _adult(1000 if quick else 5000)
    part = [[c] for c in range(X.shape[1])]
    trees, depth = (3, 4) if quick else (10, 6)
    clf, _, _ = _fit(system, X, y, part, n_estimators=trees, max_depth=depth)
    n0 = _n_splits(clf)
    nodes0 = sum(len(t.nodes) for t in clf.cs_.trees)
    per_split_build = clf.timings_["grow_cpu"] / n0
    kmax = 2 if quick else 5
    share = {k: _destroyed_share(clf, {f"u{i}" for i in range(1, k + 1)}) for k in range(1, kmax + 1)}
    # second level: CC and CS each apply HEncRef (dtpkc.hencref) to every destroyed split
    splits = [n.split for t in clf.cs_.trees for n in t.internal() if n.split is not None][:5]
    t_ref = _med([_timed(lambda c=c: hencref(hencref(c)[0])) for c in splits]).median
    table = report.table(
        f"Revocation (FRF-Revoc, Table 7), {system.bits}-bit keys: {trees} trees of depth {depth} on {X.shape[0]} "
        f"Adult samples, {n0} splits ({nodes0} nodes), one feature per participant, u1..uk revoked in turn",
        ["k revoked", "original nodes destroyed", "share", "paper share", "splits rebuilt (cum.)",
         "rebuild CPU time (cum.)", "paper time", "+ level-2 refresh (cum.)", "rebuild per split / build per split"],
        note=f"full build (IRev.Fed): {per_split_build * n0:.2f} s CPU for {n0} splits "
             f"({per_split_build * 1e3:.1f} ms per split); paper (Java, 1024 bits): {PAPER_TABLE7_FULL[0]} nodes "
             f"in {PAPER_TABLE7_FULL[1]} s. 'original nodes destroyed': nodes of the initial forest under a node "
             "of u1..uk (the paper's count). Level-2 refresh (HEncRef by the CC, then by the CS): "
             f"{t_ref * 1e3:.1f} ms per destroyed split, priced per split destroyed",
    )
    cum = {"destroyed": 0, "destroyed_splits": 0, "rebuilt": 0, "rebuild": 0.0, "rebuild_wall": 0.0}
    worst = 0.0
    rows = []
    for k in range(1, kmax + 1):
        rec = clf.revoke(f"u{k}", level=1)
        cum["destroyed"] += rec.destroyed
        cum["destroyed_splits"] += rec.destroyed_splits
        cum["rebuilt"] += rec.rebuilt
        cum["rebuild"] += rec.rebuild_cpu_seconds
        cum["rebuild_wall"] += rec.rebuild_seconds
        ratio = (cum["rebuild"] / max(cum["rebuilt"], 1)) / per_split_build
        worst = max(worst, ratio)
        paper = PAPER_TABLE7[k][0] / PAPER_TABLE7_FULL[0]
        table.add(k, share[k], f"{share[k] / nodes0:.2f}", f"{paper:.2f}", cum["rebuilt"],
                  Timing(cum["rebuild"], 0, 0, 1, 1), f"{PAPER_TABLE7[k][1]} s",
                  Timing(cum["destroyed_splits"] * t_ref, 0, 0, 1, 1), f"{ratio:.2f}")
        rows.append({"revoked": k, "original_destroyed": share[k], **cum, "record": dict(rec.__dict__)})
    report.data[f"revocation_{system.bits}"] = {"splits": n0, "nodes": nodes0, "build": clf.timings_,
                                                "refresh_per_split_s": t_ref, "rows": rows}
    return {"rebuild_ratio": worst}


def accuracy(report: Report, system: System, quick: bool) -> dict[str, float]:
    """Table 2: accuracy with 0-5 revoked participants against scikit-learn on the same columns."""
    from sklearn.ensemble import RandomForestClassifier

    X, y, Xte, yte = _adult(2000 if quick else None)
    if quick:
        Xte, yte = Xte[:2000], yte[:2000]
    trees = 3 if quick else 20
    part = [[c] for c in range(X.shape[1])]
    table = report.table(
        f"Accuracy on Adult's official test split (Table 2), {X.shape[0]} training rows, {trees} trees of depth 10, "
        "sqrt features per node, 14 one-feature participants",
        ["revoked", "scikit-learn", "RevFRF (random range)", "RevFRF (bins, full resolution)", "central reference",
         "paper Non.Fed", "paper RevFRF"],
        note="scikit-learn and the central reference are trained on the remaining columns; RevFRF revokes "
             "u1, u2, ... in turn; keys: " + f"{system.bits} bits (accuracy does not depend on them)",
    )
    # bins at full resolution (the central reference's candidates); random_range at the default code_resolution
    fed = {s: _fit(system, X, y, part, n_estimators=trees, max_depth=10, splitter=s,
                   **({"code_resolution": None} if s == "bins" else {}))[0]
           for s in ("random_range", "bins")}
    gaps = {}
    for k in range(0, 3 if quick else 6):
        if k:
            for clf in fed.values():
                clf.revoke(f"u{k}", level=1)
        cols = list(range(k, X.shape[1]))
        sk = RandomForestClassifier(n_estimators=trees, max_depth=10, max_features="sqrt", random_state=0, n_jobs=1)
        sk.fit(X[:, cols], y)
        acc_sk = float((sk.predict(Xte[:, cols]) == yte).mean())
        ref, _ = train_forest(X[:, cols], y, n_classes=2, n_estimators=trees, criterion="gini",
                              grow=GrowParams(max_depth=10), max_features="sqrt", random_state=0,
                              classes=np.arange(2))
        acc_ref = float((ref.predict(Xte[:, cols]) == yte).mean())
        acc = {s: float((c.predict(Xte) == yte).mean()) for s, c in fed.items()}
        table.add(k, f"{acc_sk * 100:.2f}", f"{acc['random_range'] * 100:.2f}", f"{acc['bins'] * 100:.2f}",
                  f"{acc_ref * 100:.2f}", f"{PAPER_ACC[k][0]:.2f}", f"{PAPER_ACC[k][1]:.2f}")
        gaps[k] = (acc_sk, acc["random_range"], acc["bins"], acc_ref)
    report.data["accuracy"] = {str(k): v for k, v in gaps.items()}
    return {"gap_rr": abs(gaps[0][1] - gaps[0][0]), "gap_bins": abs(gaps[0][2] - gaps[0][0]),
            "bins_vs_ref": abs(gaps[0][2] - gaps[0][3])}


@contextmanager
def _cc_sees(cs: Any, *, padded: bool = True, every_key: bool = True) -> Iterator[None]:
    """Prediction as it is (the defaults) or as the CC saw it before: paths stopping at their
    leaves (``padded=False``), each bit under its node's provider's key only (``every_key=False``)."""
    if not every_key:
        cs._holt_keys = lambda: []
    if not padded:
        cs._walk = lambda n, decide, pad=False: CSPrediction._walk(cs, n, decide, pad=False)
    try:
        yield
    finally:
        cs.__dict__.pop("_holt_keys", None)
        cs.__dict__.pop("_walk", None)


PADDING_VARIANTS = {"unpadded": (False, False), "padded": (True, False), "padded, every key": (True, True)}
"""The CC's view in the cost table: (padded, every key)."""

CC_VIEWS = {
    "unpadded, each bit under its provider's key (before)": (False, False),
    "unpadded, every key": (False, True),
    "padded, each bit under its provider's key": (True, False),
    "padded, every key (now)": (True, True),
}


def leaf_naming(report: Report) -> dict[str, int]:
    """The CC names the leaf from its view (``attack.name_leaf``): one tree of depth 8 on the
    test data of ``tests/revfrf`` (240 rows, 6 integer columns, 3 participants, 512-bit test
    keys: the view's shape does not depend on them), 80 known and 80 target requests."""
    X, y = integer_data()
    clf = RevFRFClassifier(n_estimators=1, max_depth=8, bootstrap=False, random_state=7,
                           kgc_factory=lambda: dtpkc_test_kgc(512)).set_params(partition=[[0, 3], [1], [2, 4, 5]])
    clf.fit(X, y)
    table = report.table(
        "The CC names the leaf of one-row encrypted requests from its view: one tree of depth 8, test data, "
        "80 known and 80 target requests",
        ["CC's view", "leaf named (of 80)", "prior (most frequent leaf)", "distinct views"],
        note="guess: the most frequent leaf among the known requests with the same batch sizes and keys; "
             "deterministic (the view's shape does not depend on cryptographic randomness)",
    )
    out = {}
    for label, (padded, every) in CC_VIEWS.items():
        with _cc_sees(clf.cs_, padded=padded, every_key=every):
            hits, prior, views = leaf_naming_experiment(clf, X, 80)
        table.add(label, str(hits), str(prior), str(views))
        out[label] = hits
    report.data["leaf_naming"] = out
    return out


def ties(report: Report) -> dict[str, float]:
    """The CC spotting ties (``attack.tie_guess_rate``) with the thresholds where the splitter put
    them against centred in their gaps: 10 trees of depth 6 on the test data, ``splitter="bins"``
    with 16 bins (edges on the integers), the comparisons of 240 new rows whose value is the
    threshold or its grid neighbour."""
    X, y = integer_data()
    rows = integer_data(seed=9)[0]
    grid = 1 << DEFAULT_CODEC.frac_bits
    table = report.table(
        "The CC's guess of the path bit from ties: 10 trees of depth 6, bins (16), test data",
        ["thresholds", "comparisons", "ties", "CC's guess of the bit"],
        note="guess: left when the view lies below what any value other than the threshold gives, else a coin; "
             "exact in expectation over HoLT's blur",
    )
    out = {}
    for label, centred in (("where the splitter put them (before)", False), ("centred (now)", True)):
        saved = ColumnGrid.centre
        if not centred:
            ColumnGrid.centre = lambda self, s: s  # type: ignore[method-assign]
        try:
            clf = RevFRFClassifier(n_estimators=10, max_depth=6, splitter="bins", max_bins=16, code_resolution=None,
                                   random_state=7, kgc_factory=lambda: dtpkc_test_kgc(512))
            clf.set_params(partition=[[0, 3], [1], [2, 4, 5]]).fit(X, y)
        finally:
            ColumnGrid.centre = saved  # type: ignore[method-assign]
        pairs = neighbour_comparisons(clf.plaintext_forest(), rows, DEFAULT_CODEC, grid)
        rate = tie_guess_rate(pairs, grid, DEFAULT_HOLT.spread)
        table.add(label, str(len(pairs)), str(sum(m == 1 for m, _ in pairs)), f"{rate * 100:.1f}%")
        out[label] = rate
    report.data["ties"] = out
    return out


def _count_comparisons(cs: Any) -> list[int]:
    """The sizes of the HoLT batches ``cs`` sends from now on (appended to the returned list)."""
    batches: list[int] = []
    holt_many = cs.holt_many
    cs.holt_many = lambda pairs, **kw: batches.append(len(pairs)) or holt_many(pairs, **kw)
    return batches


def padding(report: Report, system: System, quick: bool) -> dict[str, float]:
    """What hiding the paths from the CC costs (``specs/revfrf.md``, "What the CC learns from a
    prediction request"): one-row encrypted requests, unpadded against padded against padded
    with every bit under every participant's key, on Adult and the skewed table, one
    participant per column, trees deep enough for the paths to end at different depths."""
    trees, depth = (3, 8) if quick else (10, 10)
    n_rows = 3 if quick else 5
    data = {"Adult": _adult(1000 if quick else 5000), "skewed": skewed(1000 if quick else 5000)}
    table = report.table(
        f"Cost of hiding the paths from the CC, {system.bits}-bit keys: one-row encrypted requests, {trees} trees "
        f"of depth {depth}, median of {n_rows} requests",
        ["data", "participants", "CC view", "comparisons per request", "time per request (all parties)",
         "ratio to unpadded"],
        note="time: CPU seconds of every party (one process); comparisons: HoLT comparisons the CC decides; "
             "'every key': each bit comes back under each participant's key (one CC encryption per key)",
    )
    out: dict[str, float] = {}
    for name, (X, y, Xte, _) in data.items():
        part = [[c] for c in range(X.shape[1])]
        clf, _, _ = _fit(system, X, y, part, n_estimators=trees, max_depth=depth)
        req = clf.requester("requester")
        cs = clf.cs_
        batches = _count_comparisons(cs)
        base = 0.0
        for variant, (padded, every) in PADDING_VARIANTS.items():
            times, counts = [], []
            with _cc_sees(cs, padded=padded, every_key=every):
                for x in Xte[:n_rows]:
                    batches.clear()
                    times.append(_timed(lambda x=x, req=req: req.request(x)))
                    counts.append(sum(batches))
            t = statistics.median(times)
            base = t if variant == "unpadded" else base
            table.add(name, str(len(part)), variant, f"{statistics.median(counts):.0f}", _med(times),
                      f"{t / base:.2f}")
            out[f"{name}, {variant}"] = t / base
    report.data[f"padding_{system.bits}"] = out
    return out


def run(report: Report, quick: bool) -> None:
    leaf_naming(report)
    ties(report)
    bits_list = [1024] if quick else [2048, 1024]
    for bits in bits_list:
        system = System(bits)
        report.data[f"keygen_{bits}_s"] = system.keygen
        tc = construction(report, system, quick)
        tp = prediction(report, system, quick)
        rv = revocation(report, system, quick)
        padding(report, system, quick)
        if bits == bits_list[0] and not quick:
            label = f"{bits} bits"
            report.check(f"construction: CS time per 100 splits, random range ({label}) [s]",
                         tc["random_range_cs_per100"], "<=", 1.0)
            for splitter in ("random_range", "bins"):
                report.check(f"construction: all parties / floor, {splitter} ({label})", tc[f"{splitter}_ratio"],
                             "<=", 1.5)
            report.check(f"encrypted prediction: CS time ({label}) [s]", tp["cs"], "<=", 7.0)
            report.check(f"encrypted prediction: all parties / floor ({label})", tp["ratio"], "<=", 1.5)
            report.check(f"rebuild per split / build per split ({label})", rv["rebuild_ratio"], "<=", 1.2)
        if bits == bits_list[-1]:
            acc = accuracy(report, system, quick)
            if quick:
                continue
            report.check("accuracy gap to scikit-learn, random range [points]", acc["gap_rr"] * 100, "<=", 1.0)
            report.check("accuracy gap to scikit-learn, bins [points]", acc["gap_bins"] * 100, "<=", 1.0)
            report.check("accuracy gap bins vs central reference [points]", acc["bins_vs_ref"] * 100, "<=", 0.0)
