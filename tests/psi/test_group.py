"""The PSI group: hashing to Curve25519's subgroup, X25519 blinding, scalars and the refusals."""

from __future__ import annotations

import hashlib

import nacl.bindings as sodium
import nacl.exceptions
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import DecodeError, DuplicateIdError, ParameterError, PointRefusedError, SetSizeError
from securetrees.psi.group import (
    DOMAIN,
    blind,
    encode_id,
    encode_ids,
    hash_ids,
    join_points,
    random_scalar,
    split_points,
    x25519_scalar,
)
from securetrees.rand import DeterministicRandom
from securetrees.testing.curve25519 import in_prime_order_subgroup, on_twist, u_of_edwards

SESSION = bytes(range(16))
L = 2**252 + 27742317777372353535851937790883648493  # the order of the prime-order subgroup
P = 2**255 - 19  # the field


def _u(v: int) -> bytes:
    return v.to_bytes(32, "little")


# u-coordinates of small order that X25519 must refuse (its result is all zeros):
# 0 (order 2; also what the identity maps to), 1 and p - 1 (order 4: one on the curve, one on its
# twist), and the two of order 8.
SMALL_ORDER = {
    "u0": _u(0),
    "u1": _u(1),
    "u_minus_1": _u(P - 1),
    "order8a": bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
    "order8b": bytes.fromhex("5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157"),
}


def _scalar(seed: bytes) -> bytes:
    s: bytes = sodium.crypto_core_ed25519_scalar_reduce(hashlib.sha512(seed).digest())
    return s


def _edwards(seed: bytes) -> bytes:
    """A point of the prime-order subgroup on Ed25519 (the two-halves form of libsodium's map)."""
    h = hashlib.sha512(seed).digest()
    e: bytes = sodium.crypto_core_ed25519_add(sodium.crypto_core_ed25519_from_uniform(h[:32]),
                                              sodium.crypto_core_ed25519_from_uniform(h[32:]))
    return e


def _to_u(edwards: bytes) -> bytes:
    u: bytes = sodium.crypto_sign_ed25519_pk_to_curve25519(edwards)
    return u


def test_hash_is_the_two_halves_random_oracle_form_in_montgomery_form() -> None:
    """H(x) = to_curve25519(from_uniform(h[:32]) + from_uniform(h[32:])),
    h = SHA-512(domain || len || session || id): recomputed here from libsodium's primitives,
    so a change of construction or domain fails."""
    x = encode_id("alice")
    h = hashlib.sha512(DOMAIN + bytes([16]) + SESSION + x).digest()
    edwards = sodium.crypto_core_ed25519_add(sodium.crypto_core_ed25519_from_uniform(h[:32]),
                                             sodium.crypto_core_ed25519_from_uniform(h[32:]))
    assert sodium.crypto_core_ed25519_is_valid_point(edwards)  # in the prime-order subgroup
    assert hash_ids(SESSION, [x]) == [_to_u(edwards)]


def test_hash_and_blind_known_answers() -> None:
    """Pinned values (regression): hashing and blinding must never change silently between
    releases, or two versions of the library would find empty intersections."""
    got = hash_ids(SESSION, [b"salice", b"i42"])
    assert got[0].hex() == "532bcc672f266b886a9c40937d372b4b06fa52b2533ba6439342b60e56986c57"
    assert got[0] == hash_ids(SESSION, [encode_id("alice")])[0]
    assert got[1] == hash_ids(SESSION, [encode_id(42)])[0]
    s = random_scalar(DeterministicRandom(b"psi-kat"))
    assert s.hex() == "f0bbc12e78d21eb28cd02b8054eaedbcc777437753cebfd5c2313dc501784701"
    assert blind(s, got[:1])[0].hex() == "58dc5e931c22ec56bb935ab1a8f6507d9a0ec59b554c1e8414196c7a3576ad35"


def test_hashes_are_subgroup_points_separated_by_session_and_kind() -> None:
    ids = [encode_id(v) for v in ("7", b"7", 7, "", b"", 0)]
    pts = hash_ids(SESSION, ids)
    assert len(set(ids)) == len(ids) == len(set(pts))  # "7", b"7", 7 are three ids
    assert all(in_prime_order_subgroup(p) for p in pts)
    other = hash_ids(bytes(16), ids)
    assert not set(pts) & set(other)  # a fresh session gives unrelated points


@given(st.binary(min_size=1, max_size=16), st.binary(min_size=1, max_size=16), st.text(max_size=20))
def test_double_blinding_commutes(sa: bytes, sb: bytes, ident: str) -> None:
    """b·(a·H(x)) = a·(b·H(x)) on u-coordinates: the identity the intersection rests on."""
    a, b = _scalar(b"a" + sa), _scalar(b"b" + sb)
    if x25519_scalar(a) is None or x25519_scalar(b) is None:  # pragma: no cover - probability 2^-125
        return
    (p,) = hash_ids(SESSION, [encode_id(ident)])
    ab = blind(b, blind(a, [p]))
    ba = blind(a, blind(b, [p]))
    assert ab == ba
    assert ab != [p] and blind(a, [p]) != [p]


@pytest.mark.parametrize("seed", [b"s", b"t", b"u", b"v"])
def test_blinding_is_ed25519_multiplication_by_the_reduced_scalar(seed: bytes) -> None:
    """Known answer across libsodium's two curves: X25519 by the encoding of s, applied to the
    u-coordinate of P, is the u-coordinate of crypto_scalarmult_ed25519_noclamp(s, P), for P
    from the hash and for P = t·G (then also (s·t)·G)."""
    s, t = _scalar(b"s" + seed), _scalar(b"t" + seed)
    assert x25519_scalar(s) is not None
    e = _edwards(seed)
    assert blind(s, [_to_u(e)]) == [_to_u(sodium.crypto_scalarmult_ed25519_noclamp(s, e))]
    tg = sodium.crypto_scalarmult_ed25519_base_noclamp(t)
    st_ = sodium.crypto_core_ed25519_scalar_mul(s, t)
    assert blind(s, [_to_u(tg)]) == [_to_u(sodium.crypto_scalarmult_ed25519_base_noclamp(st_))]


def test_scalar_encoding_is_fixed_by_clamping_and_multiplies_by_plus_or_minus_s() -> None:
    """8·t with t in [2^251, 2^252): clamping changes nothing, and 8·t ≡ ±s (mod ℓ)."""
    rng = DeterministicRandom(b"psi-encoding")
    for _ in range(200):
        s = random_scalar(rng)
        k = x25519_scalar(s)
        assert k is not None
        clamped = bytearray(k)
        clamped[0] &= 248
        clamped[31] = (clamped[31] & 127) | 64
        assert bytes(clamped) == k
        kv, sv = int.from_bytes(k, "little"), int.from_bytes(s, "little")
        assert kv % L in (sv, L - sv)
    # no encoding: zero, and t = ±s/8 outside [2^251, 2^252) for both signs (s = 8: t = 1)
    assert x25519_scalar(bytes(32)) is None
    assert x25519_scalar(_u(8)) is None


def test_random_scalars_are_reduced_nonzero_and_fresh() -> None:
    draws = [random_scalar() for _ in range(32)]
    assert len(set(draws)) == 32
    for s in draws:
        assert 0 < int.from_bytes(s, "little") < L
    seeded = DeterministicRandom(b"psi-test-scalar")
    assert random_scalar(seeded) == _reduce(DeterministicRandom(b"psi-test-scalar").token_bytes(64))


def _reduce(b: bytes) -> bytes:
    r: bytes = sodium.crypto_core_ed25519_scalar_reduce(b)
    return r


class _FirstBytes:
    """A source whose first 64 bytes are given (reducing to an unusable scalar): it must be
    drawn again."""

    def __init__(self, first: bytes) -> None:
        self.calls = 0
        self.first = first
        self.inner = DeterministicRandom(b"psi-zero-first")

    def token_bytes(self, k: int) -> bytes:
        self.calls += 1
        return self.first if self.calls == 1 else self.inner.token_bytes(k)

    def randbelow(self, n: int) -> int:  # pragma: no cover - not used
        return self.inner.randbelow(n)

    def randbits(self, k: int) -> int:  # pragma: no cover - not used
        return self.inner.randbits(k)


@pytest.mark.parametrize("first", [bytes(64), (8).to_bytes(64, "little")], ids=["zero", "no-encoding"])
def test_unusable_scalars_are_redrawn(first: bytes) -> None:
    src = _FirstBytes(first)
    s = random_scalar(src)  # type: ignore[arg-type]
    assert x25519_scalar(s) is not None and src.calls == 2


@pytest.mark.parametrize("name", list(SMALL_ORDER))
def test_small_order_points_are_refused(name: str) -> None:
    """libsodium's X25519 refuses them (pinned: its all-zero result is an error), and blind
    turns the refusal into PointRefusedError."""
    point = SMALL_ORDER[name]
    k = x25519_scalar(random_scalar())
    assert k is not None
    with pytest.raises(nacl.exceptions.RuntimeError):
        sodium.crypto_scalarmult(k, point)
    with pytest.raises(PointRefusedError):
        blind(random_scalar(), [point])


def test_non_canonical_encodings_are_refused_though_libsodium_reduces_them() -> None:
    """X25519 ignores bit 255 and reduces u modulo p (pinned here), so u + p and u with bit 255
    set would act as u: blind refuses both, even after a good point (the whole call aborts)."""
    (h,) = hash_ids(SESSION, [b"sx"])
    k = x25519_scalar(random_scalar())
    assert k is not None
    nine, nine_p = _u(9), _u(9 + P)  # 9 + p < 2^255: the non-canonical twin of u = 9
    high = h[:31] + bytes([h[31] | 0x80])
    assert sodium.crypto_scalarmult(k, nine_p) == sodium.crypto_scalarmult(k, nine)
    assert sodium.crypto_scalarmult(k, high) == sodium.crypto_scalarmult(k, h)
    assert blind(random_scalar(), [nine])  # u = 9 itself (the base point) is fine
    for bad in (nine_p, high, _u(P), _u(2**255 - 1)):
        with pytest.raises(PointRefusedError):
            blind(random_scalar(), [h, bad])


def test_twist_points_are_accepted_with_the_cofactor_cleared() -> None:
    """Pinned libsodium behaviour the spec relies on: a u-coordinate on the quadratic twist is
    not refused (X25519 does not tell curve from twist), and the result is the twist point's
    multiple; the spec's argument is that the twist's order is 4·(a 253-bit prime), so the
    peer who sent it learns nothing it could not compute with a discrete logarithm there."""
    u = next(v for v in range(2, 100) if on_twist(v))
    a, b = random_scalar(), random_scalar()
    out = blind(a, [_u(u)])
    assert on_twist(int.from_bytes(out[0], "little")) and not in_prime_order_subgroup(out[0])
    assert blind(b, out) == blind(a, blind(b, [_u(u)]))  # commutes there too


def test_bad_scalars_and_lengths() -> None:
    (h,) = hash_ids(SESSION, [b"sx"])
    for s in (bytes(32), b"short", "x" * 32, _u(8)):
        with pytest.raises(ParameterError):
            blind(s, [h])  # type: ignore[arg-type]
    for bad in (h[:31], h + b"\0", "x" * 32):
        with pytest.raises(DecodeError):
            blind(random_scalar(), [h, bad])  # type: ignore[list-item]
    with pytest.raises(ParameterError):
        hash_ids(b"short", [b"sx"])


def test_point_blobs() -> None:
    pts = hash_ids(SESSION, [b"sa", b"sb"])
    assert split_points(join_points(pts), 2) == pts
    assert split_points(b"") == []
    with pytest.raises(DecodeError):
        split_points(join_points(pts)[:-1])
    with pytest.raises(DecodeError):
        split_points(join_points(pts), 3)


def test_id_sets_refuse_duplicates_oversize_and_bad_kinds() -> None:
    assert encode_ids(["a", b"a", 1], 3) == [b"sa", b"ba", b"i1"]
    with pytest.raises(DuplicateIdError):
        encode_ids(["a", "b", "a"], 10)
    with pytest.raises(SetSizeError):
        encode_ids(range(11), 10)
    for bad in (True, 1.5, None):
        with pytest.raises(ParameterError):
            encode_id(bad)  # type: ignore[arg-type]


def test_the_subgroup_check_of_the_tests_can_fail() -> None:
    """Companion of the views' point check: it rejects small-order, twist, non-canonical and
    mixed-order u-coordinates (u of E + T8, T8 of order 8), and accepts the base point 9, hashes
    and blinded hashes."""
    (h,) = hash_ids(SESSION, [b"sx"])
    t8 = bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05")  # Ed25519, order 8
    mixed = u_of_edwards(sodium.crypto_core_ed25519_add(_edwards(b"mixed"), t8))
    twist = _u(next(v for v in range(2, 100) if on_twist(v)))
    for bad in [*SMALL_ORDER.values(), twist, _u(9 + P), mixed]:
        assert not in_prime_order_subgroup(bad)
    for good in (_u(9), h, blind(random_scalar(), [h])[0], u_of_edwards(_edwards(b"good"))):
        assert in_prime_order_subgroup(good)
