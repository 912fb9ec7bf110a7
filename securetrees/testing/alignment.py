"""The one-process reference of a PSI-aligned deployment: every party's aligned tables joined.

After a deployment's run each data holder has written its row indices in the agreed order
(``securetrees.net.alignment.rows_path``); joining every party's aligned columns gives the
table a one-process estimator must be fitted on to reproduce the deployment (tests and
benchmarks only: no real party ever holds the others' columns)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import ProtocolError
from securetrees.net.alignment import aligned_tables
from securetrees.net.config import RunConfig

__all__ = ["JoinedView", "joined_view"]


@dataclass(frozen=True)
class JoinedView:
    ids: tuple[str, ...]
    X: npt.NDArray[np.float64]
    X_test: npt.NDArray[np.float64]
    y: npt.NDArray[np.str_]
    categorical: list[bool]


def joined_view(config: RunConfig, parties: Sequence[str], partition: Sequence[Sequence[int]], d: int
                ) -> JoinedView:
    """``parties[i]`` holds the global columns ``partition[i]`` (a party beyond the partition
    holds labels only); raises :class:`ProtocolError` if their agreed orders differ."""
    X = X_test = None
    ids: tuple[str, ...] | None = None
    y = None
    categorical = [False] * d
    for i, name in enumerate(parties):
        cols = list(partition[i]) if i < len(partition) else []
        train, test = aligned_tables(config, name)
        if ids is not None and train.ids != ids:
            raise ProtocolError(f"{name}'s rows are not in the agreed order")
        ids = train.ids
        if train.labels is not None:
            y = train.labels.astype(str)
        if not cols:
            continue
        if X is None:
            X, X_test = np.empty((len(train), d)), np.empty((len(test) if test is not None else 0, d))
        X[:, cols] = train.X
        if test is not None and X_test is not None:
            X_test[:, cols] = test.X
        for j, c in zip(cols, train.schema.categorical_mask(), strict=True):
            categorical[j] = c
    if X is None or X_test is None or y is None or ids is None:
        raise ProtocolError("no party holds features, or none holds labels")
    return JoinedView(ids, X, X_test, y, categorical)
