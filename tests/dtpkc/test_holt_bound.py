"""The bound on what HoLT's blinded value tells the CC about M = |2Δ + 1| (specs/dtpkc.md
"What the CC learns in HoLT").

The CC sees ``|β'| = ρ·M + ν`` in law (ν is symmetric, so the sign of Δ does not change it).
The spec's bound: ``TV(Q_M, Q_M') ≤ |log2(M'/M)|/E + ε_κ``.  Here the law Q_M is computed
exactly, at parameters small enough to enumerate, for every pair of odd M below 2^(ℓ+2), and
the excess over ``|log2(M'/M)|/E`` is held to ``2^(1-κ)`` (the spec proves ``2^(4-κ)``).  A
second test checks that :func:`draw_holt_blinding` draws ρ by the law used here (octave
uniform, ρ ∝ 1/ρ within it).  Companions: without ν (multiplicative-only) the bound fails;
a uniform-within-octave ρ fails the law check.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import numpy.typing as npt
import pytest

from securetrees.dtpkc.twoserver import HoLTParams, draw_holt_blinding
from securetrees.rand import DeterministicRandom


def exact_law(m: int, ell: int, kappa: int, spread: int, *, additive: bool = True) -> npt.NDArray[np.float64]:
    """P(|β'| = b) for b = 0, 1, ...: octave e uniform in [0, E), ρ ∝ 1/ρ in
    [2^(σ-1+e), 2^(σ+e)) with σ = ℓ + 2κ + 3 (the smallest σ allowed), ν uniform in [-W, W]
    (``additive=False``: ν = 0, the multiplicative-only blinding)."""
    sigma = ell + 2 * kappa + 3
    w = (1 << (ell + 2 + kappa)) if additive else 0
    top = (1 << (sigma - 1 + spread)) * m + w + 2
    diff = np.zeros(top + 1)
    for e in range(spread):
        low = 1 << (sigma - 1 + e)
        k = np.arange(low, 2 * low)
        p = (1.0 / k) / np.sum(1.0 / k) / spread / (2 * w + 1)
        np.add.at(diff, k * m - w, p)
        np.add.at(diff, k * m + w + 1, -p)
    return np.cumsum(diff)


def worst_excess(ell: int, kappa: int, spread: int, *, additive: bool = True) -> float:
    """``max over M < M' of TV(Q_M, Q_M') - log2(M'/M)/E``."""
    ms = list(range(1, 1 << (ell + 2), 2))
    law = {m: exact_law(m, ell, kappa, spread, additive=additive) for m in ms}
    worst = -1.0
    for a, b in itertools.combinations(ms, 2):
        pa, pb = law[a], law[b]
        pa = np.pad(pa, (0, pb.size - pa.size))
        tv = 0.5 * float(np.abs(pa - pb).sum())
        worst = max(worst, tv - math.log2(b / a) / spread)
    return worst


@pytest.mark.parametrize(("ell", "kappa", "spread"), [(2, 3, 3), (2, 4, 1), (3, 3, 2), (1, 5, 4)])
def test_magnitude_view_is_a_blurred_scale(ell: int, kappa: int, spread: int) -> None:
    assert worst_excess(ell, kappa, spread) <= 2.0 ** (1 - kappa)


def test_without_the_additive_term_the_bound_fails() -> None:
    """ν = 0: β' is a multiple of M, so M and M + 2 are told apart almost surely."""
    assert worst_excess(2, 3, 3, additive=False) > 0.5


def _octave_and_position(rhos: list[int], sigma: int) -> tuple[list[int], list[float]]:
    octave = [r.bit_length() - sigma for r in rhos]
    position = [math.log2(r / (1 << (r.bit_length() - 1))) for r in rhos]  # in [0, 1)
    return octave, position


def _hoeffding_bins(values: list[float], bins: int, lo: float, hi: float, false_alarm: float) -> bool:
    """True when every bin's count is within ``sqrt(n·ln(2·bins/α)/2)`` of uniform (a union of
    two-sided Hoeffding bounds: false-alarm rate at most α)."""
    n = len(values)
    counts, _ = np.histogram(values, bins=bins, range=(lo, hi))
    t = math.sqrt(n * math.log(2 * bins / false_alarm) / 2)
    return bool(np.all(np.abs(counts - n / bins) <= t))


SMALL = HoLTParams(ell=1, sigma=1 + 2 * 40 + 3, spread=32, kappa=40)


def test_draws_follow_the_law_of_the_bound() -> None:
    rng = DeterministicRandom("test_holt_bound/draws")
    rhos = [int(draw_holt_blinding(SMALL, rng).rho) for _ in range(20000)]
    octave, position = _octave_and_position(rhos, SMALL.sigma)
    assert _hoeffding_bins([float(o) for o in octave], SMALL.spread, 0, SMALL.spread, 1e-6)
    assert _hoeffding_bins(position, 8, 0.0, 1.0, 1e-6)  # log2 of ρ's place in its octave: uniform
    # companion: ρ uniform within its octave (no 1/ρ rejection) fails the same check
    flat = DeterministicRandom("test_holt_bound/flat")
    uniform = [(1 << (SMALL.sigma - 1 + o)) + flat.randbelow(1 << (SMALL.sigma - 1 + o)) for o in octave]
    assert not _hoeffding_bins(_octave_and_position(uniform, SMALL.sigma)[1], 8, 0.0, 1.0, 1e-6)
