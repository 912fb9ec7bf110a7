"""Test-only helper: reassemble the full trees from the active party's trees and every passive
party's lookup table (something no party can do in a run; the exactness tests compare the
result with the central reference GBDT)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from securetrees.protocols.secureboost.active import TreeRecord
from securetrees.protocols.secureboost.passive import PassiveParty
from securetrees.trees import Tree

__all__ = ["joined_tree"]


def joined_tree(record: TreeRecord, passives: Sequence[PassiveParty], n_active_features: int) -> Tree:
    """The full tree with features numbered in the partition order (active columns first, then
    each passive party's), thresholds of passive splits taken from their owners' tables."""
    t = record.tree
    feature, threshold = t.feature.copy(), t.threshold.copy()
    categorical, withheld, missing_left = t.categorical.copy(), t.withheld.copy(), t.missing_left.copy()
    offsets = np.cumsum([n_active_features, *[p.table_width for p in passives]])
    for node, rec in record.records.items():
        owner = int(t.provider[node])
        row = passives[owner - 1].table[rec]
        feature[node] = int(offsets[owner - 1]) + row.feature
        threshold[node] = row.threshold
        categorical[node] = row.categorical
        missing_left[node] = row.missing_left
        withheld[node] = False
    return Tree(t.n_features, t.left.copy(), t.right.copy(), feature, threshold, categorical,
                missing_left, t.provider.copy(), withheld, t.weight.copy(), t.value.copy())
