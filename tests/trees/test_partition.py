"""Vertical partitions (securetrees.trees.partition), shared by RevFRF and Federated Forest."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.errors import ParameterError
from securetrees.trees import check_partition


def test_valid_partition_keeps_the_given_order() -> None:
    assert check_partition([[2, 0], [np.int64(1)]], 3) == [[2, 0], [1]]


def test_featureless_party_only_where_allowed() -> None:
    assert check_partition([[0, 1, 2], []], 3, allow_empty=True) == [[0, 1, 2], []]
    with pytest.raises(ParameterError):
        check_partition([[0, 1, 2], []], 3)


@pytest.mark.parametrize(
    ("partition", "min_parties"),
    [
        ([], 1),
        ([[0, 1, 2]], 2),  # too few parties
        ([[0, 1], []], 1),  # an empty party
        ([[0, 1], [1, 2]], 1),  # a column given twice
        ([[0, 1]], 1),  # a column given to nobody
        ([[0, 3], [1, 2]], 1),  # out of range
        ([[0, True], [1, 2]], 1),  # not an index
        ("012", 1),
    ],
)
def test_bad_partitions_raise(partition: list[list[int]], min_parties: int) -> None:
    with pytest.raises(ParameterError):
        check_partition(partition, 3, min_parties=min_parties)
