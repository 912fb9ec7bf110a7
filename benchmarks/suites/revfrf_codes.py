"""RevFRF's candidate codes: what the CS reconstructs per feature, and what bounding the codes'
resolution (``code_resolution`` = k) costs in accuracy (issue 18.4, ``specs/revfrf.md``, "What
the CS learns from the candidate codes").

* Leak: the CS's reconstruction attack (``protocols/revfrf/attack.py``) on its recorded view,
  on the test data of ``tests/revfrf`` (240 rows, 6 integer columns with 60 values, three
  participants), for both splitters at k = full, 4, 8, 16, and the floor (the winning
  partitions alone, which any resolution reveals).  Deterministic: no repeats needed.
* Accuracy: via the facade on Adult's official split and on a synthetic table with skewed
  (log-normal) features, 10 trees of depth 10, one participant per column; medians over three
  ``random_state`` values (the same for every k); the drop is against full resolution in the
  same run.

``--quick`` (a smoke run for CI): 1,000 rows, one seed, forests of 3 trees of depth 6 for the
accuracy tables, the 3-tree leak figures only, no accuracy target.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
from harness import Report

from securetrees.datasets import load_adult
from securetrees.dtpkc import KGC
from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.revfrf.attack import ColumnLeak, forest_leak, integer_data
from securetrees.protocols.revfrf.thresholds import ColumnGrid
from securetrees.testing.dtpkc import dtpkc_test_kgc

RESOLUTIONS: tuple[int | None, ...] = (None, 4, 8, 16)
DEFAULT_K = 8
PARTITION = [[0, 3], [1], [2, 4, 5]]
"""Three participants over integer_data's six columns."""


def small_kgc() -> KGC:
    """512-bit cached test keys: the leak and the accuracy do not depend on the key size."""
    return dtpkc_test_kgc(512)


def _name(k: int | None) -> str:
    return "full" if k is None else str(k)


def _leak_rows(splitter: str, trees: int, depth: int) -> list[tuple[str, float, float, float]]:
    X, y = integer_data()
    rows = []
    floor = None
    for k in RESOLUTIONS:
        clf = RevFRFClassifier(n_estimators=trees, max_depth=depth, splitter=splitter, code_resolution=k,
                               random_state=7, kgc_factory=small_kgc).set_params(partition=PARTITION).fit(X, y)
        rows.append((_name(k), *_worst(forest_leak(clf.transcript_, X), X.shape[0])))
        if k == DEFAULT_K:
            floor = ("floor (winning splits)", *_worst(forest_leak(clf.transcript_, X, floor=True), X.shape[0]))
    return [*rows, floor] if floor is not None else rows


def _worst(leaks: list[ColumnLeak], n: int) -> tuple[float, float, float]:
    return (max(c.rank_correlation for c in leaks), 100 * max(c.exact_bins for c in leaks) / n,
            100 * min(c.rank_interval for c in leaks))


def leak(report: Report, quick: bool) -> dict[str, float]:
    shapes = [(3, 4)] if quick else [(3, 4), (10, 10)]
    out = {}
    for trees, depth in shapes:
        table = report.table(
            f"What the CS reconstructs per column, {trees} trees of depth {depth} (test data: 240 rows, 60 values "
            "per column)",
            ["splitter", "k", "rank correlation (max)", "exact bins [% of rows] (max)", "rank interval [%] (min)"],
            note="worst column of six; exact bins: samples whose global 255-quantile bin the CS holds for certain; "
                 "rank interval: median width of the rank range the CS can place a sample in",
        )
        for splitter in ("bins", "random_range"):
            for name, rho, exact, width in _leak_rows(splitter, trees, depth):
                table.add(splitter, name, f"{rho:.4f}", f"{exact:.1f}", f"{width:.1f}")
                if name == _name(DEFAULT_K):
                    out[f"{splitter}_{trees}_{depth}_exact"] = exact
    return out


def _adult(n: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ad = load_adult()
    X, y = np.nan_to_num(ad.X_train, nan=-1.0), ad.y_train
    if n is not None:
        X, y = X[:n], y[:n]
    return X, y, np.nan_to_num(ad.X_test, nan=-1.0), ad.y_test


def skewed(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Eight log-normal columns on different scales; the label depends on logs and a step."""
    rng = np.random.default_rng(2024)
    total = n + 5000
    Z = rng.lognormal(0.0, 1.5, size=(total, 8)) * np.array([1, 10, 100, 1, 5, 50, 2, 1000.0])
    s = (np.log(Z[:, 0]) - 0.8 * np.log(Z[:, 2] / 100) + 0.6 * (Z[:, 4] > 12) + np.log1p(Z[:, 7]) / 6
         + rng.normal(0.0, 1.0, total))
    y = (s > np.median(s)).astype(np.int64)
    return Z[:n], y[:n], Z[n:], y[n:]


def _forest(quick: bool) -> tuple[int, int]:
    """Trees and depth of the accuracy tables' forests (the quick run's are a smoke test)."""
    return (3, 6) if quick else (10, 10)


def accuracy(report: Report, quick: bool) -> dict[str, float]:
    seeds = [0] if quick else [0, 1, 2]
    trees, depth = _forest(quick)
    data = {"Adult": _adult(1000 if quick else None), "skewed": skewed(1000 if quick else 5000)}
    table = report.table(
        f"Test accuracy [%] by code resolution k, {trees} trees of depth {depth}, median of {len(seeds)} seed(s)",
        ["data", "splitter", "k", "accuracy", "drop vs full [points]"],
        note="same random_state values for every k; one participant per column",
    )
    out: dict[str, float] = {}
    for dname, (X, y, Xt, yt) in data.items():
        part = [[c] for c in range(X.shape[1])]
        for splitter in ("bins", "random_range"):
            base = 0.0
            for k in RESOLUTIONS:
                accs = [float((RevFRFClassifier(n_estimators=trees, max_depth=depth, splitter=splitter,
                                                code_resolution=k, random_state=s, kgc_factory=small_kgc,
                                                partition=part).fit(X, y)
                               .predict(Xt) == yt).mean()) for s in seeds]
                acc = float(np.median(accs))
                if k is None:
                    base = acc
                table.add(dname, splitter, _name(k), f"{acc * 100:.2f}", f"{(base - acc) * 100:.2f}")
                if k == DEFAULT_K:
                    out[f"{dname}_{splitter}"] = (base - acc) * 100
    return out


def centring(report: Report, quick: bool) -> dict[str, float]:
    """What moving each threshold to the middle of its gap's grid cell costs in accuracy
    (``protocols/revfrf/thresholds.py``, against the splitter's own thresholds), at the default
    code resolution, 10 trees of depth 10, one participant per column."""
    seeds = [0] if quick else [0, 1, 2]
    trees, depth = _forest(quick)
    data = {"Adult": _adult(1000 if quick else None), "skewed": skewed(1000 if quick else 5000)}
    table = report.table(
        f"Test accuracy [%] with thresholds centred in their gaps, {trees} trees of depth {depth}, k = {DEFAULT_K}, "
        f"median of {len(seeds)} seed(s)",
        ["data", "splitter", "splitter's thresholds", "centred", "change [points]"],
        note="the same random_state values and training splits in both columns; only where a threshold sits "
             "inside its gap differs, so only test values that fall in a gap can change side",
    )
    out: dict[str, float] = {}
    for dname, (X, y, Xt, yt) in data.items():
        part = [[c] for c in range(X.shape[1])]
        for splitter in ("bins", "random_range"):
            acc = {}
            for centred in (False, True):
                with contextlib.nullcontext() if centred else _splitters_thresholds():
                    acc[centred] = float(np.median([
                        float((RevFRFClassifier(n_estimators=trees, max_depth=depth, splitter=splitter, random_state=s,
                                                kgc_factory=small_kgc, partition=part).fit(X, y)
                               .predict(Xt) == yt).mean()) for s in seeds]))
            table.add(dname, splitter, f"{acc[False] * 100:.2f}", f"{acc[True] * 100:.2f}",
                      f"{(acc[True] - acc[False]) * 100:+.2f}")
            out[f"{dname}_{splitter}"] = (acc[True] - acc[False]) * 100
    return out


@contextlib.contextmanager
def _splitters_thresholds() -> Iterator[None]:
    """Thresholds where the splitter put them (no centring), restored on exit."""
    saved = ColumnGrid.centre
    ColumnGrid.centre = lambda self, s: s  # type: ignore[method-assign]
    try:
        yield
    finally:
        ColumnGrid.centre = saved  # type: ignore[method-assign]


def run(report: Report, quick: bool) -> None:
    figures: dict[str, Any] = {"leak": leak(report, quick), "accuracy": accuracy(report, quick),
                               "centring": centring(report, quick)}
    report.data.update(figures)
    if quick:  # 2,000 rows and one seed: the drop is within the noise, no target
        return
    for key, drop in figures["accuracy"].items():
        report.check(f"accuracy drop at k={DEFAULT_K}, {key} [points]", drop, "<=", 0.5)
