"""The passive party's bucket sums and the sparse histogram reply.

The sums (node total once, the most populous bucket of each feature and the larger sibling by
subtraction, one shared inversion per stage) decrypt to the plaintext sums of every bucket.  A
reply names each bucket's kind (sent, empty, rest of its feature); the kinds must follow from
the counts alone, which the active party checks: the planted-leak companions are passive
parties that use the kinds to carry anything else, and are refused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees.errors import ProtocolError
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.secureboost import passive as passive_module
from securetrees.protocols.secureboost.buckets import (
    bucket_codes,
    bucket_counts,
    bucket_kinds,
    expand_buckets,
    most_populous,
)
from securetrees.protocols.secureboost.messages import (
    BUCKET_EMPTY,
    BUCKET_REST,
    BUCKET_SENT,
    Gradients,
    NodeJob,
)
from tests.secureboost.conftest import PARTITION, make

S, E, R = BUCKET_SENT, BUCKET_EMPTY, BUCKET_REST


def test_bucket_kinds_follow_the_counts() -> None:
    counts = np.array([0, 3, 3, 1, 0, 0, 5, 0], dtype=np.int64)
    assert bucket_kinds(counts, [4, 2, 2]).tolist() == [E, R, S, S, E, E, R, E]  # a tie: the first


def test_expand_buckets_restores_every_bucket() -> None:
    rng = np.random.default_rng(3)
    widths = [3, 5, 2]
    counts = rng.integers(0, 4, size=(4, sum(widths)))
    counts[:, :3] = [0, 7, 1]  # a feature whose rest bucket is not the first
    full = np.column_stack([counts.ravel(), rng.integers(-50, 50, counts.size), rng.integers(0, 50, counts.size)])
    full[full[:, 0] == 0] = 0
    starts = np.cumsum([0, *widths[:-1]])
    totals = full.reshape(4, sum(widths), 3)[:, :widths[0]].sum(axis=1)
    # every feature of a node sums to the same total: make it so by adjusting the last bucket
    blocks = full.reshape(4, sum(widths), 3)
    for k in range(4):
        for f, start in enumerate(starts):
            seg = blocks[k, start:start + widths[f]]
            if f:
                seg[-1] += totals[k] - seg.sum(axis=0)
    full = blocks.reshape(-1, 3)
    assert (full[:, 0] >= 0).all()
    kinds = np.concatenate([bucket_kinds(blocks[k, :, 0], widths) for k in range(4)])
    sent = full[kinds == S]
    assert np.array_equal(expand_buckets(sent, kinds, totals, widths), full)
    bad = kinds.copy()
    bad[np.flatnonzero(kinds == R)[0]] = S  # claims a sum it does not send
    with pytest.raises(ProtocolError):
        expand_buckets(sent, bad, totals, widths)


def test_bucket_sums_decrypt_to_the_plaintext_sums(data: tuple[np.ndarray, np.ndarray],
                                                   keypair: tuple[PublicKey, PrivateKey]) -> None:
    X, y = data
    fitted = make("reg", PARTITION, keypair, n_estimators=1).fit(X, y)
    active, passive = fitted.active_, fitted.passives_[0]
    _, sk = keypair
    n = X.shape[0]
    g = np.rint(np.linspace(-1, 1, n) * 2**24).astype(np.int64)
    h = np.full(n, 1 << 24)
    layout = active.layout_for(g, h)
    plain = np.array(layout.encode(g, h), dtype=object)
    passive.on_gradients("active", Gradients(9, 24, layout.g_bound, layout.h_bound,
                                             active.encrypt_gradients(layout, g, h)))
    ids = np.arange(n, dtype=np.int64)
    passive.bucket_sums((NodeJob(0, -1, -1, ids),))
    rng = np.random.default_rng(0)
    left = np.sort(rng.choice(ids, size=n // 3, replace=False))
    right = np.setdiff1d(ids, left)
    sums = passive.bucket_sums((NodeJob(1, 0, 2, left), NodeJob(2, 0, 1, right)))
    codes = passive._codes
    assert codes is not None and passive.op_counts["subtract"] > 0
    for node_ids, node_sums in ((left, sums[0]), (right, sums[1])):
        expected = [int(plain[node_ids[codes[node_ids, f] == b]].sum())
                    for f, width in enumerate(passive._widths) for b in range(width)]
        assert [sk.decrypt_residue(c) for c in node_sums] == expected
        assert bucket_counts(codes[node_ids], passive._widths).tolist() == [
            e & ((1 << layout.w_n) - 1) for e in expected]


def _leaky_kinds(move_rest: bool) -> Callable[[np.ndarray, list[int]], np.ndarray]:
    honest = bucket_kinds

    def kinds(counts: np.ndarray, widths: list[int]) -> np.ndarray:
        out = honest(counts, widths)
        if move_rest:  # the rest moves to the last non-empty bucket of the first feature with two
            start = 0
            for width in widths:
                nonempty = np.flatnonzero(counts[start:start + width])
                if nonempty.size > 1:
                    seg = out[start:start + width]
                    seg[seg == R] = S
                    seg[nonempty[-1]] = R
                    break
                start += width
        else:  # an empty bucket is announced as sent (an encryption of zero rides along)
            out[np.flatnonzero(out == E)[:1]] = S
        return out

    return kinds


@pytest.mark.parametrize("move_rest", [True, False], ids=["rest-moved", "empty-sent"])
def test_planted_leak_kinds_carrying_more_than_the_counts_are_refused(
        data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey],
        monkeypatch: pytest.MonkeyPatch, move_rest: bool) -> None:
    X, y = data
    X = X.copy()
    X[:, 2:] = np.nan_to_num(X[:, 2:])  # no missing values: every missing bucket is empty
    make("reg", PARTITION, keypair, n_estimators=1).fit(X, y)  # the honest run passes
    monkeypatch.setattr(passive_module, "bucket_kinds", _leaky_kinds(move_rest))
    with pytest.raises(ProtocolError, match="do not follow from its counts"):
        make("reg", PARTITION, keypair, n_estimators=1).fit(X, y)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5).flatmap(
    lambda widths: st.tuples(st.just(widths), st.lists(
        st.tuples(*[st.integers(0, w - 1) for w in widths]), min_size=0, max_size=30))))
def test_most_populous_is_the_first_argmax_of_each_feature(case: tuple[list[int], list[tuple[int, ...]]]) -> None:
    widths, rows = case
    codes = np.asarray(rows, dtype=np.int16).reshape(len(rows), len(widths))
    expect = [int(np.argmax(np.bincount(codes[:, f], minlength=w))) for f, w in enumerate(widths)]
    assert most_populous(bucket_counts(codes, widths), widths).tolist() == expect


def test_bucket_codes_hold_the_largest_budget() -> None:
    """Codes are 16-bit: 255 bins and the missing bucket after them survive the narrowing."""
    binned = np.array([[0, 254], [255, 3]], dtype=np.int64)  # 255: the missing code
    codes = bucket_codes(binned, [255, 255], missing_bin=255)
    assert codes.dtype == np.int16 and codes.tolist() == [[0, 254], [255, 3]]


def test_bucket_products_do_not_depend_on_how_many_features_one_pass_sorts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node run is summed in passes of features (bounded index arrays at 10^6 rows): one feature
    per pass gives the products of all at once."""
    from securetrees._nt import mpz
    from securetrees.protocols.secureboost import buckets
    from securetrees.rand import DeterministicRandom

    rng = DeterministicRandom("passes")
    modulus = mpz((1 << 127) - 1)
    widths = [3, 5, 2, 4]
    codes = np.array([[rng.randbelow(w) for w in widths] for _ in range(40)], dtype=np.int16)
    values = [mpz(rng.randbelow(int(modulus) - 2) + 1) for _ in range(40)]
    big = most_populous(bucket_counts(codes, widths), widths).tolist()
    together = buckets._partial_sums(modulus, widths, big, values, codes)
    monkeypatch.setattr(buckets, "_PAIRS_AT_ONCE", 1)
    assert buckets._partial_sums(modulus, widths, big, values, codes) == together


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_direct_sums_are_the_products_of_each_buckets_members(data: st.DataObject) -> None:
    """Every bucket of a directly built node, computed or derived (total / the feature's other
    buckets), is the product of its members; the node total comes from the feature whose most
    populous bucket is smallest, summed in full, and the count is its members plus the other
    features' members outside their most populous bucket plus the joins of the full feature."""
    from securetrees._nt import mpz
    from securetrees.protocols.secureboost.buckets import Quotients, direct_sums

    modulus = mpz(1000003 * 1000033)
    widths = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    n = data.draw(st.integers(0, 12))
    codes = np.array([[data.draw(st.integers(0, w - 1)) for w in widths] for _ in range(n)],
                     dtype=np.int16).reshape(n, len(widths))
    values = [mpz(data.draw(st.integers(2, 1000))) for _ in range(n)]  # units modulo the modulus
    pending = Quotients(modulus)
    sums, mults = direct_sums(values, codes, widths, modulus, pending)
    pending.resolve()
    starts = np.cumsum([0, *widths[:-1]])
    for f, w in enumerate(widths):
        for b in range(w):
            product = 1
            for v in (values[i] for i in range(n) if codes[i, f] == b):
                product = product * int(v) % int(modulus)
            assert int(sums[starts[f] + b]) == product
    counts = bucket_counts(codes, widths)
    big = counts[starts + most_populous(counts, widths)]
    full = int(np.argmin(big))
    expected = sum(n - int(big[f]) for f in range(len(widths)) if f != full) + n
    joins = max(int((counts[starts[full]:starts[full] + widths[full]] > 0).sum()) - 1, 0)
    assert mults == expected + joins
