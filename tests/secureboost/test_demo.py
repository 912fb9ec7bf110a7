"""The demo runs end to end (small Adult slice, 1024-bit key) and reports the same trees as the
reference; categorical columns reach both kinds of party."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.errors import InsecureParameterWarning, ParameterError
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.secureboost.demo import adult_partition, main
from tests.secureboost.conftest import PARTITION, make


def test_demo_runs_and_matches_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.warns(InsecureParameterWarning):
        assert main(["--rows", "300", "--trees", "1", "--depth", "2", "--key-bits", "1024"]) == 0
    out = capsys.readouterr().out
    assert "same split features: True" in out


def test_demo_partition_covers_every_column_once() -> None:
    for u in (1, 2, 3):
        cols = sorted(c for part in adult_partition(u) for c in part)
        assert cols == list(range(14))


def test_categorical_columns_split_by_category(data: tuple[np.ndarray, np.ndarray],
                                              keypair: tuple[PublicKey, PrivateKey]) -> None:
    X, y = data
    X = X.copy()
    X[:, 1] = np.where(np.isnan(X[:, 1]), np.nan, (X[:, 1] > 0).astype(float) + (X[:, 1] > 1))
    X[:, 3] = np.where(np.isnan(X[:, 3]), np.nan, np.floor(np.abs(X[:, 3]) * 2) % 4)
    y = y + 3 * (X[:, 3] == 2)
    fitted = make("reg", PARTITION, keypair, categorical_features=[1, 3]).fit(X, y)
    tables = [row for p in fitted.passives_ for row in p.table]
    assert any(row.categorical for row in tables)
    with pytest.raises(ParameterError):
        make("reg", PARTITION, keypair, categorical_features=[9]).fit(X, y)
