"""SecureBoost: how well the active party places the passive parties' values (issue 26, part 6;
``specs/secureboost.md``, "What the active party learns").

The active party's interval attack (``protocols/secureboost/attack.py``) on its recorded view of
a fit, 20 trees of depth 3 and 32 buckets, 1024-bit test key:

* Adult, the first 2,000 training rows without native-country (41 category codes, more than
  32 buckets): the active party holds the label and the seven other categorical columns, one
  passive party the six numeric ones (age, fnlwgt, education-num,
  capital-gain, capital-loss, hours-per-week).
* A synthetic table of 2,000 rows with eight log-normal (skewed) columns on different scales
  (the generator of the ``revfrf_codes`` suite): the active party holds columns 0 and 1 with
  the label, one passive party columns 2-7.

Per passive feature: the splits on it, Spearman's ρ between the interval's midpoint and the
true value, the share of rows placed to ±1 bucket (an interval of at most three buckets) and
the median interval width.  The fit and the attack are deterministic (the splits do not depend
on the encryption randomness), so one run gives the figures.

``--quick``: 500 rows and 5 trees.
"""

from __future__ import annotations

import numpy as np
from harness import Report

from securetrees.datasets import load_adult
from securetrees.protocols.secureboost import SecureBoostClassifier
from securetrees.protocols.secureboost.attack import IntervalLeak, active_view_intervals, interval_leak
from securetrees.rand import DeterministicRandom
from securetrees.testing.paillier import small_keypair
from suites.revfrf_codes import skewed

BUCKETS = 32
DEPTH = 3


def leaks(X: np.ndarray, y: np.ndarray, partition: list[list[int]], categorical: list[int], trees: int
          ) -> list[tuple[int, IntervalLeak]]:
    """Fit on the partition (one passive party) and run the attack; ``(column, figures)`` per
    numeric passive feature the active party split on."""
    model = SecureBoostClassifier(partition, n_estimators=trees, max_depth=DEPTH, max_bins=BUCKETS,
                                  learning_rate=0.3, categorical_features=categorical, keypair=small_keypair(1024),
                                  allow_insecure=True, rng=DeterministicRandom("secureboost intervals"))
    model.fit(X, y)
    cols = partition[1]
    return [(cols[iv.feature], interval_leak(iv, X[:, cols[iv.feature]]))
            for iv in active_view_intervals(model.network_.transcript)]


def run(report: Report, quick: bool) -> None:
    rows, trees = (500, 5) if quick else (2000, 20)
    ad = load_adult()
    names = list(ad.feature_names)
    kept = [c for c in range(len(names)) if names[c] != "native-country"]  # 41 codes: above 32 buckets
    cat = [k for k, c in enumerate(kept) if ad.categorical[c]]
    numeric = [k for k in range(len(kept)) if k not in cat]
    Xs, ys, _, _ = skewed(rows)
    cases = {
        "Adult": (ad.X_train[:rows][:, kept], ad.y_train[:rows], [cat, numeric], cat, [names[c] for c in kept]),
        "skewed": (Xs, ys, [[0, 1], list(range(2, 8))], [], [f"x{c}" for c in range(8)]),
    }
    table = report.table(
        f"What the active party places of each passive feature, {trees} trees of depth {DEPTH}, {BUCKETS} buckets, "
        f"{rows} rows",
        ["data", "feature", "buckets", "splits", "Spearman ρ", "rows within ±1 bucket [%]", "median width [buckets]"],
        note="features the active party never split on are not listed (it learns nothing of them)",
    )
    for name, (X, y, partition, categorical, names) in cases.items():
        for col, leak in leaks(X, y, partition, categorical, trees):
            table.add(name, names[col], leak.n_bins, leak.splits, f"{leak.rank_correlation:.2f}",
                      f"{100 * leak.within_one:.0f}", f"{leak.median_width:.0f}")
            report.data[f"{name}_{names[col]}"] = {
                "buckets": leak.n_bins, "splits": leak.splits, "spearman": leak.rank_correlation,
                "within_one": leak.within_one, "median_width": leak.median_width}
