"""Exactness: SecureBoost grows the trees of the central reference GBDT trained on the joined
data (same binning, depth, learning rate, rounds), and predicts its scores.

Two references: ``train_boosted`` itself (float gradients; structure equal, leaf values within
``VALUE_TOL``), and the reference grower ``grow_tree`` fed the same 2^-f-quantised gradients
as the protocol, which must agree bit for bit, also where two candidates tie exactly (float
noise in the unquantised reference may break such a tie either way; multi-class rounds, where
the instances of one leaf share their gradients, do tie, so the multi-class case is checked
against the quantised reference only).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.errors import ProtocolError
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.secureboost import quantize
from securetrees.protocols.secureboost.messages import Gradients, NodeJob
from securetrees.protocols.secureboost.testing import joined_tree
from securetrees.trees import BinningParams, GradientGain, GrowParams, grow_tree, train_boosted
from securetrees.trees.forest import sigmoid, softmax
from tests.secureboost.conftest import PARTITION, make

#: The quantisation of g and h to 2^-24 moves leaf values by far less than this; it never
#: changes a split on these seeded data (the structure is compared exactly).
VALUE_TOL = 1e-6


def _reference(X: np.ndarray, y: np.ndarray, partition: list[list[int]], n_classes: int | None,
               **kw: Any) -> Any:
    order = [c for cols in partition for c in cols]
    providers = [p for p, cols in enumerate(partition) for _ in cols]
    model, _ = train_boosted(X[:, order], y, n_classes=n_classes, n_estimators=kw.get("n_estimators", 3),
                             learning_rate=kw.get("learning_rate", 0.1), grow=GrowParams(max_depth=3),
                             binning=BinningParams(max_bins=16), providers=providers,
                             classes=None if n_classes is None else np.arange(n_classes))
    return model, order


def _check_same_trees(fitted: Any, ref: Any, partition: list[list[int]]) -> None:
    assert len(fitted.active_.model.trees) == len(ref.trees)
    for rec, rt in zip(fitted.active_.model.trees, ref.trees, strict=True):
        jt = joined_tree(rec, fitted.passives_, len(partition[0]))
        for name in ("left", "right", "feature", "threshold", "categorical", "missing_left", "provider",
                     "weight"):
            assert np.array_equal(getattr(jt, name), getattr(rt, name), equal_nan=True), name
        assert np.abs(jt.value - rt.value).max() < VALUE_TOL
        assert rt.n_nodes > 3  # the comparison covers real splits


@pytest.mark.parametrize("partition", [PARTITION, [[0, 1, 2], [3, 4, 5]]], ids=["two-passive", "one-passive"])
def test_regressor_equals_the_reference(data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey],
                                        partition: list[list[int]]) -> None:
    X, y = data
    fitted = make("reg", partition, keypair).fit(X, y)
    ref, order = _reference(X, y, partition, None)
    _check_same_trees(fitted, ref, partition)
    assert {int(p) for t in ref.trees for p in t.provider if p >= 0} == set(range(len(partition)))
    np.testing.assert_allclose(fitted.predict(X), ref.decision_function(X[:, order]), atol=VALUE_TOL)


def _quantized_reference(X: np.ndarray, codes: np.ndarray, partition: list[list[int]], n_classes: int | None,
                         n_estimators: int, frac_bits: int = 24) -> list[Any]:
    """The reference GBDT loop of ``train_boosted`` with g and h quantised as the protocol does."""
    order = [c for cols in partition for c in cols]
    providers = [p for p, cols in enumerate(partition) for _ in cols]
    mapper = BinningParams(max_bins=16).fit(X[:, order])
    binned = mapper.transform(X[:, order])
    n = X.shape[0]
    if n_classes is None:
        target = codes[:, None].astype(np.float64)
        raw = np.full((n, 1), target.mean())
    else:
        onehot = np.eye(n_classes)[codes]
        prior = onehot.mean(axis=0)
        target = onehot[:, 1:] if n_classes == 2 else onehot
        base = np.log(prior[1:2] / prior[0:1]) if n_classes == 2 else np.log(prior)
        raw = np.tile(base, (n, 1))
    trees = []
    for _ in range(n_estimators):
        if n_classes is None:
            grad, hess = raw - target, np.ones_like(raw)
        else:
            p = sigmoid(raw) if raw.shape[1] == 1 else softmax(raw)
            grad, hess = p - target, p * (1 - p)
        for j in range(raw.shape[1]):
            g = np.ldexp(quantize(grad[:, j], frac_bits).astype(np.float64), -frac_bits)
            h = np.ldexp(quantize(hess[:, j], frac_bits).astype(np.float64), -frac_bits)
            tree = grow_tree(binned, mapper, np.column_stack([np.ones(n), g, h]), GradientGain(),
                             GrowParams(max_depth=3), providers=providers)
            raw[:, j] += 0.1 * tree.leaf_values(X[:, order])[:, 0]
            trees.append(tree)
    return trees


@pytest.mark.parametrize(("kind", "n_classes", "partition"), [
    ("reg", None, PARTITION), ("reg", None, [[0, 1, 2], [3, 4, 5]]), ("clf", 2, PARTITION), ("clf", 3, PARTITION),
])
def test_bit_exact_against_the_reference_grower_on_quantised_gradients(
        data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey], kind: str,
        n_classes: int | None, partition: list[list[int]]) -> None:
    X, y = data
    codes = y if n_classes is None else np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    fitted = make(kind, partition, keypair, n_estimators=2).fit(X, codes)
    ref = _quantized_reference(X, codes, partition, n_classes, 2)
    assert len(ref) == len(fitted.active_.model.trees)
    for rec, rt in zip(fitted.active_.model.trees, ref, strict=True):
        assert joined_tree(rec, fitted.passives_, len(partition[0])).same_as(rt)


@pytest.mark.parametrize("n_classes", [2])
def test_classifier_equals_the_reference(data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey],
                                         n_classes: int) -> None:
    X, y = data
    labels = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    names = np.array(["low", "mid", "high"])[labels]
    fitted = make("clf", PARTITION, keypair, n_estimators=2).fit(X, names)
    ref, order = _reference(X, np.unique(names, return_inverse=True)[1], PARTITION, n_classes, n_estimators=2)
    _check_same_trees(fitted, ref, PARTITION)
    raw = ref.decision_function(X[:, order])
    np.testing.assert_allclose(fitted.decision_function(X).reshape(raw.shape), raw, atol=VALUE_TOL)
    assert fitted.score(X, names) > 0.6


def test_sibling_subtraction_equals_direct_sums(data: tuple[np.ndarray, np.ndarray],
                                                keypair: tuple[PublicKey, PrivateKey]) -> None:
    """Parent − smaller child decrypts to the larger child's direct bucket sums."""
    X, y = data
    fitted = make("reg", PARTITION, keypair, n_estimators=1).fit(X, y)
    passive = fitted.passives_[0]
    assert passive.op_counts["subtract"] > 0
    _, sk = keypair
    active = fitted.active_
    g = np.linspace(-1, 1, X.shape[0])
    layout = active.layout_for(np.rint(g * 2**24).astype(np.int64), np.full(X.shape[0], 1 << 24))
    values = active.encrypt_gradients(layout, np.rint(g * 2**24).astype(np.int64), np.full(X.shape[0], 1 << 24))
    passive.on_gradients("active", Gradients(9, 24, layout.g_bound, layout.h_bound, values))
    all_ids = np.arange(X.shape[0], dtype=np.int64)
    passive.bucket_sums((NodeJob(0, -1, -1, all_ids),))
    left, right = all_ids[: 50], all_ids[50:]
    via_subtraction = passive.bucket_sums((NodeJob(1, 0, 2, left), NodeJob(2, 0, 1, right)))
    direct = passive.bucket_sums((NodeJob(2, -1, -1, right),))
    assert [sk.decrypt(c) for c in via_subtraction[1]] == [sk.decrypt(c) for c in direct[0]]


def test_siblings_that_do_not_split_their_parent_are_refused(data: tuple[np.ndarray, np.ndarray],
                                                             keypair: tuple[PublicKey, PrivateKey]) -> None:
    """A larger sibling is parent − smaller (sums and counts), so the passive party checks that the
    pair's instances are exactly its parent's: an overlap, a missing or a foreign instance is a
    ProtocolError; the honest split of the same parent is answered."""
    X, y = data
    fitted = make("reg", PARTITION, keypair, n_estimators=1).fit(X, y)
    passive = fitted.passives_[0]
    n = X.shape[0]
    ones = np.ones(n, dtype=np.int64)
    layout = fitted.active_.layout_for(ones << 24, ones << 24)
    values = fitted.active_.encrypt_gradients(layout, ones << 24, ones << 24)
    all_ids = np.arange(n, dtype=np.int64)
    for left, right in ((all_ids[:50], all_ids[40:]), (all_ids[:50], all_ids[51:]),
                        (all_ids[:50], np.r_[all_ids[50:], 0])):
        passive.on_gradients("active", Gradients(9, 24, layout.g_bound, layout.h_bound, values))
        passive.bucket_sums((NodeJob(0, -1, -1, all_ids),))
        with pytest.raises(ProtocolError):
            passive.bucket_sums((NodeJob(1, 0, 2, left), NodeJob(2, 0, 1, right)))
    passive.on_gradients("active", Gradients(9, 24, layout.g_bound, layout.h_bound, values))
    passive.bucket_sums((NodeJob(0, -1, -1, all_ids),))
    assert len(passive.bucket_sums((NodeJob(1, 0, 2, all_ids[:50]), NodeJob(2, 0, 1, all_ids[50:])))) == 2


def test_inference_takes_one_round_per_tree_level(data: tuple[np.ndarray, np.ndarray],
                                                  keypair: tuple[PublicKey, PrivateKey]) -> None:
    X, y = data
    fitted = make("reg", PARTITION, keypair).fit(X, y)
    net = fitted.network_
    before = {p.name: len(net.transcript.view(p.name)) for p in fitted.passives_}
    fitted.predict(X[:20])
    depth = max(rec.tree.max_depth for rec in fitted.active_.model.trees)
    for p in fitted.passives_:
        asked = len(net.transcript.view(p.name)) - before[p.name]
        assert 1 <= asked <= depth
