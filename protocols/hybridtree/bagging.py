"""Multi-host HybridTree by bagging (paper Appendix C.2; ``specs/hybridtree.md``).

Each host trains its own HybridTree with the guests that hold its instances (a
separate protocol run per host, with its own key and masks); prediction bags
the models: the mean for regression, max-voting for classification (the
paper's rule; ``predict_proba`` gives the mean of the hosts' probabilities).
It adds no protocol step: every host's run is the single-host protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import NotFittedError, ParameterError
from securetrees.protocols.hybridtree.estimators import HybridTreeClassifier, HybridTreeRegressor, with_guest_column

__all__ = ["HybridTreeBagging"]

IntArray = npt.NDArray[np.int64]


def _restrict(rows: IntArray, guest_rows: Sequence[npt.ArrayLike]) -> list[IntArray]:
    """Each guest's rows among ``rows``, renumbered as positions in ``rows``."""
    out = []
    for r in guest_rows:
        keep = np.intersect1d(np.asarray(r, dtype=np.int64), rows)
        out.append(np.searchsorted(rows, keep).astype(np.int64))
    return out


class HybridTreeBagging:
    """One HybridTree per host; ``host_rows[j]`` are the rows host ``j`` holds (disjoint or not).

    ``kind`` is ``"classifier"`` or ``"regressor"``; ``params`` go to every host's estimator.
    Guests without rows of a host do not take part in that host's run.
    """

    def __init__(self, kind: str = "classifier", **params: Any) -> None:
        if kind not in ("classifier", "regressor"):
            raise ParameterError("kind must be 'classifier' or 'regressor'")
        self.kind = kind
        self.params = params

    def fit(
        self, X: npt.ArrayLike, y: npt.ArrayLike, host_rows: Sequence[npt.ArrayLike],
        host_features: Sequence[int], guest_features: Sequence[int],
        guest_rows: Sequence[npt.ArrayLike],
    ) -> HybridTreeBagging:
        Xa, ya = np.asarray(X, dtype=np.float64), np.asarray(y)
        if len(host_rows) == 0:
            raise ParameterError("at least one host is needed")
        cls = HybridTreeClassifier if self.kind == "classifier" else HybridTreeRegressor
        self.models_: list[tuple[IntArray, HybridTreeClassifier | HybridTreeRegressor]] = []
        for rows in host_rows:
            r = np.unique(np.asarray(rows, dtype=np.int64))
            if r.size == 0 or r.min() < 0 or r.max() >= Xa.shape[0]:
                raise ParameterError("host_rows must be non-empty sets of existing rows")
            sub = [g for g in _restrict(r, guest_rows) if g.size]
            model = cls(**{**self.params, "host_features": list(host_features),
                           "guest_features": list(guest_features), "guest_column": -1})
            model.fit(with_guest_column(Xa[r], sub), ya[r])
            self.models_.append((r, model))
        if self.kind == "classifier":
            self.classes_ = np.unique(ya)
        return self

    def _each(self, X: npt.ArrayLike, guest_rows: Sequence[npt.ArrayLike], proba: bool) -> list[Any]:
        if not hasattr(self, "models_"):
            raise NotFittedError("fit the model before predicting")
        Xa = with_guest_column(X, guest_rows)
        out = []
        for _, model in self.models_:
            if proba and isinstance(model, HybridTreeClassifier):
                p = model.predict_proba(Xa)
                full = np.zeros((Xa.shape[0], self.classes_.size))
                full[:, np.searchsorted(self.classes_, model.classes_)] = p
                out.append(full)
            else:
                out.append(model.predict(Xa))
        return out

    def predict_proba(self, X: npt.ArrayLike, guest_rows: Sequence[npt.ArrayLike]) -> npt.NDArray[Any]:
        """Mean of the hosts' class probabilities (classification only)."""
        if self.kind != "classifier":
            raise ParameterError("predict_proba needs kind='classifier'")
        return np.asarray(np.mean(self._each(X, guest_rows, True), axis=0))

    def predict(self, X: npt.ArrayLike, guest_rows: Sequence[npt.ArrayLike]) -> npt.NDArray[Any]:
        """Mean (regression) or max-vote of the hosts' predicted classes (ties: lowest class)."""
        preds = self._each(X, guest_rows, False)
        if self.kind == "regressor":
            return np.asarray(np.mean(preds, axis=0))
        codes = np.stack([np.searchsorted(self.classes_, p) for p in preds])
        votes = np.apply_along_axis(np.bincount, 0, codes, minlength=self.classes_.size)
        return np.asarray(self.classes_[np.argmax(votes, axis=0)])
