"""Will a DP forest learn anything?  The noise against the counts, from public parameters only.

Spec: ``specs/histogram_forest.md``, "When DP leaves nothing to learn".  Before any row is read, the
facade compares the noise every count will carry with the count it is added to.  A split is chosen
from one class's rows on one side of a cut: about ``w·n / (2^ℓ · 2K)`` rows at depth ℓ (``n`` rows,
mean row weight ``w`` of the sampling, ``K`` classes, a cut near the median), summed over about
``b/2`` bins, each bin holding the sum of every client's two-sided geometric noise (variance
``2α/(1−α)²`` per client, ``α = exp(−ε_release/Δ)``).  The ratio of that count to the standard
deviation of its noise is the *signal-to-noise ratio* of layer ℓ; below 1 at the root, the first split
is chosen by the noise and the forest predicts near chance.

Everything here is arithmetic on public settings (ε, trees, depth, row count, bins, sampling, features
per node, clients, classes): nothing is read from the clients' data and nothing is released.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from securetrees.errors import ParameterError
from securetrees.protocols.histogram_forest.accountant import budget_split, layer_sensitivity
from securetrees.protocols.histogram_forest.mechanisms import check_epsilon
from securetrees.protocols.histogram_forest.sampling import dp_row_law
from securetrees.protocols.histogram_forest.server import ForestConfig
from securetrees.schema import Column

__all__ = ["MIN_SIGNAL_TO_NOISE", "DPUsefulnessWarning", "ranges_example", "signal_to_noise", "suggest_forest",
           "warn_if_useless"]

MIN_SIGNAL_TO_NOISE = 1.0
"""Below this ratio at the root the first split is picked by the noise: the model is near chance."""


class DPUsefulnessWarning(UserWarning):
    """The DP noise will drown the counts: the forest will predict near chance (see
    :func:`suggest_forest` for trees and depth that fit the budget)."""


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name} must be a positive int, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class _Setting:
    """The public parameters the estimate needs (checked)."""

    epsilon: float
    n_rows: int
    n_bins: int
    features_per_node: int
    n_clients: int
    n_classes: int
    sampling: str
    subsample_fraction: float
    max_multiplicity: int
    grid: bool

    def ratio(self, n_trees: int, max_depth: int, layer: int) -> float:
        law = dp_row_law(self.sampling, self.subsample_fraction, self.max_multiplicity)
        pmf = law.pmf()
        mean_weight = float(np.dot(np.arange(pmf.size), pmf))
        delta = layer_sensitivity(law.max_weight, self.features_per_node)
        _, eps = budget_split(self.epsilon, n_trees, max_depth, grid=self.grid)
        alpha = math.exp(-eps / delta)
        variance = self.n_clients * 2.0 * alpha / (1.0 - alpha) ** 2  # every client adds its own noise
        noise = math.sqrt(variance * max(1.0, self.n_bins / 2))
        signal = mean_weight * self.n_rows / (2.0 ** layer * 2 * self.n_classes)
        return signal / noise


def _setting(epsilon: float, n_rows: int, *, n_bins: int, features_per_node: int, n_clients: int, n_classes: int,
             sampling: str, subsample_fraction: float, max_multiplicity: int, grid: bool) -> _Setting:
    return _Setting(check_epsilon(epsilon), _positive_int("n_rows", n_rows), _positive_int("n_bins", n_bins),
                    _positive_int("features_per_node", features_per_node), _positive_int("n_clients", n_clients),
                    _positive_int("n_classes", n_classes), sampling, float(subsample_fraction),
                    _positive_int("max_multiplicity", max_multiplicity), bool(grid))


def signal_to_noise(epsilon: float, n_rows: int, *, n_trees: int, max_depth: int, layer: int = 0, n_bins: int = 32,
                    features_per_node: int = 1, n_clients: int = 3, n_classes: int = 2, sampling: str = "bootstrap",
                    subsample_fraction: float = 0.632, max_multiplicity: int = 3, grid: bool = False) -> float:
    """The expected count that decides a split at depth ``layer`` over the standard deviation of its
    noise (module docstring), from public parameters only; below :data:`MIN_SIGNAL_TO_NOISE` at the
    root (``layer=0``) the forest predicts near chance."""
    s = _setting(epsilon, n_rows, n_bins=n_bins, features_per_node=features_per_node, n_clients=n_clients,
                 n_classes=n_classes, sampling=sampling, subsample_fraction=subsample_fraction,
                 max_multiplicity=max_multiplicity, grid=grid)
    return s.ratio(_positive_int("n_trees", n_trees), _positive_int("max_depth", max_depth), int(layer))


def suggest_forest(epsilon: float, n_rows: int, *, n_bins: int = 32, features_per_node: int = 1, n_clients: int = 3,
                   n_classes: int = 2, sampling: str = "bootstrap", subsample_fraction: float = 0.632,
                   max_multiplicity: int = 3, grid: bool = False, max_trees: int = 50,
                   max_depth: int = 10) -> dict[str, int]:
    """Trees and depth for budget ``epsilon`` on ``n_rows`` rows (over all clients): the deepest
    forest whose last split layer keeps a signal-to-noise ratio of at least
    :data:`MIN_SIGNAL_TO_NOISE`, then the most trees (up to ``max_trees``) that keep it.  Returns
    ``{"n_estimators": T, "max_depth": D}`` for :class:`HistogramForestClassifier`; raises
    :class:`ParameterError` when even one stump is below the ratio (more rows, a larger ε, fewer bins or
    ``sampling="none"`` would help).  The other arguments are the classifier's settings of the same
    names (``features_per_node``: ``max_features`` resolved; ``grid``: quantile bin edges)."""
    s = _setting(epsilon, n_rows, n_bins=n_bins, features_per_node=features_per_node, n_clients=n_clients,
                 n_classes=n_classes, sampling=sampling, subsample_fraction=subsample_fraction,
                 max_multiplicity=max_multiplicity, grid=grid)
    return _suggest(s, _positive_int("max_trees", max_trees), _positive_int("max_depth", max_depth))


def _suggest(s: _Setting, max_trees: int, max_depth: int) -> dict[str, int]:
    for depth in range(max_depth, 0, -1):
        trees = [t for t in range(1, max_trees + 1) if s.ratio(t, depth, depth - 1) >= MIN_SIGNAL_TO_NOISE]
        if trees:
            return {"n_estimators": max(trees), "max_depth": depth}
    raise ParameterError(
        f"with epsilon={s.epsilon} and {s.n_rows} rows even one tree of depth 1 is decided by the noise "
        f"(signal-to-noise {s.ratio(1, 1, 0):.2f} < {MIN_SIGNAL_TO_NOISE}); more rows, a larger epsilon, fewer "
        "bins or sampling='none' would help")


def warn_if_useless(config: ForestConfig, *, n_rows: int, n_clients: int) -> None:
    """Before training (local, nothing sent): a :class:`DPUsefulnessWarning` when the histogram noise
    of ``config`` leaves the root split a signal-to-noise ratio below :data:`MIN_SIGNAL_TO_NOISE`; the
    message quotes the ratio and :func:`suggest_forest`'s trees and depth."""
    if config.epsilon is None or config.task != "classification":
        return
    s = _setting(config.epsilon, n_rows, n_bins=config.n_bins, features_per_node=config.features_per_node,
                 n_clients=n_clients, n_classes=config.n_classes, sampling=config.sampling,
                 subsample_fraction=config.subsample_fraction, max_multiplicity=config.max_multiplicity,
                 grid=config.grid_cells > 0)
    ratio = s.ratio(config.n_trees, config.max_depth, 0)
    if ratio >= MIN_SIGNAL_TO_NOISE:
        return
    try:
        hint = "suggest_forest gives " + ", ".join(f"{k}={v}" for k, v in _suggest(s, 50, 10).items())
    except ParameterError as exc:
        hint = str(exc)
    warnings.warn(DPUsefulnessWarning(
        f"epsilon={config.epsilon} over {config.n_trees} trees of depth {config.max_depth} on {n_rows} rows: the "
        f"noise of every count is larger than the counts that choose the first split (signal-to-noise "
        f"{ratio:.3f} < {MIN_SIGNAL_TO_NOISE}), so the forest will predict near chance; {hint}"), stacklevel=4)


def ranges_example(columns: Sequence[Column], categories: Sequence[int]) -> str:
    """An example of ``feature_ranges`` for these feature columns (placeholders for the bounds, None for a
    categorical column), for the error that asks for them."""
    items = ["None" if k else "(0.0, 100.0)" for k in categories]
    names = ", ".join(f"{c.name}{' (categorical)' if k else ''}" for c, k in zip(columns, categories, strict=True))
    return f"feature_ranges=[{', '.join(items)}] for the columns {names}, with each column's public bounds"
