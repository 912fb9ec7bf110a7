"""Security properties of HoAdd and HoLT: what the CC sees (specs/dtpkc.md "What each party learns").

The CC's view is read from the transcript.  It may hold only T1-type values whose
strong decryption is blinded (HoLT: ±ρ·(2Δ+1) + ν) or masked (HoAdd: Σm + α), never a
planted plaintext in any encoding.
"""

from __future__ import annotations

import dataclasses

import pytest

from securetrees._nt import mpz
from securetrees.dtpkc import Ciphertext, decrypt_strong, encrypt, twoserver
from securetrees.dtpkc.scheme import PartialDecryption, psdec2_residue
from securetrees.dtpkc.twoserver import CentralServer, ComputationServer, HoAddRequest, HoLTParams, HoLTRequest
from securetrees.encoding import FixedPoint
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import InProcessNetwork, Record, encode
from securetrees.testing.canaries import assert_no_canaries, find_canaries
from securetrees.testing.dtpkc import ScriptedRandom, dtpkc_test_keys

HOLT = HoLTParams()
KEYS = dtpkc_test_keys(512)
FP = FixedPoint(32)
CANARY_REALS = [31337.4242, -271828.18, 5150.0625]
CANARY_INTS = [FP.encode(x) for x in CANARY_REALS]


def _servers(rng: RandomSource = SYSTEM_RANDOM) -> tuple[InProcessNetwork, CentralServer]:
    net = InProcessNetwork()
    cs = CentralServer("cs", net, share=KEYS.cs_share, weak_key=KEYS.weak["cs"], rng=rng)
    ComputationServer("cc", net, share=KEYS.cc_share, weak_key=KEYS.weak["cc"], directory=KEYS.directory())
    return net, cs


def _cc_decrypts(x: int, share: int) -> int:
    """What the CC can compute from one request item: the strong decryption."""
    return int(psdec2_residue(KEYS.cc_share, PartialDecryption(x, share)))


def check_holt_view_of_cc(cs: CentralServer, net: InProcessNetwork) -> None:
    """HoLT on canaries: the CC's view holds no canary, and each β' it opens is r·(±(2Δ+1)) with r > 1;
    the CS's outputs are not the CC's replies unchanged (re-randomised un-flip)."""
    cts = [encrypt(KEYS.pk(u), m) for u, m in zip(("u1", "u2", "u3"), CANARY_INTS, strict=True)]
    pairs = [(cts[0], cts[1]), (cts[1], cts[2]), (cts[2], cts[0]), (cts[0], cts[0])]
    outs = cs.holt_many(pairs)
    view = net.transcript.view("cc")
    assert {r.type_name for r in view} == {"dtpkc.holt.request"}
    assert_no_canaries(view, CANARY_REALS + CANARY_INTS)
    n = int(KEYS.params.n)
    msg = view[0].payload
    assert isinstance(msg, HoLTRequest)
    for (c1, c2), beta, share in zip(pairs, msg.beta, msg.beta_share, strict=True):
        m1, m2 = decrypt_strong(KEYS.strong, c1), decrypt_strong(KEYS.strong, c2)
        b = _cc_decrypts(beta, share)
        signed = b if b < n // 2 else b - n
        d = 2 * (m1 - m2) + 1
        # blinded: ±ρ·d + ν with ρ >= 2^(σ-1), ν drawn afresh
        assert signed not in {d, -d}, "the CC opened an unblinded 2(m1 - m2) + 1"
        assert abs(signed) >= (1 << (HOLT.sigma - 1)) - HOLT.nu_bound
    # the CC's own reply never comes back unchanged (re-randomised un-flip)
    replies = [r.payload for r in net.transcript.view("cs")]
    sent_t1 = {t for rep in replies for t in rep.t1}  # type: ignore[union-attr]
    assert not sent_t1 & {int(o.t1) for o in outs}, "a HoLT output is the CC's reply unchanged"


def test_holt_view_of_cc_has_no_canary_and_only_blinded_values() -> None:
    net, cs = _servers()
    check_holt_view_of_cc(cs, net)


def test_holt_without_the_blinding_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: ρ = 1 and ν = 0, so the CC opens ±(2Δ+1): HoLT still answers right, the check fails."""
    monkeypatch.setattr(twoserver, "draw_holt_blinding",
                        lambda params, rng: twoserver.HoLTBlinding(rng.randbelow(2), mpz(1), mpz(0)))
    net, cs = _servers()
    with pytest.raises(AssertionError, match="unblinded"):
        check_holt_view_of_cc(cs, net)


def test_holt_output_not_rerandomised_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: the CS un-flips without re-randomising; with α = 1 its output is the CC's reply
    (α is pinned to 1 here: with the real coin all four comparisons draw α = 0 once in 16 runs)."""
    monkeypatch.setattr(Ciphertext, "rerandomize", lambda self, **_: self)
    draw = twoserver.draw_holt_blinding
    monkeypatch.setattr(twoserver, "draw_holt_blinding",
                        lambda params, rng: dataclasses.replace(draw(params, rng), alpha=1))
    net, cs = _servers()
    with pytest.raises(AssertionError, match="reply unchanged"):
        check_holt_view_of_cc(cs, net)


def check_hoadd_view_of_cc(cs: CentralServer, net: InProcessNetwork) -> None:
    """HoAdd on canaries: the CC's view holds no canary and no unmasked sum; its T1 is not the input
    T1s' product times (1 + αN)."""
    a, b = encrypt(KEYS.pk("u1"), CANARY_INTS[0]), encrypt(KEYS.pk("u2"), CANARY_INTS[1])
    out = cs.hoadd(a, b)
    assert decrypt_strong(KEYS.strong, out) == CANARY_INTS[0] + CANARY_INTS[1]
    view = net.transcript.view("cc")
    assert {r.type_name for r in view} == {"dtpkc.hoadd.request"}
    total = CANARY_INTS[0] + CANARY_INTS[1]
    assert_no_canaries(view, [*CANARY_REALS, *CANARY_INTS, total])
    msg = view[0].payload
    assert isinstance(msg, HoAddRequest)
    masked = _cc_decrypts(msg.x[0], msg.x_share[0])
    assert masked != total % int(KEYS.params.n), "the CC opened the unmasked sum"
    # the T1 the CC sees is not the product of the input T1s times (1 + αN): g^ρ hides it
    n, n2 = KEYS.params.n, KEYS.params.n2
    alpha = (masked - total) % n
    assert msg.x[0] != int(a.t1 * b.t1 % n2 * (1 + alpha * n) % n2), "the CC's T1 is not re-masked"


def test_hoadd_view_of_cc_has_no_canary_and_only_masked_sums() -> None:
    net, cs = _servers()
    check_hoadd_view_of_cc(cs, net)


def test_hoadd_with_a_zero_mask_is_caught() -> None:
    """Planted leak: the CS draws α = 0 (its first draw): the CC opens the sum itself."""
    net, cs = _servers(rng=ScriptedRandom(0))
    with pytest.raises(AssertionError, match="unmasked sum"):
        check_hoadd_view_of_cc(cs, net)


def test_hoadd_t1_not_remasked_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: the CS skips the fresh g^ρ factor on T1."""
    monkeypatch.setattr(twoserver, "_mask_t1", lambda params, t1, rng: t1)
    net, cs = _servers()
    with pytest.raises(AssertionError, match="not re-masked"):
        check_hoadd_view_of_cc(cs, net)


def test_canary_scanner_would_catch_a_leak() -> None:
    """The view test can fail: a request that carried a plaintext would be found."""
    leak = HoAddRequest((CANARY_INTS[0],), (1,), ((b"\x00" * 16,),))
    data = encode(leak)
    rec = Record(1, "cs", "cc", leak.wire_type, len(data), data, leak)
    assert find_canaries([rec], [CANARY_REALS[0]])
