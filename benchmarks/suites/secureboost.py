"""SecureBoost (issue 17, part 4): one tree on Adult split vertically (``securetrees demo secureboost``'s
split: an active party with 5 columns, 2 passive parties with the other 9), at 1024 and 2048 bits.

Time: every party runs in this process, so the process CPU time of a fit counts every party's
work.  The counted cryptographic floor of one tree (``specs/secureboost.md``, "Cost counts"):
the roles' operation counters (encryptions, homomorphic additions and subtractions, slot shifts,
re-randomisations, decryptions) each priced at its unit cost measured in this run on the same
key.  The figure is the median CPU time of a one-tree fit over repeated fits, and its ratio to
the floor.  Plaintext reference: the central GBDT on the joined columns, same parameters.

``--quick``: the first 4000 rows, 1024 bits only, one repeat.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import numpy as np
from harness import Report, Timing, measure

from securetrees._nt import batch_invert, mpz
from securetrees.datasets import load_adult
from securetrees.paillier import Ciphertext, PrivateKey, PublicKey, generate_keypair
from securetrees.paillier.batch import encrypt_many
from securetrees.protocols.secureboost.demo import MAX_BINS, adult_partition
from securetrees.protocols.secureboost.estimators import SecureBoostClassifier
from securetrees.trees import BinningParams, GrowParams, train_boosted

CPU = time.process_time
DEPTH = 3


def unit_costs(pk: PublicKey, sk: PrivateKey, width: int) -> dict[str, Timing]:
    """CPU seconds of each counted operation on this key."""
    pk.comb_table()
    values = list(range(1, 65))
    enc = measure(lambda: encrypt_many(sk, values), repeats=5, clock=CPU).per(len(values))
    c1, c2 = mpz(pk.encrypt(5).value), mpz(pk.encrypt(7).value)
    n2 = mpz(pk.n_square)
    add = measure(lambda: c1 * c2 % n2, repeats=9, clock=CPU)
    ct = Ciphertext(pk, int(c1))
    shift = measure(lambda: ct * (1 << width), repeats=7, clock=CPU)
    # a subtraction is a quotient sharing one inversion with the others of its stage
    quotients = [mpz(pk.encrypt(v).value) for v in range(64)]
    sub = measure(lambda: [c * i % n2 for c, i in zip(quotients, batch_invert(quotients, n2), strict=True)],
                  repeats=7, clock=CPU).per(len(quotients))
    rerand = measure(lambda: ct.rerandomize(), repeats=7, clock=CPU)
    dec = measure(lambda: sk.decrypt_residue(ct), repeats=7, clock=CPU)
    return {"encrypt": enc, "add": add, "subtract": sub, "shift": shift, "rerandomize": rerand, "decrypt": dec}


def counts(model: Any) -> dict[str, float]:
    a = model.active_.counts
    ps = model.passives_
    return {"encrypt": a["encrypt"], "decrypt": a["decrypt"],
            **{k: sum(p.op_counts[k] for p in ps) for k in ("add", "subtract", "shift", "rerandomize")}}


def run(report: Report, quick: bool) -> None:
    d = load_adult()
    rows = 4000 if quick else len(d.y_train)
    X, y = d.X_train[:rows], d.y_train[:rows]
    cat = [int(c) for c in np.flatnonzero(d.categorical)]
    partition = adult_partition(2)
    report.data["load_average"] = os.getloadavg()
    order = [c for cols in partition for c in cols]
    binning = BinningParams(max_bins=MAX_BINS, categorical=[c in cat for c in order])
    plain = measure(lambda: train_boosted(X[:, order], y, n_classes=2, n_estimators=1, grow=GrowParams(max_depth=DEPTH),
                                          binning=binning, classes=np.unique(y)), repeats=3, clock=CPU)
    table = report.table(
        f"One SecureBoost tree on Adult ({rows} rows, depth {DEPTH}, 2 passive parties, key-owner encryption)",
        ["key bits", "CPU per tree (median)", "floor", "CPU / floor", "decryptions / bucket sums",
         "reference GBDT tree"],
        note="CPU time of this process (all parties); floor = operation counts x unit costs measured now.",
    )
    for bits in (1024,) if quick else (1024, 2048):
        keys = generate_keypair(bits, allow_insecure=bits < 2048)
        model = SecureBoostClassifier(partition, 1, max_depth=DEPTH, max_bins=MAX_BINS, keypair=keys,
                                      categorical_features=cat, allow_insecure=bits < 2048, record_payloads=False)
        samples = []
        for _ in range(1 if quick else 3):
            t0 = CPU()
            model.fit(X, y)
            samples.append(CPU() - t0)
        fit = statistics.median(samples)
        n = rows.bit_length()
        layout_width = n + (24 + 2 + n) + (24 + 1 + n)
        units = unit_costs(*keys, layout_width)
        c = counts(model)
        floor = sum(c[k] * units[k].median for k in units)
        a = model.active_.counts
        table.add(bits, round(fit, 2), round(floor, 2), round(fit / floor, 2), f"{a['decrypt']} / {a['buckets']}",
                  plain)
        report.data[f"counts_{bits}"] = c
        report.check(f"CPU per tree / counted floor at {bits} bits (<= 1.5)", fit / floor, "<=", 1.5)
