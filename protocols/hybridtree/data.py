"""The pinned hybrid split of Adult used by the demo and the benchmark (paper Section 5.1, C.1).

The host holds a seeded random subset of the columns for every row, in the
paper's proportion (Table 5: 102 of 123 features, here of Adult's 14 raw
columns); the guests share the remaining columns and hold disjoint, equal,
random subsets of the rows (train and test alike).  Everything is drawn from
``numpy.random.default_rng(seed)``: machine-learning randomness, not secrets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError

__all__ = ["ADULT_SEED", "HybridSplit", "hybrid_split"]

IntArray = npt.NDArray[np.int64]
TABLE5_HOST_FRACTION = 102 / 123
#: The pinned seed of the demo and benchmark split (see ``specs/hybridtree.md``, "Adult split").
ADULT_SEED = 1


@dataclass(frozen=True)
class HybridSplit:
    host_features: list[int]
    guest_features: list[int]
    train_rows: list[IntArray]
    test_rows: list[IntArray]


def hybrid_split(
    n_features: int, n_train: int, n_test: int, *, n_guests: int = 5, seed: int = 0,
    host_fraction: float = TABLE5_HOST_FRACTION, linked: Sequence[Sequence[int]] = (),
) -> HybridSplit:
    """Columns: ``round(host_fraction·d)`` (at least 1, at most d-1) to the host, chosen by a
    seeded permutation; rows: a seeded permutation cut into ``n_guests`` equal parts.

    ``linked`` lists sets of columns that encode one attribute (Adult's ``education`` and
    ``education-num``): a set with a column on the guests' side goes to the guests whole, so
    the host never holds a recoding of a guest column (the host must keep one column)."""
    if n_features < 2 or n_guests < 1 or not 0.0 < host_fraction < 1.0:
        raise ParameterError("need >= 2 features, >= 1 guest and 0 < host_fraction < 1")
    rng = np.random.default_rng(seed)
    k = min(n_features - 1, max(1, round(host_fraction * n_features)))
    cols = rng.permutation(n_features)
    host, guest = sorted(cols[:k].tolist()), sorted(cols[k:].tolist())
    for group in linked:
        members = {int(c) for c in group}
        if not members <= set(range(n_features)):
            raise ParameterError("a linked column is out of range")
        if members & set(guest):
            host = [c for c in host if c not in members]
            guest = sorted(set(guest) | members)
    if not host:
        raise ParameterError("the linked columns leave the host no column")

    def cut(n: int) -> list[IntArray]:
        return [np.sort(part).astype(np.int64) for part in np.array_split(rng.permutation(n), n_guests)]

    return HybridSplit(host, guest, cut(n_train), cut(n_test))
