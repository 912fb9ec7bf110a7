"""The PSI group: hashing to Ed25519's subgroup, scalars, blinding and libsodium's refusals."""

from __future__ import annotations

import hashlib

import nacl.bindings as sodium
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
)
from securetrees.rand import DeterministicRandom

SESSION = bytes(range(16))
L = 2**252 + 27742317777372353535851937790883648493  # the order of the prime-order subgroup

# Points libsodium must refuse: the identity, the points of order 2, 4 and 8, a non-canonical
# encoding (y = p, i.e. 0 written unreduced), and one off the curve (no x for this y).
IDENTITY = bytes([1]) + bytes(31)
SMALL_ORDER = [
    IDENTITY,
    bytes.fromhex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),  # order 2 (y = -1)
    bytes(32),  # order 4 (y = 0)
    bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"),  # order 8
    bytes.fromhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"),  # order 8
]
NON_CANONICAL = bytes.fromhex("edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")


def _scalar(seed: bytes) -> bytes:
    s: bytes = sodium.crypto_core_ed25519_scalar_reduce(hashlib.sha512(seed).digest())
    return s


def test_hash_is_the_two_halves_random_oracle_form() -> None:
    """H(x) = from_uniform(h[:32]) + from_uniform(h[32:]), h = SHA-512(domain || len || session || id):
    recomputed here from libsodium's primitives, so a change of construction or domain fails."""
    x = encode_id("alice")
    h = hashlib.sha512(DOMAIN + bytes([16]) + SESSION + x).digest()
    want = sodium.crypto_core_ed25519_add(sodium.crypto_core_ed25519_from_uniform(h[:32]),
                                          sodium.crypto_core_ed25519_from_uniform(h[32:]))
    assert hash_ids(SESSION, [x]) == [want]


def test_hash_known_answer() -> None:
    """A pinned value (regression): hashing must never change silently between releases, or two
    versions of the library would find empty intersections."""
    got = hash_ids(SESSION, [b"salice", b"i42"])
    assert got[0].hex() == "3b242bd162cc325939f405e30c9c5b16009ab13539d79cf3fd64e57ddf712461"
    assert got[0] == hash_ids(SESSION, [encode_id("alice")])[0]
    assert got[1] == hash_ids(SESSION, [encode_id(42)])[0]


def test_hashes_are_subgroup_points_separated_by_session_and_kind() -> None:
    ids = [encode_id(v) for v in ("7", b"7", 7, "", b"", 0)]
    pts = hash_ids(SESSION, ids)
    assert len(set(ids)) == len(ids) == len(set(pts))  # "7", b"7", 7 are three ids
    assert all(sodium.crypto_core_ed25519_is_valid_point(p) for p in pts)
    other = hash_ids(bytes(16), ids)
    assert not set(pts) & set(other)  # a fresh session gives unrelated points


@given(st.binary(min_size=1, max_size=16), st.binary(min_size=1, max_size=16), st.text(max_size=20))
def test_double_blinding_commutes(sa: bytes, sb: bytes, ident: str) -> None:
    """b·(a·H(x)) = a·(b·H(x)): the identity the intersection rests on."""
    a, b = _scalar(b"a" + sa), _scalar(b"b" + sb)
    (p,) = hash_ids(SESSION, [encode_id(ident)])
    ab = blind(b, blind(a, [p]))
    ba = blind(a, blind(b, [p]))
    assert ab == ba
    assert ab != [p] and blind(a, [p]) != [p]


def test_blinding_is_scalar_multiplication_by_the_reduced_scalar() -> None:
    """Known answer against libsodium's own base-point multiplication: s·(t·G) = (s·t)·G."""
    s, t = _scalar(b"s"), _scalar(b"t")
    tg = sodium.crypto_scalarmult_ed25519_base_noclamp(t)
    st_ = sodium.crypto_core_ed25519_scalar_mul(s, t)
    assert blind(s, [tg]) == [sodium.crypto_scalarmult_ed25519_base_noclamp(st_)]


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


class _ZeroFirst:
    """A source whose first 64 bytes reduce to zero: the scalar must be drawn again."""

    def __init__(self) -> None:
        self.calls = 0
        self.inner = DeterministicRandom(b"psi-zero-first")

    def token_bytes(self, k: int) -> bytes:
        self.calls += 1
        return bytes(k) if self.calls == 1 else self.inner.token_bytes(k)

    def randbelow(self, n: int) -> int:  # pragma: no cover - not used
        return self.inner.randbelow(n)

    def randbits(self, k: int) -> int:  # pragma: no cover - not used
        return self.inner.randbits(k)


def test_zero_scalar_is_redrawn() -> None:
    src = _ZeroFirst()
    s = random_scalar(src)  # type: ignore[arg-type]
    assert any(s) and src.calls == 2


@pytest.mark.parametrize("point", SMALL_ORDER, ids=["identity", "order2", "order4", "order8a", "order8b"])
def test_small_order_points_are_refused(point: bytes) -> None:
    with pytest.raises(PointRefusedError):
        blind(random_scalar(), [point])


def test_non_subgroup_non_canonical_and_off_curve_points_are_refused() -> None:
    (h,) = hash_ids(SESSION, [b"sx"])
    mixed = sodium.crypto_core_ed25519_add(h, SMALL_ORDER[3])  # H + T8: on the curve, outside the subgroup
    off = next(bytes([i]) + bytes(31) for i in range(2, 256)
               if not _on_curve(bytes([i]) + bytes(31)))
    for bad in (mixed, NON_CANONICAL, off):
        with pytest.raises(PointRefusedError):
            blind(random_scalar(), [h, bad])  # refused even after a good point: the whole call aborts


def _on_curve(p: bytes) -> bool:
    """Whether libsodium can decode ``p`` at all (on the curve, any order): adding the identity works."""
    try:
        sodium.crypto_core_ed25519_add(p, IDENTITY)
    except Exception:
        return False
    return True


def test_bad_scalars_and_lengths() -> None:
    (h,) = hash_ids(SESSION, [b"sx"])
    for s in (bytes(32), b"short", "x" * 32):
        with pytest.raises(ParameterError):
            blind(s, [h])  # type: ignore[arg-type]
    with pytest.raises(DecodeError):
        blind(random_scalar(), [h[:31]])
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
