"""Attacks by the CC on HoLT's blinded values (specs/dtpkc.md "What the CC learns in HoLT",
specs/revfrf.md "What the CC learns from a prediction request").

The CC decrypts ``β' = ±ρ·M + ν`` per comparison, with ``M = |2Δ + 1|`` and ``Δ = m1 - m2``.
Each attack below guesses the bit ``l = [m1 < m2]`` (and, when sure, Δ itself) from what the
CC sees, on RevFRF's comparisons ``HoLT(x, s + 1)`` of integer-valued data in fixed point
(f = 32) against thresholds that include ties (a data value), the 5th and 95th percentiles,
the paper's ``lo + i(hi - lo)/17`` and bin midpoints.  The attacker knows the threshold of
every comparison and the exact multiset of data values (the prior); so does the simulator,
which is given, per comparison, only ``⌊log2|Δ|⌋`` (and whether Δ = 0).

The check (:func:`assert_no_better_than_simulator`), at false-alarm rate 1e-6: with ``S`` the
attack's correct guesses over ``n`` comparisons, ``S_sim`` the Bayes-optimal simulator's,
and ``δ = log2(3)/E + 2^(4-κ)`` the bound's excess per comparison, the attack passes unless
``S > S_sim + n·δ + sqrt(n·ln(1e6)/2)`` (Hoeffding: each comparison has fresh, independent
blinding).  It also requires that the attack never names Δ exactly where the simulator could
not (a class with more than one candidate Δ).  The blinding draws come from fixed
``DeterministicRandom`` streams, so the outcome is the same on every run.

Every check runs twice: on the library's blinding (it must pass) and on a leaky variant kept
here only as a companion (it must fail): the multiplicative-only blinding ``r·(±M)`` of the
earlier code, and, for the batch attack, a blinding without a random scale.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from securetrees._nt import invert, mpz, powmod_sec
from securetrees.dtpkc import Ciphertext, encrypt
from securetrees.dtpkc.keys import StrongKeyShare
from securetrees.dtpkc.scheme import PartialDecryption, psdec2_residue
from securetrees.dtpkc.twoserver import HoLTParams, draw_holt_blinding, holt_blind
from securetrees.encoding import FixedPoint
from securetrees.rand import DeterministicRandom, RandomSource
from securetrees.testing.dtpkc import dtpkc_test_keys

HOLT = HoLTParams()
FP = FixedPoint(32)
FALSE_ALARM = 1e-6
DELTA = math.log2(3) / HOLT.spread + 2.0 ** (4 - HOLT.kappa)
TRIVIAL_DIVISOR = 1 << 20  # every integer is a multiple of small M; a hit there means nothing

# ----------------------------------------------------------------------------- the comparisons

_data_rng = np.random.default_rng(20261123)  # test data only (ages 17..90), not a secret
COLUMN = _data_rng.integers(17, 91, size=400).astype(np.float64)


def _thresholds() -> list[float]:
    lo, hi = float(COLUMN.min()), float(COLUMN.max())
    p5, p95 = (float(np.percentile(COLUMN, q, method="lower")) for q in (5, 95))
    return [
        p5, p95,                                   # ties: thresholds on data values, near the ends
        p5 + 0.5, p95 + 0.5,                       # the same percentiles at midpoints
        float(np.median(COLUMN)),                  # a tie in the middle
        *(lo + i * (hi - lo) / 17 for i in (1, 5, 9, 16)),  # the paper's random_range
        40.5,                                      # a bin midpoint
    ]


THRESHOLDS = _thresholds()
VALUES = Counter(COLUMN.tolist())


@dataclass(frozen=True)
class Candidate:
    delta: int  # Δ = X - (S + 1): RevFRF compares x with s + 1
    left: int  # the bit l = [x ≤ s]
    weight: int

    @property
    def m(self) -> int:
        return abs(2 * self.delta + 1)


@dataclass(frozen=True)
class Item:
    s: float
    delta: int
    left: int  # the bit l = [x ≤ s]


def _delta(x: float, s: float) -> int:
    return int(FP.encode(x)) - (int(FP.encode(s)) + 1)


CANDIDATES = {s: [Candidate(_delta(x, s), int(x <= s), w) for x, w in VALUES.items()] for s in THRESHOLDS}


def _items(per_threshold: int, label: str) -> list[Item]:
    """``per_threshold`` data values per threshold, drawn (test data) from the column."""
    rng = np.random.default_rng(zlib.crc32(label.encode()))  # test data, seeded per label
    out = []
    for s in THRESHOLDS:
        for x in rng.choice(COLUMN, size=per_threshold, replace=False).tolist():
            out.append(Item(s, _delta(x, s), int(x <= s)))
    return out


def _class(delta: int) -> int:
    return -1 if delta == 0 else abs(delta).bit_length() - 1  # ⌊log2|Δ|⌋, -1 for Δ = 0


def simulator(items: Sequence[Item]) -> tuple[int, set[int]]:
    """The Bayes-optimal simulator given only ⌊log2|Δ|⌋ per comparison (and the attacker's
    prior): its number of correct guesses of l, and the indices of the items whose class
    pins Δ exactly (a single candidate), where naming Δ is no leak beyond the class."""
    correct, pinned = 0, set()
    for i, it in enumerate(items):
        same = [c for c in CANDIDATES[it.s] if _class(c.delta) == _class(it.delta)]
        w1 = sum(c.weight for c in same if c.left == 1)
        w0 = sum(c.weight for c in same if c.left == 0)
        correct += int((1 if w1 > w0 else 0) == it.left)
        if len({c.delta for c in same}) == 1:
            pinned.add(i)
    return correct, pinned


# ----------------------------------------------------------------------------- blindings


@dataclass(frozen=True)
class Blinding:
    """How a variant blinds one comparison (the CC decrypts ``draw(m1, m2, rng)``), and the
    scale law the attacker assumes for it."""

    name: str
    draw: Callable[[int, int, RandomSource], int]
    scale_low: int
    scale_high: int
    log_uniform: bool
    nu_bound: int


def _library(m1: int, m2: int, rng: RandomSource) -> int:
    return draw_holt_blinding(HOLT, rng).blinded(m1, m2)


def _old_multiplicative(m1: int, m2: int, rng: RandomSource) -> int:
    """LEAKY (the code before this fix): ``β' = r·(±(2Δ + 1))``, r uniform in [1, 2^σ)."""
    alpha = rng.randbelow(2)
    r = rng.randbelow((1 << HOLT.sigma) - 1) + 1
    d = 2 * (m1 - m2) + 1
    return r * (d if alpha == 1 else -d)


def _fixed_scale(m1: int, m2: int, rng: RandomSource) -> int:
    """LEAKY: the additive ν of the library, but a constant scale ``2^(σ-1)`` (no random ρ)."""
    bl = draw_holt_blinding(HOLT, rng)
    d = 2 * (m1 - m2) + 1
    return (d if bl.alpha == 1 else -d) * (1 << (HOLT.sigma - 1)) + int(bl.nu)


class _UncheckedParams(HoLTParams):
    """LEAKY: HoLT parameters without the construction's checks (``spread`` below ``MIN_SPREAD``)."""

    def __post_init__(self) -> None:
        pass


ONE_OCTAVE_PARAMS = _UncheckedParams(spread=1)


def _one_octave(m1: int, m2: int, rng: RandomSource) -> int:
    """LEAKY for repeated comparisons: the library's blinding with ρ in one octave (E = 1),
    i.e. ``β = r1·D + r2`` with r1 uniform in ``[2^(σ-1), 2^σ)``: k views pin M to about 1/k."""
    return draw_holt_blinding(ONE_OCTAVE_PARAMS, rng).blinded(m1, m2)


LIBRARY = Blinding("library", _library, 1 << (HOLT.sigma - 1), 1 << (HOLT.sigma - 1 + HOLT.spread), True,
                   HOLT.nu_bound)
OLD = Blinding("old multiplicative-only", _old_multiplicative, 1, 1 << HOLT.sigma, False, 0)
ONE_OCTAVE = Blinding("one octave", _one_octave, 1 << (HOLT.sigma - 1), 1 << HOLT.sigma, True, HOLT.nu_bound)
FIXED = Blinding("fixed scale", _fixed_scale, 1 << (HOLT.sigma - 1), 1 << (HOLT.sigma - 1), False, HOLT.nu_bound)


def views(blinding: Blinding, items: Sequence[Item], k: int, label: str) -> list[list[int]]:
    """k independent blinded values per item, as the CC decrypts them (signed)."""
    rng = DeterministicRandom(f"test_holt_attacks/{blinding.name}/{label}")
    out = []
    for it in items:
        m2 = int(FP.encode(it.s)) + 1
        m1 = m2 + it.delta
        out.append([blinding.draw(m1, m2, rng) for _ in range(k)])
    return out


# ----------------------------------------------------------------------------- attacks


@dataclass(frozen=True)
class Guess:
    left: int  # the bit l = [x ≤ s]
    delta: int | None  # named only when the attack is sure


def bayes_magnitude(bl: Blinding, cands: Sequence[Candidate], obs: Sequence[int]) -> Guess:
    """The posterior over the candidates from the magnitudes alone, under the variant's scale
    law: a candidate M is possible when every ``|β'|`` lies in ``[low·M - W, high·M + W]``
    (exact integers); the scale is log-uniform (flat likelihood) or uniform (``M^-k``).
    Names Δ when one candidate holds 99% of the posterior."""
    w = bl.nu_bound
    post = []
    for c in cands:
        if not all(bl.scale_low * c.m - w <= abs(b) <= bl.scale_high * c.m + w for b in obs):
            post.append(0.0)
        elif bl.log_uniform or bl.scale_low == bl.scale_high:
            post.append(float(c.weight))
        else:  # uniform scale: density 1/(M·(high - low)) per observation
            post.append(c.weight * 2.0 ** (-len(obs) * math.log2(c.m)))
    total = sum(post)
    if total == 0:
        return Guess(1, None)
    p1 = sum(p for p, c in zip(post, cands, strict=True) if c.left == 1) / total
    best = max(range(len(cands)), key=lambda i: post[i])
    sure = post[best] / total >= 0.99
    return Guess(int(p1 > 0.5), cands[best].delta if sure else None)


def trial_division(bl: Blinding, cands: Sequence[Candidate], obs: Sequence[int]) -> Guess:
    """The attack that broke the old blinding: the candidate M that divides |β'|."""
    hits = [c for c in cands if c.m > TRIVIAL_DIVISOR and abs(obs[0]) % c.m == 0]
    if hits:
        c = max(hits, key=lambda c: c.m)
        return Guess(c.left, c.delta)
    return bayes_magnitude(bl, cands, obs)


def gcd_ratio(bl: Blinding, cands: Sequence[Candidate], obs: Sequence[int]) -> Guess:
    """Several β' that share Δ: their gcd (the reduced ratio ``β'_1/β'_2`` leaves M in it)."""
    g = 0
    for b in obs:
        g = math.gcd(g, abs(b))
    hits = [c for c in cands if c.m > TRIVIAL_DIVISOR and g % c.m == 0]
    if hits:
        c = max(hits, key=lambda c: c.m)
        return Guess(c.left, c.delta)
    return bayes_magnitude(bl, cands, obs)


def batch_rank(bl: Blinding, items: Sequence[Item], obs: Sequence[Sequence[int]]) -> list[Guess]:
    """Sign inference from the magnitudes across a batch: per threshold, the prior's share of
    "left" comparisons goes to the smallest (or largest) |β'|, whichever side is nearer to
    the threshold on average; then each is refined by :func:`bayes_magnitude`."""
    out: list[Guess | None] = [None] * len(items)
    for s in THRESHOLDS:
        idx = [i for i, it in enumerate(items) if it.s == s]
        cands = CANDIDATES[s]
        w1 = sum(c.weight for c in cands if c.left == 1)
        mean = {side: sum(c.weight * math.log2(c.m) for c in cands if c.left == side)
                / max(1, sum(c.weight for c in cands if c.left == side)) for side in (0, 1)}
        near = 1 if mean[1] <= mean[0] else 0
        n_near = round(len(idx) * (w1 if near == 1 else sum(c.weight for c in cands) - w1)
                       / sum(c.weight for c in cands))
        order = sorted(idx, key=lambda i: abs(obs[i][0]))
        for rank, i in enumerate(order):
            g = bayes_magnitude(bl, cands, obs[i])
            side = near if rank < n_near else 1 - near
            out[i] = Guess(side if g.delta is None else g.left, g.delta)
    return [g for g in out if g is not None]


Attack = Callable[[Blinding, Sequence[Candidate], Sequence[int]], Guess]


def run_attack(attack: Attack, bl: Blinding, items: Sequence[Item], k: int, label: str) -> list[Guess]:
    obs = views(bl, items, k, label)
    return [attack(bl, CANDIDATES[it.s], o) for it, o in zip(items, obs, strict=True)]


# ----------------------------------------------------------------------------- the check


@dataclass(frozen=True)
class Outcome:
    correct: int
    bound: float
    exact_beyond_class: int
    exact_total: int

    @property
    def passes(self) -> bool:
        return self.correct <= self.bound and self.exact_beyond_class == 0


def judge(items: Sequence[Item], guesses: Sequence[Guess]) -> Outcome:
    n = len(items)
    sim_correct, pinned = simulator(items)
    correct = sum(int(g.left == it.left) for g, it in zip(guesses, items, strict=True))
    exact = [i for i, (g, it) in enumerate(zip(guesses, items, strict=True)) if g.delta == it.delta]
    bound = sim_correct + n * DELTA + math.sqrt(n * math.log(1 / FALSE_ALARM) / 2)
    return Outcome(correct, bound, sum(1 for i in exact if i not in pinned), len(exact))


def assert_no_better_than_simulator(items: Sequence[Item], guesses: Sequence[Guess]) -> Outcome:
    out = judge(items, guesses)
    assert out.correct <= out.bound, f"the CC recovers l in {out.correct} of {len(items)}, bound {out.bound:.1f}"
    assert out.exact_beyond_class == 0, f"the CC names Δ exactly in {out.exact_beyond_class} comparisons"
    return out


ITEMS = _items(200, "single")  # 2000 comparisons
REPEATED = _items(60, "repeated")  # 600 pairs, each compared k times


# ----------------------------------------------------------------------------- tests


def test_the_comparisons_include_ties_and_percentile_thresholds() -> None:
    assert any(it.delta == -1 for it in ITEMS)  # x = s: a tie (RevFRF compares with s + 1)
    p5, p95 = THRESHOLDS[0], THRESHOLDS[1]
    share_left = [float(np.mean(x <= s)) for x, s in ((COLUMN, p5), (COLUMN, p95))]
    assert share_left[0] < 0.1 and share_left[1] > 0.9
    sim, _ = simulator(ITEMS)
    assert sim < 0.85 * len(ITEMS)  # room for the companions to show a leak


@pytest.mark.parametrize(("attack", "leaky"), [(trial_division, OLD), (bayes_magnitude, FIXED)],
                         ids=["trial-division", "magnitude"])
def test_single_comparison_attacks(attack: Attack, leaky: Blinding) -> None:
    """One β' per comparison.  Library: no better than the simulator; Δ never named beyond
    its class.  Companion: the same check fails on the leaky variant."""
    assert_no_better_than_simulator(ITEMS, run_attack(attack, LIBRARY, ITEMS, 1, "single"))
    bad = judge(ITEMS, run_attack(attack, leaky, ITEMS, 1, "single"))
    assert not bad.passes and bad.correct > bad.bound and bad.exact_beyond_class > 0


@pytest.mark.parametrize(("attack", "leaky"), [(gcd_ratio, OLD), (bayes_magnitude, ONE_OCTAVE)],
                         ids=["gcd-ratio", "k-repeats"])
def test_repeated_comparisons_of_one_pair(attack: Attack, leaky: Blinding) -> None:
    """k = 16 comparisons of each pair: the gcd of their β', or their magnitudes together.
    The bound proved per comparison grows at most k-fold; this check holds the attack to the
    single-comparison excess δ, which the E-octave spread of ρ keeps at k = 16.  Companions:
    the gcd recovers M from the old blinding; with ρ in one octave (E = 1), 16 magnitudes
    pin M, and Δ is named where the simulator's class does not pin it."""
    assert_no_better_than_simulator(REPEATED, run_attack(attack, LIBRARY, REPEATED, 16, "repeated"))
    bad = judge(REPEATED, run_attack(attack, leaky, REPEATED, 16, "repeated"))
    assert not bad.passes and bad.exact_beyond_class > 0


def test_sign_inference_from_magnitudes_across_a_batch() -> None:
    obs = views(LIBRARY, ITEMS, 1, "batch")
    assert_no_better_than_simulator(ITEMS, batch_rank(LIBRARY, ITEMS, obs))
    bad = judge(ITEMS, batch_rank(FIXED, ITEMS, views(FIXED, ITEMS, 1, "batch")))
    assert not bad.passes and bad.correct > bad.bound


# ----------------------------------------------------------------------------- end to end

KEYS = dtpkc_test_keys(512)
OUT = KEYS.pk("cs").joint(KEYS.pk("u2"))


def old_holt_blind(share1: StrongKeyShare, c1: Ciphertext, c2: Ciphertext, rng: RandomSource) -> PartialDecryption:
    """LEAKY, for the companion only: the previous step 1, ``β = D^r·g^ρ`` with
    ``D = T1(m1)²·(1+N)·T1(m2)⁻²`` (or its inverse) and r uniform in [1, 2^σ)."""
    p = share1.params
    n2 = p.n2
    a = c1.t1 * c1.t1 % n2 * (1 + p.n) % n2
    b = c2.t1 * c2.t1 % n2
    alpha = rng.randbelow(2)
    d = a * invert(b, n2) % n2 if alpha == 1 else b * invert(a, n2) % n2
    r = mpz(rng.randbelow((1 << HOLT.sigma) - 1)) + 1
    beta = powmod_sec(d, r, n2) * p.g_pow(p.random_exponent(rng)) % n2
    return PartialDecryption(int(beta), int(share1.t1_pow(beta)))


def _cc_view(part: PartialDecryption) -> int:
    n = int(KEYS.params.n)
    b = int(psdec2_residue(KEYS.cc_share, part))
    return b if b < n // 2 else b - n


def test_trial_division_end_to_end_through_ciphertexts() -> None:
    """The measured attack, on real HoLT requests: the CC's strong decryption of each β, then
    trial division.  Library: no better than the simulator.  Old step 1: l and Δ recovered."""
    items = _items(6, "e2e")  # 66 comparisons
    rng = DeterministicRandom("test_holt_attacks/e2e")
    new, old = [], []
    for it in items:
        m2 = int(FP.encode(it.s)) + 1
        c1, c2 = encrypt(KEYS.pk("u1"), m2 + it.delta), encrypt(KEYS.pk("u2"), m2)
        new.append(_cc_view(holt_blind(KEYS.cs_share, c1, c2, OUT, params=HOLT, rng=rng)[1]))
        old.append(_cc_view(old_holt_blind(KEYS.cs_share, c1, c2, rng)))
    good = [trial_division(LIBRARY, CANDIDATES[it.s], [b]) for it, b in zip(items, new, strict=True)]
    assert_no_better_than_simulator(items, good)
    bad = [trial_division(OLD, CANDIDATES[it.s], [b]) for it, b in zip(items, old, strict=True)]
    assert all(g.left == it.left for g, it in zip(bad, items, strict=True))
    assert all(g.delta == it.delta for g, it in zip(bad, items, strict=True) if abs(2 * it.delta + 1) > TRIVIAL_DIVISOR)
