"""DT-PKC operations (``specs/dtpkc.md``, "Operations"; RevFRF Appendix A.2).

* HoEnc :func:`encrypt`: ``T1 = (1 + mN)·h^r``, ``T2 = g^r``, ``r ∈ [1, N/4]``.
* weak decryption :func:`decrypt_weak`: ``m = L(T1 · (T2^θ)⁻¹)``.
* strong decryption :func:`decrypt_strong` (KGC/tests): ``m = L(T1^λ)·λ⁻¹ mod N``.
* PSDec1/PSDec2 :func:`psdec1` / :func:`psdec2`: CS sends ``T1^λ1``; CC computes ``L(T1^λ1·T1^λ2)``.
* ParHDec1/ParHDec2 :func:`parhdec1` / :func:`parhdec2`: under ``h_i·h_j`` party i strips its
  key (``T1·(T2^θ_i)⁻¹``), party j decrypts what remains.
* HReEnc :func:`hreenc`: the holder of θ_j adds its key, ``T1·T2^θ_j``, then re-randomises.
* HEncRef :func:`hencref`: moves a ciphertext to key ``θ + ρ`` for a fresh ρ kept by the
  refresher (returned as a :class:`WeakSecretKey` of ``g^ρ``), then re-randomises.

Plaintexts are signed integers ``|m| < N/3`` by default (:meth:`SystemParams.signed`); a
decryption that lands in the overflow band raises :class:`EncodingOverflowError`.  Real
numbers go through :class:`~securetrees.encoding.FixedPoint` first.  ``L(x)`` refuses an
``x ≢ 1 (mod N)`` (a wrong key or a corrupted ciphertext) with :class:`InvalidCiphertext`.
"""

from __future__ import annotations

from dataclasses import dataclass

from securetrees._nt import invert, mpz, powmod_sec
from securetrees.dtpkc.ciphertext import Ciphertext, check_unit
from securetrees.dtpkc.keys import (
    PublicKey,
    StrongKeyShare,
    StrongSecretKey,
    SystemParams,
    WeakSecretKey,
)
from securetrees.encoding import SignedRange, as_int
from securetrees.errors import InvalidCiphertext, KeyMismatchError, ParameterError
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = [
    "PartialDecryption",
    "decrypt_strong",
    "decrypt_weak",
    "encrypt",
    "encrypt_residue",
    "hencref",
    "hreenc",
    "l_function",
    "parhdec1",
    "parhdec2",
    "psdec1",
    "psdec2",
    "psdec2_residue",
]


def l_function(x: mpz, n: mpz) -> mpz:
    """``L(x) = (x - 1) / N``, exact; :class:`InvalidCiphertext` if ``x ≢ 1 (mod N)``."""
    if x % n != 1:
        raise InvalidCiphertext("does not decrypt: wrong key, missing key share or corrupted ciphertext")
    return (x - 1) // n


def _range(params: SystemParams, signed: SignedRange | None) -> SignedRange:
    out = params.signed if signed is None else signed
    if out.modulus != params.n:
        raise ParameterError("signed range is not over this key's N")
    return out


def _signed(params: SystemParams, residue: mpz, signed: SignedRange | None) -> int:
    return _range(params, signed).extract(int(residue))


def encrypt_residue(pk: PublicKey, m: int | mpz, *, rng: RandomSource = SYSTEM_RANDOM) -> Ciphertext:
    """HoEnc of a residue ``m ∈ Z_N`` (a masked value, e.g. in HoAdd); most callers want :func:`encrypt`."""
    n, n2 = pk.n, pk.n2
    r = pk.params.random_exponent(rng)
    t1 = (1 + (mpz(m) % n) * n) * pk.h_pow(r) % n2
    return Ciphertext(pk, t1, pk.params.g_pow(r))


def encrypt(
    pk: PublicKey, m: int, *, rng: RandomSource = SYSTEM_RANDOM, signed: SignedRange | None = None
) -> Ciphertext:
    """HoEnc of a signed integer ``m`` (``|m| < N/3`` unless ``signed`` says otherwise)."""
    return encrypt_residue(pk, _range(pk.params, signed).embed(as_int(m)), rng=rng)


def _key_type(key: object, expected: type, what: str) -> None:
    """The runtime twin of the type annotations: a share is not the strong key, and so on."""
    if not isinstance(key, expected):
        raise KeyMismatchError(f"{what} needs a {expected.__name__}, got {type(key).__name__}")


def _own(sk: WeakSecretKey, c: Ciphertext) -> None:
    _key_type(sk, WeakSecretKey, "weak decryption")
    if c.pk.key_id != sk.key_id:
        raise KeyMismatchError("ciphertext is not under this weak key")


def decrypt_weak(sk: WeakSecretKey, c: Ciphertext, *, signed: SignedRange | None = None) -> int:
    """Weak decryption ``m = L(T1 · (T2^θ)⁻¹ mod N²)``."""
    _own(sk, c)
    n, n2 = c.pk.n, c.pk.n2
    x = c.t1 * invert(sk.t2_pow(c.t2), n2) % n2
    return _signed(c.pk.params, l_function(x, n), signed)


def decrypt_strong(sk: StrongSecretKey, c: Ciphertext, *, signed: SignedRange | None = None) -> int:
    """Strong decryption ``m = L(T1^λ mod N²) · λ⁻¹ mod N`` under any key of the system."""
    _key_type(sk, StrongSecretKey, "strong decryption")
    if c.pk.params != sk.params:
        raise KeyMismatchError("ciphertext belongs to another DT-PKC system")
    n, n2 = sk.params.n, sk.params.n2
    x = l_function(powmod_sec(c.t1, sk.lam, n2), n)
    return _signed(sk.params, x * sk.lam_inv % n, signed)


@dataclass(frozen=True)
class PartialDecryption:
    """PSDec1's output: ``T1`` and ``T1^λ1`` (what the CS sends the CC)."""

    t1: int
    share: int


def psdec1(share: StrongKeyShare, c: Ciphertext) -> PartialDecryption:
    """PSDec1 (CS, λ1): ``(T1, T1^λ1 mod N²)``.  Works under any weak or joint key."""
    _key_type(share, StrongKeyShare, "PSDec1")
    if c.pk.params != share.params:
        raise KeyMismatchError("ciphertext belongs to another DT-PKC system")
    return PartialDecryption(int(c.t1), int(share.t1_pow(c.t1)))


def psdec2_residue(share: StrongKeyShare, partial: PartialDecryption) -> mpz:
    """PSDec2 (CC, λ2) as a residue: ``L(T1^λ2 · T1^λ1 mod N²)`` (no λ⁻¹: ``s ≡ 1 mod N``).

    The inputs come from a peer, so both are validated as units mod N².
    """
    _key_type(share, StrongKeyShare, "PSDec2")
    p = share.params
    t1 = check_unit(partial.t1, p.n, p.n2, "T1")
    c1 = check_unit(partial.share, p.n, p.n2, "partial decryption")
    return l_function(share.t1_pow(t1) * c1 % p.n2, p.n)


def psdec2(share: StrongKeyShare, partial: PartialDecryption, *, signed: SignedRange | None = None) -> int:
    """PSDec2 returning the signed plaintext."""
    residue = psdec2_residue(share, partial)
    return _signed(share.params, residue, signed)


def parhdec1(sk: WeakSecretKey, c: Ciphertext) -> Ciphertext:
    """ParHDec1 (party i of a joint key ``h_i·h_j``): ``(T1·(T2^θ_i)⁻¹, T2)``, a ciphertext
    under the joint key without ``h_i`` (``h_j`` for a two-party key)."""
    _key_type(sk, WeakSecretKey, "ParHDec1")
    rest = c.pk.without(sk.public)
    n2 = c.pk.n2
    return Ciphertext(rest, c.t1 * invert(sk.t2_pow(c.t2), n2) % n2, c.t2, fresh=False)


def parhdec2(sk: WeakSecretKey, c: Ciphertext, *, signed: SignedRange | None = None) -> int:
    """ParHDec2 (party j): weak decryption of ParHDec1's output."""
    return decrypt_weak(sk, c, signed=signed)


def hreenc(sk: WeakSecretKey, c: Ciphertext, *, rng: RandomSource = SYSTEM_RANDOM) -> Ciphertext:
    """HReEnc: the holder of θ_j moves ``[[m]]_h`` to ``[[m]]_{h·h_j}`` (``T1·T2^θ_j``), then
    re-randomises, or the unchanged T2 would link input and output (erratum E10)."""
    _key_type(sk, WeakSecretKey, "HReEnc")
    if c.pk.params != sk.public.params:
        raise KeyMismatchError("ciphertext belongs to another DT-PKC system")
    n2 = c.pk.n2
    moved = Ciphertext(c.pk.joint(sk.public), c.t1 * sk.t2_pow(c.t2) % n2, c.t2, fresh=False)
    return moved.rerandomize(rng=rng)


def hencref(c: Ciphertext, *, rng: RandomSource = SYSTEM_RANDOM) -> tuple[Ciphertext, WeakSecretKey]:
    """HEncRef as FRF-Revoc uses it (RevFRF A.2): ``T1·T2^ρ`` for a fresh ``ρ ∈ [1, N/4]``.

    The result is under ``h·g^ρ`` (key ``θ + ρ``) and re-randomised; ρ is returned as the
    weak secret key of ``g^ρ``, kept by the refresher.  ``θ`` alone no longer decrypts it.
    """
    params = c.pk.params
    rho = params.random_exponent(rng)
    refresh_key = WeakSecretKey(PublicKey(params, powmod_sec(params.g, rho, params.n2)), rho)
    return hreenc(refresh_key, c, rng=rng), refresh_key
