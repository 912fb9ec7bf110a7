"""The paper's evaluation scheme (Section 4), shared by the demo and the benchmark suite.

The data set is dealt into ``n`` roughly equal client subsets, stratified by
label; each client keeps 80 % of its rows for training and 20 % for testing,
again stratified.  The federated forest is compared with each client's *local*
forest (the same algorithm trained on that client's rows alone) on that
client's test set, and with a *central* forest on the joined training rows.
F1 (of the positive class) and AUC are computed here with numpy, so the demo
runs without scikit-learn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.protocols.histogram_forest.classifier import HistogramForestClassifier
from securetrees.protocols.histogram_forest.testing import fit_parts

__all__ = [
    "ClientSplit",
    "ComparisonResult",
    "adult_schema",
    "auc_score",
    "compare_federated_local_central",
    "f1_score",
    "skewed_dataset",
    "stratified_clients",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ClientSplit:
    """One client's rows: its training part and its test part."""

    X_train: FloatArray
    y_train: IntArray
    X_test: FloatArray
    y_test: IntArray


def stratified_clients(
    X: FloatArray, y: IntArray, n_clients: int, *, test_fraction: float = 0.2, seed: int = 0
) -> list[ClientSplit]:
    """Deal the rows of each class round-robin (after a shuffle) to ``n_clients`` clients, then split
    each client's rows of each class into test (the first ``test_fraction``) and training rows."""
    if n_clients < 1 or not 0.0 < test_fraction < 1.0:
        raise ParameterError("need n_clients >= 1 and 0 < test_fraction < 1")
    gen = np.random.default_rng(seed)
    train_idx: list[list[int]] = [[] for _ in range(n_clients)]
    test_idx: list[list[int]] = [[] for _ in range(n_clients)]
    for label in np.unique(y):
        rows = gen.permutation(np.flatnonzero(y == label))
        offset = int(gen.integers(n_clients))
        for c in range(n_clients):
            mine = rows[(c + offset) % n_clients :: n_clients]
            cut = round(test_fraction * mine.size)
            test_idx[c] += mine[:cut].tolist()
            train_idx[c] += mine[cut:].tolist()
    out = []
    for c in range(n_clients):
        tr, te = gen.permutation(train_idx[c]), gen.permutation(test_idx[c])
        out.append(ClientSplit(X[tr], y[tr], X[te], y[te]))
    return out


def skewed_dataset(n: int, *, seed: int = 0) -> tuple[FloatArray, IntArray]:
    """A binary task whose signal lies in the bulk of heavy-tailed features (spec "Bin edges").

    With ``z_1 .. z_4`` standard normal, ``e`` standard exponential and ``v`` standard normal, all
    independent: ``x0 = exp(1.5·z_1)`` (log-normal), ``x1 = exp(z_2)`` (log-normal), ``x2 = e``
    (exponential), ``x3 = exp(2·z_3)`` (log-normal, no signal), ``x4 = z_4`` (normal, no signal); the
    label is ``1[2.5·z_1 - 2·z_2 + 1.5·(e - 1) + v > 0]``.  Equal-width bins over ``[min, max]`` of
    ``x0`` put nearly every row in the first bins (its maximum is hundreds of times its median), so
    uniform edges lose the splits that quantile edges keep.
    """
    if n < 2:
        raise ParameterError("n must be >= 2")
    gen = np.random.default_rng(seed)
    z = gen.standard_normal((n, 4))
    e = gen.standard_exponential(n)
    v = gen.standard_normal(n)
    X = np.column_stack([np.exp(1.5 * z[:, 0]), np.exp(z[:, 1]), e, np.exp(2.0 * z[:, 2]), z[:, 3]])
    y = (2.5 * z[:, 0] - 2.0 * z[:, 1] + 1.5 * (e - 1.0) + v > 0).astype(np.int64)
    return X.astype(np.float64), y


def f1_score(y_true: npt.ArrayLike, y_pred: npt.ArrayLike, positive: int = 1) -> float:
    """F1 of the positive class (0 when there is no true or predicted positive)."""
    t, p = np.asarray(y_true) == positive, np.asarray(y_pred) == positive
    tp = float(np.sum(t & p))
    denom = float(np.sum(t) + np.sum(p))
    return 0.0 if denom == 0 else 2.0 * tp / denom


def auc_score(y_true: npt.ArrayLike, score: npt.ArrayLike, positive: int = 1) -> float:
    """Area under the ROC curve by the rank statistic (ties get average ranks)."""
    t = np.asarray(y_true) == positive
    s = np.asarray(score, dtype=np.float64)
    n_pos, n_neg = int(t.sum()), int((~t).sum())
    if n_pos == 0 or n_neg == 0:
        raise ParameterError("AUC needs both classes in y_true")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(s.size, dtype=np.float64)
    sorted_s = s[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_s[1:] != sorted_s[:-1])))
    ends = np.concatenate((starts[1:], [s.size]))
    for a, b in zip(starts, ends, strict=True):
        ranks[order[a:b]] = (a + b + 1) / 2.0  # average of the 1-based ranks a+1 .. b
    return float((ranks[t].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def adult_schema(
    X: FloatArray, categorical: Sequence[bool], categories: Sequence[int] | None = None
) -> dict[str, object]:
    """The public schema of Adult for the facade: the categorical mask, declared ranges, and (when
    ``categories`` gives the number of documented values of each categorical feature) the category
    counts and the classes {0, 1}, which DP requires to be declared.

    The ranges are the attributes' documented domains rounded outward (age 0-100, hours 0-100,
    education-num 0-20, capital gain 0-100 000, capital loss 0-5 000, fnlwgt 0-1 600 000);
    they are public knowledge, not read from the data (they are checked to cover it, and the
    category codes to lie below the declared counts).
    """
    declared = {0: (0.0, 100.0), 2: (0.0, 1_600_000.0), 4: (0.0, 20.0), 10: (0.0, 100_000.0),
                11: (0.0, 5_000.0), 12: (0.0, 100.0)}
    ranges: list[tuple[float, float] | None] = []
    for f, cat in enumerate(categorical):
        if cat:
            ranges.append(None)
            continue
        lo, hi = declared[f]
        col = X[:, f]
        if np.nanmin(col) < lo or np.nanmax(col) > hi:
            raise ParameterError(f"declared range of feature {f} does not cover the data")
        ranges.append((lo, hi))
    schema: dict[str, object] = {"categorical": list(categorical), "feature_ranges": ranges}
    if categories is not None:
        counts = [int(k) for k in categories]
        if len(counts) != len(ranges) or any((k >= 2) != bool(c) for k, c in zip(counts, categorical, strict=True)):
            raise ParameterError("categories must give k >= 2 for each categorical feature and 0 otherwise")
        for f, k in enumerate(counts):
            if k and np.nanmax(X[:, f]) >= k:
                raise ParameterError(f"feature {f} holds codes beyond its {k} declared values")
        schema["categories"] = counts
        schema["classes"] = [0, 1]
    return schema


@dataclass(frozen=True)
class ComparisonResult:
    """Per client: F1 and AUC on its own test set of the federated and of its local forest;
    accuracy on the union of test sets of the federated and the central forest."""

    n_clients: int
    federated_f1: tuple[float, ...]
    local_f1: tuple[float, ...]
    federated_auc: tuple[float, ...]
    local_auc: tuple[float, ...]
    federated_accuracy: float
    central_accuracy: float


def compare_federated_local_central(
    splits: Sequence[ClientSplit],
    make_model: Callable[[], HistogramForestClassifier],
    *,
    central: bool = True,
) -> ComparisonResult:
    """Fit the federated forest on all clients, a local forest per client, and (optionally) a central
    forest on the joined training rows, all with the same parameters (``make_model()``)."""
    federated = fit_parts(make_model(), [(s.X_train, s.y_train) for s in splits])
    fed_f1: list[float] = []
    loc_f1: list[float] = []
    fed_auc: list[float] = []
    loc_auc: list[float] = []
    for s in splits:
        local = fit_parts(make_model(), [(s.X_train, s.y_train)])
        for model, f1s, aucs in ((federated, fed_f1, fed_auc), (local, loc_f1, loc_auc)):
            proba = model.predict_proba(s.X_test)
            f1s.append(f1_score(s.y_test, model.classes_[np.argmax(proba, axis=1)]))
            aucs.append(auc_score(s.y_test, proba[:, 1]))
    X_test = np.vstack([s.X_test for s in splits])
    y_test = np.concatenate([s.y_test for s in splits])
    fed_acc = float(np.mean(federated.predict(X_test) == y_test))
    cen_acc = float("nan")
    if central:
        X_all = np.vstack([s.X_train for s in splits])
        joined = fit_parts(make_model(), [(X_all, np.concatenate([s.y_train for s in splits]))])
        cen_acc = float(np.mean(joined.predict(X_test) == y_test))
    return ComparisonResult(
        len(splits), tuple(fed_f1), tuple(loc_f1), tuple(fed_auc), tuple(loc_auc), fed_acc, cen_acc
    )
