"""HoLT's output bit, as the CC sees it, is a fair coin whatever the inputs (specs/dtpkc.md).

The CC's bit u = [β' > N/2] is recomputed from the CC's view (the HoLT request in the
transcript, opened with λ2 as the CC would).  Under a fair coin α, u ~ Bernoulli(1/2)
independently of the inputs.  Two-sided exact binomial test, n = 400 comparisons per
input pair, false-alarm rate alpha = 1e-6 per test (3 tests: below 3e-6 in total).  The CS's
coins come from a fixed DeterministicRandom stream per input pair, so the bits, and the outcome,
are the same on every run (specs/testing.md: statistical checks run on data from fixed seeds).
"""

from __future__ import annotations

import math

import pytest

from securetrees.dtpkc import encrypt
from securetrees.dtpkc.scheme import PartialDecryption, psdec2_residue
from securetrees.dtpkc.twoserver import CentralServer, ComputationServer, HoLTRequest
from securetrees.rand import SYSTEM_RANDOM, DeterministicRandom
from securetrees.runtime import InProcessNetwork
from securetrees.testing.dtpkc import dtpkc_test_keys

KEYS = dtpkc_test_keys(512)
TRIALS = 400
ALPHA = 1e-6


def binomial_two_sided_p(k: int, n: int) -> float:
    """P[|X - n/2| >= |k - n/2|] for X ~ Bin(n, 1/2), exactly."""
    dev = abs(k - n / 2)
    tail = sum(math.comb(n, i) for i in range(n + 1) if abs(i - n / 2) >= dev)
    return min(1.0, tail / 2**n)


class _FixedCoin:
    """A RandomSource that always draws coin α = 1 (to show the test can fail)."""

    def randbelow(self, n: int, /) -> int:
        return 1 if n == 2 else SYSTEM_RANDOM.randbelow(n)

    def randbits(self, k: int, /) -> int:
        return SYSTEM_RANDOM.randbits(k)

    def token_bytes(self, k: int, /) -> bytes:
        return SYSTEM_RANDOM.token_bytes(k)


def cc_bits(m1: int, m2: int, rng: object = SYSTEM_RANDOM) -> list[int]:
    net = InProcessNetwork()
    cs = CentralServer("cs", net, share=KEYS.cs_share, weak_key=KEYS.weak["cs"], rng=rng)  # type: ignore[arg-type]
    ComputationServer("cc", net, share=KEYS.cc_share, weak_key=KEYS.weak["cc"], directory=KEYS.directory())
    c1, c2 = encrypt(KEYS.pk("u1"), m1), encrypt(KEYS.pk("u2"), m2)
    for _ in range(TRIALS // 100):
        cs.holt_many([(c1, c2)] * 100)
    half = KEYS.params.n // 2
    bits = []
    for rec in net.transcript.view("cc"):
        msg = rec.payload
        assert isinstance(msg, HoLTRequest)
        for beta, share in zip(msg.beta, msg.beta_share, strict=True):
            bits.append(int(psdec2_residue(KEYS.cc_share, PartialDecryption(beta, share)) > half))
    assert len(bits) == TRIALS
    return bits


@pytest.mark.statistical
@pytest.mark.parametrize(("m1", "m2"), [(3, 100), (100, 3), (-7, -7)], ids=["less", "greater", "equal"])
def test_cc_bit_is_balanced(m1: int, m2: int) -> None:
    ones = sum(cc_bits(m1, m2, rng=DeterministicRandom(f"dtpkc balance/{m1}/{m2}")))
    assert binomial_two_sided_p(ones, TRIALS) > ALPHA, f"{ones}/{TRIALS} ones"


@pytest.mark.statistical
def test_balance_test_detects_a_fixed_coin() -> None:
    ones = sum(cc_bits(3, 100, rng=_FixedCoin()))
    assert ones == TRIALS  # α = 1 always: u = [m1 < m2] = 1 every time
    assert binomial_two_sided_p(ones, TRIALS) <= ALPHA


def test_binomial_p_value() -> None:
    assert binomial_two_sided_p(200, 400) == 1.0
    assert binomial_two_sided_p(0, 10) == pytest.approx(2 / 1024)
