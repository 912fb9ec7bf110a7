"""Algebraic identities of RevFRF's building blocks (hypothesis) and known answers."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees.dtpkc import decrypt_weak, encrypt, parhdec1
from securetrees.dtpkc.twoserver import CentralServer, ComputationServer
from securetrees.protocols.revfrf.candidates import CandidateSet, CoarseCodes, RandomRange, candidate_codes, coarsen
from securetrees.protocols.revfrf.defaults import DEFAULT_CODEC, DEFAULT_HOLT
from securetrees.protocols.revfrf.signing import node_message, revocation_message
from securetrees.runtime import InProcessNetwork
from securetrees.testing.dtpkc import dtpkc_test_keys

from .helpers import TEST_BITS

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(st.lists(finite, min_size=1, max_size=40), st.lists(finite, min_size=1, max_size=8, unique=True))
def test_codes_carry_exactly_the_split_vectors(xs: list[float], cands: list[float]) -> None:
    """Spec step 4: candidate b sends x left iff x <= s_b iff code <= b (the split vector w_b)."""
    x = np.array(xs)
    s = np.sort(np.array(cands))
    codes = candidate_codes(s, x)
    for b in range(s.size):
        np.testing.assert_array_equal(codes <= b, x <= s[b])


@given(st.lists(st.integers(-50, 50), min_size=1, max_size=80), st.lists(finite, min_size=1, max_size=40, unique=True),
       st.integers(2, 12))
def test_coarse_codes_are_a_subset_of_the_candidates_at_resolution_k(xs: list[int], cands: list[float], k: int) -> None:
    """``code_resolution``: at most k codes, each kept candidate one of the proposed ones, the
    codes still exactly the kept candidates' split vectors, and every kept split non-trivial."""
    x = np.array(xs, dtype=np.float64)
    s = np.sort(np.array(cands))
    full = CandidateSet(s, candidate_codes(s, x))
    out = coarsen(full, k)
    assert out.n_codes <= k or out is full
    assert set(out.thresholds.tolist()) <= set(s.tolist())
    np.testing.assert_array_equal(out.codes, candidate_codes(out.thresholds, x))
    if full.n_codes > k:
        for t in out.thresholds:
            assert 0 < int((x <= t).sum()) < x.size


def test_coarse_codes_keep_the_node_quantiles() -> None:
    """Known answer: 100 distinct values, 99 candidates between them, k = 4: the kept candidates
    cut the node into four groups of 25."""
    x = np.arange(100, dtype=np.float64)
    cs = CoarseCodes(RandomRange(rho=100, n_candidates=99), 4).propose(0, x, np.random.default_rng(0))
    assert cs.n_codes == 4
    np.testing.assert_array_equal(np.bincount(cs.codes), [25, 25, 25, 25])


@given(st.lists(finite, min_size=1, max_size=60), st.integers(1, 10), st.integers(1, 20), st.integers(0, 2**32))
def test_random_range_candidates_lie_in_the_sampled_range(xs: list[float], rho: int, zeta: int, seed: int) -> None:
    """FLE-Expan lines 8-10 (erratum 1: every sample gets a code, none is left out)."""
    x = np.array(xs)
    cs = RandomRange(rho, zeta).propose(0, x, np.random.default_rng(seed))
    assert cs.thresholds.size == zeta and cs.codes.shape == x.shape
    assert np.all(np.diff(cs.thresholds) >= 0)
    assert x.min() <= cs.thresholds.min() and cs.thresholds.max() <= x.max()
    assert int(cs.codes.max()) < cs.n_codes


_keys = dtpkc_test_keys(TEST_BITS)
_net = InProcessNetwork()
_cs = CentralServer("cs", _net, share=_keys.cs_share, weak_key=_keys.weak["cs"], holt_params=DEFAULT_HOLT)
_cc = ComputationServer("cc", _net, share=_keys.cc_share, weak_key=_keys.weak["cc"], directory=_keys.directory(),
                        holt_params=DEFAULT_HOLT)


@settings(max_examples=25)
@given(finite, finite)
def test_ft_predict_comparison_is_x_le_s(x: float, s: float) -> None:
    """FT-Predict line 4 with erratum 3: HoLT([[x]], [[s]] + 1) decrypts (ParHDec1 by the provider,
    ParHDec2 by the CS) to 1 exactly when enc(x) <= enc(s)."""
    rng = DEFAULT_HOLT.inputs(int(_keys.params.n))
    ex, es = DEFAULT_CODEC.encode_scalar(x), DEFAULT_CODEC.encode_scalar(s)
    cx = encrypt(_keys.pk("u1"), ex, signed=rng)
    cs = encrypt(_keys.pk("u2"), es, signed=rng).add_constant(1)
    bit = _cs.holt(cx, cs)
    assert bit.pk == _keys.pk("cs").joint(_keys.pk("u2"))
    left = decrypt_weak(_keys.weak["cs"], parhdec1(_keys.weak["u2"], bit))
    assert left == int(ex <= es)


def test_equal_values_go_left() -> None:
    rng = DEFAULT_HOLT.inputs(int(_keys.params.n))
    e = DEFAULT_CODEC.encode_scalar(37.5)
    bit = _cs.holt(encrypt(_keys.pk("u1"), e, signed=rng), encrypt(_keys.pk("u3"), e, signed=rng).add_constant(1))
    assert decrypt_weak(_keys.weak["cs"], parhdec1(_keys.weak["u3"], bit)) == 1


def test_known_answers() -> None:
    """Pinned digests of the signed node and revocation records, and pinned candidates."""
    assert node_message(b"s" * 16, 3, 17, 2, 12345, 67890).hex() == (
        "2990795b057f2465750a21fa70cd70e93a343cd056ca6dac2bd14ae1253b4784")
    assert revocation_message(b"s" * 16, "u2", 1, 2, b"n" * 16).hex() == (
        "6c2330c88410e1eacde543baceda4874b60e6a7e56fe81a500c29a6122781b12")
    cs = RandomRange(rho=4, n_candidates=3).propose(0, np.arange(10.0), np.random.default_rng(0))
    np.testing.assert_array_equal(cs.thresholds, [3.25, 4.5, 5.75])
    np.testing.assert_array_equal(cs.codes, [0, 0, 0, 0, 1, 2, 3, 3, 3, 3])
