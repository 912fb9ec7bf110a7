"""DT-PKC ciphertexts ``(T1, T2)`` bound to the (joint) public key they are under.

Same-key homomorphic operations (``specs/dtpkc.md``,
"Operations"): add ``(T1a·T1b, T2a·T2b)``, scalar ``(T1^k, T2^k)``,
negation by modular inverses, adding a public constant ``(T1·(1+cN), T2)``.
Combining ciphertexts under different keys raises :class:`KeyMismatchError`;
crossing keys needs the two-server protocol HoAdd (``twoserver``).

Every deterministic operation returns a ciphertext marked ``fresh=False``;
:meth:`Ciphertext.rerandomize` (a fresh encryption of 0 multiplied in) makes
it fresh again, and :func:`securetrees.dtpkc.wire.encode_ciphertext`
re-randomises a stale ciphertext before it leaves a party.
"""

from __future__ import annotations

from dataclasses import dataclass

import gmpy2

from securetrees._nt import invert, mpz, powmod
from securetrees.dtpkc.keys import PublicKey
from securetrees.encoding import as_int
from securetrees.errors import InvalidCiphertext, KeyMismatchError, TypeMismatchError
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = ["Ciphertext", "check_unit"]


def check_unit(x: int | mpz, n: mpz, n2: mpz, what: str = "ciphertext component") -> mpz:
    """``x`` as an mpz if ``0 < x < N²`` and ``gcd(x, N) = 1``; :class:`InvalidCiphertext` otherwise."""
    if isinstance(x, bool) or not isinstance(x, (int, type(n))):
        raise InvalidCiphertext(f"{what} must be an integer")
    v = mpz(x)
    if not 0 < v < n2:
        raise InvalidCiphertext(f"{what} is out of range (0, N²)")
    if gmpy2.gcd(v, n) != 1:
        raise InvalidCiphertext(f"{what} is not a unit modulo N²")
    return v


@dataclass(frozen=True, eq=False)
class Ciphertext:
    """An immutable DT-PKC ciphertext under ``pk``.

    Build one with :func:`~securetrees.dtpkc.scheme.encrypt` or, from integers
    received from a peer, with :meth:`from_ints` (which validates them).
    """

    pk: PublicKey
    t1: mpz
    t2: mpz
    fresh: bool = True

    @classmethod
    def from_ints(cls, pk: PublicKey, t1: int, t2: int) -> Ciphertext:
        """Validate ``(T1, T2)`` against ``pk`` (range, unit); raise :class:`InvalidCiphertext`.

        A value received from a peer counts as fresh: the sender re-randomised it.
        """
        return cls(pk, check_unit(t1, pk.n, pk.n2, "T1"), check_unit(t2, pk.n, pk.n2, "T2"))

    def to_ints(self) -> tuple[int, int]:
        """``(T1, T2)`` as plain ints (no re-randomisation: see ``wire.encode_ciphertext``)."""
        return int(self.t1), int(self.t2)

    @property
    def key_id(self) -> bytes:
        return self.pk.key_id

    def _same_key(self, other: Ciphertext) -> None:
        if not isinstance(other, Ciphertext):
            raise TypeMismatchError("expected a Ciphertext")
        if other.pk.key_id != self.pk.key_id:
            raise KeyMismatchError(
                "ciphertexts are under different keys; use HoAdd to add across keys"
            )

    def __add__(self, other: Ciphertext) -> Ciphertext:
        self._same_key(other)
        n2 = self.pk.n2
        return Ciphertext(self.pk, self.t1 * other.t1 % n2, self.t2 * other.t2 % n2, fresh=False)

    def __neg__(self) -> Ciphertext:
        n2 = self.pk.n2
        return Ciphertext(self.pk, invert(self.t1, n2), invert(self.t2, n2), fresh=False)

    def __sub__(self, other: Ciphertext) -> Ciphertext:
        return self + (-other)

    def __mul__(self, k: int) -> Ciphertext:
        """Multiplication by a public integer scalar (negative allowed)."""
        if isinstance(k, Ciphertext):
            raise TypeMismatchError("DT-PKC is additively homomorphic: a ciphertext times a ciphertext is undefined")
        s = as_int(k)
        n2 = self.pk.n2
        return Ciphertext(self.pk, powmod(self.t1, s, n2), powmod(self.t2, s, n2), fresh=False)

    __rmul__ = __mul__

    def add_constant(self, c: int) -> Ciphertext:
        """``[[m + c]]`` for a public signed integer ``c``: ``(T1·(1 + cN), T2)``."""
        n, n2 = self.pk.n, self.pk.n2
        t1 = self.t1 * (1 + (mpz(as_int(c)) % n) * n) % n2
        return Ciphertext(self.pk, t1, self.t2, fresh=False)

    def rerandomize(self, *, rng: RandomSource = SYSTEM_RANDOM) -> Ciphertext:
        """Multiply by a fresh encryption of 0: ``(T1·h^r', T2·g^r')``, ``r' ∈ [1, N/4]``."""
        pk = self.pk
        r = pk.params.random_exponent(rng)
        n2 = pk.n2
        return Ciphertext(pk, self.t1 * pk.h_pow(r) % n2, self.t2 * pk.params.g_pow(r) % n2)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Ciphertext)
            and other.pk.key_id == self.pk.key_id
            and other.t1 == self.t1
            and other.t2 == self.t2
        )

    def __hash__(self) -> int:
        return hash((self.pk.key_id, int(self.t1), int(self.t2)))

    def __repr__(self) -> str:
        state = "fresh" if self.fresh else "stale"
        return f"Ciphertext(key={self.pk.key_id.hex()[:12]}, {state}, T1={int(self.t1) & 0xFFFFFFFF:08x}...)"
