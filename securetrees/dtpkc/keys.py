"""DT-PKC keys: system parameters, weak keys, strong-key shares, the KGC.

The math is ``specs/dtpkc.md``, "Key generation" (the RevFRF appendix's version
has errata, listed in ``specs/dtpkc.md``):

1. safe primes ``p = 2p'+1``, ``q = 2q'+1`` of ``k/2`` bits, ``N = pq`` of exactly k bits;
2. strong key ``λ = lcm(p-1, q-1) = 2p'q'`` (not lcm/2);
3. generator ``g = -a^(2N) mod N²`` with ``ord(g) = λ`` checked;
4. the split ``λ1 + λ2 ≡ s (mod λN)`` with ``s ≡ 0 (mod λ)``, ``s ≡ 1 (mod N)``;
5. weak keys ``θ_i ∈ [1, N/4]``, ``h_i = g^θ_i``;
6. joint keys ``h_i · h_j`` (the seed's additive "pk_i + pk_j").

Four distinct key types keep roles apart: :class:`PublicKey` (a weak or
joint public key), :class:`WeakSecretKey` (θ of one party),
:class:`StrongKeyShare` (λ1 or λ2 of one server) and :class:`StrongSecretKey`
(λ itself, for the KGC and tests only).  A share is not a strong key, so mypy
rejects one where the other is expected.  Every secret exponent goes through
:func:`~securetrees._nt.powmod_sec`.
"""

from __future__ import annotations

import hashlib
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

import gmpy2

from securetrees._nt import FixedBaseTable, check_exponent, invert, mpz, powmod_sec, safe_prime_pair
from securetrees.encoding import SignedRange
from securetrees.errors import (
    InsecureParameterWarning,
    KeyMismatchError,
    ParameterError,
    ProtocolError,
    RevokedError,
    TypeMismatchError,
)
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = [
    "DEFAULT_BITS",
    "DEFAULT_TABLE_WINDOW",
    "KGC",
    "PublicKey",
    "StrongKeyShare",
    "StrongSecretKey",
    "SystemParams",
    "TableCache",
    "WeakSecretKey",
    "check_key_size",
    "generate_system",
    "generate_weak_key",
    "split_strong_key",
    "system_from_primes",
]

DEFAULT_BITS: Final = 2048
MIN_SECURE_BITS: Final = 2048
MIN_INSECURE_BITS: Final = 1024
DEFAULT_TABLE_WINDOW: Final = 6
"""Comb window for g and h: at 2048 bits one table is ~11 MB (w=8 would be ~34 MB)."""

KEY_ID_BYTES: Final = 16


def check_key_size(bits: int, *, allow_insecure: bool) -> None:
    """The key-size policy (``specs/parameters.md``): >= 2048 bits; 1024 <= bits < 2048 only with
    ``allow_insecure=True`` (emits :class:`InsecureParameterWarning`); smaller never
    (test keys come from :mod:`securetrees.testing.dtpkc`)."""
    if not isinstance(bits, int) or isinstance(bits, bool) or bits % 2:
        raise ParameterError(f"key size must be an even integer, got {bits!r}")
    if bits >= MIN_SECURE_BITS:
        return
    if bits < MIN_INSECURE_BITS:
        raise ParameterError(f"{bits}-bit keys are refused (minimum {MIN_INSECURE_BITS}, default 2048)")
    if not allow_insecure:
        raise ParameterError(
            f"{bits}-bit keys give about 80-bit security; pass allow_insecure=True to use them"
        )
    warnings.warn(
        f"{bits}-bit DT-PKC key: about 80-bit security, disallowed for new protection",
        InsecureParameterWarning,
        stacklevel=3,
    )


def _digest(domain: bytes, *values: int | mpz) -> bytes:
    h = hashlib.sha256(domain)
    for v in values:
        raw = int(v).to_bytes((int(v).bit_length() + 7) // 8 or 1, "big")
        h.update(len(raw).to_bytes(4, "big") + raw)
    return h.digest()[:KEY_ID_BYTES]


class TableCache:
    """Lazily built fixed-base comb tables (``_nt.FixedBaseTable``) for g and each h.

    A base gets its table on its ``build_after``-th exponentiation (so a one-off
    joint key does not pay for a table), and at most ``max_bases`` tables are
    kept (least recently used dropped).  ``window=None`` turns tables off.
    Memory per table is ``ceil(B/w) * 2^w`` residues mod N² (``B = |N/4|`` bits): at
    2048 bits and w = 6 about 11 MB, at w = 8 about 34 MB.  Every exponentiation
    costs the same ``ceil(B/w) - 1`` multiplications, but which entries it reads depends
    on the exponent (visible to cache timing), so tables serve encryption randomness
    only, never secret keys.
    """

    def __init__(
        self, window: int | None = DEFAULT_TABLE_WINDOW, *, max_bases: int = 8, build_after: int = 2
    ) -> None:
        self._lock = threading.Lock()
        self.configure(window, max_bases=max_bases, build_after=build_after)

    def configure(self, window: int | None, *, max_bases: int = 8, build_after: int = 2) -> None:
        """Change the policy; drops every table built so far."""
        if window is not None and not 1 <= window <= 12:
            raise ParameterError("table window must be None (off) or in [1, 12]")
        if max_bases < 1 or build_after < 1:
            raise ParameterError("max_bases and build_after must be positive")
        with self._lock:
            self.window = window
            self.max_bases = max_bases
            self.build_after = build_after
            self._tables: OrderedDict[int, FixedBaseTable] = OrderedDict()
            self._uses: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._tables)

    def table(self, base: mpz, modulus: mpz, exp_bits: int, *, build: bool = False) -> FixedBaseTable | None:
        """The table for ``base`` if present (building it if due, or at once if ``build``)."""
        if self.window is None:
            return None
        key = int(base)
        with self._lock:
            tab = self._tables.get(key)
            if tab is not None:
                self._tables.move_to_end(key)
                return tab
            uses = self._uses.get(key, 0) + 1
            if len(self._uses) >= 4096:  # forget use counts of one-off bases
                self._uses.clear()
            self._uses[key] = uses
            if not build and uses < self.build_after:
                return None
            window = self.window
        tab = FixedBaseTable.build(base, modulus, exp_bits, window)
        with self._lock:
            self._tables[key] = tab
            self._uses.pop(key, None)
            while len(self._tables) > self.max_bases:
                self._tables.popitem(last=False)
        return tab

    def pow(self, base: mpz, exp: mpz, modulus: mpz, exp_bits: int) -> mpz:
        """``base^exp mod modulus`` for a secret exponent ``0 <= exp < 2^exp_bits`` (encryption
        randomness); :class:`~securetrees.errors.ExponentRangeError` outside that bound.

        With a table: ``ceil(exp_bits / w) - 1`` multiplications whatever ``exp`` is.  Before the
        base's table is built, with tables off, or with a table built for fewer bits:
        :func:`~securetrees._nt.powmod_sec`.
        """
        e = check_exponent(exp, exp_bits)
        tab = self.table(base, modulus, exp_bits)
        if tab is None or tab.exp_bits < exp_bits:
            return powmod_sec(base, e, modulus)
        return tab.pow(e, exp_bits)


@dataclass(frozen=True, eq=False)
class SystemParams:
    """The public system parameters ``(N, g)`` every DT-PKC key of one KGC shares."""

    n: mpz
    g: mpz
    tables: TableCache = field(default_factory=TableCache, repr=False)
    _n2: mpz = field(init=False, repr=False)
    _id: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", mpz(self.n))
        object.__setattr__(self, "g", mpz(self.g))
        n2 = self.n * self.n
        if self.n < 15 or self.n % 2 == 0 or not 1 < self.g < n2 - 1 or gmpy2.gcd(self.g, self.n) != 1:
            raise ParameterError("invalid DT-PKC system parameters (N, g)")
        object.__setattr__(self, "_n2", n2)
        object.__setattr__(self, "_id", _digest(b"securetrees/dtpkc/params/v1", self.n, self.g))

    @property
    def n2(self) -> mpz:
        """``N²``, the ciphertext modulus."""
        return self._n2

    @property
    def params_id(self) -> bytes:
        """A short id: SHA-256 of (N, g), truncated to 16 bytes."""
        return self._id

    @property
    def bits(self) -> int:
        """``|N|``."""
        return int(self.n.bit_length())

    @property
    def signed(self) -> SignedRange:
        """The default signed plaintext range ``|m| < N/3`` (the middle third is the overflow band)."""
        return SignedRange.thirds(int(self.n))

    @property
    def r_bound(self) -> mpz:
        """Encryption randomness is uniform in ``[1, N/4]`` (``specs/dtpkc.md``, "Operations", HoEnc)."""
        return self.n // 4

    @property
    def exponent_bits(self) -> int:
        """B, the bit length of ``N/4``: every encryption-randomness exponent is below ``2^B``."""
        return int(self.r_bound.bit_length())

    def random_exponent(self, rng: RandomSource) -> mpz:
        """A uniform ``r ∈ [1, N/4]``."""
        return mpz(rng.randbelow(int(self.r_bound))) + 1

    def g_pow(self, exp: mpz) -> mpz:
        """``g^exp mod N²`` for a secret ``0 <= exp < 2^exponent_bits`` (encryption randomness):
        a comb table's fixed ``ceil(B / w) - 1`` multiplications, or ``powmod_sec`` (:meth:`TableCache.pow`)."""
        return self.tables.pow(self.g, exp, self.n2, self.exponent_bits)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SystemParams) and self.params_id == other.params_id

    def __hash__(self) -> int:
        return hash(self.params_id)


@dataclass(frozen=True, eq=False)
class PublicKey:
    """A weak or joint public key ``(N, g, h)``.

    ``components`` lists the key ids of the weak keys whose product ``h`` is
    (sorted, with repetition), so a party can check what a joint key is made of.
    A key is identified by ``key_id`` = SHA-256 of (N, g, h), truncated.
    """

    params: SystemParams
    h: mpz
    components: tuple[bytes, ...] = ()
    _id: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        p = self.params
        h = mpz(self.h) % p.n2
        object.__setattr__(self, "h", h)
        if not 1 < h < p.n2 - 1 or gmpy2.gcd(h, p.n) != 1:
            raise ParameterError("public key h must be a unit modulo N², not ±1")
        key_id = _digest(b"securetrees/dtpkc/pk/v1", p.n, p.g, h)
        object.__setattr__(self, "_id", key_id)
        comps = tuple(sorted(self.components)) if self.components else (key_id,)
        if any(not isinstance(c, bytes) or len(c) != KEY_ID_BYTES for c in comps):
            raise ParameterError("key components must be key ids")
        object.__setattr__(self, "components", comps)

    @property
    def key_id(self) -> bytes:
        return self._id

    @property
    def n(self) -> mpz:
        return self.params.n

    @property
    def n2(self) -> mpz:
        return self.params.n2

    @property
    def is_joint(self) -> bool:
        return len(self.components) > 1

    def joint(self, *others: PublicKey) -> PublicKey:
        """The joint key ``h · h' · ...`` (``specs/dtpkc.md``, "Key generation"); its secret stays in shares."""
        h = self.h
        comps = list(self.components)
        for o in others:
            if o.params != self.params:
                raise KeyMismatchError("cannot join keys of different DT-PKC systems")
            h = h * o.h % self.n2
            comps.extend(o.components)
        return PublicKey(self.params, h, tuple(comps))

    def without(self, part: PublicKey) -> PublicKey:
        """The joint key with ``part`` (one of its components' keys) taken out: ``h · h_part⁻¹``."""
        comps = list(self.components)
        for c in part.components:
            if c not in comps:
                raise KeyMismatchError("the key is not a component of this joint key")
            comps.remove(c)
        if not comps:
            raise KeyMismatchError("removing every component leaves no key")
        h = self.h * invert(part.h, self.n2) % self.n2
        return PublicKey(self.params, h, tuple(comps))

    def precompute(self) -> None:
        """Build the comb tables for g and h now rather than on first use (no-op if tables are off)."""
        bits = self.params.exponent_bits
        self.params.tables.table(self.params.g, self.n2, bits, build=True)
        self.params.tables.table(self.h, self.n2, bits, build=True)

    def h_pow(self, exp: mpz) -> mpz:
        """``h^exp mod N²`` for a secret ``0 <= exp < 2^exponent_bits`` (encryption randomness),
        as :meth:`SystemParams.g_pow`."""
        return self.params.tables.pow(self.h, exp, self.n2, self.params.exponent_bits)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PublicKey) and self.key_id == other.key_id

    def __hash__(self) -> int:
        return hash(self.key_id)

    def __repr__(self) -> str:
        kind = f"joint of {len(self.components)}" if self.is_joint else "weak"
        return f"PublicKey({self.params.bits} bits, {kind}, id={self.key_id.hex()[:12]})"


_NO_PICKLE = "a DT-PKC secret key is never pickled; seal it with wire.encrypt_secret_key(key, passphrase)"


@dataclass(frozen=True, eq=False, repr=False)
class WeakSecretKey:
    """A party's weak secret key ``θ`` with its public key ``h = g^θ``."""

    public: PublicKey
    theta: mpz

    def __post_init__(self) -> None:
        object.__setattr__(self, "theta", mpz(self.theta))
        if self.public.is_joint:
            raise ParameterError("a weak secret key belongs to one (non-joint) public key")
        if not 1 <= self.theta < self.public.n2:
            raise ParameterError("weak secret key out of range")

    @property
    def key_id(self) -> bytes:
        return self.public.key_id

    def t2_pow(self, t2: mpz) -> mpz:
        """``T2^θ mod N²`` (constant-time: θ is secret)."""
        return powmod_sec(t2, self.theta, self.public.n2)

    def __repr__(self) -> str:
        return f"WeakSecretKey(id={self.key_id.hex()[:12]}, theta=<secret>)"

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeMismatchError(_NO_PICKLE)


@dataclass(frozen=True, eq=False, repr=False)
class StrongKeyShare:
    """One server's share of the strong key: λ1 (CS, ``index=1``) or λ2 (CC, ``index=2``).

    ``λ1 + λ2 ≡ s (mod λN)`` where ``s ≡ 0 (mod λ)`` and ``s ≡ 1 (mod N)``
    (``specs/dtpkc.md``, "Key generation").  One share alone decrypts nothing.
    """

    params: SystemParams
    share: mpz
    index: Literal[1, 2]

    def __post_init__(self) -> None:
        object.__setattr__(self, "share", mpz(self.share))
        if self.index not in (1, 2):
            raise ParameterError("share index must be 1 (CS) or 2 (CC)")
        if self.share < 0:
            raise ParameterError("share must be non-negative")

    def t1_pow(self, t1: mpz) -> mpz:
        """``T1^λi mod N²`` (constant-time: λi is secret)."""
        return powmod_sec(t1, self.share, self.params.n2)

    def __repr__(self) -> str:
        return f"StrongKeyShare(index={self.index}, params={self.params.params_id.hex()[:12]}, share=<secret>)"

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeMismatchError(_NO_PICKLE)


@dataclass(frozen=True, eq=False, repr=False)
class StrongSecretKey:
    """The whole strong key ``λ = lcm(p-1, q-1)``: for the KGC and tests only."""

    params: SystemParams
    lam: mpz
    _lam_inv: mpz = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lam", mpz(self.lam))
        object.__setattr__(self, "_lam_inv", invert(self.lam, self.params.n))

    @property
    def lam_inv(self) -> mpz:
        """``λ⁻¹ mod N``."""
        return self._lam_inv

    def __repr__(self) -> str:
        return f"StrongSecretKey(params={self.params.params_id.hex()[:12]}, lambda=<secret>)"

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeMismatchError(_NO_PICKLE)


def _find_generator(n: mpz, p1: mpz, q1: mpz, lam: mpz, rng: RandomSource) -> mpz:
    """``g = -a^(2N) mod N²`` with ``ord(g) = λ = 2p'q'`` (``specs/dtpkc.md``, "Key generation")."""
    n2 = n * n
    for _ in range(1000):
        a = mpz(rng.randbelow(int(n2) - 2)) + 2
        if gmpy2.gcd(a, n) != 1:
            continue
        g = n2 - powmod_sec(a, 2 * n, n2)
        if powmod_sec(g, lam, n2) != 1:
            continue
        if any(powmod_sec(g, lam // d, n2) == 1 for d in (mpz(2), p1, q1)):
            continue
        return g
    raise ParameterError("no generator of order λ found: are p and q safe primes?")


def system_from_primes(
    p: int | mpz, q: int | mpz, *, rng: RandomSource = SYSTEM_RANDOM, tables: TableCache | None = None
) -> tuple[SystemParams, StrongSecretKey]:
    """System parameters and the strong key from given safe primes (no size policy: the
    callers are :func:`generate_system` and the test helpers)."""
    p, q = mpz(p), mpz(q)
    if p == q or p.bit_length() != q.bit_length():
        raise ParameterError("p and q must be distinct primes of equal size")
    p1, q1 = (p - 1) // 2, (q - 1) // 2
    for x in (p, q, p1, q1):
        if not gmpy2.is_prime(x, 40):
            raise ParameterError("p and q must be safe primes (p = 2p'+1 with p' prime)")
    n = p * q
    lam = 2 * p1 * q1  # lcm(p-1, q-1) for safe primes; NOT lcm/2 (erratum E6)
    if gmpy2.gcd(lam, n) != 1:
        raise ParameterError("gcd(λ, N) != 1")
    g = _find_generator(n, p1, q1, lam, rng)
    params = SystemParams(n, g, tables if tables is not None else TableCache())
    return params, StrongSecretKey(params, lam)


def generate_system(
    bits: int = DEFAULT_BITS,
    *,
    allow_insecure: bool = False,
    rng: RandomSource = SYSTEM_RANDOM,
    processes: int | None = None,
) -> tuple[SystemParams, StrongSecretKey]:
    """KGC step 1-3: safe primes of ``bits/2`` bits (``_nt.safe_prime_pair``), λ, g."""
    check_key_size(bits, allow_insecure=allow_insecure)
    p, q = safe_prime_pair(bits // 2, rng=rng, processes=processes)
    return system_from_primes(p, q, rng=rng)


def split_strong_key(
    sk: StrongSecretKey, *, rng: RandomSource = SYSTEM_RANDOM
) -> tuple[StrongKeyShare, StrongKeyShare]:
    """KGC step 4: ``s = λ·(λ⁻¹ mod N) mod λN``; ``λ1`` uniform in ``[0, λN)``, ``λ2 = s - λ1 mod λN``."""
    n, lam = sk.params.n, sk.lam
    order = lam * n
    s = lam * sk.lam_inv % order
    lam1 = mpz(rng.randbelow(int(order)))
    lam2 = (s - lam1) % order
    return StrongKeyShare(sk.params, lam1, 1), StrongKeyShare(sk.params, lam2, 2)


def generate_weak_key(params: SystemParams, *, rng: RandomSource = SYSTEM_RANDOM) -> WeakSecretKey:
    """KGC step 5: ``θ`` uniform in ``[1, N/4]``, ``h = g^θ mod N²``."""
    theta = params.random_exponent(rng)
    return WeakSecretKey(PublicKey(params, powmod_sec(params.g, theta, params.n2)), theta)


class KGC:
    """The key generation centre (trusted; RevFRF Section 3): issues the strong-key shares
    once, one weak key per party, keeps the public-key directory and revokes keys.

    It keeps λ only until :meth:`forget_strong_key` (tests may keep it to check results).
    """

    def __init__(
        self, params: SystemParams, strong_key: StrongSecretKey | None, *, rng: RandomSource = SYSTEM_RANDOM
    ) -> None:
        if strong_key is not None and strong_key.params != params:
            raise KeyMismatchError("strong key belongs to other system parameters")
        self.params = params
        self._strong: StrongSecretKey | None = strong_key
        self._rng = rng
        self._shares_issued = strong_key is None  # without λ the shares were issued before
        self._keys: dict[str, PublicKey] = {}
        self._revoked: set[str] = set()

    @classmethod
    def setup(
        cls,
        bits: int = DEFAULT_BITS,
        *,
        allow_insecure: bool = False,
        rng: RandomSource = SYSTEM_RANDOM,
        processes: int | None = None,
    ) -> KGC:
        """Generate a fresh system (:func:`generate_system`)."""
        params, sk = generate_system(bits, allow_insecure=allow_insecure, rng=rng, processes=processes)
        return cls(params, sk, rng=rng)

    @classmethod
    def restore(cls, params: SystemParams, directory: Mapping[str, PublicKey], *,
                revoked: Iterable[str] = (), rng: RandomSource = SYSTEM_RANDOM) -> KGC:
        """A KGC that has already issued the strong-key shares and forgotten λ: its public
        directory and revocation list (a networked KGC service starts from these)."""
        kgc = cls(params, None, rng=rng)
        kgc._revoked.update(revoked)
        for party, pk in directory.items():
            if pk.params != params:
                raise KeyMismatchError(f"the key of {party!r} belongs to other system parameters")
            kgc._keys[party] = pk
        return kgc

    def strong_shares(self) -> tuple[StrongKeyShare, StrongKeyShare]:
        """(λ1 for the CS, λ2 for the CC); issued once."""
        if self._strong is None or self._shares_issued:
            raise ProtocolError("strong-key shares are issued once, while the KGC still holds λ")
        self._shares_issued = True
        return split_strong_key(self._strong, rng=self._rng)

    def strong_key(self) -> StrongSecretKey:
        """λ itself (tests and the KGC only)."""
        if self._strong is None:
            raise ProtocolError("the KGC has forgotten the strong key")
        return self._strong

    def forget_strong_key(self) -> None:
        self._strong = None

    def issue_weak_key(self, party: str) -> WeakSecretKey:
        """A fresh weak key for ``party`` (refused for a revoked or already registered party)."""
        if party in self._revoked:
            raise RevokedError(f"party {party!r} has been revoked")
        if party in self._keys:
            raise ProtocolError(f"party {party!r} already holds a weak key")
        sk = generate_weak_key(self.params, rng=self._rng)
        self._keys[party] = sk.public
        return sk

    def public_key(self, party: str) -> PublicKey:
        self.check_active(party)
        return self._keys[party]

    def directory(self) -> dict[str, PublicKey]:
        """The public keys of every active party."""
        return dict(self._keys)

    def revoke(self, party: str) -> None:
        """Revoke ``party``'s key (FRF-Revoc line 15): it leaves the directory for good."""
        self.check_active(party)
        del self._keys[party]
        self._revoked.add(party)

    def is_revoked(self, party: str) -> bool:
        return party in self._revoked

    def check_active(self, party: str) -> None:
        """Raise :class:`RevokedError` for a revoked party, :class:`KeyMismatchError` for an unknown one."""
        if party in self._revoked:
            raise RevokedError(f"party {party!r} has been revoked")
        if party not in self._keys:
            raise KeyMismatchError(f"no key registered for party {party!r}")

    def __repr__(self) -> str:
        return f"KGC({self.params.bits} bits, {len(self._keys)} parties, {len(self._revoked)} revoked)"
