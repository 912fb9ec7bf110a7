"""Paillier ciphertexts and their homomorphic operations (``specs/paillier.md``, "Ciphertexts and operations").

A :class:`Ciphertext` is immutable, holds its value as a gmpy2 ``mpz`` and a
reference to its :class:`~securetrees.paillier.keys.PublicKey`, and knows
whether it is *fresh* (straight out of an encryption or :meth:`rerandomize`).

* ``c1 + c2`` multiplies mod N²; ``c + k`` multiplies by ``1 + kN``; ``c * k``
  raises to ``k`` (a negative ``k`` inverts first, so the exponent stays below
  N/2); ``-c`` inverts mod N².  Plaintext constants are taken mod N.
* Every result of such a deterministic transformation is *not fresh*: its
  value is a function of the inputs, so a peer who saw the inputs could link
  it.  :meth:`Ciphertext.to_bytes` therefore re-randomises a ciphertext that
  is not fresh before it encodes it (the one rule: bytes that leave a party
  never come from a deterministic transformation).
* Combining ciphertexts of different keys raises :class:`KeyMismatchError`;
  the check compares key objects by identity first, so the hot path of ``+``
  is one identity test, one multiplication and one reduction.

:class:`FixedCiphertext` pairs a ciphertext with the public scale ``2^f`` of
the fixed-point value inside it (``specs/encoding.md``).
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import gmpy2

from securetrees._nt import mpz
from securetrees.encoding import Fixed, as_int
from securetrees.errors import KeyMismatchError, ParameterError
from securetrees.paillier import wire
from securetrees.rand import SYSTEM_RANDOM, RandomSource

if TYPE_CHECKING:
    from securetrees.paillier.keys import Mode, PublicKey

__all__ = ["Ciphertext", "FixedCiphertext"]


def _immutable(self: object, name: str, value: object = None) -> NoReturn:
    raise AttributeError(f"{type(self).__name__} is immutable")


class ObfuscatorSource(Protocol):
    """Precomputed single-use encryptions of 0 for one key (a
    :class:`~securetrees.paillier.pool.RandomnessPool`): what encryption takes from a pool."""

    @property
    def public_key(self) -> PublicKey: ...

    def take(self) -> mpz: ...


def _key_mismatch(a: PublicKey, b: PublicKey) -> None:
    """Raise unless ``a`` and ``b`` are the same key (equal key ids)."""
    if a != b:
        raise KeyMismatchError(
            f"ciphertexts under different keys ({a.key_id.hex()[:16]} vs {b.key_id.hex()[:16]})"
        )


def _plain_int(k: object) -> int | None:
    """``k`` as an ``int`` if it is an integer (Python or numpy, not bool), else None."""
    if type(k) is int:
        return k
    if isinstance(k, numbers.Integral) and not isinstance(k, bool):
        return int(k)
    return None


class Ciphertext:
    """A Paillier ciphertext under one public key; immutable; see the module docstring.

    ``Ciphertext(public_key, value)`` validates ``value`` (``0 < value < N²``,
    a unit mod N) and marks it not fresh: use it for integers that arrive from
    elsewhere.  Encryption and the operators build ciphertexts without
    re-validation.
    """

    __slots__ = ("_c", "_fresh", "_pk")

    _c: mpz
    _pk: PublicKey
    _fresh: bool

    def __init__(self, public_key: PublicKey, value: int) -> None:
        c = mpz(as_int(value))
        public_key.check_ciphertext_value(c)
        _set_c(self, c)
        _set_pk(self, public_key)
        _set_fresh(self, False)

    __setattr__ = _immutable
    __delattr__ = _immutable

    # -- accessors -------------------------------------------------------------------------
    @property
    def public_key(self) -> PublicKey:
        return self._pk

    @property
    def value(self) -> int:
        """The ciphertext as a plain ``int`` in ``(0, N²)``."""
        return int(self._c)

    @property
    def fresh(self) -> bool:
        """True for the output of an encryption or :meth:`rerandomize`; False after any operation."""
        return self._fresh

    def __repr__(self) -> str:
        return f"Ciphertext(key={self._pk.key_id.hex()[:16]}, fresh={self._fresh})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self._pk, int(self._c), self._fresh))

    # -- homomorphic operations ------------------------------------------------------------
    def __add__(self, other: object) -> Ciphertext:
        pk = self._pk
        if type(other) is Ciphertext:
            if other._pk is not pk:
                _key_mismatch(pk, other._pk)
            return _make(pk, self._c * other._c % pk._n2, False)
        k = _plain_int(other)
        if k is None:
            return NotImplemented
        return _make(pk, self._c * (1 + k % pk._n * pk._n) % pk._n2, False)

    __radd__ = __add__

    def __neg__(self) -> Ciphertext:
        pk = self._pk
        return _make(pk, gmpy2.invert(self._c, pk._n2), False)

    def __sub__(self, other: object) -> Ciphertext:
        if type(other) is Ciphertext:
            return self + (-other)
        k = _plain_int(other)
        if k is None:
            return NotImplemented
        return self + (-k)

    def __rsub__(self, other: object) -> Ciphertext:
        k = _plain_int(other)
        if k is None:
            return NotImplemented
        return (-self) + k

    def __mul__(self, other: object) -> Ciphertext:
        k = _plain_int(other)
        if k is None:
            return NotImplemented
        pk = self._pk
        k %= pk._n
        if k > pk._n >> 1:  # a negative scalar: invert, then raise to |k| < N/2
            return _make(pk, gmpy2.powmod(gmpy2.invert(self._c, pk._n2), pk._n - k, pk._n2), False)
        return _make(pk, gmpy2.powmod(self._c, k, pk._n2), False)

    __rmul__ = __mul__

    # -- freshness and the wire ------------------------------------------------------------
    def rerandomize(
        self, *, mode: Mode = "djn", pool: ObfuscatorSource | None = None,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> Ciphertext:
        """A fresh ciphertext of the same plaintext: multiply by a new encryption of 0."""
        pk = self._pk
        return _make(pk, self._c * pk.obfuscator(mode=mode, pool=pool, rng=rng) % pk._n2, True)

    def to_bytes(self, *, rng: RandomSource = SYSTEM_RANDOM) -> bytes:
        """The wire form (``specs/paillier.md``); re-randomises first unless :attr:`fresh`."""
        c = self if self._fresh else self.rerandomize(rng=rng)
        pk = self._pk
        return wire.encode_ciphertext(pk.key_id, pk.modulus_bytes, c._c)

    @classmethod
    def from_bytes(cls, data: bytes, public_key: PublicKey) -> Ciphertext:
        """Decode a ciphertext under ``public_key``.

        Raises :class:`~securetrees.errors.DecodeError` (format, version,
        length, key id) or :class:`~securetrees.errors.InvalidCiphertext`
        (value out of range or not a unit).  The result is not fresh: forwarding
        it unchanged would let the sender and the next receiver link it.
        """
        c = wire.decode_ciphertext(data, public_key.key_id, public_key.modulus_bytes)
        public_key.check_ciphertext_value(c)
        return _make(public_key, c, False)


# The slot descriptors' setters bypass the immutable __setattr__ (the only writers).
_slot: dict[str, Any] = dict(Ciphertext.__dict__)
_set_c = _slot["_c"].__set__
_set_pk = _slot["_pk"].__set__
_set_fresh = _slot["_fresh"].__set__
_new = object.__new__


def _make(pk: PublicKey, c: mpz, fresh: bool) -> Ciphertext:
    """Build a ciphertext from a trusted value (no validation): the library's own results."""
    obj = _new(Ciphertext)
    _set_c(obj, c)
    _set_pk(obj, pk)
    _set_fresh(obj, fresh)
    return obj


def _restore(pk: PublicKey, value: int, fresh: bool) -> Ciphertext:
    """Unpickling for the library's own worker processes (never for bytes from a peer)."""
    return _make(pk, mpz(value), fresh)


class FixedCiphertext:
    """An encrypted fixed-point number ``m / 2^frac_bits`` (``specs/encoding.md``).

    Sums need equal scales (else :class:`ParameterError`); a product with a
    plaintext :class:`~securetrees.encoding.Fixed` adds the scales; a product
    with an integer keeps the scale.  Decrypt with
    :meth:`~securetrees.paillier.keys.PrivateKey.decrypt_fixed`.
    """

    __slots__ = ("ciphertext", "frac_bits")

    ciphertext: Ciphertext
    frac_bits: int

    def __init__(self, ciphertext: Ciphertext, frac_bits: int) -> None:
        if type(frac_bits) is not int or frac_bits < 0:
            raise ParameterError("frac_bits must be a non-negative integer")
        object.__setattr__(self, "ciphertext", ciphertext)
        object.__setattr__(self, "frac_bits", frac_bits)

    __setattr__ = _immutable
    __delattr__ = _immutable

    @property
    def fresh(self) -> bool:
        return self.ciphertext.fresh

    def __repr__(self) -> str:
        return f"FixedCiphertext({self.ciphertext!r}, frac_bits={self.frac_bits})"

    def _same_scale(self, frac_bits: int) -> None:
        if frac_bits != self.frac_bits:
            raise ParameterError(
                f"cannot add fixed-point values of scales 2^{self.frac_bits} and 2^{frac_bits}"
            )

    def __add__(self, other: object) -> FixedCiphertext:
        if isinstance(other, FixedCiphertext):
            self._same_scale(other.frac_bits)
            return FixedCiphertext(self.ciphertext + other.ciphertext, self.frac_bits)
        if isinstance(other, Fixed):
            self._same_scale(other.frac_bits)
            return FixedCiphertext(self.ciphertext + other.value, self.frac_bits)
        return NotImplemented

    __radd__ = __add__

    def __neg__(self) -> FixedCiphertext:
        return FixedCiphertext(-self.ciphertext, self.frac_bits)

    def __sub__(self, other: object) -> FixedCiphertext:
        if isinstance(other, (FixedCiphertext, Fixed)):
            return self + (-other)
        return NotImplemented

    def __rsub__(self, other: object) -> FixedCiphertext:
        if isinstance(other, Fixed):
            return (-self) + other
        return NotImplemented

    def __mul__(self, other: object) -> FixedCiphertext:
        if isinstance(other, Fixed):
            return FixedCiphertext(self.ciphertext * other.value, self.frac_bits + other.frac_bits)
        k = _plain_int(other)
        if k is None:
            return NotImplemented
        return FixedCiphertext(self.ciphertext * k, self.frac_bits)

    __rmul__ = __mul__

    def rerandomize(self, *, rng: RandomSource = SYSTEM_RANDOM) -> FixedCiphertext:
        return FixedCiphertext(self.ciphertext.rerandomize(rng=rng), self.frac_bits)
