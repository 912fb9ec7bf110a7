"""Paillier keys: generation, validation, encryption modes, CRT decryption.

Specification: ``specs/paillier.md``; key sizes: ``specs/parameters.md``.

``g = N + 1`` throughout, so ``g^m = 1 + mN``.  The public key carries
``hs = (-x²)^N mod N²`` for Damgård-Jurik-Nielsen encryption; key generation
makes DJN keys (``p ≡ q ≡ 3 (mod 4)``, ``gcd(p-1, q-1) = 2``).  The
encryption modes, their costs and their assumptions are in
``specs/paillier.md`` ("Encryption modes"):

* ``"djn"`` (default): ``(1 + mN) · hs^a``, ``a`` uniform of ``⌈|N|/2⌉`` bits,
  through a fixed-base comb table (window 8) built on first use;
* ``"djn-short"`` (opt-in): the same with ``a`` of ``2κ`` bits (κ the security
  level of the key size); rests on a short-exponent assumption;
* ``"classic"``: ``(1 + mN) · r^N`` with ``r`` uniform in ``Z*_N``;
* key owner (:meth:`PrivateKey.encrypt`): ``r_p^p mod p²`` and
  ``r_q^q mod q²`` joined by CRT, the same distribution as ``r^N``.

Decryption is CRT with :func:`~securetrees._nt.powmod_sec` on the secret
exponents ``p - 1`` and ``q - 1`` unless the caller passes
``constant_time=False``.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections import deque
from collections.abc import Sequence
from typing import Any, Final, Literal, NoReturn

import gmpy2

from securetrees import sealing
from securetrees._nt import (
    FixedBaseTable,
    crt_pair,
    exponent_columns,
    invert,
    is_probable_prime,
    mpz,
    powmod,
    powmod_sec,
    random_prime,
)
from securetrees.encoding import Fixed, SignedRange, as_int
from securetrees.errors import (
    DecodeError,
    InsecureParameterWarning,
    InvalidCiphertext,
    KeyMismatchError,
    ParameterError,
    TypeMismatchError,
)
from securetrees.paillier import wire
from securetrees.paillier.ciphertext import Ciphertext, FixedCiphertext, ObfuscatorSource, _make
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = [
    "DEFAULT_BITS",
    "MODES",
    "Mode",
    "PrivateKey",
    "PublicKey",
    "generate_keypair",
    "security_level",
]

Mode = Literal["djn", "djn-short", "classic"]
MODES: Final[tuple[Mode, ...]] = ("djn", "djn-short", "classic")

DEFAULT_BITS: Final = 2048
INSECURE_MIN_BITS: Final = 1024
COMB_WINDOW: Final = 8
BATCH_TABLE_BYTES: Final = 16 << 20
"""About the most a key's batch table may hold (its residues' bytes)."""
CRT_OBFUSCATOR_MIN_BITS: Final = 768
"""From this key size on the key owner's DJN obfuscators go through the two half-size CRT tables;
below it one pass modulo N² is cheaper (measured: at 512 bits the per-operation overhead of two
passes outweighs their smaller operands; at 768 bits and above CRT is the faster)."""
BATCH_TABLE_MIN: Final = 1024
"""Exponents in one call from which a batch uses the batch table (building one costs about 2^w
multiplications per row, so smaller calls use the window-8 table)."""
BATCH_SLICE: Final = 8192
"""Exponents a batch raises at once: its digit columns (one Python int per digit) stay a few MiB."""
_DRAW_CHUNK: Final = 1024  # exponents per byte string drawn
_SMALL_PRIMORIAL: Final = math.prod(
    [p for p in range(3, 1 << 12, 2) if all(p % d for d in range(3, int(p**0.5) + 1, 2))]
)


def security_level(bits: int) -> int:
    """κ, the symmetric-equivalent strength of an RSA-type modulus of ``bits`` bits (SP 800-57)."""
    for limit, kappa in ((15360, 256), (7680, 192), (3072, 128), (2048, 112)):
        if bits >= limit:
            return kappa
    return 80


def check_key_size(bits: int, allow_insecure: bool) -> None:
    """The size policy: >= 2048 bits; 1024..2047 only with ``allow_insecure`` (and a warning)."""
    if bits >= DEFAULT_BITS:
        return
    if bits >= INSECURE_MIN_BITS and allow_insecure:
        warnings.warn(
            f"{bits}-bit Paillier modulus: below 112-bit security (see specs/parameters.md)",
            InsecureParameterWarning,
            stacklevel=3,
        )
        return
    if bits >= INSECURE_MIN_BITS:
        raise ParameterError(f"a {bits}-bit modulus is insecure; pass allow_insecure=True to use it")
    raise ParameterError(f"a {bits}-bit modulus is far too small (minimum {INSECURE_MIN_BITS})")


def _immutable(self: object, name: str, value: object = None) -> NoReturn:
    raise AttributeError(f"{type(self).__name__} is immutable")


def validate_public_values(n: mpz, hs: mpz) -> None:
    """What a receiver can check about ``(N, hs)`` without the factors (``specs/paillier.md``).

    N: odd, ``≡ 1 (mod 4)`` (both primes are 3 mod 4), no prime factor below
    2^12, not a perfect square, not prime.  hs: ``1 < hs < N² - 1``, a unit,
    ``hs mod N ∉ {0, 1, N-1}``, Jacobi symbol ``(hs | N) = +1`` (true of every
    ``(-x²)^N`` when ``-1`` is a non-residue modulo both primes).  That hs is
    an N-th residue of large order cannot be checked publicly.
    """
    if n % 4 != 1:
        raise DecodeError("modulus is not ≡ 1 (mod 4): not a product of two primes ≡ 3 (mod 4)")
    if gmpy2.gcd(n, _SMALL_PRIMORIAL) != 1:
        raise DecodeError("modulus has a small prime factor")
    if gmpy2.is_square(n) or is_probable_prime(n, 25):
        raise DecodeError("modulus is a square or a prime")
    n2 = n * n
    if not 1 < hs < n2 - 1 or gmpy2.gcd(hs, n) != 1:
        raise DecodeError("hs is out of range or not a unit modulo N")
    if hs % n in (0, 1, n - 1):
        raise DecodeError("hs is degenerate modulo N")
    if gmpy2.jacobi(hs % n, n) != 1:
        raise DecodeError("hs has Jacobi symbol -1 modulo N: not of the form (-x^2)^N")


_KEYS: weakref.WeakValueDictionary[bytes, PublicKey] = weakref.WeakValueDictionary()


def batch_window(modulus_bits: int, exp_bits: int, budget: int = BATCH_TABLE_BYTES) -> int:
    """The widest window in ``[COMB_WINDOW, 12]`` whose table (``ceil(exp_bits / w) · 2^w``
    residues of ``modulus_bits``) stays within ``budget`` bytes: 12 for 512-bit keys, 10 for
    1024-bit keys, 8 from 2048 bits on (a key owner's two CRT tables share one budget)."""
    window = COMB_WINDOW
    while window < 12 and (-(-exp_bits // (window + 1)) << (window + 1)) * ((modulus_bits + 7) // 8) <= budget:
        window += 1
    return window


class PublicKey:
    """A Paillier public key ``(N, hs)``; immutable, identified by :attr:`key_id`.

    ``PublicKey(n, hs, allow_insecure=False)`` applies the size policy and
    :func:`validate_public_values` (raising :class:`DecodeError`); keys from
    :func:`generate_keypair` or :meth:`from_bytes` are the usual source.
    """

    __slots__ = (
        "__weakref__",
        "_batch_table",
        "_bits",
        "_half_bits",
        "_hs",
        "_key_id",
        "_n",
        "_n2",
        "_range",
        "_table",
        "_width",
    )

    _n: mpz
    _n2: mpz
    _hs: mpz
    _bits: int
    _half_bits: int
    _width: int
    _key_id: bytes
    _range: SignedRange
    _table: FixedBaseTable | None
    _batch_table: FixedBaseTable | None

    def __init__(self, n: int, hs: int, *, allow_insecure: bool = False) -> None:
        n_, hs_ = mpz(as_int(n)), mpz(as_int(hs))
        check_key_size(n_.bit_length(), allow_insecure)
        validate_public_values(n_, hs_)
        self._setup(n_, hs_)

    @classmethod
    def _unchecked(cls, n: mpz, hs: mpz) -> PublicKey:
        """A key from trusted values (key generation, the test helpers, our own workers)."""
        obj = object.__new__(cls)
        obj._setup(mpz(n), mpz(hs))
        return obj

    def _setup(self, n: mpz, hs: mpz) -> None:
        s = object.__setattr__
        s(self, "_n", n)
        s(self, "_n2", n * n)
        s(self, "_hs", hs)
        s(self, "_bits", n.bit_length())
        s(self, "_half_bits", (n.bit_length() + 1) // 2)
        s(self, "_width", wire.modulus_bytes(n))
        s(self, "_key_id", wire.key_id(n, hs))
        s(self, "_range", SignedRange.thirds(int(n)))
        s(self, "_table", None)
        s(self, "_batch_table", None)
        _KEYS.setdefault(self._key_id, self)

    __setattr__ = _immutable
    __delattr__ = _immutable

    # -- identity --------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return int(self._n)

    @property
    def n_square(self) -> int:
        return int(self._n2)

    @property
    def hs(self) -> int:
        """The DJN base ``(-x²)^N mod N²``."""
        return int(self._hs)

    @property
    def bits(self) -> int:
        return self._bits

    @property
    def key_id(self) -> bytes:
        """16 bytes of SHA-256 over N and hs (``specs/paillier.md``)."""
        return self._key_id

    @property
    def modulus_bytes(self) -> int:
        return self._width

    @property
    def plaintext_range(self) -> SignedRange:
        """Signed plaintexts ``|m| < N // 3``; the middle third of Z_N is the overflow band."""
        return self._range

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PublicKey):
            return NotImplemented
        return self._key_id == other._key_id

    def __hash__(self) -> int:
        return hash(self._key_id)

    def __repr__(self) -> str:
        return f"PublicKey(bits={self._bits}, id={self._key_id.hex()[:16]})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_public_key, (int(self._n), int(self._hs)))

    # -- the wire --------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        return wire.encode_public_key(self._n, self._hs)

    @classmethod
    def from_bytes(cls, data: bytes, *, allow_insecure: bool = False) -> PublicKey:
        """Decode and validate a public key; raises :class:`DecodeError` (or the size policy's
        :class:`ParameterError`)."""
        n, hs = wire.decode_public_key(data)
        return cls(int(n), int(hs), allow_insecure=allow_insecure)

    def check_ciphertext_value(self, c: mpz) -> None:
        """Raise :class:`InvalidCiphertext` unless ``0 < c < N²`` and ``gcd(c, N) = 1``."""
        if not 0 < c < self._n2 or gmpy2.gcd(c, self._n) != 1:
            raise InvalidCiphertext("ciphertext is out of range or not a unit modulo N")

    # -- randomness ------------------------------------------------------------------------
    def comb_table(self) -> FixedBaseTable:
        """The fixed-base table for ``hs`` (built on first use; 16 MiB at 2048 bits)."""
        table = self._table
        if table is None:
            table = FixedBaseTable.build(self._hs, self._n2, self._half_bits, COMB_WINDOW)
            object.__setattr__(self, "_table", table)
        return table

    def batch_table(self) -> FixedBaseTable:
        """The table for large batches: the :func:`batch_window` of this key (built on first use;
        the comb table itself when that window is 8)."""
        table = self._batch_table
        if table is None:
            window = self.batch_window()
            table = (self.comb_table() if window == COMB_WINDOW
                     else FixedBaseTable.build(self._hs, self._n2, self._half_bits, window))
            object.__setattr__(self, "_batch_table", table)
        return table

    def batch_window(self) -> int:
        """The window of :meth:`batch_table` (:func:`batch_window` of ``N²`` and ``|N|/2`` bits)."""
        return batch_window(self._n2.bit_length(), self._half_bits)

    def exponent_bits(self, mode: Mode) -> int:
        """Bits of the random exponent ``a`` in the DJN modes."""
        if mode == "djn":
            return self._half_bits
        if mode == "djn-short":
            return min(self._half_bits, 2 * security_level(self._bits))
        raise ParameterError(f"mode {mode!r} has no exponent")

    def draw_randomness(self, mode: Mode, rng: RandomSource) -> mpz:
        """The secret input of one obfuscator: ``a`` (DJN modes) or ``r ∈ Z*_N`` (classic)."""
        if mode == "classic":
            while True:
                r = mpz(rng.randbelow(self._n - 1) + 1)
                if gmpy2.gcd(r, self._n) == 1:
                    return r
        return mpz(rng.randbits(self.exponent_bits(mode)))

    def draw_randomness_many(self, mode: Mode, count: int, rng: RandomSource) -> list[mpz]:
        """``count`` values of :meth:`draw_randomness`; in the DJN modes from one byte string per
        chunk of exponents (the same values as one ``randbits`` call each for a byte stream)."""
        if mode == "classic":
            return [self.draw_randomness(mode, rng) for _ in range(count)]
        bits = self.exponent_bits(mode)
        width, shift = (bits + 7) // 8, -bits % 8
        out: list[mpz] = []
        for start in range(0, count, _DRAW_CHUNK):
            raw = rng.token_bytes(width * min(_DRAW_CHUNK, count - start))
            out += [mpz(int.from_bytes(raw[i:i + width], "big") >> shift) for i in range(0, len(raw), width)]
        return out

    def obfuscator_from(self, mode: Mode, randomness: mpz) -> mpz:
        """``hs^a`` or ``r^N`` mod N²: a uniform-looking encryption of 0."""
        if mode == "classic":
            return powmod(randomness, self._n, self._n2)  # the exponent N is public
        if mode not in MODES:
            raise ParameterError(f"unknown encryption mode {mode!r}; choose one of {MODES}")
        # ``a`` is secret: a fixed number of windows and multiplications for the mode's bound.
        return self.comb_table().pow(randomness, self.exponent_bits(mode))

    def obfuscators_from(self, mode: Mode, randomness: Sequence[Any]) -> list[mpz]:
        """:meth:`obfuscator_from` of each value, the DJN modes through one batched table pass."""
        if mode == "classic":
            return [self.obfuscator_from(mode, r) for r in randomness]
        if mode not in MODES:
            raise ParameterError(f"unknown encryption mode {mode!r}; choose one of {MODES}")
        table = self.batch_table() if len(randomness) >= BATCH_TABLE_MIN else self.comb_table()
        bits = self.exponent_bits(mode)
        out: list[mpz] = []
        for start in range(0, len(randomness), BATCH_SLICE):  # bounded digit columns
            out += table.pow_many(randomness[start:start + BATCH_SLICE], bits)
        return out

    def obfuscator(
        self, *, mode: Mode = "djn", pool: ObfuscatorSource | None = None,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> mpz:
        """One encryption of 0: from ``pool`` if given (single use), else computed now."""
        if pool is not None:
            if pool.public_key is not self:
                self._same_key(pool.public_key)
            return pool.take()
        if mode not in MODES:
            raise ParameterError(f"unknown encryption mode {mode!r}; choose one of {MODES}")
        return self.obfuscator_from(mode, self.draw_randomness(mode, rng))

    def _same_key(self, other: PublicKey) -> None:
        if other != self:
            raise KeyMismatchError("object belongs to another public key")

    # -- encryption ------------------------------------------------------------------------
    def encrypt(
        self, m: int, *, mode: Mode = "djn", pool: ObfuscatorSource | None = None,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> Ciphertext:
        """Encrypt a signed integer ``|m| < N // 3`` (else :class:`EncodingOverflowError`).

        ``mode`` picks the encryption mode; ``pool`` takes a precomputed
        obfuscator instead (the online cost is then one multiplication).
        """
        return self._encrypt_element(self._range.embed(m), mode, pool, rng)

    def _encrypt_element(
        self, residue: int, mode: Mode, pool: ObfuscatorSource | None, rng: RandomSource
    ) -> Ciphertext:
        obf = self.obfuscator(mode=mode, pool=pool, rng=rng)
        return _make(self, (1 + residue * self._n) * obf % self._n2, True)

    def encrypt_residue(
        self, r: int, *, mode: Mode = "djn", pool: ObfuscatorSource | None = None,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> Ciphertext:
        """Encrypt an element ``0 <= r < N`` of Z_N as is (masks that are uniform mod N)."""
        residue = as_int(r)
        if not 0 <= residue < self._n:
            raise ParameterError("residue must lie in [0, N)")
        return self._encrypt_element(residue, mode, pool, rng)

    def encrypt_fixed(
        self, x: Fixed, *, mode: Mode = "djn", pool: ObfuscatorSource | None = None,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> FixedCiphertext:
        """Encrypt a fixed-point value (``FixedPoint(f).fixed(x)``); the scale travels with it."""
        if not isinstance(x, Fixed):
            raise ParameterError("encrypt_fixed takes a Fixed value: use FixedPoint(f).fixed(x)")
        return FixedCiphertext(self.encrypt(x.value, mode=mode, pool=pool, rng=rng), x.frac_bits)



# Keys that arrived by pickle in this process (an executor's worker), kept alive so that
# their comb tables are built once per worker and not once per chunk.
_RECEIVED: deque[PublicKey | PrivateKey] = deque(maxlen=4)


def _restore_public_key(n: int, hs: int) -> PublicKey:
    """Unpickling in the library's own workers: reuse a live key (and its comb table)."""
    key = _KEYS.get(wire.key_id(n, hs))
    if key is None:
        key = PublicKey._unchecked(mpz(n), mpz(hs))
        _RECEIVED.append(key)
    return key


class PrivateKey:
    """The factors of N with the CRT constants; immutable; its repr shows no secret.

    ``PrivateKey(public_key, p, q)`` checks that ``pq = N``, that both are
    prime, the DJN conditions and that hs is an N-th residue.
    """

    __slots__ = (
        "__weakref__",
        "_batch_tables",
        "_hp",
        "_hq",
        "_p",
        "_p2",
        "_pk",
        "_q",
        "_q2",
        "_q2_inv_p2",
        "_q_inv_p",
        "_tables",
    )

    _pk: PublicKey
    _p: mpz
    _q: mpz
    _p2: mpz
    _q2: mpz
    _hp: mpz
    _hq: mpz
    _q_inv_p: mpz
    _q2_inv_p2: mpz
    _tables: tuple[FixedBaseTable, FixedBaseTable] | None
    _batch_tables: tuple[FixedBaseTable, FixedBaseTable] | None

    def __init__(self, public_key: PublicKey, p: int, q: int) -> None:
        p_, q_ = mpz(as_int(p)), mpz(as_int(q))
        n = public_key._n
        if p_ * q_ != n or p_ == q_ or p_ < 3 or q_ < 3:
            raise KeyMismatchError("the factors do not match the public key")
        if not (is_probable_prime(p_) and is_probable_prime(q_)):
            raise ParameterError("a factor is not prime")
        if p_ % 4 != 3 or q_ % 4 != 3 or gmpy2.gcd(p_ - 1, q_ - 1) != 2:
            raise ParameterError("factors violate the DJN conditions p ≡ q ≡ 3 (mod 4), "
                                 "gcd(p-1, q-1) = 2")
        hs = public_key._hs
        if powmod_sec(hs, p_ - 1, p_ * p_) != 1 or powmod_sec(hs, q_ - 1, q_ * q_) != 1:
            raise KeyMismatchError("hs is not an N-th residue for these factors")
        self._setup(public_key, p_, q_)

    @classmethod
    def _unchecked(cls, public_key: PublicKey, p: mpz, q: mpz) -> PrivateKey:
        obj = object.__new__(cls)
        obj._setup(public_key, mpz(p), mpz(q))
        return obj

    def _setup(self, pk: PublicKey, p: mpz, q: mpz) -> None:
        if p < q:  # a canonical order, so one key has one encoding
            p, q = q, p
        s = object.__setattr__
        p2, q2 = p * p, q * q
        s(self, "_pk", pk)
        s(self, "_p", p)
        s(self, "_q", q)
        s(self, "_p2", p2)
        s(self, "_q2", q2)
        # h_p = L_p(g^(p-1) mod p²)^-1 mod p; with g = 1 + N, L_p(...) = (p-1)·q mod p.
        s(self, "_hp", invert((p - 1) * q % p, p))
        s(self, "_hq", invert((q - 1) * p % q, q))
        s(self, "_q_inv_p", invert(q, p))
        s(self, "_q2_inv_p2", invert(q2, p2))
        s(self, "_tables", None)
        s(self, "_batch_tables", None)
        _PRIVATE.setdefault(pk.key_id, self)

    __setattr__ = _immutable
    __delattr__ = _immutable

    @property
    def public_key(self) -> PublicKey:
        return self._pk

    def __repr__(self) -> str:
        return f"PrivateKey(bits={self._pk.bits}, id={self._pk.key_id.hex()[:16]}, secret=<hidden>)"

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeMismatchError(
            "a private key is never pickled (the pickle would hold its factors in the clear); "
            "store it with to_encrypted_bytes(passphrase)"
        )

    def __copy__(self) -> PrivateKey:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> PrivateKey:
        """The key itself: it is immutable, and a copy would only duplicate its secret in memory
        (``sklearn.base.clone`` of an estimator holding a key pair shares the key)."""
        return self

    def for_workers(self) -> WorkerPrivateKey:
        """This key wrapped for the executor of a private-key batch call with
        ``trusted_workers=True``: the only object that pickles the factors (see
        :mod:`securetrees.paillier.batch` and ``specs/batch_executors.md``)."""
        return WorkerPrivateKey(self)

    # -- decryption ------------------------------------------------------------------------
    def _check(self, c: Ciphertext) -> None:
        if type(c) is not Ciphertext:
            raise TypeMismatchError(f"expected a Ciphertext, got {type(c).__name__}")
        if c._pk is not self._pk:
            self._pk._same_key(c._pk)

    def _residue(self, c: mpz, constant_time: bool) -> mpz:
        p, q, p2, q2 = self._p, self._q, self._p2, self._q2
        pw = gmpy2.powmod_sec if constant_time else gmpy2.powmod  # GMP reduces c mod p² itself
        mp = (pw(c, p - 1, p2) - 1) // p * self._hp % p
        mq = (pw(c, q - 1, q2) - 1) // q * self._hq % q
        return crt_pair(mp, mq, p, q, self._q_inv_p)

    def decrypt(self, c: Ciphertext, *, constant_time: bool = True) -> int:
        """The signed plaintext; raises :class:`EncodingOverflowError` in the overflow band.

        ``constant_time=False`` uses GMP's ordinary ``powmod`` on the secret
        exponents ``p-1``, ``q-1`` (faster, leaks timing; never the default).
        """
        self._check(c)
        return self._pk._range.extract(int(self._residue(c._c, constant_time)))

    def decrypt_residue(self, c: Ciphertext, *, constant_time: bool = True) -> int:
        """The plaintext as an element of Z_N, ``[0, N)``, with no signed reading."""
        self._check(c)
        return int(self._residue(c._c, constant_time))

    def decrypt_fixed(self, c: FixedCiphertext, *, constant_time: bool = True) -> float:
        """The fixed-point plaintext as a float (``value / 2^frac_bits``)."""
        if not isinstance(c, FixedCiphertext):
            raise TypeMismatchError(f"expected a FixedCiphertext, got {type(c).__name__}")
        return float(Fixed(self.decrypt(c.ciphertext, constant_time=constant_time), c.frac_bits))

    # -- key-owner encryption --------------------------------------------------------------
    def comb_tables(self) -> tuple[FixedBaseTable, FixedBaseTable]:
        """Fixed-base tables for ``hs mod p²`` and ``hs mod q²`` (built on first use)."""
        tables = self._tables
        if tables is None:
            bits = self._pk._half_bits
            tables = (FixedBaseTable.build(self._pk._hs % self._p2, self._p2, bits, COMB_WINDOW),
                      FixedBaseTable.build(self._pk._hs % self._q2, self._q2, bits, COMB_WINDOW))
            object.__setattr__(self, "_tables", tables)
        return tables

    def batch_tables(self) -> tuple[FixedBaseTable, FixedBaseTable]:
        """The CRT tables for large batches, with the :func:`batch_window` of ``p²`` (built on
        first use; the comb tables themselves when that window is 8)."""
        tables = self._batch_tables
        if tables is None:
            bits = self._pk._half_bits
            window = batch_window(self._p2.bit_length(), bits, BATCH_TABLE_BYTES // 2)
            tables = (self.comb_tables() if window == COMB_WINDOW else
                      (FixedBaseTable.build(self._pk._hs % self._p2, self._p2, bits, window),
                       FixedBaseTable.build(self._pk._hs % self._q2, self._q2, bits, window)))
            object.__setattr__(self, "_batch_tables", tables)
        return tables

    def draw_randomness(self, mode: Mode, rng: RandomSource) -> Any:
        """``a`` for the DJN modes (as the public key draws it); ``(r_p, r_q)`` for classic."""
        if mode == "classic":
            return mpz(rng.randbelow(self._p - 1) + 1), mpz(rng.randbelow(self._q - 1) + 1)
        return self._pk.draw_randomness(mode, rng)

    def draw_randomness_many(self, mode: Mode, count: int, rng: RandomSource) -> list[Any]:
        """``count`` values of :meth:`draw_randomness`."""
        if mode == "classic":
            return [self.draw_randomness(mode, rng) for _ in range(count)]
        return list(self._pk.draw_randomness_many(mode, count, rng))

    def obfuscator_from(self, mode: Mode, randomness: Any) -> mpz:
        """The public key's obfuscator for ``mode``, computed modulo p² and q² and joined by CRT.

        DJN modes: ``hs^a`` from the two half-size comb tables (the same value
        as the public key's ``hs^a``).  Classic: ``r_p^p mod p²`` and
        ``r_q^q mod q²`` with ``powmod_sec`` (``p``, ``q`` are secret): ``x ↦ x^p``
        maps ``Z*_{p²}`` uniformly onto its subgroup of order ``p - 1``, the
        N-th residues mod p², so the result is distributed as ``r^N`` for a
        uniform ``r``.
        """
        if mode == "classic":
            rp, rq = randomness
            xp = powmod_sec(rp, self._p, self._p2)
            xq = powmod_sec(rq, self._q, self._q2)
        elif mode in MODES:
            tp, tq = self.comb_tables()
            bits = self._pk.exponent_bits(mode)
            xp, xq = tp.pow(randomness, bits), tq.pow(randomness, bits)
        else:
            raise ParameterError(f"unknown encryption mode {mode!r}; choose one of {MODES}")
        return crt_pair(xp, xq, self._p2, self._q2, self._q2_inv_p2)

    def obfuscators_from(self, mode: Mode, randomness: Sequence[Any]) -> list[mpz]:
        """:meth:`obfuscator_from` of each value, the DJN modes through batched table passes."""
        if mode == "classic":
            return [self.obfuscator_from(mode, r) for r in randomness]
        if mode not in MODES:
            raise ParameterError(f"unknown encryption mode {mode!r}; choose one of {MODES}")
        if self._pk._bits < CRT_OBFUSCATOR_MIN_BITS:
            return self._pk.obfuscators_from(mode, randomness)  # the same values, one pass mod N²
        tp, tq = self.batch_tables() if len(randomness) >= BATCH_TABLE_MIN else self.comb_tables()
        bits = self._pk.exponent_bits(mode)
        p2, q2, inv = self._p2, self._q2, self._q2_inv_p2
        out: list[mpz] = []
        for start in range(0, len(randomness), BATCH_SLICE):  # bounded digit columns
            columns = exponent_columns(randomness[start:start + BATCH_SLICE], bits, tp.window)  # shared by both
            out += [xq + q2 * ((xp - xq) * inv % p2)  # crt_pair, inlined for the batch
                    for xp, xq in zip(tp.pow_columns(columns), tq.pow_columns(columns), strict=True)]
        return out

    def encrypt(self, m: int, *, mode: Mode = "djn", rng: RandomSource = SYSTEM_RANDOM) -> Ciphertext:
        """Key-owner encryption of a signed integer: the public key's ``mode``, computed by CRT."""
        pk = self._pk
        residue = pk._range.embed(m)
        obf = self.obfuscator_from(mode, self.draw_randomness(mode, rng))
        return _make(pk, (1 + residue * pk._n) * obf % pk._n2, True)

    # -- storage ---------------------------------------------------------------------------
    def to_encrypted_bytes(
        self, passphrase: str | bytes, *, rng: RandomSource = SYSTEM_RANDOM,
        scrypt_log2_n: int = sealing.SCRYPT_LOG2_N_DEFAULT,
    ) -> bytes:
        """The key sealed under a passphrase (scrypt + AES-256-GCM, key id as associated data)."""
        w = (self._p.bit_length() + 7) // 8
        secret = w.to_bytes(2, "big") + int(self._p).to_bytes(w, "big")
        return sealing.seal(self._pk.to_bytes(), self._pk.key_id, secret, passphrase,
                            rng=rng, log2_n=scrypt_log2_n)

    @classmethod
    def from_encrypted_bytes(
        cls, data: bytes, passphrase: str | bytes, *, allow_insecure: bool = False
    ) -> PrivateKey:
        """Open a sealed key; raises :class:`DecodeError` (wrong passphrase, any modified byte)."""
        pk_bytes, kid, secret = sealing.open_sealed(data, passphrase)
        pk = PublicKey.from_bytes(pk_bytes, allow_insecure=allow_insecure)
        if pk.key_id != kid:
            raise DecodeError("key id in the header does not match the public key")
        if len(secret) < 2 or len(secret) != 2 + int.from_bytes(secret[:2], "big"):
            raise DecodeError("malformed private-key payload")
        p = int.from_bytes(secret[2:], "big")
        if p < 3 or pk.n % p:
            raise DecodeError("stored factor does not divide N")
        try:
            return cls(pk, p, pk.n // p)
        except (ParameterError, KeyMismatchError) as exc:
            raise DecodeError(f"stored key is invalid: {exc}") from exc


_PRIVATE: weakref.WeakValueDictionary[bytes, PrivateKey] = weakref.WeakValueDictionary()


class WorkerPrivateKey:
    """A private key on its way to the workers of a private-key batch call with ``trusted_workers=True``.

    Pickling it sends the factors; unpickling yields a wrapper again (around the live
    :class:`PrivateKey` of the receiving process), so that a cluster that forwards a task
    (Dask: client, scheduler, worker) can pickle it once more.  Workers call :meth:`unwrap`.
    """

    __slots__ = ("key",)

    def __init__(self, key: PrivateKey) -> None:
        self.key = key

    def __repr__(self) -> str:
        return f"WorkerPrivateKey({self.key!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        k = self.key
        return (_restore_private_key, (k._pk, int(k._p), int(k._q)))

    @staticmethod
    def unwrap(key: PublicKey | PrivateKey | WorkerPrivateKey) -> PublicKey | PrivateKey:
        return key.key if isinstance(key, WorkerPrivateKey) else key


def _restore_private_key(pk: PublicKey, p: int, q: int) -> WorkerPrivateKey:
    """Unpickling for a ``trusted_workers=True`` batch call: reuse a live key with these factors."""
    key = _PRIVATE.get(pk.key_id)
    if key is None or key._p != max(p, q):
        key = PrivateKey._unchecked(pk, mpz(p), mpz(q))
        _RECEIVED.append(key)
    return WorkerPrivateKey(key)


def _djn_primes(half: int, rng: RandomSource) -> tuple[mpz, mpz]:
    """Two primes ``≡ 3 (mod 4)`` of ``half`` bits with ``gcd(p-1, q-1) = 2`` and ``|p-q|`` large."""
    p = random_prime(half, rng=rng, congruent_3_mod_4=True)
    while True:
        q = random_prime(half, rng=rng, congruent_3_mod_4=True)
        if gmpy2.gcd(p - 1, q - 1) == 2 and abs(p - q).bit_length() > half - 100:
            return p, q


def djn_base(n: mpz, rng: RandomSource) -> mpz:
    """``hs = (-x²)^N mod N²`` for a uniform unit ``x`` (DJN; ``specs/paillier.md``, "Parameters and defaults")."""
    while True:
        x = mpz(rng.randbelow(n - 2) + 2)
        if gmpy2.gcd(x, n) == 1:
            break
    return powmod(n - x * x % n, n, n * n)


def keypair_from_factors(p: mpz, q: mpz, rng: RandomSource) -> tuple[PublicKey, PrivateKey]:
    """Build a key pair from primes already chosen (no size policy: callers apply it)."""
    n = p * q
    pk = PublicKey._unchecked(n, djn_base(n, rng))
    return pk, PrivateKey._unchecked(pk, p, q)


def generate_keypair(
    bits: int = DEFAULT_BITS, *, rng: RandomSource = SYSTEM_RANDOM, allow_insecure: bool = False
) -> tuple[PublicKey, PrivateKey]:
    """A fresh DJN-ready Paillier key pair with an N of exactly ``bits`` bits.

    ``bits >= 2048`` (default 2048, 3072 for 128-bit security); 1024..2047 only
    with ``allow_insecure=True``, which warns; anything smaller raises
    :class:`ParameterError` (tests build small keys through
    :mod:`securetrees.testing.paillier`).
    """
    if not isinstance(bits, int) or isinstance(bits, bool) or bits % 2:
        raise ParameterError(f"bits must be an even integer, got {bits!r}")
    check_key_size(bits, allow_insecure)
    p, q = _djn_primes(bits // 2, rng)
    return keypair_from_factors(p, q, rng)
