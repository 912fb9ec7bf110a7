"""Ensembles of :class:`Tree`: an averaging forest and an additive (boosted) forest.

Spec: ``specs/trees.md`` section "Data model".  A random forest averages the
per-tree class distributions (leaf counts normalised per tree) or the per-tree
regression values.  A boosted forest adds ``learning_rate`` times the leaf
values (HybridTree Eq. 8) to a base score; with ``K`` outputs (multi-class) the
trees of round ``r`` are ``trees[r*K : (r+1)*K]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.trees.tree import Tree

__all__ = ["BoostedForest", "Forest", "sigmoid", "softmax"]

FloatArray = npt.NDArray[np.float64]

TASKS = ("classification", "regression")
LOSSES = ("logistic", "squared")


def sigmoid(z: FloatArray) -> FloatArray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)), dtype=np.float64)


def softmax(z: FloatArray) -> FloatArray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return np.asarray(e / e.sum(axis=1, keepdims=True), dtype=np.float64)


def _check_common(trees: tuple[Tree, ...], classes: npt.NDArray[np.generic] | None) -> None:
    if not trees:
        raise ParameterError("an ensemble needs at least one tree")
    if len({t.n_features for t in trees}) != 1:
        raise ParameterError("all trees of an ensemble must have the same number of features")
    if classes is not None and (classes.ndim != 1 or classes.size < 2):
        raise ParameterError("classes must list at least two labels")


@dataclass(frozen=True, eq=False)
class Forest:
    """An averaging forest; ``classes`` (sorted labels) for classification, None for regression."""

    trees: tuple[Tree, ...]
    task: str
    classes: npt.NDArray[np.generic] | None = None

    def __post_init__(self) -> None:
        _check_common(self.trees, self.classes)
        if self.task not in TASKS:
            raise ParameterError(f"task must be one of {TASKS}")
        want = 1 if self.classes is None else self.classes.size
        if (self.task == "regression") != (self.classes is None):
            raise ParameterError("classification forests need classes, regression forests none")
        if any(t.n_outputs != want for t in self.trees):
            raise ParameterError(f"every tree must have {want} outputs")

    @property
    def n_features(self) -> int:
        return self.trees[0].n_features

    def predict_proba(self, X: npt.ArrayLike) -> FloatArray:
        """Mean over trees of the leaf class distribution."""
        if self.classes is None:
            raise ParameterError("predict_proba needs a classification forest")
        total = np.zeros((np.asarray(X).shape[0], self.classes.size), dtype=np.float64)
        for t in self.trees:
            counts = t.leaf_values(X)
            sums = counts.sum(axis=1, keepdims=True)
            total += np.divide(counts, sums, out=np.zeros_like(counts), where=sums > 0)
        return total / len(self.trees)

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.generic]:
        if self.classes is not None:
            return np.asarray(self.classes[np.argmax(self.predict_proba(X), axis=1)])
        return np.asarray(np.mean([t.leaf_values(X)[:, 0] for t in self.trees], axis=0))

    def partial(self, party: int) -> Forest:
        """Every tree as ``party``'s partial tree (:meth:`Tree.partial`)."""
        return Forest(tuple(t.partial(party) for t in self.trees), self.task, self.classes)


@dataclass(frozen=True, eq=False)
class BoostedForest:
    """``F(x) = base_score + learning_rate · Σ_r tree_r(x)``, per output.

    ``loss="logistic"``: binary (one output, sigmoid) or multi-class (K outputs,
    softmax); ``loss="squared"``: regression.
    """

    trees: tuple[Tree, ...]
    loss: str
    base_score: FloatArray
    learning_rate: float
    classes: npt.NDArray[np.generic] | None = None

    def __post_init__(self) -> None:
        _check_common(self.trees, self.classes)
        if self.loss not in LOSSES:
            raise ParameterError(f"loss must be one of {LOSSES}")
        if (self.loss == "squared") != (self.classes is None):
            raise ParameterError("logistic loss needs classes, squared loss none")
        k = self.n_outputs
        if self.base_score.shape != (k,) or not np.all(np.isfinite(self.base_score)):
            raise ParameterError(f"base_score must be {k} finite numbers")
        if len(self.trees) % k or any(t.n_outputs != 1 for t in self.trees):
            raise ParameterError("a boosted forest holds K single-output trees per round")
        if not (np.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ParameterError("learning_rate must be positive")

    @property
    def n_outputs(self) -> int:
        if self.classes is None or self.classes.size == 2:
            return 1
        return int(self.classes.size)

    @property
    def n_features(self) -> int:
        return self.trees[0].n_features

    def decision_function(self, X: npt.ArrayLike) -> FloatArray:
        """Raw scores ``F(x)``: shape ``(n,)`` for one output, ``(n, K)`` otherwise."""
        k = self.n_outputs
        raw = np.tile(self.base_score, (np.asarray(X).shape[0], 1))
        for i, t in enumerate(self.trees):
            raw[:, i % k] += self.learning_rate * t.leaf_values(X)[:, 0]
        return raw[:, 0] if k == 1 else raw

    def predict_proba(self, X: npt.ArrayLike) -> FloatArray:
        if self.classes is None:
            raise ParameterError("predict_proba needs a classification model")
        raw = self.decision_function(X)
        if self.n_outputs == 1:
            p = sigmoid(raw)
            return np.column_stack([1.0 - p, p])
        return softmax(raw)

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.generic]:
        if self.classes is not None:
            return np.asarray(self.classes[np.argmax(self.predict_proba(X), axis=1)])
        return self.decision_function(X)
