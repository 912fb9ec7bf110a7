"""SecureBoost's known leak, measured: from what it receives, the active party reconstructs the
instance space of every passive party's split (which of its training rows go left, which right),
and, as it chose the split's bucket, which rows lie at or below a bucket of that passive feature.
It still learns no passive threshold or feature value (``test_views.py``, with planted leaks).

The check compares the reconstruction with the true partition, computed from the joined trees
(``securetrees.protocols.secureboost.testing.joined_tree``, which no party can build); its
companion shows the comparison fails when the reconstruction misses a single row."""

from __future__ import annotations

from typing import Any

import numpy as np

from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.secureboost.testing import joined_tree
from securetrees.trees import Tree
from tests.secureboost.conftest import PARTITION, make, vertical_data

Partition = dict[tuple[int, int], frozenset[int]]
"""(tree, node) → the training rows sent left at that passive split."""


def _reaching(tree: Tree, X: np.ndarray) -> dict[int, set[int]]:
    """Node → the rows whose path passes through it."""
    n = X.shape[0]
    out: dict[int, set[int]] = {0: set(range(n))}
    rows, pos = np.arange(n), np.zeros(n, dtype=np.int64)
    while rows.size:
        inner = tree.left[pos] >= 0
        rows, pos = rows[inner], pos[inner]
        if not rows.size:
            break
        go = tree.goes_left(X[rows, tree.feature[pos]], pos)
        pos = np.where(go, tree.left[pos], tree.right[pos])
        for node in np.unique(pos).tolist():
            out.setdefault(node, set()).update(rows[pos == node].tolist())
    return out


def true_partition(model: Any, X: np.ndarray) -> Partition:
    """Every passive split's left rows, from the joined trees (the test's view of everything)."""
    assert model.active_.model is not None
    order = [c for cols in PARTITION for c in cols]
    out: Partition = {}
    for t, rec in enumerate(model.active_.model.trees):
        tree = joined_tree(rec, model.passives_, len(PARTITION[0]))
        reach = _reaching(tree, X[:, order])
        for node in rec.records:
            out[(t, node)] = frozenset(reach[node] & reach[int(tree.left[node])])
    return out


def active_reconstruction(model: Any) -> Partition:
    """What the active party holds after training: each split reply's left rows, keyed by the
    record id its own trees keep for that node (its view and its own state only)."""
    assert model.active_.model is not None
    by_record: dict[tuple[str, int], frozenset[int]] = {}
    for r in model.network_.transcript.view("active"):
        if r.type_name == "secureboost.split_reply":
            for rec, left in zip(r.payload.records, r.payload.left, strict=True):
                by_record[(r.sender, int(rec))] = frozenset(np.asarray(left).tolist())
    out: Partition = {}
    for t, rec in enumerate(model.active_.model.trees):
        for node, record in rec.records.items():
            owner = int(rec.tree.provider[node])
            out[(t, node)] = by_record[(f"passive{owner}", record)]
    return out


def _fit(keys: tuple[PublicKey, PrivateKey]) -> tuple[Any, np.ndarray]:
    X, y = vertical_data()
    return make("reg", PARTITION, keys, n_estimators=3).fit(X, y), X


def test_active_party_reconstructs_every_passive_split(keypair: tuple[PublicKey, PrivateKey]) -> None:
    model, X = _fit(keypair)
    truth = true_partition(model, X)
    got = active_reconstruction(model)
    assert len(truth) >= 5  # passive parties own several splits
    assert got == truth  # SecureBoost's known leak: exact instance spaces at passive splits
    # the active party also knows the passive feature (its local index) and the bucket of each split
    orders = [o for r in model.network_.transcript.view("passive1") + model.network_.transcript.view("passive2")
              if r.type_name == "secureboost.split_request" for o in r.payload.orders]
    assert len(orders) == len(truth) and all(o.bin >= 0 and o.feature >= 0 for o in orders)


def test_the_reconstruction_check_fails_on_a_single_missing_row(keypair: tuple[PublicKey, PrivateKey]) -> None:
    """Companion: a reconstruction that lacks one row of one split is not taken for the truth."""
    model, X = _fit(keypair)
    got = dict(active_reconstruction(model))
    key = next(k for k, v in got.items() if v)
    got[key] = frozenset(sorted(got[key])[1:])
    assert got != true_partition(model, X)
