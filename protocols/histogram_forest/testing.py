"""Simulation helpers for the histogram forest: fit a facade on one ``(X_i, y_i)`` part per client."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from securetrees.protocols.histogram_forest.facade import HistogramForestBase, Part, stack_parts

__all__ = ["fit_parts"]

Model = TypeVar("Model", bound=HistogramForestBase)


def fit_parts(model: Model, parts: Sequence[Part], **fit_kw: Any) -> Model:
    """``model`` fitted on ``parts`` (one ``(X_i, y_i)`` pair per client): the rows stacked by
    :func:`stack_parts` with the client index as the last column, named by ``client_column=-1``.
    The fitted model predicts from the feature columns alone."""
    model.set_params(client_column=-1).fit(*stack_parts(parts), **fit_kw)
    return model
