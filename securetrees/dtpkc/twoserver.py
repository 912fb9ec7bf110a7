"""HoAdd and HoLT: the two-server protocols of DT-PKC (``specs/dtpkc.md``).

The CS (:class:`CentralServer`) holds λ1 and its own weak key; the CC
(:class:`ComputationServer`) holds λ2 and its own weak key.  Each protocol is
three steps, exposed as plain functions so other roles (RevFRF's CS, which also
scores splits; its CC, which also refreshes) can compose them:

==========  ============================  ==========================================
protocol    step (party)                  function
==========  ============================  ==========================================
HoAdd       1. blind (CS)                 :func:`hoadd_blind`
            2. reveal and encrypt (CC)    :func:`hoadd_reveal`
            3. unmask (CS)                :func:`hoadd_finish`
HoLT        1. blind (CS)                 :func:`holt_blind`
            2. decide (CC)                :func:`holt_decide`
            3. un-flip (CS)               :func:`holt_finish`
==========  ============================  ==========================================

Every request carries a batch (one round trip for many additions or
comparisons).  Only T1 parts travel: strong decryption kills every power of g,
so T2 is useless to the CC.  Each T1 the CS sends is multiplied by ``g^ρ`` for a
fresh ρ, which strong decryption also kills; it makes the value independent of
the input ciphertexts, so a CC that has seen them elsewhere cannot strip the mask.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from securetrees._nt import invert, mpz, powmod_sec
from securetrees.dtpkc.ciphertext import Ciphertext, check_unit
from securetrees.dtpkc.keys import PublicKey, StrongKeyShare, SystemParams, WeakSecretKey
from securetrees.dtpkc.scheme import PartialDecryption, encrypt_residue, psdec2_residue
from securetrees.encoding import SignedRange, as_int
from securetrees.errors import (
    EncodingOverflowError,
    KeyMismatchError,
    ParameterError,
    ProtocolError,
    UnexpectedMessage,
)
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, Network, Party, handles, message

__all__ = [
    "MIN_SPREAD",
    "CentralServer",
    "ComputationServer",
    "HoAddPending",
    "HoAddReply",
    "HoAddRequest",
    "HoLTBlinding",
    "HoLTParams",
    "HoLTPending",
    "HoLTReply",
    "HoLTRequest",
    "default_sum_key",
    "draw_holt_blinding",
    "hoadd_blind",
    "hoadd_finish",
    "hoadd_reveal",
    "holt_blind",
    "holt_decide",
    "holt_delta",
    "holt_finish",
    "holt_open",
]


# --------------------------------------------------------------------------- parameters


MIN_KAPPA = 40
"""The smallest statistical parameter κ that :class:`HoLTParams` accepts."""

MIN_SPREAD = 32
"""The fewest octaves E of ρ that :class:`HoLTParams` accepts: the CC's advantage per comparison
over the simulator, ``δ = log2(3)/E + 2^(4-κ)``, is then at most 0.0496 (``specs/dtpkc.md``); at
E = 1 the bound says nothing."""


def holt_delta(spread: int, kappa: int) -> float:
    """``δ = log2(3)/E + 2^(4-κ)``: the bound on the CC's advantage per comparison."""
    return math.log2(3) / spread + 2.0 ** (4 - kappa)


@dataclass(frozen=True)
class HoLTParams:
    """HoLT's input bound, blinding sizes and statistical parameter (``specs/dtpkc.md`` "HoLT").

    * ``ell`` (ℓ): inputs ``|m| < 2^ℓ`` (R1), so ``M = |2(m1 - m2) + 1| < 2^(ℓ+2)``;
    * ``sigma`` (σ): the multiplier ρ is at least ``2^(σ-1)``;
    * ``spread`` (E): ρ is log-uniform over E octaves, ``[2^(σ-1), 2^(σ-1+E))``, which blurs
      the magnitude ``log2 M`` the CC sees by E bits;
    * ``kappa`` (κ): the additive term ν is uniform in ``[-W, W]`` with ``W = 2^(ℓ+2+κ)``, and
      the law of ``|β'|`` is within statistical distance ``2^(4-κ)`` of a smooth scale family
      of M (no divisibility, no exact value).

    Defaults ℓ = 128, σ = 256, E = 96, κ = 60.  Construction refuses ``E < 32`` (:data:`MIN_SPREAD`), ``κ < 40`` and
    ``σ < ℓ + 2κ + 3`` (which keeps ``W ≤ 2^-κ·2^(σ-1)``, so ν never flips a sign and
    hardly shows at the edges); :meth:`check` refuses any configuration that could wrap
    modulo N: ``ℓ + σ + E + 3 < |N|``.
    """

    ell: int = 128
    sigma: int = 256
    spread: int = 96
    kappa: int = 60

    def __post_init__(self) -> None:
        for name in ("ell", "sigma", "spread", "kappa"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ParameterError(f"HoLT {name} must be a positive integer")
        if self.spread < MIN_SPREAD:
            raise ParameterError(
                f"HoLT spread must be at least {MIN_SPREAD} octaves (the CC's advantage per comparison "
                f"is then at most {holt_delta(MIN_SPREAD, MIN_KAPPA):.4f}; at spread={self.spread} it is "
                f"{min(1.0, holt_delta(self.spread, self.kappa)):.4f})"
            )
        if self.kappa < MIN_KAPPA:
            raise ParameterError(f"HoLT kappa must be at least {MIN_KAPPA} (statistical hiding 2^-kappa)")
        if self.sigma < self.ell + 2 * self.kappa + 3:
            raise ParameterError(
                f"HoLT sigma={self.sigma} is too small for ell={self.ell}, kappa={self.kappa} "
                "(need sigma >= ell + 2*kappa + 3)"
            )

    @property
    def nu_bound(self) -> int:
        """``W = 2^(ℓ+2+κ)``: the additive term ν is uniform in ``[-W, W]``."""
        return 1 << (self.ell + 2 + self.kappa)

    def check(self, bits: int) -> None:
        """Raise :class:`ParameterError` unless ``ℓ + σ + E + 3 < |N|``."""
        if not self.ell + self.sigma + self.spread + 3 < bits:
            raise ParameterError(
                f"HoLT with ell={self.ell}, sigma={self.sigma}, spread={self.spread} could wrap "
                f"modulo a {bits}-bit N (need ell + sigma + spread + 3 < |N|)"
            )

    def inputs(self, n: int) -> SignedRange:
        """The input range ``|m| < 2^ℓ`` over ``N``: encrypt HoLT inputs with it to check the claim."""
        self.check(int(n).bit_length())
        return SignedRange.bits(int(n), self.ell)

    def blinded(self, n: int) -> SignedRange:
        """The range of ``β' = ±ρ·M + ν``: ``|β'| < 2^(ℓ+σ+E+2)``; outside it the inputs broke the bound."""
        return SignedRange.bits(int(n), self.ell + self.sigma + self.spread + 2)


@dataclass(frozen=True, repr=False)
class HoLTBlinding:
    """One comparison's secret blinding, drawn by the CS (:func:`draw_holt_blinding`).

    The CC decrypts ``β' = s·ρ·(2(m1 - m2) + 1) + ν`` with ``s = +1`` if α = 1 and ``-1``
    if α = 0 (:meth:`blinded`).  Since ``|ν| ≤ W < ρ``, the sign of β' is the sign of
    ``s·(2(m1 - m2) + 1)``; since ν is symmetric, ``|β'|`` has the same law for both signs.
    """

    alpha: int
    rho: mpz
    nu: mpz

    def blinded(self, m1: int, m2: int) -> int:
        """The signed value the CC decrypts for inputs ``(m1, m2)`` (the integer model of step 1)."""
        d = 2 * (int(m1) - int(m2)) + 1
        return (d if self.alpha == 1 else -d) * int(self.rho) + int(self.nu)

    def __repr__(self) -> str:
        return "HoLTBlinding(<secret>)"


def draw_holt_blinding(params: HoLTParams, rng: RandomSource = SYSTEM_RANDOM) -> HoLTBlinding:
    """The CS's secret draws for one comparison, in this order:

    1. the coin α uniform in {0, 1};
    2. an octave e uniform in ``[0, E)``;
    3. ρ in ``[2^(σ-1+e), 2^(σ+e))`` with probability ∝ 1/ρ: a uniform candidate k, kept
       when a uniform ``u < k`` falls below ``2^(σ-1+e)`` (about 1.44 tries; the tries depend
       only on the secret draws, never on the inputs);
    4. ν uniform in ``[-W, W]``, ``W = 2^(ℓ+2+κ)``.

    So ρ is log-uniform over ``[2^(σ-1), 2^(σ-1+E))`` and the CC's ``log2|β'|`` is
    ``log2 M`` plus a value spread evenly over E octaves.
    """
    alpha = rng.randbelow(2)
    low = 1 << (params.sigma - 1 + rng.randbelow(params.spread))
    while True:
        k = low + rng.randbelow(low)
        if rng.randbelow(k) < low:
            break
    w = params.nu_bound
    nu = rng.randbelow(2 * w + 1) - w
    return HoLTBlinding(alpha, mpz(k), mpz(nu))


# --------------------------------------------------------------------------- messages


@message("dtpkc.hoadd.request", sender="cs", receiver="cc")
@dataclass(frozen=True)
class HoAddRequest(Message):
    """CS → CC, HoAdd step 1: per item ``X`` and ``X^λ1`` and the output key's component ids."""

    x: tuple[int, ...]
    x_share: tuple[int, ...]
    out_keys: tuple[tuple[bytes, ...], ...]


@message("dtpkc.hoadd.reply", reply_to=HoAddRequest)
@dataclass(frozen=True)
class HoAddReply(Message):
    """CC → CS, HoAdd step 2: per item ``HoEnc_out(a + b + α)`` as ``(T1, T2)``."""

    t1: tuple[int, ...]
    t2: tuple[int, ...]


@message("dtpkc.holt.request", sender="cs", receiver="cc")
@dataclass(frozen=True)
class HoLTRequest(Message):
    """CS → CC, HoLT step 1: per comparison ``β`` and ``β^λ1``; the batch's output keys (their
    component ids), under each of which the CC encrypts every comparison's bit.  One key list
    for the whole batch, not one key per comparison: the CC cannot tell which key a comparison
    is for (RevFRF lists every live participant, so the node's provider stays hidden)."""

    beta: tuple[int, ...]
    beta_share: tuple[int, ...]
    out_keys: tuple[tuple[bytes, ...], ...]


@message("dtpkc.holt.reply", reply_to=HoLTRequest)
@dataclass(frozen=True)
class HoLTReply(Message):
    """CC → CS, HoLT step 2: per comparison and per output key of the request (comparison-major)
    ``HoEnc_{h_CS·h_j}(u)`` as ``(T1, T2)``."""

    t1: tuple[int, ...]
    t2: tuple[int, ...]


# --------------------------------------------------------------------------- steps


@dataclass(frozen=True, repr=False)
class HoAddPending:
    """The CS's state between HoAdd steps 1 and 3 (the mask α is secret)."""

    alpha: mpz
    out_key: PublicKey

    def __repr__(self) -> str:
        return f"HoAddPending(out_key={self.out_key!r}, alpha=<secret>)"


@dataclass(frozen=True, repr=False)
class HoLTPending:
    """The CS's state between HoLT steps 1 and 3 (the coin α is secret)."""

    alpha: int
    out_key: PublicKey

    def __repr__(self) -> str:
        return f"HoLTPending(out_key={self.out_key!r}, alpha=<secret>)"


def _check_share(share: StrongKeyShare, index: int, role: str) -> None:
    if share.index != index:
        raise ParameterError(f"the {role} holds strong-key share λ{index}, got λ{share.index}")


def _same_system(params: SystemParams, *keys: PublicKey) -> None:
    for k in keys:
        if k.params != params:
            raise KeyMismatchError("ciphertext or key belongs to another DT-PKC system")


def _mask_t1(params: SystemParams, t1: mpz, rng: RandomSource) -> mpz:
    """``t1 · g^ρ`` for a fresh ρ ∈ [1, N/4] (invisible to strong decryption)."""
    return t1 * params.g_pow(params.random_exponent(rng)) % params.n2


def default_sum_key(*cts: Ciphertext) -> PublicKey:
    """The joint key of the distinct keys of ``cts`` (``h_a · h_b`` for two keys, ``h_a`` for one)."""
    distinct: dict[bytes, PublicKey] = {}
    for c in cts:
        distinct.setdefault(c.pk.key_id, c.pk)
    keys = list(distinct.values())
    return keys[0].joint(*keys[1:])


def hoadd_blind(
    share1: StrongKeyShare,
    cts: Sequence[Ciphertext],
    *,
    out_key: PublicKey | None = None,
    rng: RandomSource = SYSTEM_RANDOM,
) -> tuple[HoAddPending, PartialDecryption]:
    """HoAdd step 1 (CS, λ1): ``X = Π T1_i · (1 + αN) · g^ρ`` with α uniform in Z_N; send
    ``(X, X^λ1)``.  Any number of inputs under any keys of the system.

    Reveals to the CC: nothing but ``Σ m_i + α``, uniform in Z_N.
    """
    _check_share(share1, 1, "CS")
    if len(cts) < 1:
        raise ParameterError("HoAdd needs at least one ciphertext")
    p = share1.params
    out = default_sum_key(*cts) if out_key is None else out_key
    _same_system(p, out, *(c.pk for c in cts))
    alpha = mpz(rng.randbelow(int(p.n)))
    x = 1 + alpha * p.n
    for c in cts:
        x = x * c.t1 % p.n2
    x = _mask_t1(p, x, rng)
    return HoAddPending(alpha, out), PartialDecryption(int(x), int(share1.t1_pow(x)))


def hoadd_reveal(
    share2: StrongKeyShare,
    partial: PartialDecryption,
    out_key: PublicKey,
    *,
    rng: RandomSource = SYSTEM_RANDOM,
) -> Ciphertext:
    """HoAdd step 2 (CC, λ2): ``M = L(X^λ2 · X^λ1) = Σm + α mod N``; return ``HoEnc_out(M)``."""
    _check_share(share2, 2, "CC")
    m = psdec2_residue(share2, partial)
    return encrypt_residue(out_key, m, rng=rng)


def hoadd_finish(pending: HoAddPending, reply: Ciphertext, *, rng: RandomSource = SYSTEM_RANDOM) -> Ciphertext:
    """HoAdd step 3 (CS): add the constant ``-α``, then re-randomise (the CC knows its reply)."""
    if reply.pk.key_id != pending.out_key.key_id:
        raise KeyMismatchError("HoAdd reply is not under the requested output key")
    return reply.add_constant(-int(pending.alpha)).rerandomize(rng=rng)


def holt_blind(
    share1: StrongKeyShare,
    c1: Ciphertext,
    c2: Ciphertext,
    out_key: PublicKey,
    *,
    params: HoLTParams = HoLTParams(),
    rng: RandomSource = SYSTEM_RANDOM,
) -> tuple[HoLTPending, PartialDecryption]:
    """HoLT step 1 (CS, λ1), for ``l = [m1 < m2]``.

    Draws (α, ρ, ν) with :func:`draw_holt_blinding`.  With ``D = T1(m1)·T1(m2)⁻¹`` (α = 1)
    or ``T1(m2)·T1(m1)⁻¹`` (α = 0), sends ``β = D^(2ρ) · (1 + cN) · g^ρ'`` with
    ``c = ρ + ν`` (α = 1) or ``ν - ρ`` (α = 0), and ``β^λ1``.  Strong decryption gives
    ``β' = ±ρ·(2(m1 - m2) + 1) + ν``: the doubled odd difference of erratum E1, scaled by ρ
    and shifted by ν.

    Reveals to the CC: the uniform bit u (the sign of β'), and ``|β'|``, whose law depends
    on the inputs only through ``M = |2(m1 - m2) + 1|``, and on M only as a blurred scale
    (``specs/dtpkc.md`` "What the CC learns in HoLT").
    """
    _check_share(share1, 1, "CS")
    p = share1.params
    params.check(p.bits)
    _same_system(p, c1.pk, c2.pk, out_key)
    n, n2 = p.n, p.n2
    bl = draw_holt_blinding(params, rng)
    num, den = (c1.t1, c2.t1) if bl.alpha == 1 else (c2.t1, c1.t1)
    d = num * invert(den, n2) % n2
    shift = (bl.rho + bl.nu if bl.alpha == 1 else bl.nu - bl.rho) % n
    beta = powmod_sec(d, 2 * bl.rho, n2) * (1 + shift * n) % n2  # ρ is secret: it hides M
    beta = _mask_t1(p, beta, rng)
    return HoLTPending(bl.alpha, out_key), PartialDecryption(int(beta), int(share1.t1_pow(beta)))


def holt_open(share2: StrongKeyShare, partial: PartialDecryption, *, params: HoLTParams = HoLTParams()) -> int:
    """HoLT step 2 without the encryption (CC, λ2): ``β' = L(β^λ2·β^λ1)``; ``u = 1`` iff
    ``β' > N/2`` (the threshold rule; erratum E3).  :func:`holt_decide` encrypts u.

    A ``β'`` outside ``|β'| < 2^(ℓ+σ+E+2)`` means an input broke ``|m| < 2^ℓ``: refused with
    :class:`EncodingOverflowError`; ``β' = 0`` (which no honest blinding gives: ``|β'| ≥ ρ - W > 0``)
    is refused as a protocol violation.
    """
    _check_share(share2, 2, "CC")
    p = share2.params
    params.check(p.bits)
    beta = psdec2_residue(share2, partial)
    if beta == 0:
        raise ProtocolError("HoLT β' = 0 (no blinding does that): refused")
    try:
        params.blinded(int(p.n)).extract(int(beta))
    except EncodingOverflowError as exc:
        raise EncodingOverflowError(
            "HoLT input out of range: |m| < 2^ell does not hold for the compared values"
        ) from exc
    return 1 if beta > p.n // 2 else 0


def holt_decide(
    share2: StrongKeyShare,
    partial: PartialDecryption,
    out_key: PublicKey,
    *,
    params: HoLTParams = HoLTParams(),
    rng: RandomSource = SYSTEM_RANDOM,
) -> Ciphertext:
    """HoLT step 2 (CC, λ2): u by :func:`holt_open`; return ``HoEnc_{out}(u)``."""
    return encrypt_residue(out_key, mpz(holt_open(share2, partial, params=params)), rng=rng)


def holt_finish(pending: HoLTPending, reply: Ciphertext, *, rng: RandomSource = SYSTEM_RANDOM) -> Ciphertext:
    """HoLT step 3 (CS): α = 1: ``[[l]] = [[u]]``; α = 0: ``[[l]] = [[1]]·[[u]]⁻¹`` (inverse,
    not ``^(N-1)``; erratum E8); re-randomised in both cases, so the CC cannot recognise
    its own reply and learn α."""
    if reply.pk.key_id != pending.out_key.key_id:
        raise KeyMismatchError("HoLT reply is not under the requested output key")
    out = reply if pending.alpha == 1 else (-reply).add_constant(1)
    return out.rerandomize(rng=rng)


# --------------------------------------------------------------------------- roles


def _reply_cts(out_keys: Sequence[PublicKey], t1: Sequence[int], t2: Sequence[int]) -> list[Ciphertext]:
    if not len(t1) == len(t2) == len(out_keys):
        raise UnexpectedMessage("reply has the wrong number of ciphertexts")
    return [Ciphertext.from_ints(k, a, b) for k, a, b in zip(out_keys, t1, t2, strict=True)]


class CentralServer(Party):
    """The CS of RevFRF: holds λ1 and its own weak key; runs HoAdd and HoLT with the CC.

    Subclass or compose it: :meth:`hoadd_many` and :meth:`holt_many` are one round trip each.
    """

    role = "cs"

    def __init__(
        self,
        name: str,
        network: Network,
        *,
        share: StrongKeyShare,
        weak_key: WeakSecretKey,
        cc: str = "cc",
        holt_params: HoLTParams = HoLTParams(),
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> None:
        _check_share(share, 1, "CS")
        if weak_key.public.params != share.params:
            raise KeyMismatchError("weak key and strong-key share belong to different systems")
        holt_params.check(share.params.bits)
        super().__init__(name, network)
        self._share = share
        self._weak = weak_key
        self.cc = cc
        self.holt_params = holt_params
        self._rng = rng

    @property
    def params(self) -> SystemParams:
        return self._share.params

    @property
    def public_key(self) -> PublicKey:
        """The CS's own weak public key ``h_CS``."""
        return self._weak.public

    def hoadd(self, a: Ciphertext, b: Ciphertext, *, out_key: PublicKey | None = None) -> Ciphertext:
        """``[[a + b]]`` under ``out_key`` (default ``h_a · h_b``): one round trip."""
        return self.hoadd_many([(a, b)], out_keys=None if out_key is None else [out_key])[0]

    def hoadd_many(
        self,
        items: Sequence[Sequence[Ciphertext]],
        *,
        out_keys: Sequence[PublicKey] | None = None,
    ) -> list[Ciphertext]:
        """Batch HoAdd: one sum per item (each a sequence of ciphertexts under any keys), in
        one round trip.  Reveals to the CC: one uniformly masked sum per item."""
        if out_keys is not None and len(out_keys) != len(items):
            raise ParameterError("one output key per item")
        pendings, partials = [], []
        for i, cts in enumerate(items):
            pend, part = hoadd_blind(
                self._share, list(cts), out_key=None if out_keys is None else out_keys[i], rng=self._rng
            )
            pendings.append(pend)
            partials.append(part)
        reply = self.call(
            self.cc,
            HoAddRequest(
                tuple(p.t1 for p in partials),
                tuple(p.share for p in partials),
                tuple(p.out_key.components for p in pendings),
            ),
            expect=HoAddReply,
        )
        cts_back = _reply_cts([p.out_key for p in pendings], reply.t1, reply.t2)
        return [hoadd_finish(p, c, rng=self._rng) for p, c in zip(pendings, cts_back, strict=True)]

    def holt(self, c1: Ciphertext, c2: Ciphertext, *, partner: PublicKey | None = None) -> Ciphertext:
        """``[[m1 < m2]]`` under ``h_CS · h_partner`` (default: the key of ``c2``)."""
        return self.holt_many([(c1, c2)], partners=None if partner is None else [partner])[0]

    def holt_many(
        self,
        pairs: Sequence[tuple[Ciphertext, Ciphertext]],
        *,
        partners: Sequence[PublicKey] | None = None,
        fan_out: Sequence[PublicKey] = (),
    ) -> list[Ciphertext]:
        """Batch HoLT: ``[[m1 < m2]]`` for each pair, each under ``h_CS · h_partner``
        (default: the key of the pair's second ciphertext; a partner key that already
        contains ``h_CS`` is used as it is), in one round trip.

        The request names the batch's output keys once, sorted: the distinct pair keys and
        ``h_CS · h_k`` for each key of ``fan_out``; the CC encrypts every comparison's bit
        under each, and the CS keeps each pair's own.  So the CC learns the set of keys of
        the batch, not which comparison is for which key; ``fan_out`` makes that set a
        constant (it costs the CC one encryption per comparison and key)."""
        if partners is not None and len(partners) != len(pairs):
            raise ParameterError("one partner key per pair")
        keys: dict[bytes, PublicKey] = {}

        def joint(partner: PublicKey) -> PublicKey:
            out = partner if self.public_key.key_id in partner.components else self.public_key.joint(partner)
            return keys.setdefault(out.key_id, out)

        pendings, partials = [], []
        for i, (c1, c2) in enumerate(pairs):
            out = joint(c2.pk if partners is None else partners[i])
            pend, part = holt_blind(self._share, c1, c2, out, params=self.holt_params, rng=self._rng)
            pendings.append(pend)
            partials.append(part)
        for k in fan_out:
            joint(k)
        order = sorted(keys)
        reply = self.call(
            self.cc,
            HoLTRequest(
                tuple(p.t1 for p in partials),
                tuple(p.share for p in partials),
                tuple(keys[k].components for k in order),
            ),
            expect=HoLTReply,
        )
        width = len(order)
        if not len(reply.t1) == len(reply.t2) == width * len(pendings):
            raise UnexpectedMessage("reply has the wrong number of ciphertexts")
        at = {k: j for j, k in enumerate(order)}
        out_cts = []
        for i, p in enumerate(pendings):
            j = i * width + at[p.out_key.key_id]
            out_cts.append(holt_finish(p, Ciphertext.from_ints(p.out_key, reply.t1[j], reply.t2[j]), rng=self._rng))
        return out_cts


class ComputationServer(Party):
    """The CC of RevFRF: holds λ2 and its own weak key; answers HoAdd and HoLT requests.

    It encrypts results only under keys built from its directory of weak public keys
    (party name → key), and never under a key made of the requester's own key alone.
    HoAdd and HoLT requests are admitted from the CS role only (the message declarations).
    """

    role = "cc"

    def __init__(
        self,
        name: str,
        network: Network,
        *,
        share: StrongKeyShare,
        weak_key: WeakSecretKey,
        directory: Mapping[str, PublicKey],
        holt_params: HoLTParams = HoLTParams(),
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> None:
        _check_share(share, 2, "CC")
        holt_params.check(share.params.bits)
        super().__init__(name, network)
        self._share = share
        self._weak = weak_key
        self.holt_params = holt_params
        self._rng = rng
        self._by_id: dict[bytes, PublicKey] = {}
        self._owner: dict[bytes, str] = {}
        for party, pk in directory.items():
            self.register_key(party, pk)

    @property
    def params(self) -> SystemParams:
        return self._share.params

    @property
    def public_key(self) -> PublicKey:
        """The CC's own weak public key."""
        return self._weak.public

    def register_key(self, party: str, pk: PublicKey) -> None:
        """Add ``party``'s weak public key to the directory."""
        if pk.params != self.params or pk.is_joint:
            raise KeyMismatchError("the directory holds weak keys of this system only")
        self._by_id[pk.key_id] = pk
        self._owner[pk.key_id] = party

    def remove_key(self, party: str) -> None:
        """Drop ``party``'s key (revocation): requests naming it are refused from then on."""
        for kid in [k for k, p in self._owner.items() if p == party]:
            del self._by_id[kid]
            del self._owner[kid]

    def resolve_key(self, sender: str, components: Iterable[bytes]) -> PublicKey:
        """The joint key of ``components``, all from the directory and not all the sender's."""
        comps = list(components)
        if not comps:
            raise UnexpectedMessage("empty output key")
        keys = []
        for kid in comps:
            pk = self._by_id.get(kid)
            if pk is None:
                raise KeyMismatchError("output key names a key outside the directory")
            keys.append(pk)
        if all(self._owner[k] == sender for k in comps):
            raise ProtocolError("refusing to encrypt a result under the requester's own key alone")
        return keys[0].joint(*keys[1:])

    def _batch(
        self, sender: str, t1: Sequence[int], shares: Sequence[int], out_keys: Sequence[tuple[bytes, ...]]
    ) -> list[tuple[PartialDecryption, PublicKey]]:
        if not len(t1) == len(shares) == len(out_keys) or not t1:
            raise UnexpectedMessage("request fields have different lengths or are empty")
        p = self.params
        out = []
        for x, s, k in zip(t1, shares, out_keys, strict=True):
            check_unit(as_int(x), p.n, p.n2, "T1")
            out.append((PartialDecryption(x, s), self.resolve_key(sender, k)))
        return out

    @handles(HoAddRequest)
    def on_hoadd(self, sender: str, msg: HoAddRequest) -> HoAddReply:
        """HoAdd step 2 for each item.  Learns: ``Σm + α`` per item (uniform)."""
        cts = [
            hoadd_reveal(self._share, part, key, rng=self._rng)
            for part, key in self._batch(sender, msg.x, msg.x_share, msg.out_keys)
        ]
        return HoAddReply(tuple(int(c.t1) for c in cts), tuple(int(c.t2) for c in cts))

    @handles(HoLTRequest)
    def on_holt(self, sender: str, msg: HoLTRequest) -> HoLTReply:
        """HoLT step 2 for each comparison, its bit encrypted under every output key of the
        batch.  Learns: the uniform bit u and |β'|, a blurred scale of
        ``M = |2(m1 - m2) + 1|`` (the magnitude hint), per comparison; the batch's keys."""
        if not len(msg.beta) == len(msg.beta_share) or not msg.beta or not msg.out_keys:
            raise UnexpectedMessage("request fields have different lengths or are empty")
        p = self.params
        keys = [self.resolve_key(sender, k) for k in msg.out_keys]
        t1: list[int] = []
        t2: list[int] = []
        for x, s in zip(msg.beta, msg.beta_share, strict=True):
            check_unit(as_int(x), p.n, p.n2, "T1")
            u = mpz(holt_open(self._share, PartialDecryption(x, s), params=self.holt_params))
            for k in keys:
                c = encrypt_residue(k, u, rng=self._rng)
                t1.append(int(c.t1))
                t2.append(int(c.t2))
        return HoLTReply(tuple(t1), tuple(t2))
