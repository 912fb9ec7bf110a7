"""Cover splits (``specs/federated_forest.md``, "Cover splits"): the random valid candidate,
the cover draws, pruning to the central forest's tree, and the model they leave unchanged."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.protocols.federated_forest.cover import prune, random_valid_splits, reference_ancestor
from securetrees.protocols.federated_forest.testing import mixed_data, small_key_options
from securetrees.rand import DeterministicRandom, RandomSource
from securetrees.trees import Tree

KEY = b"c" * 32


def _options(w: np.ndarray, nb: int, categorical: bool, floor: float) -> set[tuple[int, bool]]:
    """Brute force: every (bin, missing_left) whose two children both weigh at least ``floor``,
    one per distinct partition (numeric: the partition's lowest bin, a non-empty one)."""
    miss = float(w[-1])
    out = set()
    for b in range(nb):
        if w[b] <= 0:
            continue
        left_bins = (np.arange(nb) == b) if categorical else (np.arange(nb) <= b)
        lw = float(w[:nb][left_bins].sum())
        rw = float(w[:nb].sum()) - lw
        sides = (False, True) if miss > 0 else (lw >= rw,)
        for ml in sides:
            a, c = (lw + miss, rw) if (ml and miss > 0) else (lw, rw + miss)
            if a >= floor and c >= floor:
                out.add((b, ml))
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 6), st.integers(1, 3), st.data())
def test_the_random_candidate_is_always_a_valid_one(n_nodes: int, n_slots: int, max_bins: int, msl: int,
                                                    data: st.DataObject) -> None:
    counts = st.integers(0, 3)
    hist = np.asarray(data.draw(st.lists(counts, min_size=n_nodes * n_slots * (max_bins + 1) * 2,
                                         max_size=n_nodes * n_slots * (max_bins + 1) * 2)),
                      dtype=np.float64).reshape(n_nodes, n_slots, max_bins + 1, 2)
    slots = np.asarray(data.draw(st.lists(st.booleans(), min_size=n_nodes * n_slots, max_size=n_nodes * n_slots)),
                       dtype=bool).reshape(n_nodes, n_slots)
    n_bins = np.asarray(data.draw(st.lists(st.integers(1, max_bins), min_size=n_nodes * n_slots,
                                           max_size=n_nodes * n_slots)), dtype=np.int64).reshape(n_nodes, n_slots)
    cat = np.asarray(data.draw(st.lists(st.booleans(), min_size=n_nodes * n_slots, max_size=n_nodes * n_slots)),
                     dtype=bool).reshape(n_nodes, n_slots)
    streams: list[RandomSource] = [DeterministicRandom(f"node{k}") for k in range(n_nodes)]
    found, slot, b, ml = random_valid_splits(hist, slots, n_bins, cat, np.ones(2), float(msl), streams)
    for k in range(n_nodes):
        w = hist[k].sum(axis=-1)
        every = {(j, *o) for j in np.flatnonzero(slots[k]).tolist()
                 for o in _options(w[j], int(n_bins[k, j]), bool(cat[k, j]), float(msl))}
        if found[k]:
            assert (int(slot[k]), int(b[k]), bool(ml[k])) in every
        else:
            assert not every


def test_every_valid_candidate_can_be_drawn() -> None:
    """Uniform over the valid candidates: each one turns up over many streams."""
    w = np.asarray([[2, 0], [0, 0], [1, 1], [0, 3], [1, 0]], dtype=np.float64)  # 4 bins + missing
    hist = np.stack([w, w])[None]  # one node, two slots
    slots = np.asarray([[True, True]])
    n_bins, cat = np.asarray([[4, 4]]), np.asarray([[False, True]])
    want = {(0, *o) for o in _options(w.sum(1), 4, False, 1.0)} | {(1, *o) for o in _options(w.sum(1), 4, True, 1.0)}
    seen = set()
    for i in range(400):
        _, s, b, ml = random_valid_splits(hist, slots, n_bins, cat, np.ones(2), 1.0, [DeterministicRandom(str(i))])
        seen.add((int(s[0]), int(b[0]), bool(ml[0])))
    assert seen == want and len(want) > 4


def _tree() -> tuple[Tree, np.ndarray]:
    """Root split (kept); node 1 a reference leaf with a cover split below; node 2 split (kept)."""
    left = np.asarray([1, 3, 5, -1, -1, -1, -1])
    right = np.asarray([2, 4, 6, -1, -1, -1, -1])
    n = left.size
    internal = left != -1
    t = Tree(3, left, right, np.where(internal, 0, -1), np.where(internal, 0.5, np.nan), np.zeros(n, dtype=bool),
             np.zeros(n, dtype=bool), np.where(internal, 1, -1), np.zeros(n, dtype=bool),
             np.asarray([9.0, 5, 4, 2, 3, 1, 3]), np.arange(2 * n, dtype=np.float64).reshape(n, 2))
    return t, np.asarray([True, True, True, False, False, True, True])


def test_prune_and_reference_ancestor() -> None:
    t, ref = _tree()
    assert reference_ancestor(t, ref).tolist() == [0, 1, 2, 1, 1, 5, 6]
    p = prune(t, ref)
    assert p.left.tolist() == [1, -1, 3, -1, -1] and p.right.tolist() == [2, -1, 4, -1, -1]
    assert p.feature[1] == -1 and np.isnan(p.threshold[1]) and p.provider[1] == -1
    assert np.array_equal(p.value, t.value[[0, 1, 2, 5, 6]]) and np.array_equal(p.weight, t.weight[[0, 1, 2, 5, 6]])


def test_cover_splits_happen_and_leave_the_model_unchanged() -> None:
    """Encrypted mode grows cover subtrees (clients see them) that the model drops: the pruned
    trees equal the ``shared`` run's, whose master knows nothing to hide."""
    X, y, cat = mixed_data(150, seed=4, n_classes=3)
    runs = {}
    for mode in ("encrypted", "shared"):
        ff = FederatedForestClassifier(3, max_depth=5, random_state=3, categorical_features=cat, label_protection=mode,
                                       rng=DeterministicRandom("same id key"), **small_key_options())
        ff.set_params(partition=[[0, 2, 4], [1, 3, 5]]).fit(X, y)
        runs[mode] = ff
    enc = runs["encrypted"]
    holder = runs["shared"].clients_[0]
    assert any((~r).any() for r in enc.clients_[0].reference)  # some cover splits
    assert all(r.all() for r in holder.reference) and len(holder.reference) == 3
    for a, b in zip(enc.complete_forest().trees, runs["shared"].complete_forest().trees, strict=True):
        assert a.same_as(b)
    assert np.array_equal(enc.predict_proba(X), runs["shared"].predict_proba(X))
