"""Loaders for the data shipped with securetrees (UCI Adult; see ``securetrees/data/ATTRIBUTION.md``).

:func:`load_adult` returns the official train/test split as float matrices:
numeric features as floats; categorical features as integer codes, where the
code of a value is its index in ``categories[name]``, the sorted list of the
values that occur in either file; ``?`` is missing (NaN).  Labels: ``>50K`` = 1,
``<=50K`` = 0 (the test file's trailing periods and its first comment line are
handled).  The sha256 of each uncompressed file is checked before parsing.
"""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from importlib import resources

import numpy as np
import numpy.typing as npt

from securetrees.errors import DecodeError

__all__ = ["ADULT_FEATURES", "AdultData", "load_adult"]

ADULT_SHA256 = {
    "adult.data": "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
    "adult.test": "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
}
#: (name, is_categorical) in file order; the 15th column is the label.
ADULT_FEATURES: tuple[tuple[str, bool], ...] = (
    ("age", False), ("workclass", True), ("fnlwgt", False), ("education", True),
    ("education-num", False), ("marital-status", True), ("occupation", True),
    ("relationship", True), ("race", True), ("sex", True), ("capital-gain", False),
    ("capital-loss", False), ("hours-per-week", False), ("native-country", True),
)
_LABELS = {">50K": 1, "<=50K": 0}


@dataclass(frozen=True, eq=False)
class AdultData:
    """The Adult split: ``X_*`` float (NaN missing, categorical as codes), ``y_*`` in {0, 1}."""

    X_train: npt.NDArray[np.float64]
    y_train: npt.NDArray[np.int64]
    X_test: npt.NDArray[np.float64]
    y_test: npt.NDArray[np.int64]
    feature_names: tuple[str, ...]
    categorical: npt.NDArray[np.bool_]
    categories: dict[str, tuple[str, ...]]


def _read(name: str) -> list[list[str]]:
    raw = gzip.decompress((resources.files("securetrees") / "data" / f"{name}.gz").read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != ADULT_SHA256[name]:
        raise DecodeError(f"{name}: sha256 {digest} does not match the shipped data")
    rows = []
    for line in raw.decode("ascii").splitlines():
        if not line.strip() or line.startswith("|"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(ADULT_FEATURES) + 1:
            raise DecodeError(f"{name}: a row has {len(fields)} fields")
        rows.append(fields)
    return rows


def load_adult() -> AdultData:
    """The shipped UCI Adult data, official split (32,561 training and 16,281 test rows)."""
    train, test = _read("adult.data"), _read("adult.test")
    categories: dict[str, tuple[str, ...]] = {}
    for j, (name, is_cat) in enumerate(ADULT_FEATURES):
        if is_cat:
            seen = {r[j] for r in train} | {r[j] for r in test}
            categories[name] = tuple(sorted(seen - {"?"}))

    def convert(rows: list[list[str]]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        X = np.empty((len(rows), len(ADULT_FEATURES)), dtype=np.float64)
        for j, (name, is_cat) in enumerate(ADULT_FEATURES):
            col = [r[j] for r in rows]
            if is_cat:
                index = {v: float(i) for i, v in enumerate(categories[name])}
                X[:, j] = [np.nan if v == "?" else index[v] for v in col]
            else:
                X[:, j] = [np.nan if v == "?" else float(v) for v in col]
        try:
            y = np.array([_LABELS[r[-1].rstrip(".")] for r in rows], dtype=np.int64)
        except KeyError as exc:
            raise DecodeError(f"unknown Adult label {exc}") from None
        return X, y

    X_train, y_train = convert(train)
    X_test, y_test = convert(test)
    return AdultData(
        X_train=X_train, y_train=y_train, X_test=X_test, y_test=y_test,
        feature_names=tuple(n for n, _ in ADULT_FEATURES),
        categorical=np.array([c for _, c in ADULT_FEATURES], dtype=bool),
        categories=categories,
    )
