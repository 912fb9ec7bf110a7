"""Ties are impossible by construction (``specs/revfrf.md``, "Thresholds no value can tie"):
each provider moves its threshold to the middle of the column's grid cell in the middle of its
training gap, so a value on the grid never equals it and the CC that spots ties
(:func:`~securetrees.protocols.revfrf.attack.tie_guess_rate`) guesses the path bit at 1/2.
Planted leak: the paper's thresholds left where the splitter put them (on the integer grid
the bin edges of ``splitter="bins"``,
which are integers for integer data): the same attack guesses above 1/2."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np
import pytest

from securetrees.protocols.revfrf.attack import neighbour_comparisons, tie_guess_rate
from securetrees.protocols.revfrf.defaults import DEFAULT_CODEC, DEFAULT_HOLT
from securetrees.protocols.revfrf.thresholds import ColumnGrid

from ..revfrf.helpers import PARTITION, classifier, make_data

GRID = 1 << DEFAULT_CODEC.frac_bits  # integer data: one unit is 2^-f
SETTINGS: dict[str, Any] = {"splitter": "bins", "max_bins": 16, "code_resolution": None, "n_estimators": 10,
                            "max_depth": 6}
"""16 quantile bins: edges on the integers (percentiles of integer data)."""


@contextmanager
def uncentred() -> Iterator[None]:
    """Planted leak: thresholds stay where the splitter put them."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ColumnGrid, "centre", lambda self, s: s)
        yield


def tie_rate(variant: Any) -> tuple[float, int]:
    X, y = make_data()
    with variant():
        clf = classifier(**SETTINGS).set_params(partition=PARTITION).fit(X, y)
    pairs = neighbour_comparisons(clf.plaintext_forest(), make_data(seed=9)[0], DEFAULT_CODEC, GRID)
    return tie_guess_rate(pairs, GRID, DEFAULT_HOLT.spread), sum(m == 1 for m, _ in pairs)


def test_no_value_on_the_grid_ties_a_threshold() -> None:
    rate, ties = tie_rate(nullcontext)
    assert ties == 0
    assert rate == 0.5


def test_planted_thresholds_on_the_grid_let_the_cc_spot_ties() -> None:
    rate, ties = tie_rate(uncentred)
    assert ties > 0
    assert rate > 0.53


def test_centred_thresholds_sit_mid_cell_and_keep_the_split() -> None:
    grid = ColumnGrid.fit(np.array([0.0, 2.0, 3.0, 7.0, np.nan]), DEFAULT_CODEC)
    assert grid.step == GRID
    assert [grid.centre(s) for s in (0.0, 2.5, 3.0, 6.99)] == [1.5, 2.5, 5.5, 5.5]
    assert grid.centre(-1.0) == -1.0 and grid.centre(7.0) == 7.0 and grid.centre(np.inf) == np.inf
    fine = ColumnGrid.fit(np.array([0.25, 0.5, 1.75]), DEFAULT_CODEC)
    assert fine.step == GRID // 4 and fine.centre(0.3) == 0.375 and fine.centre(0.5) == 1.125
