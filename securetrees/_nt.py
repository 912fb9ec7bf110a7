"""Number theory on gmpy2: primes, safe primes, CRT, fixed-base tables, exponentiation.

All arithmetic runs on :class:`gmpy2.mpz`; callers convert to ``int`` at the
public API.  Secret exponents go through :func:`powmod_sec` (GMP's
``mpz_powm_sec``: same time and memory-access pattern for same-size inputs) or,
for encryption randomness, a :class:`FixedBaseTable` (the same number of
multiplications for every exponent below its declared bound).

Prime generation draws every candidate from a :class:`~securetrees.rand.RandomSource`
(the OS CSPRNG by default) and filters it with a sieve before any modular
exponentiation.  Safe primes ``p = 2p' + 1`` sieve ``p'`` and ``2p' + 1``
together over a window of candidates, test ``p'`` and ``p`` with one base-2
Fermat test each, confirm ``p'`` with Miller-Rabin, and prove ``p`` prime by
Pocklington's criterion (``p - 1 = 2p'`` with ``p'`` prime and
``2^(p-1) ≡ 1 (mod p)``, ``gcd(2^2 - 1, p) = 1``).
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import gmpy2
import numpy as np
from gmpy2 import mpz

from securetrees.errors import ExponentRangeError, ParameterError
from securetrees.rand import SYSTEM_RANDOM, RandomSource, SystemRandom

__all__ = [
    "MILLER_RABIN_ROUNDS",
    "FixedBaseTable",
    "batch_invert",
    "check_exponent",
    "crt_pair",
    "exponent_columns",
    "invert",
    "is_probable_prime",
    "mpz",
    "powmod",
    "powmod_sec",
    "random_prime",
    "safe_prime",
    "safe_prime_pair",
    "small_primes",
]

MILLER_RABIN_ROUNDS = 40
"""Miller-Rabin rounds for a prime we keep: error below 2^-80 even for adversarial inputs."""

_SIEVE_BOUND = 1 << 16
_WINDOW = 1 << 13


@lru_cache(maxsize=4)
def small_primes(bound: int = _SIEVE_BOUND) -> np.ndarray:
    """All odd primes below ``bound`` (Eratosthenes, numpy)."""
    if bound < 3:
        raise ParameterError("sieve bound must be at least 3")
    flags = np.ones(bound, dtype=bool)
    flags[:2] = False
    flags[4::2] = False
    for i in range(3, int(bound**0.5) + 1, 2):
        if flags[i]:
            flags[i * i :: 2 * i] = False
    primes = np.nonzero(flags)[0]
    return primes[1:].astype(np.int64)  # drop 2: every candidate here is odd


def powmod(base: int | mpz, exp: int | mpz, mod: int | mpz) -> mpz:
    """``base^exp mod mod`` for public exponents (negative exponents invert)."""
    return gmpy2.powmod(base, exp, mod)


def powmod_sec(base: int | mpz, exp: int | mpz, mod: int | mpz) -> mpz:
    """``base^exp mod mod`` for a secret, non-negative exponent and odd modulus (constant time).

    GMP's ``mpz_powm_sec`` needs a positive exponent; ``exp = 0`` (never a real secret)
    returns ``1 mod mod``.  A negative exponent raises :class:`ParameterError`.
    """
    if exp <= 0:
        if exp < 0:
            raise ParameterError("powmod_sec takes a non-negative exponent")
        return mpz(1) % mod
    return gmpy2.powmod_sec(base, exp, mod)


def invert(x: int | mpz, mod: int | mpz) -> mpz:
    """The inverse of ``x`` modulo ``mod``; raises :class:`ParameterError` if none exists."""
    try:
        return gmpy2.invert(x, mod)
    except ZeroDivisionError as exc:
        raise ParameterError("value is not invertible modulo the given modulus") from exc


def batch_invert(values: Sequence[mpz], mod: mpz) -> list[mpz]:
    """The inverses of units modulo ``mod``, in order, with one inversion and ``3(k - 1)``
    multiplications for ``k`` values (Montgomery's trick); raises :class:`ParameterError` if
    any value is not a unit."""
    if not values:
        return []
    prefix = [mpz(values[0]) % mod]
    for v in values[1:]:
        prefix.append(prefix[-1] * v % mod)
    inv = invert(prefix[-1], mod)
    out = [inv] * len(values)
    for i in range(len(values) - 1, 0, -1):
        out[i] = inv * prefix[i - 1] % mod
        inv = inv * values[i] % mod
    out[0] = inv
    return out


def is_probable_prime(n: int | mpz, rounds: int = MILLER_RABIN_ROUNDS) -> bool:
    """Miller-Rabin (GMP) with ``rounds`` rounds."""
    return bool(gmpy2.is_prime(mpz(n), rounds))


def crt_pair(rp: mpz, rq: mpz, p: mpz, q: mpz, q_inv_p: mpz) -> mpz:
    """The x mod pq with x ≡ rp (mod p), x ≡ rq (mod q), given ``q_inv_p = q^-1 mod p`` (Garner)."""
    return rq + q * (((rp - rq) * q_inv_p) % p)


def _random_odd(bits: int, rng: RandomSource, top_two: bool) -> mpz:
    """A uniform odd integer of exactly ``bits`` bits (its two top bits set if ``top_two``)."""
    x = mpz(rng.randbits(bits)) | 1 | (mpz(1) << (bits - 1))
    if top_two:
        x |= mpz(1) << (bits - 2)
    return x


def _window_survivors(start: mpz, twin: bool, step: int = 2) -> np.ndarray:
    """Offsets j in [0, _WINDOW) such that start + step*j (and, if ``twin``, 2(start+step*j)+1)
    has no prime factor below the sieve bound.

    Only primes below ``start / 2`` sieve, so a small candidate is never struck out for being
    one of the sieving primes itself.
    """
    primes = small_primes()
    primes = primes[primes < (start >> 1)]
    keep = np.ones(_WINDOW, dtype=bool)
    start_int = int(start)
    for s in primes.tolist():
        r = start_int % s
        inv_step = pow(step, -1, s)
        keep[(-r * inv_step) % s :: s] = False
        if twin:
            keep[(((s - 1) // 2 - r) * inv_step) % s :: s] = False
    return np.nonzero(keep)[0]


def _search_safe_prime_window(bits: int, start: mpz) -> mpz | None:
    """Search one window of p' candidates from ``start`` for a safe prime p = 2p'+1 of ``bits`` bits."""
    two = mpz(2)
    for j in _window_survivors(start, twin=True).tolist():
        q = start + 2 * j
        if q.bit_length() != bits - 1:
            break
        if gmpy2.powmod(two, q - 1, q) != 1:
            continue
        p = 2 * q + 1
        if gmpy2.powmod(two, p - 1, p) != 1:
            continue
        if gmpy2.is_prime(q, MILLER_RABIN_ROUNDS):
            return p  # Pocklington: p' prime, 2^(p-1) = 1 (mod p), gcd(3, p) = 1 by the sieve.
    return None


def _safe_prime_worker(bits: int, seed: bytes) -> mpz | None:
    # Workers draw their window start from the bytes the parent gave them,
    # which came from the parent's CSPRNG; no state is shared across fork.
    start = mpz(int.from_bytes(seed, "big") >> (len(seed) * 8 - (bits - 1)))
    start |= (mpz(1) << (bits - 2)) | (mpz(1) << (bits - 3)) | 1
    return _search_safe_prime_window(bits, start)


def _check_prime_bits(bits: int, minimum: int) -> None:
    if not isinstance(bits, int) or bits < minimum:
        raise ParameterError(f"prime size must be an integer of at least {minimum} bits, got {bits!r}")


def safe_prime(bits: int, *, rng: RandomSource = SYSTEM_RANDOM) -> mpz:
    """A uniform-window safe prime ``p = 2p' + 1`` of exactly ``bits`` bits, top two bits set."""
    _check_prime_bits(bits, 16)
    while True:
        seed = rng.token_bytes((bits + 7) // 8)
        p = _safe_prime_worker(bits, seed)
        if p is not None:
            return p


def safe_prime_pair(
    bits: int, *, rng: RandomSource = SYSTEM_RANDOM, processes: int | None = None
) -> tuple[mpz, mpz]:
    """Two distinct safe primes of ``bits`` bits, searched in parallel worker processes.

    Windows are handed out to a process pool until two primes are found, so
    the load balances across cores.  With a non-system ``rng`` (known-answer
    tests) the search runs serially so that it is reproducible.
    """
    _check_prime_bits(bits, 16)
    if not isinstance(rng, SystemRandom) or processes == 1:
        p = safe_prime(bits, rng=rng)
        while True:
            q = safe_prime(bits, rng=rng)
            if q != p:
                return p, q
    workers = processes or min(2, multiprocessing.cpu_count())
    found: list[mpz] = []
    # fork needs no ``if __name__ == "__main__"`` guard in the caller's script, and the
    # workers use only the seed bytes they are handed, so no generator state is shared.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        pending = {
            pool.submit(_safe_prime_worker, bits, rng.token_bytes((bits + 7) // 8))
            for _ in range(2 * workers)
        }
        while len(found) < 2:
            done, pending = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                p = fut.result()
                if p is not None and p not in found and len(found) < 2:
                    found.append(p)
                pending.add(pool.submit(_safe_prime_worker, bits, rng.token_bytes((bits + 7) // 8)))
        for fut in pending:
            fut.cancel()
    return found[0], found[1]


def random_prime(
    bits: int, *, rng: RandomSource = SYSTEM_RANDOM, congruent_3_mod_4: bool = False
) -> mpz:
    """A random prime of exactly ``bits`` bits with its two top bits set.

    With ``congruent_3_mod_4`` the prime is ≡ 3 (mod 4) (a Blum prime, which
    the Damgård-Jurik-Nielsen encryption mode needs).
    """
    _check_prime_bits(bits, 16)
    step = 4 if congruent_3_mod_4 else 2
    two = mpz(2)
    while True:
        start = _random_odd(bits, rng, top_two=True)
        if congruent_3_mod_4:
            start |= 3
        for j in _window_survivors(start, twin=False, step=step).tolist():
            c = start + step * j
            if c.bit_length() != bits:
                break
            if gmpy2.powmod(two, c - 1, c) == 1 and gmpy2.is_prime(c, MILLER_RABIN_ROUNDS):
                return c


def check_exponent(exp: int | mpz, bits: int) -> mpz:
    """``exp`` as an mpz if ``0 <= exp < 2^bits``, else :class:`ExponentRangeError`."""
    e = mpz(exp)
    if e < 0 or e.bit_length() > bits:
        raise ExponentRangeError(f"exponent must lie in [0, 2^{bits})")
    return e


def window_digits(exp: mpz, window: int, count: int) -> list[int]:
    """The ``count`` base-``2^window`` digits of ``exp < 2^(window·count)``, least significant first.

    A guard bit above the top digit keeps every shift on a number of the same size,
    so the work does not depend on how many of the top digits are zero.
    """
    x = int(exp) | (1 << (window * count))
    mask = (1 << window) - 1
    if window == 8:
        return list(x.to_bytes(count + 1, "little")[:count])
    digits = []
    for _ in range(count):
        digits.append(x & mask)
        x >>= window
    return digits


def window_digit_columns(exps: Sequence[int | mpz], window: int, count: int) -> list[list[int]]:
    """:func:`window_digits` of many exponents at once, as ``count`` columns (column i: every
    exponent's digit i), for ``window`` up to 16.  Each exponent must lie in
    ``[0, 2^(window·count))``; the same guard bit as :func:`window_digits` keeps every conversion
    the same size.  Digit i is read from the three bytes holding bits ``[w·i, w·i + w)``."""
    if not 1 <= window <= 16:
        raise ParameterError("window must lie in [1, 16]")
    width = window * count
    nbytes = width // 8 + 3
    guard = 1 << width
    raw = b"".join((e | guard).to_bytes(nbytes, "little") for e in exps)
    data = np.frombuffer(raw, dtype=np.uint8).reshape(len(exps), nbytes)
    if window == 8:  # the digits are the bytes
        columns: list[list[int]] = data[:, :count].T.tolist()
        return columns
    starts = np.arange(count, dtype=np.int64) * window
    at = starts // 8
    three = (data[:, at].astype(np.uint32) | data[:, at + 1].astype(np.uint32) << 8
             | data[:, at + 2].astype(np.uint32) << 16)
    digits = three >> (starts % 8).astype(np.uint32) & np.uint32((1 << window) - 1)
    out: list[list[int]] = digits.T.tolist()
    return out


def exponent_columns(exps: Sequence[int | mpz], bits: int, window: int) -> list[list[int]]:
    """The ``ceil(bits / window)`` digit columns of exponents that must all lie in ``[0, 2^bits)``:
    :class:`ExponentRangeError` otherwise (one check for the batch, not one per exponent)."""
    count = -(-bits // window)
    if not exps:
        return [[] for _ in range(count)]
    if not all(type(e) is mpz for e in exps):  # as drawn here: the fast path needs no conversion
        try:
            exps = [mpz(operator.index(e)) for e in exps]
        except TypeError as exc:
            raise ExponentRangeError(f"exponents must be integers in [0, 2^{bits})") from exc
    if min(exps) < 0 or max(exps).bit_length() > bits:
        raise ExponentRangeError(f"exponent must lie in [0, 2^{bits})")
    return window_digit_columns(exps, window, count)


@dataclass(frozen=True, eq=False)
class FixedBaseTable:
    """Precomputed powers for ``base^e mod modulus``, secret ``e`` of at most ``exp_bits`` bits.

    Row i holds ``base^((d + 1) · 2^(w·i))`` for every w-bit digit d: the digit set
    is ``{1, ..., 2^w}``, so no entry is the identity and every window costs one
    full multiplication.  :meth:`pow` with a bound of B bits always processes all
    ``k = ceil(B / w)`` windows.  The digit set adds ``K = Σ_{i<k} 2^(w·i)`` to the
    exponent; a *head* row per ``k``, row 0 times ``base^(-K)``, takes it off, so
    the first window is a look-up and the other ``k - 1`` windows one multiplication
    each, whatever the exponent (0 included).  Memory is ``ceil(exp_bits / w) · 2^w``
    residues, plus ``2^w`` per bound used.

    The entry read in each row is chosen by one digit of the exponent: Python cannot
    hide these secret-indexed reads from a cache-timing attacker on the same
    machine (``specs/paillier.md``, "Secret exponents").  The base must be a unit.
    """

    base: mpz
    modulus: mpz
    exp_bits: int
    window: int
    rows: tuple[tuple[mpz, ...], ...]
    heads: dict[int, tuple[mpz, ...]] = field(default_factory=dict, repr=False)
    """``k -> row 0 · base^(-K_k)`` for the window counts used so far."""

    @classmethod
    def build(cls, base: int | mpz, modulus: int | mpz, exp_bits: int, window: int = 8) -> FixedBaseTable:
        if exp_bits < 1 or not 1 <= window <= 12:
            raise ParameterError("exp_bits must be positive and window in [1, 12]")
        m = mpz(modulus)
        b = mpz(base) % m
        if m < 2 or gmpy2.gcd(b, m) != 1:
            raise ParameterError("a fixed-base table needs a unit base modulo a modulus above 1")
        rows: list[tuple[mpz, ...]] = []
        step = b  # base^(2^(w·i)) for row i
        for _ in range(-(-exp_bits // window)):
            row = [step]
            for _ in range((1 << window) - 1):
                row.append(row[-1] * step % m)
            rows.append(tuple(row))
            step = row[-1]  # base^(2^w · 2^(w·i)), the last entry
        table = cls(b, m, exp_bits, window, tuple(rows))
        table.head(len(rows))
        return table

    def windows(self, bits: int) -> int:
        """``ceil(bits / w)``, the windows of one :meth:`pow` with bound ``bits`` (it multiplies one time fewer)."""
        return -(-bits // self.window)

    def head(self, count: int) -> tuple[mpz, ...]:
        """Row 0 times ``base^(-K)``, ``K = Σ_{i<count} 2^(w·i)``: built once per ``count``."""
        head = self.heads.get(count)
        if head is None:
            k = sum(mpz(1) << (self.window * i) for i in range(count))
            m = self.modulus
            inv = invert(gmpy2.powmod(self.base, k, m), m)
            head = tuple(inv * v % m for v in self.rows[0])
            self.heads[count] = head
        return head

    def pow(self, exp: int | mpz, bits: int | None = None) -> mpz:
        """``base^exp mod modulus`` for a secret ``0 <= exp < 2^bits`` (``bits`` defaults to ``exp_bits``).

        Exactly ``ceil(bits / w) - 1`` multiplications mod ``modulus`` for every exponent in
        range; :class:`ExponentRangeError` outside it, or if ``bits`` exceeds the table.
        """
        bound = self._bound(bits)
        count = self.windows(bound)
        digits = window_digits(check_exponent(exp, bound), self.window, count)
        m = self.modulus
        acc = self.head(count)[digits[0]]
        for row, d in zip(self.rows[1:count], digits[1:], strict=True):
            acc = acc * row[d] % m
        return acc

    def pow_many(self, exps: Sequence[int | mpz], bits: int | None = None) -> list[mpz]:
        """:meth:`pow` of every exponent in ``exps`` (same results, same fixed count of
        multiplications per exponent), window by window over the whole batch: the digits are
        extracted at once and the inner loop is one list comprehension per window."""
        return self.pow_columns(exponent_columns(exps, self._bound(bits), self.window))

    def pow_columns(self, columns: list[list[int]]) -> list[mpz]:
        """:meth:`pow_many` from the exponents' digit columns (:func:`exponent_columns` with this
        table's window), so that tables with the same window share one extraction."""
        if not columns or not columns[0]:
            return []
        count = len(columns)
        if count > len(self.rows):
            raise ExponentRangeError(f"exponent bound must lie in [1, {self.exp_bits}] bits")
        m = self.modulus
        head = self.head(count)
        accs = [head[d] for d in columns[0]]
        for row, col in zip(self.rows[1:count], columns[1:], strict=True):
            accs = [a * row[d] % m for a, d in zip(accs, col, strict=True)]
        return accs

    def _bound(self, bits: int | None) -> int:
        bound = self.exp_bits if bits is None else bits
        if not 1 <= bound <= self.exp_bits:
            raise ExponentRangeError(f"exponent bound must lie in [1, {self.exp_bits}] bits")
        return bound


def product_mod(values: Sequence[mpz], modulus: mpz) -> mpz:
    """The product of ``values`` modulo ``modulus``."""
    acc = mpz(1)
    for v in values:
        acc = acc * v % modulus
    return acc
