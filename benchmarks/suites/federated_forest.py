"""Federated Forest on UCI Adult: training against scikit-learn, accuracy over seeds, the
encrypted mode against its counted floor, and the paper's Figures 3-6 (prediction and
training time against clients, trees, depth and test fraction; one-round vs classical).

``python benchmarks/run.py federated_forest [--quick] [--json PATH]``

Adult's official split, columns dealt round-robin to the clients, the labels at client 0.
scikit-learn's RandomForestClassifier is fitted on the joined data in the same run with the
same number of trees, depth, features per split (sqrt) and bootstrap, ``n_jobs=1``.
``--quick`` uses 2,000 training rows, few trees and a 512-bit test key (not a security
setting) so that it finishes in seconds.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
from harness import Report, measure, measure_each
from sklearn.ensemble import RandomForestClassifier

from securetrees.datasets import load_adult
from securetrees.paillier import generate_keypair
from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.protocols.federated_forest.slots import classification_units
from securetrees.protocols.federated_forest.testing import small_key_options


def _split(n_features: int, m: int) -> list[list[int]]:
    return [list(range(i, n_features, m)) for i in range(m)]


def _ff(n_trees: int, depth: int, seed: int, mode: str, cat: list[bool], **kw: Any) -> FederatedForestClassifier:
    return FederatedForestClassifier(n_trees, max_depth=depth, random_state=seed, label_protection=mode,
                                     categorical_features=cat, record_payloads=False, **kw)


def _sk(n_trees: int, depth: int, seed: int) -> RandomForestClassifier:
    return RandomForestClassifier(n_trees, max_depth=depth, max_features="sqrt", bootstrap=True, n_jobs=1,
                                  random_state=seed)


def run(report: Report, quick: bool) -> None:
    d = load_adult()
    Xtr, ytr, Xte, yte = d.X_train, d.y_train, d.X_test, d.y_test
    if quick:
        Xtr, ytr, Xte, yte = Xtr[:2000], ytr[:2000], Xte[:1000], yte[:1000]
    cat = [bool(c) for c in d.categorical]
    F = Xtr.shape[1]
    part2 = _split(F, 2)
    n_trees, depth = (5, 6) if quick else (100, 10)
    repeats = 1 if quick else 3
    report.data["setting"] = {"train_rows": int(Xtr.shape[0]), "test_rows": int(Xte.shape[0]),
                              "trees": n_trees, "depth": depth, "clients": 2, "max_features": "sqrt"}

    # -- training time, shared mode, against scikit-learn ----------------------------------
    fitted: list[FederatedForestClassifier] = []

    def fit_shared() -> None:
        fitted[:] = [_ff(n_trees, depth, 0, "shared", cat).set_params(partition=part2).fit(Xtr, ytr)]

    t_ff = measure_each(fit_shared, repeats=repeats)
    t_sk = measure_each(lambda: _sk(n_trees, depth, 0).fit(Xtr, ytr), repeats=repeats)
    tr = fitted[-1].transcript_
    tab = report.table("Training on Adult (2 clients)", ["method", "time", "ratio to sklearn", "MB", "rounds"],
                       note="shared mode = the paper's practice; sklearn fitted on the joined data, n_jobs=1")
    tab.add("scikit-learn RandomForestClassifier", t_sk, "1.00", "-", "-")
    tab.add("Federated Forest, shared labels", t_ff, f"{t_ff.median / t_sk.median:.2f}",
            f"{tr.total_bytes / 1e6:.1f}", tr.rounds)
    report.check("shared-mode training time / sklearn fit time", t_ff.median / t_sk.median, "<=", 5.0)

    # -- accuracy over seeds ---------------------------------------------------------------
    seeds = range(2) if quick else range(10)
    acc_ff, acc_sk = [], []
    for s in seeds:
        ff = fitted[-1] if s == 0 else _ff(n_trees, depth, s, "shared", cat).set_params(partition=part2).fit(Xtr, ytr)
        acc_ff.append(float((ff.predict(Xte) == yte).mean()))
        acc_sk.append(float((_sk(n_trees, depth, s).fit(Xtr, ytr).predict(Xte) == yte).mean()))
    tab = report.table(f"Accuracy on Adult's test split, {len(acc_ff)} seeds",
                       ["method", "mean accuracy", "min", "max"],
                       note="encrypted mode grows the same trees as shared mode (tests/federated_forest/"
                            "test_lossless.py), so its accuracy is the same")
    tab.add("scikit-learn", f"{statistics.mean(acc_sk):.4f}", f"{min(acc_sk):.4f}", f"{max(acc_sk):.4f}")
    tab.add("Federated Forest", f"{statistics.mean(acc_ff):.4f}", f"{min(acc_ff):.4f}", f"{max(acc_ff):.4f}")
    report.data["accuracy"] = {"federated": acc_ff, "sklearn": acc_sk}
    report.check("|mean accuracy difference| (percentage points)",
                 abs(statistics.mean(acc_ff) - statistics.mean(acc_sk)) * 100, "<=", 0.5)

    # -- encrypted mode against its floor --------------------------------------------------
    enc_trees = 1 if quick else 100  # the issue: 2 clients, 100 trees, depth 10
    if quick:
        key_kw: dict[str, Any] = small_key_options()
    else:
        key_kw = {"paillier_keys": generate_keypair(2048)}
    t0 = time.perf_counter()
    ffe = _ff(enc_trees, depth, 0, "encrypted", cat, **key_kw).set_params(partition=part2).fit(Xtr, ytr)
    t_enc = time.perf_counter() - t0
    holder, other = ffe.clients_
    cnt_h, cnt_o = holder.counters, other.counters
    pk, sk = key_kw["paillier_keys"]
    c = pk.encrypt(12345)
    c2 = pk.encrypt(678)
    layout, _ = classification_units(ytr.astype(np.int64), 2)
    shift = 1 << layout.bin_bits  # the slot shift of this run's packing
    unit = {
        "encrypt (djn)": measure(lambda: pk.encrypt(1), repeats=5),
        "weight (c^w, w=3)": measure(lambda: c * 3, repeats=5),
        "add": measure(lambda: c + c2, repeats=5),
        "slot shift": measure(lambda: c * shift, repeats=5),
        "re-randomise (djn)": measure(lambda: c.rerandomize(), repeats=5),
        "decrypt (CRT)": measure(lambda: sk.decrypt_residue(c), repeats=5),
    }
    counts = {
        "encrypt (djn)": cnt_h.encryptions, "weight (c^w, w=3)": cnt_o.weightings,
        "add": cnt_o.additions, "slot shift": cnt_o.shifts,
        "re-randomise (djn)": cnt_o.rerandomizations, "decrypt (CRT)": cnt_h.decryptions,
    }
    tab = report.table(f"Encrypted mode: the counted floor ({pk.bits}-bit N, {enc_trees} tree(s), depth {depth})",
                       ["operation", "count", "unit cost", "total s"],
                       note=f"a slot shift multiplies by 2^{layout.bin_bits} (two {layout.slot_bits}-bit class slots "
                            "per bin); unit costs measured in this run")
    floor = 0.0
    floor_issue = 0.0
    for k, t in unit.items():
        tab.add(k, counts[k], t, f"{counts[k] * t.median:.2f}")
        floor += counts[k] * t.median
        if k != "re-randomise (djn)":
            floor_issue += counts[k] * t.median
    tre = ffe.transcript_
    tab = report.table("Encrypted mode: time and bytes", ["measure", "value"])
    tab.add("measured training time (s)", f"{t_enc:.2f}")
    tab.add("floor incl. re-randomisation (s)", f"{floor:.2f}")
    tab.add("floor as the issue counts it (s)", f"{floor_issue:.2f}")
    tab.add("ratio to floor incl. re-randomisation", f"{t_enc / floor:.2f}")
    tab.add("ratio to the issue's floor", f"{t_enc / floor_issue:.2f}")
    tab.add("MB on the wire", f"{tre.total_bytes / 1e6:.1f}")
    tab.add("rounds", tre.rounds)
    cover = sum(int((~r).sum()) for r in ffe.clients_[0].reference)
    tab.add("nodes (of them cover-split subtrees)", f"{sum(t.n_nodes for t in ffe.master_.trees)} ({cover})")
    ffe.predict(Xte[:100])  # aligns the test ids; then one-round prediction alone
    mark = tre.mark()
    ffe.master_.hand_leaves(ffe.master_.leaf_of_one_round())
    tab.add("one-round prediction rounds (leaf sets, the leaves to the label holder)", tre.since(mark).rounds)
    report.check("encrypted-mode time / counted floor", t_enc / floor, "<=", 1.5)

    # -- Figures 3-6: prediction (and training) against clients, trees, depth, test size ----
    small = 3000 if quick else 10000
    Xs, ys = Xtr[:small], ytr[:small]

    def sweep(title: str, label: str, points: list[Any], make: Any) -> None:
        tab = report.table(title, [label, "train", "one-round", "classical", "speed-up",
                                   "rounds 1-round", "rounds classical", "KB 1-round", "KB classical"],
                           note="prediction times are medians of 3; rounds and bytes from the transcript")
        rows = []
        for p in points:
            ff, _parts, Xq, t_train = make(p)
            ff.predict(Xq)  # align test ids once
            m = ff.master_
            tr = ff.transcript_
            out = {}
            for how, fn in (("one", m.leaf_of_one_round), ("classical", m.leaf_of_classical)):
                mark = tr.mark()
                fn()
                st = tr.since(mark)
                out[how] = (measure_each(fn, repeats=3), st.rounds, st.bytes)
            tab.add(p, f"{t_train:.2f}s", out["one"][0], out["classical"][0],
                    f"{out['classical'][0].median / out['one'][0].median:.1f}x", out["one"][1], out["classical"][1],
                    f"{out['one'][2] / 1e3:.0f}", f"{out['classical'][2] / 1e3:.0f}")
            rows.append({"point": p, "one_round_s": out["one"][0].median, "classical_s": out["classical"][0].median,
                         "rounds_one": out["one"][1], "rounds_classical": out["classical"][1], "train_s": t_train})
        report.data[title] = rows

    def trained(m_clients: int, trees: int, dep: int, frac: float) -> tuple[Any, Any, Any, float]:
        parts = _split(F, m_clients)
        t0 = time.perf_counter()
        ff = _ff(trees, dep, 0, "shared", cat).set_params(partition=parts).fit(Xs, ys)
        t = time.perf_counter() - t0
        n_q = max(1, int(frac * Xte.shape[0]))
        return ff, parts, Xte[:n_q], t

    fr = 0.1
    report.data["figures"] = "paper Figures 3-6; the paper gives no numbers, so none are quoted"
    sweep("Figure 3: clients (8 trees, depth 4)", "clients",
          [2, 4] if quick else [2, 3, 4, 5, 6, 7, 8], lambda p: trained(p, 8, 4, fr))
    sweep("Figure 4: trees (depth 4, 2 clients)", "trees",
          [8, 16] if quick else [8, 16, 24, 32], lambda p: trained(2, p, 4, fr))
    sweep("Figure 5: depth (8 trees, 2 clients)", "depth",
          [4, 8] if quick else [4, 8, 12, 16], lambda p: trained(2, 8, p, fr))
    sweep("Figure 6: test fraction (8 trees, depth 4, 2 clients)", "fraction",
          [0.1, 0.2] if quick else [0.1, 0.2, 0.3, 0.4], lambda p: trained(2, 8, 4, p))
    _draw_figures(report)
    one_rounds = {r["rounds_one"] for key in report.data if key.startswith("Figure")
                  for r in report.data[key]}
    report.check("one-round prediction: distinct round counts over all sweeps", float(len(one_rounds)), "<=", 1.0)


def _draw_figures(report: Report) -> None:
    """The paper's Figures 3-6 as one PNG: prediction time of both methods against each swept
    parameter (the paper gives no numbers, so only our points are drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweeps = [k for k in report.data if k.startswith("Figure ")]
    fig, axes = plt.subplots(1, len(sweeps), figsize=(4 * len(sweeps), 3.4), constrained_layout=True)
    for ax, key in zip(axes, sweeps, strict=True):
        rows = report.data[key]
        xs = [r["point"] for r in rows]
        ax.plot(xs, [r["one_round_s"] for r in rows], "o-", label="one-round (1 round)")
        ax.plot(xs, [r["classical_s"] for r in rows], "s--", label="classical (1 round per node)")
        ax.set_title(key.split(" (")[0], fontsize=10)
        ax.set_xlabel(key.split(": ")[1].split(" (")[0])

        ax.grid(alpha=0.3)
    axes[0].set_ylabel("prediction time (s)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Federated Forest prediction on Adult (cf. the paper's Figures 3-6)", fontsize=11)
    report.save_figure("figures-3-6", fig)
