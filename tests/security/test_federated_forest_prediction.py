"""Federated Forest prediction in ``encrypted`` mode gives the master no output from which leaf
values, and so training labels, follow (``specs/federated_forest.md``, "What the attacks measure";
helpers in ``securetrees.protocols.federated_forest.attacks``).

Every fit here is deterministic (seeded data and draws, every party's secret randomness from a
``DeterministicRandom``), so each figure is one fixed number and no check can flake.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.attacks import (
    PREDICTION_KNOWN,
    majority_rate,
    outputs_at,
    outputs_to_master,
    prediction_fit,
    prediction_report,
)
from securetrees.rand import DeterministicRandom

SEED = 2
MASTER_MARGIN = 0.05  # the master labels at most the majority-class rate + this (issue 26 part 1)
# Stated in the spec with the figures of `python -m securetrees.protocols.federated_forest.attacks`
# (seeds 1-5): the spreading attack labels 0.711-0.800 of the other 270 samples from 30 known labels,
# a client's own-column kNN 0.326-0.367.  This seed's figures (0.711, 0.367) stay inside that range.
COOCCURRENCE = (0.70, 0.81)
KNN_BASELINE = 0.40


def _fit() -> tuple[Any, np.ndarray]:
    ff, y, _ = prediction_fit(SEED, rng=DeterministicRandom(f"ff-labels/{SEED}"))
    return ff, y


@pytest.fixture(scope="module")
def fitted() -> tuple[Any, np.ndarray]:
    return _fit()


def _at_master(ff: Any) -> list[Any]:
    return [r for r in ff.transcript_ if "master" in (r.sender, r.receiver)]


def test_the_master_sees_no_output_and_labels_no_better_than_the_majority_guess(
        fitted: tuple[Any, np.ndarray]) -> None:
    ff, y = fitted
    handed = [r for r in _at_master(ff) if isinstance(r.payload, m.TestLeaves)]
    n_test = handed[-1].payload.leaves.shape[1]
    assert outputs_at(_at_master(ff), "master", n_test, ff.master_.n_outputs) == []
    report = prediction_report(ff, y)
    assert report["least_squares_now"] <= majority_rate(y) + MASTER_MARGIN
    assert report["leaf_average_now"] <= majority_rate(y) + MASTER_MARGIN


def test_planted_leak_a_master_handed_the_outputs_labels_the_training_set() -> None:
    """The step before the fix (``outputs_to_master``): the label holder answers the master the
    output; the master's least-squares attack then labels the training set."""
    with outputs_to_master():
        ff, y = _fit()
    report = prediction_report(ff, y)
    assert report["outputs_at_master"] == 1
    assert report["least_squares_now"] > majority_rate(y) + MASTER_MARGIN
    assert report["least_squares_now"] == report["least_squares_before"]  # the kept output, as handed


def test_the_spreading_attack_stays_at_its_stated_size(fitted: tuple[Any, np.ndarray]) -> None:
    """The co-occurrence leak the spec states (not closed by this protocol): from the partitions
    alone and 30 known labels, inside the stated range, and above the own-column baseline."""
    ff, y = fitted
    report = prediction_report(ff, y)
    assert PREDICTION_KNOWN == 30
    assert COOCCURRENCE[0] <= report["cooccurrence"] <= COOCCURRENCE[1]
    assert report["knn_own_columns"] <= KNN_BASELINE < COOCCURRENCE[0]
