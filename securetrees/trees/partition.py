"""Vertical partitions: which party holds which feature columns.

A partition is a list with one column-index list per party (RevFRF's participants,
Federated Forest's clients).  It is valid when every column of ``[0, n_features)``
appears in exactly one list and there are at least ``min_parties`` lists; a list may be
empty only where the protocol allows a featureless party (Federated Forest's label
holder standing in for a master that holds the labels).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from securetrees.errors import ParameterError

__all__ = ["check_partition"]


def check_partition(
    partition: Sequence[Sequence[int]], n_features: int, *, min_parties: int = 1, party: str = "party",
    allow_empty: bool = False,
) -> list[list[int]]:
    """The column lists as ``int`` lists, in the order given; :class:`ParameterError` otherwise.

    ``party`` names a party in the error messages ("participant", "client").
    """
    if isinstance(partition, (str, bytes)) or len(partition) < max(min_parties, 1):
        raise ParameterError(f"partition must list the columns of at least {max(min_parties, 1)} {party}(s)")
    out: list[list[int]] = []
    seen: set[int] = set()
    for cols in partition:
        if isinstance(cols, (str, bytes)) or (not allow_empty and not len(cols)):
            raise ParameterError(f"every {party} owns at least one column")
        row = []
        for c in cols:
            if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 0 <= int(c) < n_features:
                raise ParameterError(f"column {c!r} is not in [0, {n_features})")
            if int(c) in seen:
                raise ParameterError(f"column {int(c)} is given to two {party}s")
            seen.add(int(c))
            row.append(int(c))
        out.append(row)
    if len(seen) != n_features:
        missing = sorted(set(range(n_features)) - seen)
        raise ParameterError(f"columns {missing[:5]} belong to no {party}")
    return out
