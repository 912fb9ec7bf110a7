"""The shipped Adult data (securetrees.datasets)."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees import datasets
from securetrees.errors import DecodeError


@pytest.fixture(scope="module")
def adult() -> datasets.AdultData:
    return datasets.load_adult()


def test_official_split_shapes_and_labels(adult: datasets.AdultData) -> None:
    assert adult.X_train.shape == (32561, 14) and adult.X_test.shape == (16281, 14)
    assert set(np.unique(adult.y_train)) == {0, 1} == set(np.unique(adult.y_test))
    assert adult.y_train.sum() == 7841 and adult.y_test.sum() == 3846  # >50K rows
    assert len(adult.feature_names) == 14 and adult.categorical.sum() == 8


def test_first_rows_decode(adult: datasets.AdultData) -> None:
    # adult.data row 1: 39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical,
    # Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K
    row = adult.X_train[0]
    cats = adult.categories
    assert row[[0, 2, 4, 10, 11, 12]].tolist() == [39, 77516, 13, 2174, 0, 40]
    assert cats["workclass"][int(row[1])] == "State-gov"
    assert cats["native-country"][int(row[13])] == "United-States"
    assert adult.y_train[0] == 0
    # adult.test row 1 (after the comment line): 25, Private, ..., <=50K.
    assert adult.X_test[0, 0] == 25 and cats["workclass"][int(adult.X_test[0, 1])] == "Private"


def test_missing_values_and_category_codes(adult: datasets.AdultData) -> None:
    names = list(adult.feature_names)
    missing = np.isnan(adult.X_train).sum(axis=0)
    assert {names[i] for i in np.flatnonzero(missing)} == {
        "workclass", "occupation", "native-country"}
    assert missing[names.index("workclass")] == 1836
    for j in np.flatnonzero(adult.categorical):
        values = adult.categories[names[j]]
        assert list(values) == sorted(values) and "?" not in values
        col = np.concatenate([adult.X_train[:, j], adult.X_test[:, j]])
        col = col[~np.isnan(col)]
        assert col.min() >= 0 and col.max() == len(values) - 1


def test_checksum_mismatch_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(datasets.ADULT_SHA256, "adult.test", "0" * 64)
    with pytest.raises(DecodeError):
        datasets.load_adult()
