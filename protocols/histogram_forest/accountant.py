"""Privacy accounting for the histogram forest (spec: "Differential privacy and its accounting").

Each layer request a client answers with noise is one *release*: every node of
the layer holds disjoint rows (parallel composition), so one release costs
``ε_release`` whatever the number of nodes; layers and trees compose
sequentially, so the total is the sum over releases.  Input perturbation is a
single release of the whole data set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from securetrees.errors import ParameterError, ProtocolError
from securetrees.protocols.histogram_forest.mechanisms import check_epsilon

__all__ = ["GRID_SHARE", "PrivacyAccountant", "Release", "budget_split", "layer_sensitivity", "per_release_epsilon"]


#: Share of the budget spent on the first private round (quantile bin edges), when there is one.
GRID_SHARE = 0.1


@dataclass(frozen=True)
class Release:
    """One noisy release: which tree and layer, its shape, its sensitivity and its ε."""

    tree: int
    layer: int
    nodes: int
    features_per_node: int
    sensitivity: int
    epsilon: float


def layer_sensitivity(max_multiplicity: int, features_per_node: int) -> int:
    """L1 sensitivity of one layer's counts: a row of weight ``m`` adds ``m`` to one cell per feature."""
    if max_multiplicity < 1 or features_per_node < 1:
        raise ParameterError("multiplicity and features per node must be >= 1")
    return max_multiplicity * features_per_node


def per_release_epsilon(epsilon: float, n_trees: int, max_depth: int) -> float:
    """Even split of the total budget over at most ``n_trees · max_depth`` layer releases."""
    eps = check_epsilon(epsilon)
    if n_trees < 1 or max_depth < 1:
        raise ParameterError("a DP forest needs n_trees >= 1 and max_depth >= 1")
    return eps / (n_trees * max_depth)


def budget_split(epsilon: float, n_trees: int, max_depth: int, *, grid: bool) -> tuple[float | None, float]:
    """``(ε of the grid round or None, ε per layer release)``: the grid round takes ``GRID_SHARE`` of
    the budget, the ``n_trees · max_depth`` layer releases share the rest evenly."""
    eps = check_epsilon(epsilon)
    if not grid:
        return None, per_release_epsilon(eps, n_trees, max_depth)
    return GRID_SHARE * eps, per_release_epsilon((1 - GRID_SHARE) * eps, n_trees, max_depth)


@dataclass
class PrivacyAccountant:
    """Sequential composition of releases against a total budget (pure ε-DP)."""

    budget: float
    releases: list[Release] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.budget = check_epsilon(self.budget)

    @property
    def spent(self) -> float:
        """The composed ε of everything released so far."""
        return float(sum(r.epsilon for r in self.releases))

    def charge(self, release: Release) -> None:
        """Record a release; ProtocolError if it would exceed the budget (checked before any noise is sent)."""
        if self.spent + release.epsilon > self.budget * (1 + 1e-9):
            raise ProtocolError(
                f"release of ε={release.epsilon} would exceed the privacy budget {self.budget} "
                f"(already spent {self.spent})"
            )
        self.releases.append(release)
