"""The corrected geometric mechanism, input perturbation and the privacy accountant
(spec "Differential privacy and its accounting")."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import chi2

from securetrees.errors import ParameterError, ProtocolError
from securetrees.protocols.histogram_forest.accountant import (
    PrivacyAccountant,
    Release,
    layer_sensitivity,
    per_release_epsilon,
)
from securetrees.protocols.histogram_forest.mechanisms import (
    GRID_BITS,
    MAX_RATIO,
    MIN_RATIO,
    check_epsilon,
    geometric_alpha,
    geometric_noise,
    geometric_pmf,
    geometric_rate,
    laplace_noise,
    randomized_response,
    uniforms,
)
from securetrees.rand import DeterministicRandom


@given(st.floats(1e-3, 50.0), st.floats(0.5, 30.0))
def test_corrected_pmf_is_a_distribution_with_ratio_alpha(epsilon: float, sensitivity: float) -> None:
    """As printed (ε for α) Eq. 6 goes negative for ε > 1; with α = exp(-ε/Δ) it sums to one and
    neighbouring values differ by the factor α (so shifting by Δ costs exactly e^ε)."""
    alpha = geometric_alpha(epsilon, sensitivity)
    assert alpha == pytest.approx(math.exp(-epsilon / sensitivity))
    z = np.arange(-4000, 4001)
    p = geometric_pmf(z, alpha)
    assert np.all(p >= 0)
    if alpha < 0.99:
        assert p.sum() == pytest.approx(1.0, rel=1e-9)
    assert p[4001] / p[4000] == pytest.approx(alpha)


@pytest.mark.statistical
@pytest.mark.parametrize(("epsilon", "sensitivity"), [(0.5, 1.0), (2.0, 1.0), (0.9, 6.0), (9.0, 4.0)])
def test_geometric_output_matches_the_corrected_formula(epsilon: float, sensitivity: float) -> None:
    """Chi-square goodness of fit of 20 000 draws of the exact sampler against (1-α)/(1+α)·α^|z|,
    false-alarm rate 1e-3 per case (fixed seeds, so the outcome never changes between runs).

    Every value with at least 5 expected draws is its own cell; the rest are pooled into one tail cell.
    """
    n, alpha = 20_000, geometric_alpha(epsilon, sensitivity)
    z = geometric_noise(n, epsilon, sensitivity, rng=DeterministicRandom(f"geometric/{epsilon}"))
    m = 0
    while geometric_pmf(m + 1, alpha) * n >= 5:
        m += 1
    support = np.arange(-m, m + 1)
    expected = geometric_pmf(support, alpha) * n
    observed = np.array([(z == s).sum() for s in support], dtype=np.float64)
    expected = np.append(expected, n - expected.sum())
    observed = np.append(observed, n - observed.sum())
    stat = float((((observed - expected) ** 2) / expected).sum())
    assert stat < float(chi2.ppf(0.999, expected.size - 1))


def test_smaller_epsilon_gives_more_noise() -> None:
    rng = DeterministicRandom("geometric/compare")
    spreads = [float(np.abs(geometric_noise(4000, eps, 3.0, rng=rng)).mean()) for eps in (10.0, 1.0, 0.1)]
    assert spreads[0] < spreads[1] < spreads[2]
    # E|Z| = 2α / (1 - α²) for the two-sided geometric law.
    for eps, spread in zip((10.0, 1.0, 0.1), spreads, strict=True):
        a = math.exp(-eps / 3.0)
        assert spread == pytest.approx(2 * a / (1 - a * a), rel=0.1)


def test_noise_known_answer_and_shape() -> None:
    """Pinned draws from a DeterministicRandom, so a change in the sampler cannot pass unnoticed."""
    z = geometric_noise((2, 3), 1.0, 1.0, rng=DeterministicRandom("hf/kat"))
    assert z.dtype == np.int64
    assert z.tolist() == [[1, -1, -1], [1, 1, 1]]
    wider = geometric_noise((2, 3), 0.5, 2.0, rng=DeterministicRandom("hf/kat"))  # α = e^-0.25
    assert wider.tolist() == [[4, -4, -1], [-3, -4, 4]]
    assert geometric_noise((0, 4), 1.0, 1.0).shape == (0, 4)
    u = uniforms(4, rng=DeterministicRandom("hf/kat"))
    assert np.all((u > 0) & (u <= 1))
    raw = np.frombuffer(DeterministicRandom("hf/kat").token_bytes(32), dtype="<u8") >> np.uint64(11)
    np.testing.assert_array_equal(u, (raw.astype(np.float64) + 1) / 2.0**53)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "1"])
def test_bad_epsilon_is_refused(bad: object) -> None:
    with pytest.raises(ParameterError):
        check_epsilon(bad)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        geometric_noise(3, bad, 1.0)  # type: ignore[arg-type]


def test_out_of_range_ratio_shape_and_sensitivity_are_refused() -> None:
    """Issue 14 part 6: ε/Δ = 1000 used to fail with an untyped 'math domain error' (α underflowed to 0)."""
    for eps, delta in ((1000.0, 1.0), (MAX_RATIO * 1.001, 1.0), (MIN_RATIO / 2, 1.0), (1.0, 1e12)):
        with pytest.raises(ParameterError, match="outside"):
            geometric_noise(3, eps, delta)
        with pytest.raises(ParameterError):
            geometric_alpha(eps, delta)
    for bad_delta in (0, -2.0, float("nan"), float("inf"), True, "1", None):
        with pytest.raises(ParameterError, match="sensitivity"):
            geometric_noise(3, 1.0, bad_delta)  # type: ignore[arg-type]
    for bad_shape in (-1, (2, -1), 2.5, (2.0, 3), True, "3", [2, 3]):
        with pytest.raises(ParameterError, match="shape"):
            geometric_noise(bad_shape, 1.0, 1.0)  # type: ignore[arg-type]
    assert geometric_noise(2, MAX_RATIO, 1.0).tolist() == [0, 0]  # the largest ratio accepted: no noise
    assert geometric_noise(1, MIN_RATIO, 1.0).shape == (1,)


@given(st.floats(1e-6, 50.0), st.integers(1, 100))
def test_the_sampled_rate_never_exceeds_epsilon_over_delta(epsilon: float, sensitivity: int) -> None:
    """ε/Δ is rounded down to the 2^-40 grid (more noise, never less), by less than one grid step."""
    rate = geometric_rate(epsilon, sensitivity)
    exact = Fraction(epsilon) / sensitivity * (1 << GRID_BITS)
    assert rate <= exact < rate + 1
    assert geometric_alpha(epsilon, sensitivity) >= math.exp(-epsilon / sensitivity)


def test_bad_sensitivity_and_scale_are_refused() -> None:
    with pytest.raises(ParameterError):
        geometric_alpha(1.0, 0.0)
    with pytest.raises(ParameterError):
        laplace_noise(3, -1.0)
    with pytest.raises(ParameterError):
        randomized_response([0, 3], 3, 1.0)
    with pytest.raises(ParameterError):
        randomized_response([0], 1, 1.0)


def test_laplace_and_randomized_response_statistics() -> None:
    rng = DeterministicRandom("hf/input")
    lap = laplace_noise(20_000, 2.0, rng=rng)
    assert abs(float(lap.mean())) < 0.1 and float(np.abs(lap).mean()) == pytest.approx(2.0, rel=0.05)
    codes = np.zeros(20_000, dtype=np.int64)
    out = randomized_response(codes, 4, math.log(3.0), rng=rng)  # keep with 3 / (3 + 3) = 1/2
    assert float((out == 0).mean()) == pytest.approx(0.5, abs=0.02)
    for other in (1, 2, 3):
        assert float((out == other).mean()) == pytest.approx(1 / 6, abs=0.02)


def test_accountant_composes_and_refuses_overspending() -> None:
    acc = PrivacyAccountant(1.0)
    eps = per_release_epsilon(1.0, n_trees=2, max_depth=2)
    assert eps == 0.25
    for layer in range(4):
        acc.charge(Release(layer // 2, layer % 2, 1, 3, layer_sensitivity(1, 3), eps))
    assert acc.spent == pytest.approx(1.0)
    with pytest.raises(ProtocolError):
        acc.charge(Release(2, 0, 1, 3, 3, eps))
    assert layer_sensitivity(3, 4) == 12
    with pytest.raises(ParameterError):
        layer_sensitivity(0, 4)
    with pytest.raises(ParameterError):
        PrivacyAccountant(0.0)
