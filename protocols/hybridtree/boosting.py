"""The host's boosting arithmetic (``specs/hybridtree.md``, "One boosting round", step H1).

Everything here runs at the host, on its labels and scores only: the targets and
base score from the labels, each round's gradients and hessians from the current
scores, and the progress events the host reports while it trains.  Nothing here
is sent: the gradients leave the host only encrypted (step H3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.progress import Progress

__all__ = ["FitProgress", "Loss", "Targets", "gradients", "probabilities", "sigmoid", "softmax", "targets"]

FloatArray = npt.NDArray[np.float64]
Loss = Literal["logistic", "squared"]


def sigmoid(x: FloatArray) -> FloatArray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)), dtype=np.float64)


def softmax(x: FloatArray) -> FloatArray:
    z = np.exp(x - x.max(axis=1, keepdims=True))
    return np.asarray(z / z.sum(axis=1, keepdims=True), dtype=np.float64)


def probabilities(raw: FloatArray) -> FloatArray:
    """Class probabilities from raw scores: ``(n,)`` scores of two classes (sigmoid) or
    ``(n, K)`` of K classes (softmax)."""
    if raw.ndim == 1:
        p = sigmoid(raw)
        return np.column_stack([1.0 - p, p])
    return softmax(raw)


@dataclass(frozen=True)
class Targets:
    """The host's labels as regression targets: one column per output (one tree per output and
    round), the base score per output, and the class labels (``None`` for regression)."""

    target: FloatArray
    base: FloatArray
    classes: npt.NDArray[np.generic] | None

    @property
    def n_outputs(self) -> int:
        return int(self.target.shape[1])


def targets(y: npt.ArrayLike, n: int, loss: Loss, base_score: Literal["prior", "zero"]) -> Targets:
    """Targets and base score (the class prior's log-odds / the mean, or zero as Algorithm 1
    line 2).  Logistic loss: one output for two classes, one per class (softmax) for more.
    Reveals nothing: the labels stay at the host."""
    if base_score not in ("prior", "zero"):
        raise ParameterError("base_score must be 'prior' or 'zero'")
    ya = np.asarray(y)
    if ya.shape != (n,):
        raise ParameterError("y must have one value per row of X")
    if ya.dtype.kind == "f" and np.isnan(ya).any():
        raise ParameterError("y holds NaN")
    if loss == "squared":
        yf = ya.astype(np.float64)
        if not np.isfinite(yf).all():
            raise ParameterError("y must be finite")
        return Targets(yf[:, None], np.array([yf.mean() if base_score == "prior" else 0.0]), None)
    if loss != "logistic":
        raise ParameterError("loss must be 'logistic' or 'squared'")
    classes, codes = np.unique(ya, return_inverse=True)
    k = classes.size
    if k < 2:
        raise ParameterError("classification needs at least two classes")
    onehot = np.zeros((n, k))
    onehot[np.arange(n), codes] = 1.0
    prior = np.clip(onehot.mean(axis=0), 1e-12, 1.0)
    if k == 2:
        logit = np.log(prior[1] / prior[0])
        return Targets(onehot[:, 1:], np.array([logit if base_score == "prior" else 0.0]), classes)
    return Targets(onehot, np.log(prior) if base_score == "prior" else np.zeros(k), classes)


def gradients(raw: FloatArray, target: FloatArray, loss: Loss) -> tuple[FloatArray, FloatArray]:
    """H1: per instance and output, ``g`` and ``h`` of the loss at the current scores ``raw``
    (logistic: ``p - y`` and ``p(1 - p)``; squared: ``ŷ - y`` and 1).  Host only."""
    if loss == "logistic":
        p = sigmoid(raw) if raw.shape[1] == 1 else softmax(raw)
        return p - target, p * (1.0 - p)
    return raw - target, np.ones_like(raw)


@dataclass(frozen=True)
class FitProgress:
    """One progress event of the host's training: tree ``tree`` (0-based) of ``n_trees`` is at
    ``step`` (``"host layers"``, ``"encrypting"``, ``"gradients sent"``, ``"guest layer"``,
    ``"tree done"``); ``done``/``total`` count the step's units (encryptions, or the layer
    number out of ``guest_depth``; 1/1 otherwise)."""

    tree: int
    n_trees: int
    step: str
    done: int = 1
    total: int = 1

    def describe(self) -> str:
        unit = f" {self.done}/{self.total}" if self.total > 1 else ""
        return f"tree {self.tree + 1}/{self.n_trees}: {self.step}{unit}"

    @staticmethod
    def shown_on(display: Progress) -> Callable[[FitProgress], None]:
        """A :meth:`Host.fit` progress callback that moves ``display`` (a
        :class:`securetrees.progress.Progress` over the trees): finished trees as its count, the
        current step as its note."""

        def show(event: FitProgress) -> None:
            display.advance_to(event.tree + (1 if event.step == "tree done" else 0), event.describe())

        return show
