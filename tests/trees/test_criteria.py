"""Criteria (specs/trees.md "Criteria"): each formula against its textbook definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from securetrees.errors import ParameterError
from securetrees.trees import (
    Entropy,
    Gini,
    GradientGain,
    SquaredError,
    eq7_score,
    eq8_leaf_value,
    make_criterion,
)

counts = arrays(np.float64, st.integers(2, 5), elements=st.integers(0, 50).map(float))


@given(counts)
def test_gini_is_weighted_impurity(c: np.ndarray) -> None:
    n = c.sum()
    expected = n * (1 - ((c / n) ** 2).sum()) if n else 0.0
    assert Gini().cost(c) == pytest.approx(expected, abs=1e-9)


@given(counts)
def test_entropy_is_weighted_entropy_in_bits(c: np.ndarray) -> None:
    n = c.sum()
    p = c[c > 0] / n if n else np.zeros(0)
    assert Entropy().cost(c) == pytest.approx(-n * (p * np.log2(p)).sum(), abs=1e-9)


@given(arrays(np.float64, st.integers(1, 20), elements=st.floats(-100, 100)),
       st.integers(1, 19))
def test_gain_is_parent_cost_minus_children(y: np.ndarray, cut: int) -> None:
    """Regression: gain = SSE(parent) - SSE(left) - SSE(right), with SSE about the mean."""
    crit = SquaredError()

    def stats(v: np.ndarray) -> np.ndarray:
        return np.array([v.size, v.sum(), (v * v).sum()], dtype=float)

    def sse(v: np.ndarray) -> float:
        return float(((v - v.mean()) ** 2).sum()) if v.size else 0.0

    lft, rgt = y[:cut], y[cut:]
    got = crit.gain(stats(y), stats(lft), stats(rgt))
    assert got == pytest.approx(sse(y) - sse(lft) - sse(rgt), abs=1e-6 * max(1.0, (y * y).sum()))
    assert crit.leaf_value(stats(y))[0] == pytest.approx(y.mean())


@given(arrays(np.float64, (2, 5), elements=st.floats(-10, 10)),
       arrays(np.float64, (2, 5), elements=st.floats(0.01, 2)),
       st.floats(0, 10), st.booleans())
def test_gradient_gain_is_half_eq7_minus_parent(g: np.ndarray, h: np.ndarray, lam: float,
                                                second: bool) -> None:
    crit = GradientGain(reg_lambda=lam, second_order=second)
    n = np.array([5.0, 5.0])
    d = h.sum(axis=1) if second else n
    left = np.array([n[0], g[0].sum(), h[0].sum()])
    right = np.array([n[1], g[1].sum(), h[1].sum()])
    parent = left + right
    u = eq7_score(g[0].sum(), d[0], g[1].sum(), d[1], lam)
    want = 0.5 * (u - parent[1] ** 2 / (d.sum() + lam))
    assert crit.gain(parent, left, right) == pytest.approx(want, rel=1e-9, abs=1e-9)
    assert crit.leaf_value(left)[0] == pytest.approx(float(eq8_leaf_value(g[0].sum(), d[0], lam)))


def test_first_order_known_answer() -> None:
    """HybridTree Eq. 7/8 with counts: G_L = -3 over 2 samples, G_R = 1 over 1, λ = 1."""
    assert eq7_score(-3.0, 2.0, 1.0, 1.0, 1.0) == pytest.approx(9 / 3 + 1 / 2)
    assert eq8_leaf_value(-3.0, 2.0, 1.0) == pytest.approx(1.0)
    crit = GradientGain(reg_lambda=1.0, second_order=False)
    assert crit.gain(np.array([3.0, -2.0, 9.0]), np.array([2.0, -3.0, 9.0]),
                     np.array([1.0, 1.0, 0.0])) == pytest.approx(0.5 * (3.5 - 4 / 4))


def test_purity() -> None:
    assert Gini().is_pure(np.array([0.0, 3.0, 0.0]))
    assert not Gini().is_pure(np.array([1.0, 3.0, 0.0]))
    assert SquaredError().is_pure(np.array([3.0, 6.0, 12.0]))
    assert not SquaredError().is_pure(np.array([2.0, 1.0, 5.0]))


def test_vectorised_over_leading_axes() -> None:
    c = np.arange(24, dtype=float).reshape(2, 3, 4)
    np.testing.assert_allclose(Gini().cost(c), [[Gini().cost(c[i, j]) for j in range(3)]
                                                for i in range(2)])


def test_unknown_criterion_and_bad_lambda() -> None:
    with pytest.raises(ParameterError):
        make_criterion("hinge")
    with pytest.raises(ParameterError):
        GradientGain(reg_lambda=-1.0)
    assert make_criterion("mse").name == "squared_error"
