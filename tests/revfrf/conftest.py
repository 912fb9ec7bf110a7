"""Shared RevFRF fixtures (helpers in ``helpers.py``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from securetrees.protocols.revfrf import RevFRFClassifier

from .helpers import PARTITION, classifier, make_data


@pytest.fixture
def data() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    return make_data()


@pytest.fixture
def fitted(data: tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]) -> RevFRFClassifier:
    X, y = data
    return classifier().set_params(partition=PARTITION).fit(X, y)  # type: ignore[no-any-return]
