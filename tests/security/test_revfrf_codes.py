"""What the CS learns from the candidate codes (specs/revfrf.md, "What the CS learns from the
candidate codes"): at most ``code_resolution`` codes per (node, column), and the CS's best
reconstruction of each feature from its recorded view (protocols/revfrf/attack.py) held to
the bounds the spec states.  Each check has a planted-leak companion: the old full-resolution
codes (``code_resolution=None``), on which it fails.

Deterministic: the codes depend only on the data (fixed seed), ``random_state`` and the
participants' seeded ρ-samples, never on cryptographic randomness, so every figure is
reproduced exactly on every run (false-alarm rate 0).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.revfrf.attack import ColumnLeak, cs_code_view, forest_leak

from ..revfrf.helpers import PARTITION, classifier, make_data

SPEC = Path(__file__).resolve().parents[2] / "specs" / "revfrf.md"
BOUND_ROW = re.compile(r"^\| bound, (\d+) trees, depth (\d+) \| ≤ ([0-9.]+) \| ≤ ([0-9.]+)% \| ≥ ([0-9.]+)% \|")
DEFAULT_K = 8


def _spec_bounds() -> dict[tuple[int, int], tuple[float, float, float]]:
    """The spec's bound rows: (trees, depth) → (rank correlation ≤, exact bins ≤ %, rank interval ≥ %)."""
    out = {}
    for line in SPEC.read_text(encoding="utf-8").splitlines():
        m = BOUND_ROW.match(line)
        if m:
            out[(int(m[1]), int(m[2]))] = (float(m[3]), float(m[4]), float(m[5]))
    return out


def _fit(splitter: str, trees: int, depth: int, **kw: object) -> tuple[RevFRFClassifier, np.ndarray]:
    X, y = make_data()
    return classifier(splitter=splitter, n_estimators=trees, max_depth=depth,
            **kw).set_params(partition=PARTITION).fit(X, y), X


def _violations(leaks: list[ColumnLeak], n: int, bound: tuple[float, float, float]) -> list[str]:
    rho_max, exact_pct, interval_pct = bound
    bad = []
    for c in leaks:
        if c.rank_correlation > rho_max:
            bad.append(f"column {c.column}: rank correlation {c.rank_correlation:.4f} > {rho_max}")
        if 100 * c.exact_bins / n > exact_pct:
            bad.append(f"column {c.column}: exact bins {c.exact_bins}/{n} > {exact_pct}%")
        if 100 * c.rank_interval < interval_pct:
            bad.append(f"column {c.column}: rank interval {100 * c.rank_interval:.1f}% < {interval_pct}%")
    return bad


def _max_codes(clf: RevFRFClassifier) -> int:
    return max(t.n_codes for t in cs_code_view(clf.transcript_))


def test_spec_states_the_bounds_tested_here() -> None:
    assert set(_spec_bounds()) == {(3, 4), (10, 10)}
    assert RevFRFClassifier().code_resolution == DEFAULT_K


@pytest.mark.parametrize("splitter", ["bins", "random_range"])
def test_cs_sees_at_most_k_codes_per_node_and_column(splitter: str) -> None:
    for k in (2, 5, DEFAULT_K):
        clf, _ = _fit(splitter, 3, 4, code_resolution=k)
        tasks = cs_code_view(clf.transcript_)
        assert tasks and all(t.n_codes <= k and int(t.codes.max()) < t.n_codes for t in tasks)


@pytest.mark.parametrize("splitter", ["bins", "random_range"])
def test_planted_full_resolution_shows_more_codes(splitter: str) -> None:
    clf, _ = _fit(splitter, 3, 4, code_resolution=None)
    assert _max_codes(clf) > DEFAULT_K


@pytest.mark.parametrize("shape", [(3, 4), (10, 10)])
@pytest.mark.parametrize("splitter", ["bins", "random_range"])
def test_cs_reconstruction_within_the_spec_bound(splitter: str, shape: tuple[int, int]) -> None:
    clf, X = _fit(splitter, *shape)
    leaks = forest_leak(clf.transcript_, X)
    assert len(leaks) == X.shape[1]
    assert _violations(leaks, X.shape[0], _spec_bounds()[shape]) == []


@pytest.mark.parametrize(("splitter", "shape"), [("bins", (3, 4)), ("bins", (10, 10)),
                                                 ("random_range", (3, 4)), ("random_range", (10, 10))])
def test_planted_full_resolution_codes_break_the_bound(splitter: str, shape: tuple[int, int]) -> None:
    clf, X = _fit(splitter, *shape, code_resolution=None)
    assert _violations(forest_leak(clf.transcript_, X), X.shape[0], _spec_bounds()[shape])


def test_full_resolution_bins_codes_are_the_global_bins() -> None:
    """The issue's finding, reproduced by the attack: old bins codes give every sample the CS saw
    its exact global bin (label reading), and the default codes do not."""
    old, X = _fit("bins", 3, 4, code_resolution=None)
    for c in forest_leak(old.transcript_, X):
        assert c.exact_bins == c.observed > 0
    new, _ = _fit("bins", 3, 4)
    assert all(c.exact_bins < c.observed // 10 for c in forest_leak(new.transcript_, X))


# ------------------------------------------------------------------ the worst column shapes

SPIKE_MARGIN = 15.0
"""Exact bins beyond the share of a column's most frequent value, at 10 trees of depth 10 and
the default k (the spec's bound for the worst column shape)."""


def _shaped(shape: str) -> tuple[np.ndarray, np.ndarray]:
    """The test data with column 2 (the one the forest splits on most) reshaped: a spike of
    zeros over a share of the rows, or five distinct values (fewer than k)."""
    X, y = make_data()
    rng = np.random.default_rng(5)  # which rows get the spike: test data, not a secret
    if shape == "five values":
        X[:, 2] = np.floor(X[:, 2] / 12)
    else:
        share = int(shape.removesuffix("% zeros")) / 100
        X[np.argsort(rng.random(X.shape[0]))[: round(share * X.shape[0])], 2] = 0.0
    return X, y


def _column_2(splitter: str, shape: str, **kw: object) -> tuple[float, float]:
    """(exact bins of column 2 in % of the rows, share of its most frequent value in %)."""
    X, y = _shaped(shape)
    clf = classifier(splitter=splitter, n_estimators=10, max_depth=10, **kw).set_params(partition=PARTITION).fit(X, y)
    (leak,) = [c for c in forest_leak(clf.transcript_, X) if c.column == 2]
    top = np.unique(X[:, 2], return_counts=True)[1].max()
    return 100 * leak.exact_bins / X.shape[0], 100 * top / X.shape[0]


@pytest.mark.parametrize("shape", ["63% zeros", "92% zeros"])
@pytest.mark.parametrize("splitter", ["bins", "random_range"])
def test_worst_spiked_column_within_its_share_plus_the_margin(splitter: str, shape: str) -> None:
    exact, top = _column_2(splitter, shape)
    assert exact <= top + SPIKE_MARGIN


def test_worst_column_with_fewer_values_than_k_is_read_whole() -> None:
    """Stated, not bounded: with at most k distinct values the coarse codes are the values' ranks."""
    exact, _ = _column_2("bins", "five values")
    assert exact == 100.0


def test_planted_worst_spiked_column_at_full_resolution_breaks_the_margin() -> None:
    exact, top = _column_2("bins", "63% zeros", code_resolution=None)
    assert exact > top + SPIKE_MARGIN
