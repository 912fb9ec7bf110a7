"""Secret exponents in encryption take a fixed number of operations (specs/paillier.md and
specs/dtpkc.md, "Secret exponents").

The DJN exponent a and DT-PKC's r decide the ciphertext's randomness, so the work done on them
must not depend on their value: a comb table always processes ``ceil(B / w)`` windows (a look-up
for the first, one multiplication for each other), and without a table DT-PKC uses
``powmod_sec``.  The multiplications are counted by wrapping the table's entries in
:class:`Counted`, which leaves the production loop as it is.  Each check has a companion that
runs it on the leaky variant and sees it fail.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import gmpy2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees import _nt
from securetrees._nt import FixedBaseTable, mpz
from securetrees.dtpkc import keys as dtpkc_keys
from securetrees.dtpkc.keys import PublicKey as DtpkcPublicKey
from securetrees.dtpkc.keys import SystemParams, TableCache
from securetrees.errors import ExponentRangeError, ParameterError
from securetrees.paillier.keys import PrivateKey, PublicKey
from securetrees.rand import DeterministicRandom
from securetrees.testing.dtpkc import dtpkc_test_keys
from securetrees.testing.paillier import small_keypair

P25519 = mpz(2**255 - 19)


class Counted:
    """A residue that counts every multiplication it takes part in (into a shared one-item list)."""

    __slots__ = ("counter", "value")

    def __init__(self, value: Any, counter: list[int]) -> None:
        self.value = mpz(value)
        self.counter = counter

    def __mul__(self, other: Any) -> Counted:
        self.counter[0] += 1
        return Counted(self.value * (other.value if isinstance(other, Counted) else other), self.counter)

    __rmul__ = __mul__

    def __mod__(self, m: Any) -> Counted:
        return Counted(self.value % m, self.counter)

    # The key owner's CRT join adds and subtracts the two halves: plain residues from there on.
    def __add__(self, other: Any) -> mpz:
        return self.value + value_of(other)

    def __sub__(self, other: Any) -> mpz:
        return self.value - value_of(other)

    __radd__ = __add__

    def __rsub__(self, other: Any) -> mpz:
        return value_of(other) - self.value


def counting(table: FixedBaseTable, counter: list[int], *bounds: int) -> FixedBaseTable:
    """``table`` with every entry wrapped in :class:`Counted`: its own ``pow`` then counts.

    The head rows for ``bounds`` are built first, so that no exponentiation counts their set-up.
    """
    for bits in bounds:
        table.head(table.windows(bits))
    rows = tuple(tuple(Counted(v, counter) for v in row) for row in table.rows)
    heads = {k: tuple(Counted(v, counter) for v in h) for k, h in table.heads.items()}
    return dataclasses.replace(table, rows=rows, heads=heads)  # type: ignore[arg-type]


def cost(bits: int, window: int) -> int:
    """The fixed cost: ``ceil(B / w)`` windows, the first a look-up, the others one multiplication."""
    return -(-bits // window) - 1


def value_of(x: Any) -> mpz:
    return x.value if isinstance(x, Counted) else mpz(x)


def multiplications(fn: Callable[[Any], Any], exponents: Iterable[int], counter: list[int],
                    check: Callable[[int, mpz], None]) -> list[int]:
    """The multiplications ``fn(e)`` takes for each exponent (its result checked by ``check``)."""
    counts = []
    for e in exponents:
        counter[0] = 0
        result = fn(mpz(e))
        counts.append(counter[0])
        check(e, value_of(result))
    return counts


def probe_exponents(bits: int, label: str) -> list[int]:
    """0, 1, 2, 2^(B-1), 2^B - 1 and 16 uniform B-bit exponents (fixed seed: test data)."""
    rng = DeterministicRandom(f"tests/secret-exponents/{label}/{bits}")
    edge = [0, 1, 2, 1 << (bits - 1), (1 << bits) - 1]
    return edge + [rng.randbits(bits) for _ in range(16)]


def assert_fixed_count(counts: list[int], expected: int) -> None:
    """The property: every exponent costs the same, and that cost is ``expected``."""
    assert set(counts) == {expected}, f"multiplication counts vary with the exponent: {sorted(set(counts))}"


class EarlyExitTable(FixedBaseTable):
    """The leaky variant (the table before this fix): stops when the remaining exponent is 0 and
    skips the multiplication for a zero digit, over rows whose digit-0 entry is the identity."""

    @classmethod
    def build(cls, base: int | mpz, modulus: int | mpz, exp_bits: int, window: int = 8) -> EarlyExitTable:
        m, b = mpz(modulus), mpz(base) % mpz(modulus)
        rows = []
        for _ in range(-(-exp_bits // window)):
            row = [mpz(1)]
            for _ in range((1 << window) - 1):
                row.append(row[-1] * b % m)
            rows.append(tuple(row))
            b = row[-1] * b % m
        return cls(mpz(base) % m, m, exp_bits, window, tuple(rows))

    def pow(self, exp: int | mpz, bits: int | None = None) -> mpz:
        e, acc, mask = mpz(exp), mpz(1), (1 << self.window) - 1
        for row in self.rows:
            if not e:
                break
            d = int(e & mask)
            if d:
                acc = acc * row[d] % self.modulus
            e >>= self.window
        return acc


def check_table_count(cls: type[FixedBaseTable], bits: int, window: int, bound: int) -> None:
    base = mpz(7)
    counter = [0]
    table = counting(cls.build(base, P25519, bits, window), counter, bound)

    def same_as_powmod(e: int, got: mpz) -> None:
        assert got == gmpy2.powmod(base, e, P25519)

    counts = multiplications(lambda e: table.pow(e, bound), probe_exponents(bound, "table"), counter,
                             same_as_powmod)
    assert_fixed_count(counts, cost(bound, window))


# -- the table ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("bits", "window", "bound"), [(200, 8, 200), (200, 6, 200), (200, 8, 64),
                                                        (97, 5, 97), (97, 5, 3), (16, 1, 16)])
def test_table_takes_ceil_b_over_w_windows_for_every_exponent(bits: int, window: int,
                                                                       bound: int) -> None:
    check_table_count(FixedBaseTable, bits, window, bound)


def check_batch_count(cls: type[FixedBaseTable], bits: int, window: int, bound: int) -> None:
    """:meth:`FixedBaseTable.pow_many`: per exponent (a batch of one) and over the whole batch."""
    base = mpz(7)
    counter = [0]
    table = counting(cls.build(base, P25519, bits, window), counter, bound)
    exps = probe_exponents(bound, "batch")

    def same_as_powmod(e: int, got: mpz) -> None:
        assert got == gmpy2.powmod(base, e, P25519)

    counts = multiplications(lambda e: table.pow_many([e], bound)[0], exps, counter, same_as_powmod)
    assert_fixed_count(counts, cost(bound, window))
    counter[0] = 0
    assert [value_of(v) for v in table.pow_many(exps, bound)] == [gmpy2.powmod(base, e, P25519) for e in exps]
    assert_fixed_count([counter[0]], len(exps) * cost(bound, window))


@pytest.mark.parametrize(("bits", "window", "bound"), [(200, 8, 200), (200, 10, 200), (200, 12, 200), (97, 5, 3),
                                                        (16, 1, 16)])
def test_batched_table_takes_the_same_fixed_count(bits: int, window: int, bound: int) -> None:
    check_batch_count(FixedBaseTable, bits, window, bound)


def test_batch_count_check_catches_a_zero_digit_skip() -> None:
    """Planted leak: a batched pass that skips the multiplication for a zero digit."""

    class SkipZeroBatch(FixedBaseTable):
        def pow_many(self, exps: Any, bits: int | None = None) -> list[mpz]:
            return [self._skip_zero(e) for e in exps]

        def _skip_zero(self, exp: int) -> Any:
            digits = _nt.window_digits(mpz(exp), self.window, len(self.rows))
            acc: Any = mpz(1)
            for row, d in zip(self.rows, digits, strict=True):
                if d:
                    acc = row[d - 1] * acc % self.modulus  # row[d - 1] is base^(d·2^(w·i))
            return acc

    with pytest.raises(AssertionError, match="vary with the exponent"):
        check_batch_count(SkipZeroBatch, 200, 8, 200)


def test_count_check_catches_the_early_exit_table() -> None:
    """Planted leak: the old table (early exit, no multiplication for a zero digit) fails the check."""
    with pytest.raises(AssertionError, match="vary with the exponent"):
        check_table_count(EarlyExitTable, 200, 8, 200)


def test_count_check_catches_a_zero_digit_skip_alone() -> None:
    """Planted leak: every window processed, but a zero digit's multiplication skipped."""

    class SkipZero(EarlyExitTable):
        def pow(self, exp: int | mpz, bits: int | None = None) -> mpz:
            e, acc, mask = mpz(exp), mpz(1), (1 << self.window) - 1
            for row in self.rows:
                d = int(e & mask)
                if d:
                    acc = acc * row[d] % self.modulus
                e >>= self.window
            return acc

    with pytest.raises(AssertionError, match="vary with the exponent"):
        check_table_count(SkipZero, 200, 8, 200)


@given(st.integers(min_value=1, max_value=300), st.integers(min_value=1, max_value=10), st.data())
def test_table_pow_equals_gmpy2_powmod(bits: int, window: int, data: st.DataObject) -> None:
    bound = data.draw(st.integers(min_value=1, max_value=bits))
    exp = data.draw(st.integers(min_value=0, max_value=(1 << bound) - 1))
    base = data.draw(st.integers(min_value=1, max_value=int(P25519) - 1))
    table = FixedBaseTable.build(base, P25519, bits, window)
    expected = gmpy2.powmod(base, exp, P25519)
    assert table.pow(exp, bound) == expected
    assert table.pow(exp) == expected  # the table's own bound, exp_bits >= bound


@given(st.integers(min_value=0, max_value=(1 << 130) - 1), st.integers(min_value=2, max_value=10**40))
def test_table_pow_equals_gmpy2_powmod_modulo_a_square(exp: int, base: int) -> None:
    n2 = mpz(1000003 * 999983) ** 2  # a composite modulus like N²; the base must be a unit
    if gmpy2.gcd(base, n2) != 1:
        base += 1
    assert FixedBaseTable.build(base, n2, 130, 6).pow(exp) == gmpy2.powmod(base, exp, n2)


def test_exponents_outside_the_bound_are_refused() -> None:
    table = FixedBaseTable.build(3, P25519, 64, 8)
    for exp, bound in [(1 << 64, None), (-1, None), (1 << 20, 20), (0, 65), (0, 0)]:
        with pytest.raises(ExponentRangeError):
            table.pow(exp, bound)
    assert issubclass(ExponentRangeError, ParameterError)


def test_a_table_needs_a_unit_base() -> None:
    with pytest.raises(ParameterError):
        FixedBaseTable.build(0, P25519, 8)
    with pytest.raises(ParameterError):
        FixedBaseTable.build(6, 9 * 9, 8)


def test_digits_cover_every_window_whatever_the_exponent() -> None:
    for window in (1, 5, 6, 8, 12):
        for e in (0, 1, (1 << (3 * window)) - 1):
            digits = _nt.window_digits(mpz(e), window, 3)
            assert len(digits) == 3 and sum(d << (window * i) for i, d in enumerate(digits)) == e
    exps = [0, 1, 2**30 - 1, 12345, 2**29]
    for window in (1, 5, 6, 8, 10, 12, 13, 16):
        count = -(-30 // window)
        columns = _nt.window_digit_columns(exps, window, count)
        assert [list(c) for c in zip(*columns, strict=True)] == [_nt.window_digits(mpz(e), window, count) for e in exps]


# -- Paillier call sites -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def paillier() -> tuple[PublicKey, PrivateKey]:
    """Fresh key objects over the cached 512-bit test key, so counting tables stay local."""
    pk0, sk0 = small_keypair(512)
    pk = PublicKey._unchecked(mpz(pk0.n), mpz(pk0.hs))
    return pk, PrivateKey._unchecked(pk, sk0._p, sk0._q)


@contextmanager
def counting_paillier(pk: PublicKey, sk: PrivateKey, counter: list[int]) -> Iterator[None]:
    table, tables = pk.comb_table(), sk.comb_tables()
    bounds = [pk.exponent_bits(mode) for mode in ("djn", "djn-short")]
    object.__setattr__(pk, "_table", counting(table, counter, *bounds))
    object.__setattr__(sk, "_tables", (counting(tables[0], counter, *bounds),
                                       counting(tables[1], counter, *bounds)))
    try:
        yield
    finally:
        object.__setattr__(pk, "_table", table)
        object.__setattr__(sk, "_tables", tables)


@pytest.mark.parametrize("mode", ["djn", "djn-short"])
def test_paillier_obfuscators_take_a_fixed_count(paillier: tuple[PublicKey, PrivateKey], mode: Any) -> None:
    pk, sk = paillier
    bits = pk.exponent_bits(mode)
    assert mode == "djn" or bits < pk._half_bits  # djn-short's bound is its own, not the table's
    counter = [0]

    def hs_pow(e: int, got: mpz) -> None:
        assert got == gmpy2.powmod(pk.hs, e, pk.n_square)

    with counting_paillier(pk, sk, counter):
        public = multiplications(lambda a: pk.obfuscator_from(mode, a), probe_exponents(bits, mode),
                                 counter, hs_pow)
        owner = multiplications(lambda a: sk.obfuscator_from(mode, a), probe_exponents(bits, mode),
                                counter, hs_pow)
    assert_fixed_count(public, cost(bits, 8))
    assert_fixed_count(owner, 2 * cost(bits, 8))


def test_paillier_refuses_an_exponent_beyond_the_mode(paillier: tuple[PublicKey, PrivateKey]) -> None:
    pk, sk = paillier
    too_big = mpz(1) << pk.exponent_bits("djn-short")
    for key in (pk, sk):
        with pytest.raises(ExponentRangeError):
            key.obfuscator_from("djn-short", too_big)
    assert pk.obfuscator_from("djn", too_big) == sk.obfuscator_from("djn", too_big)


def test_paillier_count_check_catches_the_early_exit_table(paillier: tuple[PublicKey, PrivateKey]) -> None:
    """Planted leak: the public key with the old table fails the same check."""
    pk, _ = paillier
    bits = pk.exponent_bits("djn")
    counter = [0]
    leaky = counting(EarlyExitTable.build(pk.hs, pk.n_square, pk._half_bits, 8), counter)
    table = pk.comb_table()
    object.__setattr__(pk, "_table", leaky)
    try:
        counts = multiplications(lambda a: pk.obfuscator_from("djn", a), probe_exponents(bits, "djn"),
                                 counter, lambda e, got: None)
    finally:
        object.__setattr__(pk, "_table", table)
    with pytest.raises(AssertionError, match="vary with the exponent"):
        assert_fixed_count(counts, cost(bits, 8))


# -- DT-PKC call sites -------------------------------------------------------------------------
def dtpkc_key(tables: TableCache) -> DtpkcPublicKey:
    """u1's public key of the 512-bit test system, over its own table cache."""
    keys = dtpkc_test_keys(512)
    params = SystemParams(keys.params.n, keys.params.g, tables)
    return DtpkcPublicKey(params, keys.pk("u1").h)


def test_dtpkc_g_and_h_powers_take_a_fixed_count() -> None:
    pk = dtpkc_key(TableCache(6))
    params, bits = pk.params, pk.params.exponent_bits
    assert bits == params.r_bound.bit_length() and params.random_exponent(DeterministicRandom("r")) < 1 << bits
    pk.precompute()
    counter = [0]
    cache = params.tables
    for base in (params.g, pk.h):
        tab = cache.table(base, params.n2, bits)
        assert tab is not None
        cache._tables[int(base)] = counting(tab, counter, bits)
    for fn, base in ((params.g_pow, params.g), (pk.h_pow, pk.h)):
        def same(e: int, got: mpz, base: mpz = base) -> None:
            assert got == gmpy2.powmod(base, e, params.n2)

        assert_fixed_count(multiplications(fn, probe_exponents(bits, "dtpkc"), counter, same), cost(bits, 6))


@contextmanager
def recorded_exponentiations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[mpz]]:
    """Every exponent DT-PKC's key module hands to ``powmod_sec``."""
    seen: list[mpz] = []
    real = _nt.powmod_sec

    def record(base: Any, exp: Any, mod: Any) -> mpz:
        seen.append(mpz(exp))
        return real(base, exp, mod)

    monkeypatch.setattr(dtpkc_keys, "powmod_sec", record)
    yield seen


def check_fallback_is_powmod_sec(tables: TableCache, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a table (off, or before the base's table is due), both powers go to ``powmod_sec``."""
    pk = dtpkc_key(tables)
    params = pk.params
    r = params.random_exponent(DeterministicRandom("fallback"))
    with recorded_exponentiations(monkeypatch) as seen:
        got = (params.g_pow(r), pk.h_pow(r))
    assert got == (gmpy2.powmod(params.g, r, params.n2), gmpy2.powmod(pk.h, r, params.n2))
    assert seen == [r, r], "a secret exponent took a path other than powmod_sec"


@pytest.mark.parametrize("tables", [TableCache(None), TableCache(6, build_after=2)],
                         ids=["tables-off", "before-build"])
def test_dtpkc_fallback_is_powmod_sec(tables: TableCache, monkeypatch: pytest.MonkeyPatch) -> None:
    check_fallback_is_powmod_sec(tables, monkeypatch)


def test_fallback_check_catches_plain_powmod(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: the old fallback (GMP's variable-time ``powmod``) fails the check."""

    class PlainFallback(TableCache):
        def pow(self, base: mpz, exp: mpz, modulus: mpz, exp_bits: int) -> mpz:
            return gmpy2.powmod(base, exp, modulus)

    with pytest.raises(AssertionError, match="other than powmod_sec"):
        check_fallback_is_powmod_sec(PlainFallback(None), monkeypatch)


def test_dtpkc_refuses_exponents_outside_the_bound() -> None:
    pk = dtpkc_key(TableCache(None))
    bits = pk.params.exponent_bits
    for exp in (mpz(1) << bits, mpz(-1)):
        with pytest.raises(ExponentRangeError):
            pk.params.g_pow(exp)
        with pytest.raises(ExponentRangeError):
            pk.h_pow(exp)
