"""Split criteria, vectorised over any leading axes of a statistics array.

Spec: ``specs/trees.md`` section "Criteria".  Every criterion works on a node's
*sufficient statistics* (last axis), so a protocol that computed the statistics
itself (class counts, gradient sums) scores candidates with the same code:

- classification: weighted class counts ``c[0..C-1]``;
- regression (MSE): ``(w, Σ w·y, Σ w·y²)``;
- gradient boosting: ``(n, G, H)`` (count, gradient sum, hessian sum).

``cost(s)`` is the node's weighted impurity (lower is better), and
``gain(parent, left, right) = cost(parent) - cost(left) - cost(right)``.
RevFRF Appendix B's garbled Gini is replaced by weighted Gini and weighted MSE
(``specs/trees.md``, "Criteria"); the boosting score is HybridTree Appendix B, Eq. 7, and the
leaf value Eq. 8.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError

__all__ = [
    "Criterion",
    "Entropy",
    "Gini",
    "GradientGain",
    "SquaredError",
    "eq7_score",
    "eq8_leaf_value",
    "gain_is_cost_difference",
    "make_criterion",
]

FloatArray = npt.NDArray[np.float64]


class Criterion(Protocol):
    """What the grower and the protocols need from a criterion."""

    @property
    def name(self) -> str: ...

    def cost(self, stats: FloatArray) -> FloatArray: ...

    def gain(self, parent: FloatArray, left: FloatArray, right: FloatArray) -> FloatArray: ...

    def weight(self, stats: FloatArray) -> FloatArray: ...

    def is_pure(self, stats: FloatArray) -> npt.NDArray[np.bool_]: ...

    def leaf_value(self, stats: FloatArray) -> FloatArray: ...


class _Base:
    name = ""

    def cost(self, stats: FloatArray) -> FloatArray:
        raise NotImplementedError

    def gain(self, parent: FloatArray, left: FloatArray, right: FloatArray) -> FloatArray:
        """Decrease of the weighted impurity: ``cost(parent) - cost(left) - cost(right)``."""
        return self.cost(parent) - self.cost(left) - self.cost(right)


def _sum_last(a: FloatArray) -> FloatArray:
    """``a.sum(axis=-1)``; as slice additions when the axis is short (much faster in numpy)."""
    if a.shape[-1] > 8:
        return np.asarray(a.sum(axis=-1), dtype=np.float64)
    out: FloatArray = a[..., 0].copy()
    for k in range(1, a.shape[-1]):
        out += a[..., k]
    return out


def _safe_div(num: FloatArray, den: FloatArray) -> FloatArray:
    """``num / den`` where ``den > 0``, else 0."""
    if np.all(den > 0):
        return np.asarray(num / den, dtype=np.float64)
    out = np.zeros(np.broadcast_shapes(num.shape, den.shape), dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


class Gini(_Base):
    """Weighted Gini impurity ``n·(1 - Σ p_k²) = n - Σ c_k² / n`` over class counts."""

    name = "gini"

    def cost(self, stats: FloatArray) -> FloatArray:
        n = _sum_last(stats)
        return np.asarray(n - _safe_div(_sum_last(stats * stats), n), dtype=np.float64)

    def weight(self, stats: FloatArray) -> FloatArray:
        return _sum_last(stats)

    def is_pure(self, stats: FloatArray) -> npt.NDArray[np.bool_]:
        return np.asarray(np.count_nonzero(stats > 0, axis=-1) <= 1)

    def leaf_value(self, stats: FloatArray) -> FloatArray:
        """The class counts themselves (the forest normalises them per tree)."""
        return np.asarray(stats, dtype=np.float64)


class Entropy(Gini):
    """Weighted entropy in bits ``n·H(p) = n·log2 n - Σ c_k·log2 c_k``."""

    name = "entropy"

    def cost(self, stats: FloatArray) -> FloatArray:
        n = _sum_last(stats)
        with np.errstate(divide="ignore", invalid="ignore"):
            c_log_c = np.where(stats > 0, stats * np.log2(np.where(stats > 0, stats, 1.0)), 0.0)
            n_log_n = np.where(n > 0, n * np.log2(np.where(n > 0, n, 1.0)), 0.0)
        return np.asarray(n_log_n - _sum_last(c_log_c), dtype=np.float64)


class SquaredError(_Base):
    """Weighted MSE times weight: ``Σ w·y² - (Σ w·y)² / Σ w`` over ``(w, Σwy, Σwy²)``."""

    name = "squared_error"

    def cost(self, stats: FloatArray) -> FloatArray:
        w, s, s2 = stats[..., 0], stats[..., 1], stats[..., 2]
        return np.asarray(s2 - _safe_div(s * s, w), dtype=np.float64)

    def weight(self, stats: FloatArray) -> FloatArray:
        return np.asarray(stats[..., 0], dtype=np.float64)

    def is_pure(self, stats: FloatArray) -> npt.NDArray[np.bool_]:
        scale = np.maximum(np.abs(stats[..., 2]), 1e-300)
        return np.asarray(self.cost(stats) <= 1e-12 * scale)

    def leaf_value(self, stats: FloatArray) -> FloatArray:
        return _safe_div(stats[..., 1], stats[..., 0])[..., None]


def eq7_score(g_left: FloatArray, d_left: FloatArray, g_right: FloatArray, d_right: FloatArray,
              lam: float) -> FloatArray:
    """HybridTree Eq. 7: ``U = G_L²/(D_L+λ) + G_R²/(D_R+λ)``.

    ``D`` is the count ``|I|`` in the paper's first-order form, or the hessian
    sum ``H`` in the second-order (XGBoost) form.
    """
    return np.asarray(g_left**2 / (d_left + lam) + g_right**2 / (d_right + lam), dtype=np.float64)


def eq8_leaf_value(g: FloatArray, d: FloatArray, lam: float) -> FloatArray:
    """HybridTree Eq. 8: ``V = -G / (D + λ)`` with ``D`` as in :func:`eq7_score`."""
    return np.asarray(-g / (d + lam), dtype=np.float64)


@dataclass(frozen=True)
class GradientGain(_Base):
    """Boosting criterion over ``(n, G, H)``: ``cost = -½·G²/(D+λ)``, ``D = H`` or ``n``.

    So ``gain = ½·(U - G²/(D+λ))`` with ``U`` from Eq. 7, the standard
    second-order gain without a per-leaf penalty.  ``second_order=False`` is
    the paper's first-order form (``D = |I|``).
    """

    reg_lambda: float = 1.0
    second_order: bool = True
    name: str = "gradient"

    def __post_init__(self) -> None:
        if not (self.reg_lambda >= 0 and np.isfinite(self.reg_lambda)):
            raise ParameterError("reg_lambda must be finite and >= 0")

    def _denominator(self, stats: FloatArray) -> FloatArray:
        return np.asarray(stats[..., 2] if self.second_order else stats[..., 0], dtype=np.float64)

    def cost(self, stats: FloatArray) -> FloatArray:
        g = stats[..., 1]
        return -0.5 * _safe_div(g * g, self._denominator(stats) + self.reg_lambda)

    def weight(self, stats: FloatArray) -> FloatArray:
        return np.asarray(stats[..., 0], dtype=np.float64)

    def is_pure(self, stats: FloatArray) -> npt.NDArray[np.bool_]:
        return np.asarray(stats[..., 0] < 2)

    def leaf_value(self, stats: FloatArray) -> FloatArray:
        d = self._denominator(stats) + self.reg_lambda
        return _safe_div(-stats[..., 1], d)[..., None]


def gain_is_cost_difference(criterion: Criterion) -> bool:
    """Is ``criterion.gain(p, l, r)`` exactly ``cost(p) - cost(l) - cost(r)`` with a cost
    made of correctly rounded arithmetic only (Gini, squared error, gradient; not entropy,
    whose logarithm numpy may evaluate differently on arrays of different lengths)?  Then
    a split search may compute each node's cost once and get the same numbers."""
    return isinstance(criterion, (Gini, SquaredError, GradientGain)) and not isinstance(criterion, Entropy) \
        and type(criterion).gain is _Base.gain


def make_criterion(name: str) -> Criterion:
    """``"gini"``, ``"entropy"`` or ``"squared_error"`` (alias ``"mse"``)."""
    table: dict[str, Criterion] = {
        "gini": Gini(), "entropy": Entropy(), "squared_error": SquaredError(), "mse": SquaredError(),
    }
    if name not in table:
        raise ParameterError(f"unknown criterion {name!r}")
    return table[name]
