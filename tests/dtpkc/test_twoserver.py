"""HoAdd and HoLT between the CS and the CC (specs/dtpkc.md "HoAdd", "HoLT")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.dtpkc import decrypt_strong, encrypt, parhdec1, parhdec2
from securetrees.dtpkc.scheme import psdec2_residue
from securetrees.dtpkc.twoserver import (
    CentralServer,
    ComputationServer,
    HoAddReply,
    HoAddRequest,
    HoLTBlinding,
    HoLTParams,
    HoLTReply,
    HoLTRequest,
    draw_holt_blinding,
    hoadd_blind,
    hoadd_finish,
    hoadd_reveal,
    holt_blind,
    holt_decide,
    holt_finish,
)
from securetrees.encoding import FixedPoint
from securetrees.errors import (
    EncodingOverflowError,
    InvalidCiphertext,
    KeyMismatchError,
    ParameterError,
    ProtocolError,
    UnexpectedMessage,
)
from securetrees.rand import DeterministicRandom
from securetrees.runtime import InProcessNetwork
from securetrees.testing.dtpkc import DTPKCTestKeys, ScriptedRandom, dtpkc_test_keys

KEYS = dtpkc_test_keys(512)
HOLT = HoLTParams()  # ℓ = 128, σ = 256, E = 96: 483 < 512 bits
R1 = 1 << HOLT.ell
INPUTS = HOLT.inputs(int(KEYS.params.n))
EDGES = [0, 1, -1, R1 - 1, -(R1 - 1)]
holt_values = st.one_of(st.integers(-(R1 - 1), R1 - 1), st.sampled_from(EDGES))
BOUND = int(KEYS.params.n) // 3
sum_values = st.one_of(st.integers(-(BOUND // 2 - 1), BOUND // 2 - 1),
                       st.sampled_from([0, 1, -1, BOUND // 2 - 1, -(BOUND // 2 - 1)]))
users = st.sampled_from(["u1", "u2", "u3"])


def make_servers(keys: DTPKCTestKeys = KEYS) -> tuple[InProcessNetwork, CentralServer, ComputationServer]:
    net = InProcessNetwork()
    cs = CentralServer("cs", net, share=keys.cs_share, weak_key=keys.weak["cs"])
    cc = ComputationServer("cc", net, share=keys.cc_share, weak_key=keys.weak["cc"],
                           directory=keys.directory())
    return net, cs, cc


NET, CS, CC = make_servers()


def open_holt(l_ct: object, partner: str) -> int:
    """What the CS and the partner do with HoLT's output: ParHDec1 by the partner, ParHDec2 by the CS."""
    return parhdec2(KEYS.weak["cs"], parhdec1(KEYS.weak[partner], l_ct))  # type: ignore[arg-type]


@given(a=sum_values, b=sum_values, ka=users, kb=users)
def test_hoadd_across_keys(a: int, b: int, ka: str, kb: str) -> None:
    ca, cb = encrypt(KEYS.pk(ka), a), encrypt(KEYS.pk(kb), b)
    out = CS.hoadd(ca, cb)
    expected_key = KEYS.pk(ka) if ka == kb else KEYS.pk(ka).joint(KEYS.pk(kb))
    assert out.pk == expected_key and out.fresh
    assert decrypt_strong(KEYS.strong, out) == a + b


@given(a=sum_values, b=sum_values)
def test_hoadd_of_joint_and_weak_inputs(a: int, b: int) -> None:
    joint = KEYS.pk("u1").joint(KEYS.pk("u2"))
    out = CS.hoadd(encrypt(joint, a), encrypt(KEYS.pk("u3"), b), out_key=KEYS.pk("u3").joint(KEYS.pk("cs")))
    assert parhdec2(KEYS.weak["cs"], parhdec1(KEYS.weak["u3"], out)) == a + b


def test_hoadd_batch_is_one_round_trip() -> None:
    values = [(i * 1000 - 7, -i * 77) for i in range(6)]
    items = [(encrypt(KEYS.pk("u1"), a), encrypt(KEYS.pk("u2"), b)) for a, b in values]
    mark = NET.transcript.mark()
    outs = CS.hoadd_many(items)
    stats = NET.transcript.since(mark)
    assert stats.rounds == 1 and stats.messages == 2
    assert [decrypt_strong(KEYS.strong, o) for o in outs] == [a + b for a, b in values]
    three = CS.hoadd_many([[encrypt(KEYS.pk(u), 5) for u in ("u1", "u2", "u3")]])[0]
    assert decrypt_strong(KEYS.strong, three) == 15 and len(three.pk.components) == 3


@given(m1=holt_values, m2=holt_values, k1=users, k2=users)
def test_holt_matches_less_than(m1: int, m2: int, k1: str, k2: str) -> None:
    c1 = encrypt(KEYS.pk(k1), m1, signed=INPUTS)
    c2 = encrypt(KEYS.pk(k2), m2, signed=INPUTS)
    out = CS.holt(c1, c2)
    assert out.pk == KEYS.pk("cs").joint(KEYS.pk(k2))  # under h_CS · h_j
    assert open_holt(out, k2) == int(m1 < m2)


@given(m=holt_values)
def test_holt_equal_inputs_are_not_less(m: int) -> None:
    c1, c2 = encrypt(KEYS.pk("u1"), m), encrypt(KEYS.pk("u2"), m)
    assert open_holt(CS.holt(c1, c2), "u2") == 0
    assert open_holt(CS.holt(c2, c1, partner=KEYS.pk("u1")), "u1") == 0


def scripted_blinding(alpha: int, rho: str, nu: int, params: HoLTParams = HOLT) -> ScriptedRandom:
    """The draws of ``draw_holt_blinding`` pinned: α, then ρ at the bottom (``2^(σ-1)``) or
    the top (``2^(σ-1+E) - 1``) of its range, then ν (in ``[-W, W]``)."""
    octave = 0 if rho == "min" else params.spread - 1
    offset = 0 if rho == "min" else (1 << (params.sigma - 1 + octave)) - 1
    return ScriptedRandom(alpha, octave, offset, 0, nu + params.nu_bound)


@pytest.mark.parametrize("alpha", [0, 1])
@pytest.mark.parametrize(("rho", "nu"), [("min", HOLT.nu_bound), ("min", -HOLT.nu_bound),
                                         ("max", HOLT.nu_bound), ("max", -HOLT.nu_bound), ("max", 0)])
@pytest.mark.parametrize(
    ("m1", "m2"),
    [(R1 - 1, -(R1 - 1)), (-(R1 - 1), R1 - 1), (R1 - 1, R1 - 1), (-(R1 - 1), -(R1 - 1)),
     (0, 0), (-1, 0), (0, -1), (5, 5), (-5, -5), (10, 12)],
)
def test_holt_corner_cases(alpha: int, rho: str, nu: int, m1: int, m2: int) -> None:
    """Both coins, extreme ρ and ν, range edges ±(R1 - 1), equal pairs: the steps run directly."""
    out_key = KEYS.pk("cs").joint(KEYS.pk("u2"))
    c1, c2 = encrypt(KEYS.pk("u1"), m1), encrypt(KEYS.pk("u2"), m2)
    pend, part = holt_blind(KEYS.cs_share, c1, c2, out_key, rng=scripted_blinding(alpha, rho, nu))
    assert pend.alpha == alpha
    reply = holt_decide(KEYS.cc_share, part, out_key)
    assert decrypt_strong(KEYS.strong, reply) == int(m1 < m2) ^ (1 - alpha)  # u before the un-flip
    final = holt_finish(pend, reply)
    assert final != reply and final.fresh  # re-randomised in both branches
    assert decrypt_strong(KEYS.strong, final) == int(m1 < m2)


@given(m1=holt_values, m2=holt_values, seed=st.integers(0, 2**32))
def test_holt_blinded_value_is_the_integer_model(m1: int, m2: int, seed: int) -> None:
    """What the CC decrypts is exactly ``HoLTBlinding.blinded(m1, m2)`` for the blinding the CS
    drew (the model the statistical tests in tests/security/test_holt_attacks.py run on), and
    its sign is the sign of ``±(2(m1 - m2) + 1)``."""
    out_key = KEYS.pk("cs").joint(KEYS.pk("u2"))
    c1, c2 = encrypt(KEYS.pk("u1"), m1), encrypt(KEYS.pk("u2"), m2)
    label = f"test_twoserver/model/{seed}"
    model = draw_holt_blinding(HOLT, DeterministicRandom(label))
    _, part = holt_blind(KEYS.cs_share, c1, c2, out_key, rng=DeterministicRandom(label))
    n = int(KEYS.params.n)
    got = int(psdec2_residue(KEYS.cc_share, part))
    value = model.blinded(m1, m2)
    assert got == value % n
    d = 2 * (m1 - m2) + 1
    assert (value > 0) == ((d > 0) == (model.alpha == 1))
    assert abs(value) < 1 << (HOLT.ell + HOLT.sigma + HOLT.spread + 2)


def test_holt_blinding_draws_cover_their_ranges() -> None:
    """ρ in ``[2^(σ-1), 2^(σ-1+E))`` with every octave used, ν in ``[-W, W]`` with both signs."""
    small = HoLTParams(ell=8, sigma=8 + 2 * 40 + 3, spread=32, kappa=40)
    rng = DeterministicRandom("test_twoserver/ranges")
    draws = [draw_holt_blinding(small, rng) for _ in range(400)]
    octaves = {int(b.rho).bit_length() - small.sigma for b in draws}
    assert octaves == set(range(small.spread))
    assert all(-small.nu_bound <= int(b.nu) <= small.nu_bound for b in draws)
    assert any(b.nu < 0 for b in draws) and any(b.nu > 0 for b in draws)
    assert {b.alpha for b in draws} == {0, 1}
    assert repr(draws[0]) == "HoLTBlinding(<secret>)"
    assert isinstance(draws[0], HoLTBlinding)


def test_holt_with_a_joint_key_input_that_contains_the_cs_key() -> None:
    """FT-Test line 6: the split is under h_τ·h_CS; the result stays under that key."""
    split_key = KEYS.pk("u2").joint(KEYS.pk("cs"))
    out = CS.holt(encrypt(KEYS.pk("u1"), 7), encrypt(split_key, 9))
    assert out.pk == split_key
    assert open_holt(out, "u2") == 1


def test_holt_batch_and_fixed_point() -> None:
    fp = FixedPoint(32)
    xs = [-3.25, 0.0, 1e-9, 17.5, 17.5, -1e6]
    ys = [-3.5, 0.0, 0.0, 17.5, 17.50000001, 1e6]
    pairs = [(encrypt(KEYS.pk("u1"), fp.encode(x), signed=INPUTS),
              encrypt(KEYS.pk("u3"), fp.encode(y), signed=INPUTS)) for x, y in zip(xs, ys, strict=True)]
    mark = NET.transcript.mark()
    outs = CS.holt_many(pairs)
    assert NET.transcript.since(mark).rounds == 1
    assert [open_holt(o, "u3") for o in outs] == [int(fp.encode(x) < fp.encode(y)) for x, y in zip(xs, ys, strict=True)]


def test_holt_parameters_refuse_wrapping_configurations() -> None:
    HoLTParams().check(512)  # 128 + 256 + 96 + 3 = 483 < 512
    HoLTParams(128, 256, 124).check(512)
    with pytest.raises(ParameterError):
        HoLTParams(128, 256, 125).check(512)  # 128 + 256 + 125 + 3 = 512, not < 512
    for bad in (0, -1, True, 1.5):
        for field in ("ell", "sigma", "spread", "kappa"):
            with pytest.raises(ParameterError):
                HoLTParams(**{field: bad})  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        HoLTParams(kappa=39, sigma=256)  # below the statistical floor κ >= 40
    HoLTParams(ell=128, sigma=128 + 80 + 3, kappa=40)  # σ = ℓ + 2κ + 3 exactly
    with pytest.raises(ParameterError):
        HoLTParams(ell=128, sigma=128 + 80 + 2, kappa=40)  # ν could reach ρ's scale
    with pytest.raises(ParameterError):
        HoLTParams(ell=128, sigma=256, kappa=63)  # 128 + 126 + 3 > 256
    net = InProcessNetwork()
    with pytest.raises(ParameterError):
        CentralServer("cs", net, share=KEYS.cs_share, weak_key=KEYS.weak["cs"],
                      holt_params=HoLTParams(300, 500, kappa=40))


def test_holt_inputs_out_of_range_are_refused() -> None:
    with pytest.raises(EncodingOverflowError):
        encrypt(KEYS.pk("u1"), R1, signed=INPUTS)  # the participant's own check
    # an input that breaks the claim anyway is caught by the CC's range check on β'
    big = encrypt(KEYS.pk("u1"), 1 << 300)
    with pytest.raises(EncodingOverflowError):
        CS.holt(big, encrypt(KEYS.pk("u2"), 0))


def test_cc_refuses_bad_requests() -> None:
    _, cs, cc = make_servers()
    c = encrypt(KEYS.pk("u1"), 1)
    out_key = KEYS.pk("cs").joint(KEYS.pk("u1"))
    _, part = holt_blind(KEYS.cs_share, c, c, out_key)
    comps = out_key.components
    with pytest.raises(UnexpectedMessage):  # ragged batch
        cs.call("cc", HoLTRequest((part.t1, part.t1), (part.share,), (comps,)), expect=HoLTReply)
    with pytest.raises(UnexpectedMessage):  # empty batch
        cs.call("cc", HoLTRequest((), (), ()), expect=HoLTReply)
    with pytest.raises(InvalidCiphertext):  # not a unit
        cs.call("cc", HoLTRequest((0,), (part.share,), (comps,)), expect=HoLTReply)
    with pytest.raises(KeyMismatchError):  # a key outside the directory
        cs.call("cc", HoLTRequest((part.t1,), (part.share,), ((b"\x01" * 16,),)), expect=HoLTReply)
    with pytest.raises(ProtocolError):  # the requester's own key alone
        cs.call("cc", HoAddRequest((part.t1,), (part.share,), (KEYS.pk("cs").components,)),
                expect=HoAddReply)
    with pytest.raises(UnexpectedMessage):  # a reply type is not a request
        cs.call("cc", HoLTReply((1,), (1,)), expect=HoLTReply)
    with pytest.raises(ProtocolError):  # β' = 0: no honest blinding gives it
        cs.call("cc", HoLTRequest((1,), (1,), (comps,)), expect=HoLTReply)
    cc.remove_key("u1")  # revocation: the CC no longer encrypts under u1's key
    with pytest.raises(KeyMismatchError):
        cs.holt(c, c)


def test_step_functions_check_roles_and_keys() -> None:
    c = encrypt(KEYS.pk("u1"), 1)
    out_key = KEYS.pk("cs").joint(KEYS.pk("u1"))
    with pytest.raises(ParameterError):
        holt_blind(KEYS.cc_share, c, c, out_key)  # λ2 is not the CS's share
    pend, part = hoadd_blind(KEYS.cs_share, [c, c])
    with pytest.raises(ParameterError):
        hoadd_reveal(KEYS.cs_share, part, pend.out_key)
    with pytest.raises(ParameterError):
        hoadd_blind(KEYS.cs_share, [])
    reply = hoadd_reveal(KEYS.cc_share, part, KEYS.pk("u2"))
    with pytest.raises(KeyMismatchError):
        hoadd_finish(pend, reply)  # not under the requested key
    hpend, hpart = holt_blind(KEYS.cs_share, c, c, out_key)
    with pytest.raises(KeyMismatchError):
        holt_finish(hpend, holt_decide(KEYS.cc_share, hpart, KEYS.pk("u2").joint(KEYS.pk("cs"))))
    assert "<secret>" in repr(pend) and "<secret>" in repr(hpend)
    net = InProcessNetwork()
    with pytest.raises(ParameterError):
        ComputationServer("cc", net, share=KEYS.cs_share, weak_key=KEYS.weak["cc"], directory={})
    with pytest.raises(KeyMismatchError):
        ComputationServer("cc", net, share=KEYS.cc_share, weak_key=KEYS.weak["cc"],
                          directory={"j": KEYS.pk("u1").joint(KEYS.pk("u2"))})


PROTOCOL_ERRORS = (InvalidCiphertext, KeyMismatchError, EncodingOverflowError, ProtocolError,
                   UnexpectedMessage)


@given(
    xs=st.lists(st.integers(-(2**1100), 2**1100), min_size=0, max_size=3),
    shares=st.lists(st.integers(-(2**1100), 2**1100), min_size=0, max_size=3),
    keyids=st.lists(st.binary(min_size=0, max_size=20), max_size=3),
    holt=st.booleans(),
)
def test_fuzz_cc_handlers(xs: list[int], shares: list[int], keyids: list[bytes], holt: bool) -> None:
    """Arbitrary request contents: the CC answers or raises one of the protocol's typed errors."""
    n = min(len(xs), len(shares))
    out_keys = tuple((k,) for k in keyids[:n]) if keyids else tuple(
        (KEYS.pk("u1").components[0], KEYS.pk("cs").components[0]) for _ in range(n))
    msg = (HoLTRequest if holt else HoAddRequest)(tuple(xs), tuple(shares), out_keys)
    try:
        CC.on_holt("cs", msg) if holt else CC.on_hoadd("cs", msg)  # type: ignore[arg-type]
    except PROTOCOL_ERRORS:
        return
