"""Central reference trainers: a random forest and a GBDT, grown layer by layer.

Spec: ``specs/trees.md`` sections "Random forest", "Gradient boosting" and
"Random-draw order".  These are the plaintext references the federated
protocols are checked against: a protocol that replays :class:`TreeDraws` and
scores candidates with the same criterion on the same statistics grows the same
trees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.progress import progress as progress_bar
from securetrees.trees.binning import BinMapper
from securetrees.trees.criteria import GradientGain, make_criterion
from securetrees.trees.forest import BoostedForest, Forest, sigmoid, softmax
from securetrees.trees.grow import GrowParams, grow_tree
from securetrees.trees.sampling import TreeDraws, resolve_max_features, tree_generators

__all__ = ["BinningParams", "class_stats", "regression_stats", "train_boosted", "train_forest"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class BinningParams:
    """How features are binned (see :class:`BinMapper`)."""

    max_bins: int = 255
    strategy: str = "quantile"
    categorical: Sequence[bool] | None = None
    ranges: Sequence[tuple[float, float] | None] | None = None

    def fit(self, X: FloatArray) -> BinMapper:
        return BinMapper.fit(X, max_bins=self.max_bins, strategy=self.strategy,
                             categorical=self.categorical, ranges=self.ranges)


DEFAULT_BINNING = BinningParams()
FOREST_GROW = GrowParams()
BOOSTING_GROW = GrowParams(max_depth=6, min_samples_leaf=20)


def class_stats(y_codes: IntArray, n_classes: int, weight: FloatArray) -> FloatArray:
    """Per-sample classification statistics: ``weight[i]`` in column ``y_codes[i]``."""
    stats = np.zeros((y_codes.size, n_classes), dtype=np.float64)
    stats[np.arange(y_codes.size), y_codes] = weight
    return stats


def regression_stats(y: FloatArray, weight: FloatArray) -> FloatArray:
    """Per-sample MSE statistics ``(w, w·y, w·y²)``."""
    return np.column_stack([weight, weight * y, weight * y * y])


def train_forest(
    X: FloatArray,
    y: FloatArray | IntArray,
    *,
    n_classes: int | None,
    n_estimators: int = 100,
    criterion: str = "gini",
    grow: GrowParams = FOREST_GROW,
    max_features: int | float | str | None = "sqrt",
    max_features_tree: int | float | str | None = None,
    bootstrap: bool = True,
    binning: BinningParams = DEFAULT_BINNING,
    providers: Sequence[int] | None = None,
    random_state: int | None = None,
    progress: bool = False,
    classes: npt.NDArray[np.generic] | None = None,
    node_keyed_draws: bool = False,
) -> tuple[Forest, BinMapper]:
    """Random forest: ``y`` holds class codes ``0..n_classes-1`` (classification) or
    targets (``n_classes=None``, regression).  Per tree: :class:`TreeDraws` on the
    tree's Generator (bootstrap, per-tree features, then per-node features; with
    ``node_keyed_draws`` each node's features are keyed by its heap index, as Federated
    Forest draws them: ``specs/trees.md``, "Random-draw order")."""
    n_samples, n_features = X.shape
    mapper = binning.fit(X)
    binned = mapper.transform(X)
    crit = make_criterion(criterion)
    is_clf = n_classes is not None
    if is_clf != (crit.name in ("gini", "entropy")):
        raise ParameterError(f"criterion {criterion!r} does not fit this task")
    k_tree = None if max_features_tree is None else resolve_max_features(max_features_tree, n_features)
    k_node = resolve_max_features(max_features, k_tree or n_features)
    trees = []
    gens = tree_generators(random_state, n_estimators)
    for rng in progress_bar(gens, desc="forest", total=n_estimators, enabled=progress):
        draws = TreeDraws(rng, n_samples, n_features, bootstrap=bootstrap,
                          max_features_tree=k_tree, max_features=k_node, node_keyed=node_keyed_draws)
        if n_classes is not None:
            stats = class_stats(np.asarray(y, dtype=np.int64), n_classes, draws.sample_weight)
        else:
            stats = regression_stats(np.asarray(y, dtype=np.float64), draws.sample_weight)
        trees.append(grow_tree(binned, mapper, stats, crit, grow, draws=draws, providers=providers))
    task = "classification" if is_clf else "regression"
    return Forest(tuple(trees), task, classes if is_clf else None), mapper


def train_boosted(
    X: FloatArray,
    y: FloatArray | IntArray,
    *,
    n_classes: int | None,
    n_estimators: int = 100,
    learning_rate: float = 0.1,
    reg_lambda: float = 1.0,
    second_order: bool = True,
    base_score: str = "prior",
    grow: GrowParams = BOOSTING_GROW,
    binning: BinningParams = DEFAULT_BINNING,
    providers: Sequence[int] | None = None,
    progress: bool = False,
    classes: npt.NDArray[np.generic] | None = None,
) -> tuple[BoostedForest, BinMapper]:
    """GBDT (HybridTree Appendix B): per round, gradients ``g`` and hessians ``h`` of the
    loss at the current scores; one tree per output grown on ``(1, g, h)`` with the
    Eq. 7 gain and Eq. 8 leaf values (``second_order=False``: the paper's
    first-order form with counts).  Logistic loss for classification (sigmoid,
    or softmax with one tree per class and round), squared loss for regression.
    ``base_score``: ``"prior"`` (log-odds / log-prior / mean) or ``"zero"`` (as
    HybridTree Algorithm 1 line 2).  Deterministic: no random draws."""
    if not (np.isfinite(learning_rate) and learning_rate > 0):
        raise ParameterError("learning_rate must be positive")
    if n_estimators < 1:
        raise ParameterError("n_estimators must be >= 1")
    if base_score not in ("prior", "zero"):
        raise ParameterError("base_score must be 'prior' or 'zero'")
    mapper = binning.fit(X)
    binned = mapper.transform(X)
    crit = GradientGain(reg_lambda=reg_lambda, second_order=second_order)
    n = X.shape[0]
    if n_classes is None:
        target = np.asarray(y, dtype=np.float64)[:, None]
        base = np.array([target.mean() if base_score == "prior" else 0.0])
    else:
        codes = np.asarray(y, dtype=np.int64)
        onehot = np.zeros((n, n_classes), dtype=np.float64)
        onehot[np.arange(n), codes] = 1.0
        prior = np.clip(onehot.mean(axis=0), 1e-12, 1.0)
        if n_classes == 2:
            target = onehot[:, 1:]
            logit = np.log(prior[1] / prior[0])
            base = np.array([logit if base_score == "prior" else 0.0])
        else:
            target = onehot
            base = np.log(prior) if base_score == "prior" else np.zeros(n_classes)
    k = base.size
    raw = np.tile(base, (n, 1))
    trees = []
    ones = np.ones(n, dtype=np.float64)
    for _ in progress_bar(range(n_estimators), desc="boosting", total=n_estimators,
                      enabled=progress):
        if n_classes is None:
            grad, hess = raw - target, np.ones_like(raw)
        else:
            p = sigmoid(raw) if k == 1 else softmax(raw)
            grad, hess = p - target, p * (1.0 - p)
        for j in range(k):
            stats = np.column_stack([ones, grad[:, j], hess[:, j]])
            tree = grow_tree(binned, mapper, stats, crit, grow, providers=providers)
            raw[:, j] += learning_rate * tree.leaf_values(X)[:, 0]
            trees.append(tree)
    model = BoostedForest(
        tuple(trees), "squared" if n_classes is None else "logistic", base, float(learning_rate),
        classes if n_classes is not None else None,
    )
    return model, mapper
