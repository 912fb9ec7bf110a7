"""Binning of features into small integer codes, and the candidate thresholds they define.

Spec: ``specs/trees.md`` section "Binning".  A numeric feature with edges
``e[0] < ... < e[k-1]`` maps ``x`` to the bin ``b`` with ``e[b-1] < x <= e[b]``
(``searchsorted(e, x, side="left")``), so the candidate split "bin <= b" is the
threshold test ``x <= e[b]``.  A categorical feature holds integer codes, and the
bin is the code itself.  Missing values (NaN) go to the shared bin
``max_bins`` (the last slot of every histogram).

- ``quantile``: edges at the midpoints between consecutive distinct training values
  when there are at most ``max_bins`` of them (exact search, as scikit-learn's
  trees), otherwise midpoint quantiles of the training values (histogram forest,
  HybridTree).
- ``uniform``: ``max_bins`` equal-width bins over a declared range per feature.
  With declared ranges the edges do not depend on the data, which differentially
  private histograms need (histogram forest Section 3.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError

__all__ = ["BinMapper", "quantile_edges", "uniform_edges"]

FloatArray = npt.NDArray[np.float64]
MAX_BINS_LIMIT = 65535


def quantile_edges(values: npt.ArrayLike, max_bins: int) -> FloatArray:
    """Edges of at most ``max_bins`` bins from the non-missing ``values`` (data-dependent)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    distinct = np.unique(x)
    if distinct.size <= max_bins:
        return np.asarray((distinct[:-1] + distinct[1:]) / 2.0, dtype=np.float64)
    qs = np.linspace(0.0, 100.0, max_bins + 1)[1:-1]
    edges = np.unique(np.percentile(x, qs, method="midpoint"))
    # An edge equal to the maximum would leave the last bin empty.
    return np.asarray(edges[edges < distinct[-1]], dtype=np.float64)


def uniform_edges(low: float, high: float, n_bins: int) -> FloatArray:
    """Edges of ``n_bins`` equal-width bins over ``[low, high]`` (data-independent)."""
    if not (np.isfinite(low) and np.isfinite(high)) or not low < high:
        raise ParameterError(f"uniform bins need a finite range low < high, got [{low}, {high}]")
    if n_bins < 1:
        raise ParameterError("n_bins must be >= 1")
    k = np.arange(1, n_bins, dtype=np.float64)
    return np.asarray(low + (high - low) * k / n_bins, dtype=np.float64)


@dataclass(frozen=True)
class BinMapper:
    """Fitted binning of every feature: edges for numeric, category counts for categorical.

    ``edges[f]`` is empty for a categorical feature; ``n_bins[f]`` is the number of
    real (non-missing) bins of feature ``f``; ``missing_bin == max_bins`` for all.
    """

    max_bins: int
    categorical: tuple[bool, ...]
    edges: tuple[FloatArray, ...]
    n_bins: tuple[int, ...]

    @property
    def missing_bin(self) -> int:
        return self.max_bins

    @property
    def n_features(self) -> int:
        return len(self.categorical)

    @classmethod
    def fit(
        cls,
        X: npt.ArrayLike,
        *,
        max_bins: int = 255,
        strategy: str = "quantile",
        categorical: Sequence[bool] | None = None,
        ranges: Sequence[tuple[float, float] | None] | None = None,
    ) -> BinMapper:
        """Choose the bins of each column of ``X`` (NaN = missing).

        ``ranges`` (for ``strategy="uniform"``) declares ``(low, high)`` per feature;
        ``None`` for a feature falls back to the data's range, which is then
        data-dependent.  Categorical columns must hold integer codes ``0..max_bins-1``.
        """
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2:
            raise ParameterError("X must be 2-dimensional")
        if not 2 <= max_bins <= MAX_BINS_LIMIT:
            raise ParameterError(f"max_bins must be in [2, {MAX_BINS_LIMIT}]")
        if strategy not in ("quantile", "uniform"):
            raise ParameterError(f"unknown binning strategy {strategy!r}")
        n_features = Xa.shape[1]
        cat = tuple(bool(c) for c in categorical) if categorical is not None else (False,) * n_features
        if len(cat) != n_features:
            raise ParameterError("categorical mask length differs from the number of features")
        if ranges is not None and len(ranges) != n_features:
            raise ParameterError("ranges length differs from the number of features")
        edges: list[FloatArray] = []
        n_bins: list[int] = []
        for f in range(n_features):
            col = Xa[:, f]
            if cat[f]:
                codes = col[~np.isnan(col)]
                check_category_codes(codes, max_bins)
                edges.append(np.empty(0, dtype=np.float64))
                n_bins.append(int(codes.max()) + 1 if codes.size else 1)
                continue
            if strategy == "quantile":
                e = quantile_edges(col, max_bins)
            else:
                declared = ranges[f] if ranges is not None else None
                if declared is None:
                    present = col[~np.isnan(col)]
                    if present.size == 0 or present.min() == present.max():
                        e = np.empty(0, dtype=np.float64)
                    else:
                        e = uniform_edges(float(present.min()), float(present.max()), max_bins)
                else:
                    e = uniform_edges(float(declared[0]), float(declared[1]), max_bins)
            edges.append(e)
            n_bins.append(int(e.size) + 1)
        return cls(max_bins=max_bins, categorical=cat, edges=tuple(edges), n_bins=tuple(n_bins))

    @property
    def dtype(self) -> type[np.unsignedinteger[npt.NBitBase]]:
        return np.uint8 if self.max_bins <= 255 else np.uint16  # type: ignore[return-value]

    def transform(self, X: npt.ArrayLike) -> npt.NDArray[np.unsignedinteger[npt.NBitBase]]:
        """Bin codes of ``X``: shape ``(n_samples, n_features)``, missing as ``missing_bin``."""
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[1] != self.n_features:
            raise ParameterError(f"X must have shape (n, {self.n_features})")
        out = np.empty(Xa.shape, dtype=self.dtype)
        for f in range(self.n_features):
            col = Xa[:, f]
            missing = np.isnan(col)
            if self.categorical[f]:
                check_category_codes(col[~missing], self.max_bins)
                b = np.where(missing, 0, col).astype(np.int64)
            else:
                b = np.searchsorted(self.edges[f], np.where(missing, 0.0, col), side="left")
            out[:, f] = np.where(missing, self.missing_bin, b)
        return out

    @cached_property
    def _threshold_table(self) -> FloatArray:
        """``table[f, b]`` = :meth:`threshold` ``(f, b)`` for every real bin ``b``."""
        table = np.full((self.n_features, self.max_bins + 1), np.inf)
        for f in range(self.n_features):
            if self.categorical[f]:
                table[f] = np.arange(self.max_bins + 1, dtype=np.float64)
            else:
                table[f, : self.edges[f].size] = self.edges[f]
        return table

    def thresholds(self, features: npt.NDArray[np.int64], bins: npt.NDArray[np.int64]) -> FloatArray:
        """:meth:`threshold` of many (feature, bin) pairs at once."""
        return np.asarray(self._threshold_table[features, bins], dtype=np.float64)

    def threshold(self, feature: int, bin_index: int) -> float:
        """The raw-value threshold of the candidate split "bin <= ``bin_index``".

        Numeric: ``edges[bin]``, or ``+inf`` for the last bin (a split that separates
        only the missing values).  Categorical: the category code (test ``x == code``).
        """
        if self.categorical[feature]:
            return float(bin_index)
        e = self.edges[feature]
        return float(e[bin_index]) if bin_index < e.size else float("inf")


def check_category_codes(codes: npt.NDArray[np.float64], max_bins: int) -> None:
    """Raise ParameterError unless every code is an integer in ``[0, max_bins)``."""
    if codes.size and (
        np.any(codes < 0) or np.any(codes >= max_bins) or np.any(codes != np.floor(codes))
    ):
        raise ParameterError(f"categorical values must be integer codes in [0, {max_bins})")
