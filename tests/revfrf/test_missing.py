"""Missing values (NaN), routed as the shared trees route them (``specs/revfrf.md``, "Missing
values"): the missing code and bin in training, the split's missing side at every prediction
path, the ``+inf`` threshold of a split that isolates the missing values."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.dtpkc import decrypt_weak, encrypt, parhdec1
from securetrees.dtpkc.twoserver import CentralServer, ComputationServer
from securetrees.errors import EncodingOverflowError, UnexpectedMessage
from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.revfrf.candidates import CandidateSet, RandomRange, candidate_codes, coarsen
from securetrees.protocols.revfrf.defaults import DEFAULT_CODEC, DEFAULT_HOLT
from securetrees.protocols.revfrf.messages import (
    ExpandReply,
    ExpandRequest,
    PredictReply,
    PredictRequest,
    SplitReply,
    SplitRequest,
)
from securetrees.protocols.revfrf.missing import MISSING_CODE, threshold_plaintext, value_plaintext
from securetrees.protocols.revfrf.requester import Requester
from securetrees.runtime import InProcessNetwork, Message
from securetrees.testing.dtpkc import dtpkc_test_keys
from securetrees.trees import BinningParams, GrowParams, train_forest

from .helpers import PARTITION, TEST_BITS, assert_same_up_to_gaps, classifier, make_data, regressor

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
RANGE = DEFAULT_HOLT.inputs(int(dtpkc_test_keys(TEST_BITS).params.n))


def _with_missing(X: np.ndarray, rate: float, seed: int) -> np.ndarray:
    out = X.copy()
    out[np.random.default_rng(seed).random(X.shape) < rate] = np.nan  # test data only
    return out


def _providers(d: int) -> list[int]:
    owner = [0] * d
    for i, cols in enumerate(PARTITION):
        for c in cols:
            owner[c] = i
    return owner


# ---------------------------------------------------------------------------- codes and plaintexts


@given(st.lists(st.one_of(finite, st.just(math.nan)), min_size=1, max_size=40),
       st.lists(finite, min_size=1, max_size=8, unique=True))
def test_missing_values_get_the_missing_code(xs: list[float], cands: list[float]) -> None:
    x = np.array(xs)
    s = np.sort(np.array(cands))
    codes = candidate_codes(s, x)
    np.testing.assert_array_equal(codes == MISSING_CODE, np.isnan(x))
    present = ~np.isnan(x)
    for b in range(s.size):
        np.testing.assert_array_equal((codes <= b)[present], x[present] <= s[b])


@given(st.lists(st.one_of(st.integers(-50, 50), st.none()), min_size=1, max_size=80),
       st.lists(finite, min_size=1, max_size=40, unique=True), st.integers(2, 12))
def test_coarse_codes_leave_missing_values_missing(xs: list[int | None], cands: list[float], k: int) -> None:
    """``code_resolution`` groups the present values only; missing values keep their code and
    the present codes are those of the present values alone."""
    x = np.array([np.nan if v is None else float(v) for v in xs])
    s = np.sort(np.array(cands))
    present = ~np.isnan(x)
    out = coarsen(CandidateSet(s, candidate_codes(s, x)), k)
    alone = coarsen(CandidateSet(s, candidate_codes(s, x[present])), k)
    np.testing.assert_array_equal(out.thresholds, alone.thresholds)
    np.testing.assert_array_equal(out.codes[present], alone.codes)
    assert np.all(out.codes[~present] == MISSING_CODE)


def test_random_range_uses_present_values_only() -> None:
    x = np.array([np.nan, 1.0, 5.0, np.nan, 3.0])
    cs = RandomRange(rho=64, n_candidates=3).propose(0, x, np.random.default_rng(0))
    np.testing.assert_array_equal(cs.thresholds, [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(cs.codes, [MISSING_CODE, 0, 3, MISSING_CODE, 1])
    none = RandomRange().propose(0, np.full(4, np.nan), np.random.default_rng(0))
    assert none.n_codes == 1 and np.all(none.codes == MISSING_CODE)


@given(finite, finite)
def test_stand_ins_fall_on_their_side_of_every_threshold(x: float, s: float) -> None:
    """x ≤ s (HoLT's ``x < s + 1``): a missing value goes to the node's side at every threshold,
    the +inf one included; a present value is left of +inf and compared as itself."""
    for thr in (threshold_plaintext(DEFAULT_CODEC, RANGE, s), threshold_plaintext(DEFAULT_CODEC, RANGE, math.inf)):
        assert value_plaintext(DEFAULT_CODEC, RANGE, math.nan, True) < thr + 1
        assert not value_plaintext(DEFAULT_CODEC, RANGE, math.nan, False) < thr + 1
        assert abs(thr + 1) < RANGE.bound
    inf = threshold_plaintext(DEFAULT_CODEC, RANGE, math.inf)
    for side in (True, False):
        assert value_plaintext(DEFAULT_CODEC, RANGE, x, side) == DEFAULT_CODEC.encode_scalar(x)
        assert value_plaintext(DEFAULT_CODEC, RANGE, x, side) < inf + 1


def test_values_in_the_stand_ins_band_are_refused() -> None:
    big = float(RANGE.bound >> DEFAULT_CODEC.frac_bits)
    with pytest.raises(EncodingOverflowError):
        value_plaintext(DEFAULT_CODEC, RANGE, big, True)
    with pytest.raises(EncodingOverflowError):
        threshold_plaintext(DEFAULT_CODEC, RANGE, -big)


def test_holt_accepts_the_stand_ins() -> None:
    """The extremes ±B against the +inf threshold B − 1 through the real HoLT (one CS, one CC)."""
    keys = dtpkc_test_keys(TEST_BITS)
    net = InProcessNetwork()
    cs = CentralServer("cs", net, share=keys.cs_share, weak_key=keys.weak["cs"], holt_params=DEFAULT_HOLT)
    ComputationServer("cc", net, share=keys.cc_share, weak_key=keys.weak["cc"], directory=keys.directory(),
                      holt_params=DEFAULT_HOLT)
    s = encrypt(keys.pk("u2"), threshold_plaintext(DEFAULT_CODEC, RANGE, math.inf), signed=RANGE).add_constant(1)
    for side in (True, False):
        x = encrypt(keys.pk("u1"), value_plaintext(DEFAULT_CODEC, RANGE, math.nan, side), signed=RANGE)
        left = decrypt_weak(keys.weak["cs"], parhdec1(keys.weak["u2"], cs.holt(x, s)))
        assert left == int(side)


# ---------------------------------------------------------------------------- the protocol


def test_missing_values_bins_mode_equals_central_reference() -> None:
    """NaN in training and in prediction: the forest is the central reference's at full
    resolution up to where thresholds sit in their gaps, every prediction path gives the
    plaintext model's output, and on the training rows the reference's."""
    X, y = make_data(seed=2)
    Xm = _with_missing(X, 0.15, seed=1)
    clf = classifier(splitter="bins", max_bins=32, code_resolution=None, n_estimators=3, max_depth=5)
    clf.set_params(partition=PARTITION).fit(Xm, y)
    ref, _ = train_forest(Xm, y, n_classes=2, n_estimators=3, criterion="gini", grow=GrowParams(max_depth=5),
                          max_features="sqrt", bootstrap=True, binning=BinningParams(max_bins=32),
                          providers=_providers(X.shape[1]), random_state=7, classes=np.arange(2))
    fed = clf.plaintext_forest()
    for a, b in zip(fed.trees, ref.trees, strict=True):
        assert_same_up_to_gaps(a, b, Xm)
    assert any(t.missing_left[~t.is_leaf].any() for t in fed.trees)
    rows = _with_missing(make_data(seed=9)[0], 0.2, seed=3)
    assert np.isnan(rows[:6]).any()
    for method in ("vertical", "test", "encrypted"):
        r = rows if method == "vertical" else rows[:6]
        np.testing.assert_allclose(clf.predict_proba(r, method=method), fed.predict_proba(r))
    np.testing.assert_allclose(clf.predict_proba(Xm), ref.predict_proba(Xm))  # no training value in a gap


def test_missing_values_regression_equals_central_reference() -> None:
    X, codes = make_data(seed=3)
    y = X[:, 0] * 0.5 + X[:, 1] - codes * 3.0
    Xm = _with_missing(X, 0.1, seed=4)
    reg = regressor(splitter="bins", max_bins=16, code_resolution=None, n_estimators=3, max_depth=4)
    reg.set_params(partition=PARTITION).fit(Xm, y)
    ref, _ = train_forest(Xm, y, n_classes=None, n_estimators=3, criterion="squared_error",
                          grow=GrowParams(max_depth=4), max_features="sqrt", binning=BinningParams(max_bins=16),
                          providers=_providers(X.shape[1]), random_state=7)
    for a, b in zip(reg.plaintext_forest().trees, ref.trees, strict=True):
        assert_same_up_to_gaps(a, b, Xm)
    np.testing.assert_allclose(reg.predict(Xm), ref.predict(Xm), rtol=1e-12)


@pytest.fixture(scope="module")
def missing_apart() -> tuple[RevFRFClassifier, np.ndarray]:
    """Column 1 (u2's) is missing for most of class 1 and uninformative otherwise, so the
    forest isolates the missing values: a split with threshold +inf."""
    rng = np.random.default_rng(4)  # test data only
    X = rng.integers(0, 60, size=(240, 6)).astype(np.float64)
    y = (rng.random(240) < 0.5).astype(np.int64)
    ones = np.flatnonzero(y == 1)
    X[ones[rng.random(ones.size) < 0.8], 1] = np.nan
    clf = classifier(n_estimators=3, max_depth=3, max_features=None).set_params(partition=PARTITION).fit(X, y)
    return clf, X


def test_a_split_that_isolates_the_missing_values(missing_apart: tuple[RevFRFClassifier, np.ndarray]) -> None:
    clf, X = missing_apart
    fed = clf.plaintext_forest()
    apart = [(t, k) for t in fed.trees for k in np.flatnonzero(np.isinf(t.threshold))]
    assert apart and all(not t.missing_left[k] and t.feature[k] == 1 for t, k in apart)
    rows = np.vstack([X[:4], X[np.isnan(X[:, 1])][:3]])
    for method in ("vertical", "test", "encrypted"):
        np.testing.assert_allclose(clf.predict_proba(rows, method=method), fed.predict_proba(rows))


# ---------------------------------------------------------------------------- what the CS sees


def _captured_requests(req: Requester, rows: np.ndarray) -> list[PredictRequest]:
    seen: list[PredictRequest] = []
    call = req.call

    def capture(receiver: str, msg: Message, *, expect: Any) -> Any:
        if isinstance(msg, PredictRequest):
            seen.append(msg)
        return call(receiver, msg, expect=expect)

    req.call = capture  # type: ignore[method-assign]
    for row in rows:
        req.request(row)
    return seen


def _requests_hide_missingness(msgs: list[PredictRequest], d: int) -> bool:
    """Every request carries two fresh ciphertexts per feature, whatever is missing."""
    return all(len(m.t1) == len(m.low_t1) == d and all(a != b for a, b in zip(m.t1, m.low_t1, strict=True))
               for m in msgs)


class _LeakyRequester(Requester):
    """Planted leak: the second ciphertexts only for rows with a missing value."""

    def request(self, x: Any) -> np.ndarray:
        v = np.asarray(x, dtype=np.float64)
        if np.isnan(v).any():
            return super().request(v)
        cts = [encrypt(self._weak.public, DEFAULT_CODEC.encode_scalar(float(a)), signed=self._range) for a in v]
        reply = self.call("cs", PredictRequest(tuple(int(c.t1) for c in cts), tuple(int(c.t2) for c in cts)),
                          expect=PredictReply)
        return np.asarray(reply.output, dtype=np.float64)


def test_encrypted_requests_do_not_show_which_values_are_missing(
        missing_apart: tuple[RevFRFClassifier, np.ndarray]) -> None:
    clf, X = missing_apart
    rows = np.vstack([X[~np.isnan(X).any(axis=1)][:2], X[np.isnan(X).any(axis=1)][:2]])
    honest = _captured_requests(clf.requester("alice"), rows)
    assert len(honest) == 4 and _requests_hide_missingness(honest, X.shape[1])
    sk = clf.kgc_.kgc.issue_weak_key("mallory")
    clf.cs_.register_requester("mallory", sk.public)
    leaky = _LeakyRequester("mallory", clf.network_, weak_key=sk)
    out = np.stack([leaky.request(r) for r in rows])
    np.testing.assert_allclose(out, clf.plaintext_forest().predict_proba(rows))  # it still works...
    assert not _requests_hide_missingness(_captured_requests(leaky, rows), X.shape[1])  # ...and shows it


# ---------------------------------------------------------------------------- rejections


def test_malformed_missing_sides_refused(missing_apart: tuple[RevFRFClassifier, np.ndarray]) -> None:
    clf, _ = missing_apart
    i64 = np.array([0], dtype=np.int64)
    col = np.array([PARTITION[0][0]], dtype=np.int64)
    for bad in (np.zeros(2, dtype=bool), np.zeros(1, dtype=np.int64)):
        clf.cs_.call("u1", ExpandRequest(777, i64, i64, np.array([0, 3]), np.arange(3), i64, col), expect=ExpandReply)
        with pytest.raises(UnexpectedMessage):
            clf.cs_.call("u1", SplitRequest(777, 0, i64, i64, i64, np.array([10**6]), bad), expect=SplitReply)
    req = clf.requester("bob")
    good = [encrypt(req._weak.public, 1, signed=RANGE) for _ in range(6)]
    t1, t2 = tuple(int(c.t1) for c in good), tuple(int(c.t2) for c in good)
    with pytest.raises(UnexpectedMessage):
        req.call("cs", PredictRequest(t1, t2, t1[:5], t2[:5]), expect=PredictReply)
    with pytest.raises(UnexpectedMessage):
        req.call("cs", PredictRequest(t1, t2, t1, t2[:5]), expect=PredictReply)
