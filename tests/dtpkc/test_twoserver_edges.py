"""Edges of the two-server protocols that mutation testing found unguarded (specs/testing.md):
a one-ciphertext HoAdd, ciphertexts and keys from another DT-PKC system, HoLT's partner key,
and that every random draw comes from the servers' own sources."""

from __future__ import annotations

import pytest

from securetrees.dtpkc import decrypt_strong, encrypt
from securetrees.dtpkc.scheme import decrypt_weak
from securetrees.dtpkc.twoserver import (
    MIN_SPREAD,
    CentralServer,
    ComputationServer,
    HoLTParams,
    hoadd_blind,
    holt_blind,
    holt_delta,
)
from securetrees.errors import KeyMismatchError, ParameterError, SecureTreesError
from securetrees.rand import SYSTEM_RANDOM, DeterministicRandom, RandomSource
from securetrees.runtime import InProcessNetwork
from securetrees.testing.dtpkc import ScriptedRandom, dtpkc_test_keys

KEYS = dtpkc_test_keys(512)
OTHER = dtpkc_test_keys(512, label="another-system")


def _servers(cs_rng: RandomSource = SYSTEM_RANDOM, cc_rng: RandomSource = SYSTEM_RANDOM) -> CentralServer:
    net = InProcessNetwork()
    cs = CentralServer("cs", net, share=KEYS.cs_share, weak_key=KEYS.weak["cs"], rng=cs_rng)
    ComputationServer("cc", net, share=KEYS.cc_share, weak_key=KEYS.weak["cc"], directory=KEYS.directory(),
                      rng=cc_rng)
    return cs


def test_hoadd_of_a_single_ciphertext_and_of_none() -> None:
    cs = _servers()
    (out,) = cs.hoadd_many([(encrypt(KEYS.pk("u1"), -41),)])
    assert decrypt_strong(KEYS.strong, out) == -41
    with pytest.raises(ParameterError, match="at least one"):
        hoadd_blind(KEYS.cs_share, [])


def test_hoadd_refuses_another_systems_ciphertext_or_output_key() -> None:
    mine, foreign = encrypt(KEYS.pk("u1"), 3), encrypt(OTHER.pk("u1"), 4)
    with pytest.raises(KeyMismatchError, match="another DT-PKC system"):
        hoadd_blind(KEYS.cs_share, [mine, foreign], out_key=KEYS.pk("u1"))
    with pytest.raises(KeyMismatchError, match="another DT-PKC system"):
        hoadd_blind(KEYS.cs_share, [mine, mine], out_key=OTHER.pk("u2"))


def test_holt_answers_under_the_partner_key_asked_for() -> None:
    cs = _servers()
    c1, c2 = encrypt(KEYS.pk("u1"), 5), encrypt(KEYS.pk("u2"), 9)
    default, chosen = cs.holt(c1, c2), cs.holt(c1, c2, partner=KEYS.pk("u3"))
    assert default.pk.key_id == cs.public_key.joint(KEYS.pk("u2")).key_id
    assert chosen.pk.key_id == cs.public_key.joint(KEYS.pk("u3")).key_id
    assert decrypt_strong(KEYS.strong, chosen) == decrypt_strong(KEYS.strong, default) == 1
    with pytest.raises(KeyMismatchError):
        decrypt_weak(KEYS.weak["u3"], default)


def _seeded_run(label: str) -> list[tuple[int, int]]:
    cs = _servers(DeterministicRandom(f"{label}/cs"), DeterministicRandom(f"{label}/cc"))
    rng = DeterministicRandom(f"{label}/inputs")
    a, b = encrypt(KEYS.pk("u1"), 12, rng=rng), encrypt(KEYS.pk("u2"), -7, rng=rng)
    outs = [cs.hoadd(a, b), cs.hoadd(a, b, out_key=KEYS.pk("u3")), cs.holt(a, b), cs.holt(b, a)]
    return [(int(c.t1), int(c.t2)) for c in outs]


def test_every_draw_comes_from_the_servers_sources() -> None:
    """Seeded CS and CC reproduce their outputs bit for bit (no draw bypasses the given source),
    and another seed changes every output."""
    first = _seeded_run("run")
    assert _seeded_run("run") == first
    assert all(x != y for x, y in zip(first, _seeded_run("other"), strict=True))


SMALL = HoLTParams(ell=16, sigma=16 + 2 * 40 + 3, spread=32, kappa=40)
"""The smallest blinding the construction accepts for ℓ = 16: σ = ℓ + 2κ + 3 at κ = 40, E = 32."""


def test_custom_holt_parameters_reach_both_steps() -> None:
    """ℓ = 16, σ = 99, E = 32, κ = 40 on both servers: the CS blinds within the CC's range
    check (|β'| < 2^(ℓ+σ+E+2)) and every comparison comes out right."""
    net = InProcessNetwork()
    cs = CentralServer("cs", net, share=KEYS.cs_share, weak_key=KEYS.weak["cs"], holt_params=SMALL)
    ComputationServer("cc", net, share=KEYS.cc_share, weak_key=KEYS.weak["cc"], directory=KEYS.directory(),
                      holt_params=SMALL)
    values = [-(2**15) + 1, -3, 0, 5, 2**15 - 1]
    pairs = [(encrypt(KEYS.pk("u1"), a), encrypt(KEYS.pk("u2"), b)) for a in values for b in values]
    outs = cs.holt_many(pairs)
    assert [decrypt_strong(KEYS.strong, o) for o in outs] == [int(a < b) for a in values for b in values]


def test_holt_parameters_at_their_minimum_are_allowed_and_below_refused() -> None:
    low = HoLTParams(ell=1, sigma=1 + 2 * 40 + 3, spread=MIN_SPREAD, kappa=40)
    assert (low.ell, low.spread) == (1, MIN_SPREAD)
    for bad in (dict(ell=0), dict(sigma=0), dict(spread=0), dict(kappa=0), dict(ell=True)):
        with pytest.raises(ParameterError, match="positive integer"):
            HoLTParams(**bad)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="kappa must be at least 40"):
        HoLTParams(kappa=39)
    with pytest.raises(ParameterError, match=r"sigma=.* is too small"):
        HoLTParams(ell=1, sigma=1 + 2 * 40 + 2, spread=MIN_SPREAD, kappa=40)
    for spread in (1, MIN_SPREAD - 1):
        with pytest.raises(ParameterError, match=f"spread must be at least {MIN_SPREAD}"):
            HoLTParams(spread=spread)


def test_the_smallest_spread_keeps_the_stated_bound_small() -> None:
    """At E = 32 and κ = 40 the CC's advantage per comparison is at most 0.0496 (the figure of
    specs/dtpkc.md); at E = 1, which construction once accepted, the bound exceeds 1."""
    assert holt_delta(MIN_SPREAD, 40) <= 0.0496
    assert holt_delta(HoLTParams().spread, HoLTParams().kappa) <= 0.0166
    assert holt_delta(1, 40) > 1


def test_holt_refuses_another_systems_ciphertexts_or_key() -> None:
    mine, foreign = encrypt(KEYS.pk("u1"), 3), encrypt(OTHER.pk("u1"), 4)
    out = KEYS.pk("cs").joint(KEYS.pk("u1"))
    for c1, c2, key in ((foreign, mine, out), (mine, foreign, out), (mine, mine, OTHER.pk("u2"))):
        with pytest.raises(KeyMismatchError, match="another DT-PKC system"):
            holt_blind(KEYS.cs_share, c1, c2, key)


def test_the_ccs_range_check_is_tight() -> None:
    """SMALL parameters with the CS's draws pinned at their largest (α = 1, top octave,
    ρ = 2^(σ+E-1) - 1, ν = +W): the CC accepts the largest Δ whose β' = ρ·(2Δ+1) + ν stays
    below 2^(ℓ+σ+E+2), and refuses Δ + 1."""
    top = SMALL.sigma - 1 + SMALL.spread - 1
    rho, w = (1 << (top + 1)) - 1, SMALL.nu_bound
    limit = 1 << (SMALL.ell + SMALL.sigma + SMALL.spread + 2)
    largest = ((limit - 1 - w) // rho - 1) // 2  # the largest Δ with ρ·(2Δ+1) + W < limit

    def run(delta: int) -> int:
        # α = 1; octave E-1; k = low + (low - 1); accept (u = 0 < low); ν = 2W - W = +W
        rng = ScriptedRandom(1, SMALL.spread - 1, (1 << top) - 1, 0, 2 * w)
        net = InProcessNetwork()
        cs = CentralServer("cs", net, share=KEYS.cs_share, weak_key=KEYS.weak["cs"], holt_params=SMALL, rng=rng)
        ComputationServer("cc", net, share=KEYS.cc_share, weak_key=KEYS.weak["cc"], directory=KEYS.directory(),
                          holt_params=SMALL)
        return decrypt_strong(KEYS.strong, cs.holt(encrypt(KEYS.pk("u1"), delta), encrypt(KEYS.pk("u2"), 0)))

    assert rho * (2 * largest + 1) + w < limit <= rho * (2 * largest + 3) + w
    assert run(largest) == 0
    with pytest.raises(SecureTreesError, match="out of range"):
        run(largest + 1)


def test_each_server_publishes_its_own_weak_public_key() -> None:
    net = InProcessNetwork()
    cs = CentralServer("cs", net, share=KEYS.cs_share, weak_key=KEYS.weak["cs"])
    cc = ComputationServer("cc", net, share=KEYS.cc_share, weak_key=KEYS.weak["cc"], directory=KEYS.directory())
    assert cs.public_key == KEYS.pk("cs") and cc.public_key == KEYS.pk("cc")
