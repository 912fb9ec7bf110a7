"""Validated conversions to and from python-paillier (``phe``), for users migrating from it.

Both libraries use ``g = N + 1``, the same ciphertexts ``(1 + mN)·ρ mod N²`` and
the same signed band (``|m| < N // 3``), so a conversion moves integers; it never
re-encrypts.  Everything checked here is in ``specs/paillier.md`` ("Migrating
from python-paillier"); in short:

* Keys: a phe key has no DJN base ``hs``.  Coming in, ``hs`` is the caller's (to
  recover a securetrees key that was exported) or :func:`derived_hs` of ``N``,
  the same on every party, so that every party converting the same phe key gets
  the same key id.  The key must meet securetrees' key policy: the size policy
  (``allow_insecure``), the public checks of :class:`PublicKey` and, for a
  private key, every check of :class:`PrivateKey` (``pq = N``, primes, the DJN
  conditions ``p ≡ q ≡ 3 (mod 4)``, ``gcd(p−1, q−1) = 2``).  phe's own key
  generator does not aim at the DJN conditions, so most phe-generated keys are
  refused (:class:`ParameterError`); their ciphertexts migrate by decryption
  with phe and encryption under a securetrees key.
* Ciphertexts coming in are checked against the receiving key (same ``N``, else
  :class:`KeyMismatchError`) and as any ciphertext from elsewhere (range and
  unit, :class:`InvalidCiphertext`); they are not fresh.
* Exponents: phe's ``EncryptedNumber`` holds ``mantissa · 16^exponent``.  A
  :class:`Ciphertext` is exponent 0 exactly; a :class:`FixedCiphertext` at
  scale ``2^-f`` is exponent ``-f/4`` exactly.  Any other pairing is refused
  (:class:`ParameterError`), never rescaled silently.
* Ciphertexts going out are re-randomised first unless fresh (the library's
  rule for every ciphertext that leaves a party).

phe is an optional dependency (``pip install 'securetrees[phe]'``), imported
when a function here is called; without it they raise
:class:`MissingDependencyError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from securetrees._nt import mpz
from securetrees.encoding import as_int
from securetrees.errors import (
    DecodeError,
    KeyMismatchError,
    MissingDependencyError,
    ParameterError,
    TypeMismatchError,
)
from securetrees.paillier import wire
from securetrees.paillier.ciphertext import Ciphertext, FixedCiphertext
from securetrees.paillier.keys import PrivateKey, PublicKey, djn_base
from securetrees.rand import SYSTEM_RANDOM, DeterministicRandom, RandomSource

if TYPE_CHECKING:  # phe ships no type information: these names are Any to mypy
    from phe import EncryptedNumber, PaillierPrivateKey, PaillierPublicKey

__all__ = [
    "PHE_LOG2_BASE",
    "ciphertext_from_phe",
    "ciphertext_to_phe",
    "derived_hs",
    "fixed_ciphertext_from_phe",
    "fixed_ciphertext_to_phe",
    "private_key_from_phe",
    "private_key_to_phe",
    "public_key_from_phe",
    "public_key_to_phe",
]

PHE_LOG2_BASE: Final = 4  # phe's EncodedNumber.BASE is 16 = 2^4
_HS_LABEL: Final = b"securetrees/paillier/phe-interop/hs/v1/"


def _phe() -> Any:
    """The ``phe`` module, or :class:`MissingDependencyError` with the install hint."""
    try:
        import phe
    except ImportError as exc:
        raise MissingDependencyError(
            "python-paillier is not installed: pip install 'securetrees[phe]' (or pip install phe)"
        ) from exc
    return phe


def derived_hs(n: int) -> int:
    """The DJN base ``(−x²)^N mod N²`` that converted phe keys get when no ``hs`` is given.

    ``x`` comes from a SHAKE-256 stream keyed by a fixed label and ``N``
    (:class:`~securetrees.rand.DeterministicRandom`), so every party computes the
    same ``hs`` and the same key id from a phe key.  ``x`` is therefore public;
    the obfuscator ``hs^a`` stays secret through ``a``, which is drawn fresh from
    the CSPRNG for every encryption (``specs/paillier.md`` discusses this choice).
    """
    n_ = mpz(as_int(n))
    if n_ < 3:
        raise ParameterError("modulus is too small")
    width = wire.modulus_bytes(n_)
    label = _HS_LABEL + width.to_bytes(2, "big") + int(n_).to_bytes(width, "big")
    return int(djn_base(n_, DeterministicRandom(label)))


# -- public keys ---------------------------------------------------------------------------


def _phe_modulus(phe_public_key: PaillierPublicKey) -> int:
    """``N`` of a phe public key after checking its type and ``g = N + 1``."""
    phe = _phe()
    if not isinstance(phe_public_key, phe.PaillierPublicKey):
        raise TypeMismatchError(f"expected a phe PaillierPublicKey, got {type(phe_public_key).__name__}")
    n = as_int(phe_public_key.n)
    if as_int(phe_public_key.g) != n + 1:
        raise ParameterError("the phe key's g is not N + 1: not a key of this scheme")
    return n


def public_key_from_phe(
    phe_public_key: PaillierPublicKey, *, hs: int | None = None, allow_insecure: bool = False
) -> PublicKey:
    """A securetrees :class:`PublicKey` with the phe key's ``N``.

    ``hs`` defaults to :func:`derived_hs` of ``N``; pass a securetrees key's own
    ``hs`` to get that key back after :func:`public_key_to_phe`.  Applies the
    size policy (below 2048 bits only with ``allow_insecure=True``, which warns)
    and the public checks of :class:`PublicKey`; a key that fails them raises
    :class:`ParameterError`.
    """
    n = _phe_modulus(phe_public_key)
    base = derived_hs(n) if hs is None else as_int(hs)
    try:
        return PublicKey(n, base, allow_insecure=allow_insecure)
    except DecodeError as exc:
        raise ParameterError(
            f"the phe key is not a valid securetrees key ({exc}); securetrees keys need primes "
            "p ≡ q ≡ 3 (mod 4) (specs/paillier.md, 'Migrating from python-paillier')"
        ) from exc


def public_key_to_phe(public_key: PublicKey) -> PaillierPublicKey:
    """A phe ``PaillierPublicKey`` with this key's ``N`` (phe keeps no ``hs``)."""
    phe = _phe()
    if not isinstance(public_key, PublicKey):
        raise TypeMismatchError(f"expected a PublicKey, got {type(public_key).__name__}")
    return phe.PaillierPublicKey(public_key.n)


# -- private keys --------------------------------------------------------------------------


def private_key_from_phe(
    phe_private_key: PaillierPrivateKey, *, hs: int | None = None, allow_insecure: bool = False
) -> PrivateKey:
    """A securetrees :class:`PrivateKey` from a phe private key's ``p`` and ``q``.

    The public key is :func:`public_key_from_phe` of the phe key's public key
    (with ``hs`` and ``allow_insecure`` passed on); then every check of
    :class:`PrivateKey` runs: ``pq = N`` and an ``hs`` that is an N-th residue
    for these factors (else :class:`KeyMismatchError`), both factors prime and
    the DJN conditions (else :class:`ParameterError`).
    """
    phe = _phe()
    if not isinstance(phe_private_key, phe.PaillierPrivateKey):
        raise TypeMismatchError(
            f"expected a phe PaillierPrivateKey, got {type(phe_private_key).__name__}"
        )
    pk = public_key_from_phe(phe_private_key.public_key, hs=hs, allow_insecure=allow_insecure)
    return PrivateKey(pk, as_int(phe_private_key.p), as_int(phe_private_key.q))


def private_key_to_phe(private_key: PrivateKey) -> PaillierPrivateKey:
    """A phe ``PaillierPrivateKey`` with this key's factors.

    The result is an ordinary phe object: it holds ``p`` and ``q`` in the clear
    and pickles like any Python object, which a securetrees :class:`PrivateKey`
    refuses to do.  Export only to code that needs the key.
    """
    phe = _phe()
    if not isinstance(private_key, PrivateKey):
        raise TypeMismatchError(f"expected a PrivateKey, got {type(private_key).__name__}")
    return phe.PaillierPrivateKey(
        public_key_to_phe(private_key.public_key), int(private_key._p), int(private_key._q)
    )


# -- ciphertexts ---------------------------------------------------------------------------


def _phe_value(encrypted: EncryptedNumber, public_key: PublicKey, exponent: int) -> Ciphertext:
    """The ciphertext integer of ``encrypted`` under ``public_key``, after every check."""
    phe = _phe()
    if not isinstance(encrypted, phe.EncryptedNumber):
        raise TypeMismatchError(f"expected a phe EncryptedNumber, got {type(encrypted).__name__}")
    if not isinstance(public_key, PublicKey):
        raise TypeMismatchError(f"expected a PublicKey, got {type(public_key).__name__}")
    if _phe_modulus(encrypted.public_key) != public_key.n:
        raise KeyMismatchError("the phe ciphertext was made under another modulus than this key's")
    got = as_int(encrypted.exponent)
    if got != exponent:
        hint = (f"; phe can lower it first: encrypted.decrease_exponent_to({exponent})"
                if got > exponent else "")
        raise ParameterError(
            f"the phe ciphertext has exponent {got} (plaintext mantissa·16^{got}); this conversion "
            f"needs exponent {exponent} exactly{hint}"
        )
    # be_secure=False reads phe's value as is: phe would otherwise spend a classic
    # obfuscation here; the result is not fresh and is re-randomised when it leaves.
    return Ciphertext(public_key, as_int(encrypted.ciphertext(be_secure=False)))


def ciphertext_from_phe(encrypted: EncryptedNumber, public_key: PublicKey) -> Ciphertext:
    """A :class:`Ciphertext` under ``public_key`` from a phe ``EncryptedNumber`` of exponent 0.

    Raises :class:`KeyMismatchError` if phe's key has another ``N``,
    :class:`ParameterError` for a non-zero exponent (use
    :func:`fixed_ciphertext_from_phe` for exponents below 0),
    :class:`InvalidCiphertext` for a value out of range or not a unit.  The
    result is not fresh.
    """
    return _phe_value(encrypted, public_key, 0)


def fixed_ciphertext_from_phe(
    encrypted: EncryptedNumber, public_key: PublicKey, frac_bits: int
) -> FixedCiphertext:
    """A :class:`FixedCiphertext` at scale ``2^-frac_bits`` from a phe ``EncryptedNumber``.

    phe's scale ``16^exponent`` must equal ``2^-frac_bits`` exactly: ``frac_bits``
    a multiple of 4 and ``exponent = -frac_bits / 4`` (else :class:`ParameterError`);
    the other checks are those of :func:`ciphertext_from_phe`.
    """
    f = as_int(frac_bits)
    if f < 0 or f % PHE_LOG2_BASE:
        raise ParameterError(f"phe scales are powers of 16: frac_bits must be a non-negative multiple of "
                             f"{PHE_LOG2_BASE}, got {f}")
    return FixedCiphertext(_phe_value(encrypted, public_key, -(f // PHE_LOG2_BASE)), f)


def _leaving(ciphertext: Ciphertext, rng: RandomSource) -> Ciphertext:
    """``ciphertext`` as it may leave this party: re-randomised unless fresh."""
    return ciphertext if ciphertext.fresh else ciphertext.rerandomize(rng=rng)


def _to_phe(ciphertext: Ciphertext, exponent: int, rng: RandomSource) -> EncryptedNumber:
    phe = _phe()
    out = _leaving(ciphertext, rng)
    return phe.EncryptedNumber(public_key_to_phe(out.public_key), out.value, exponent)


def ciphertext_to_phe(ciphertext: Ciphertext, *, rng: RandomSource = SYSTEM_RANDOM) -> EncryptedNumber:
    """A phe ``EncryptedNumber`` of exponent 0; re-randomised first unless :attr:`~Ciphertext.fresh`."""
    _phe()
    if type(ciphertext) is not Ciphertext:
        raise TypeMismatchError(
            f"expected a Ciphertext, got {type(ciphertext).__name__} (fixed-point: fixed_ciphertext_to_phe)"
        )
    return _to_phe(ciphertext, 0, rng)


def fixed_ciphertext_to_phe(
    ciphertext: FixedCiphertext, *, rng: RandomSource = SYSTEM_RANDOM
) -> EncryptedNumber:
    """A phe ``EncryptedNumber`` of exponent ``-frac_bits / 4``; re-randomised first unless fresh.

    A scale ``2^-f`` with ``f`` not a multiple of 4 has no phe exponent: :class:`ParameterError`.
    """
    _phe()
    if not isinstance(ciphertext, FixedCiphertext):
        raise TypeMismatchError(f"expected a FixedCiphertext, got {type(ciphertext).__name__}")
    f = ciphertext.frac_bits
    if f % PHE_LOG2_BASE:
        raise ParameterError(f"scale 2^-{f} is not a power of 16: phe cannot represent it exactly")
    return _to_phe(ciphertext.ciphertext, -(f // PHE_LOG2_BASE), rng)
