"""Edges of the secure-aggregation primitives that mutation testing found unguarded
(specs/testing.md, "Mutation runs"): Shamir points, thresholds and field bounds, the byte
layout of context fields and of the share channel's associated data, truncated share
ciphertexts, the PRG at modulus 2 and powers of two, and the rings' input and wire edges."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.errors import EncodingOverflowError, InvalidCiphertext, ParameterError, ProtocolError
from securetrees.secagg import shamir
from securetrees.secagg.channel import NONCE_BYTES, associated_data, open_sealed, seal
from securetrees.secagg.keyagree import encode_fields
from securetrees.secagg.prg import MaskExpander, expand_mod, keystream_bytes
from securetrees.secagg.rings import ZN, FixedPointVectors, Z2k

KEY = bytes(range(32))
SESSION = b"s" * 16
PRIME = shamir.PRIME


def _field(tag: bytes, raw: bytes) -> bytes:
    """One context field as specs/secagg.md lays it out: tag, 4-byte big-endian length, bytes."""
    return tag + len(raw).to_bytes(4, "big") + raw


# --- Shamir ------------------------------------------------------------------------------


def test_share_points_exclude_zero_and_the_prime() -> None:
    """A share at x = 0 (or x = PRIME, the same field element) would be the secret itself."""
    for points in ([0, 1, 2], [1, 2, PRIME]):
        with pytest.raises(ParameterError, match="non-zero field elements"):
            shamir.split(KEY, 2, points)
    shares = shamir.split(KEY, 2, [1, PRIME - 1])
    assert shamir.reconstruct(shares, 2) == KEY


def test_threshold_one_shares_are_the_secret() -> None:
    shares = shamir.split(KEY, 1, [1, 2, 3])
    assert set(shares.values()) == {int.from_bytes(KEY, "big")}
    assert shamir.reconstruct({2: shares[2]}, 1) == KEY
    with pytest.raises(ParameterError):
        shamir.split(KEY, 0, [1, 2])
    with pytest.raises(ParameterError):
        shamir.reconstruct({1: 1}, 0)


@pytest.mark.parametrize("t", [2, 3, 5])
def test_t_minus_one_shares_do_not_reconstruct_and_t_do(t: int) -> None:
    shares = shamir.split(KEY, t, list(range(1, 6)))
    with pytest.raises(ProtocolError, match="cannot reconstruct"):
        shamir.reconstruct({x: shares[x] for x in range(1, t)}, t)
    assert shamir.reconstruct({x: shares[x] for x in range(6 - t, 6)}, t) == KEY


@pytest.mark.parametrize(("x", "y"), [(0, 5), (PRIME, 5), (1, PRIME), (1, -1)])
def test_reconstruct_refuses_shares_outside_the_field(x: int, y: int) -> None:
    with pytest.raises(ProtocolError, match="outside the field"):
        shamir.reconstruct({x: y}, 1)


def test_zero_is_a_valid_share_value() -> None:
    assert shamir.reconstruct({1: 0, 2: 0}, 2) == bytes(32)
    for value in (0, 1, PRIME - 1):
        assert shamir.share_from_bytes(shamir.share_to_bytes(value)) == value
    for bad in (-1, PRIME):
        with pytest.raises(ParameterError):
            shamir.share_to_bytes(bad)
    with pytest.raises(ProtocolError, match="outside the field"):
        shamir.share_from_bytes(PRIME.to_bytes(shamir.SHARE_BYTES, "big"))
    assert shamir.share_from_bytes((PRIME - 1).to_bytes(shamir.SHARE_BYTES, "big")) == PRIME - 1


def test_a_reconstruction_beyond_32_bytes_is_refused() -> None:
    assert shamir.reconstruct({1: (1 << 256) - 1}, 1) == b"\xff" * 32
    with pytest.raises(ProtocolError, match="32-byte"):
        shamir.reconstruct({1: 1 << 256}, 1)


# --- context encoding and the share channel ------------------------------------------------


def test_context_integers_use_their_minimal_big_endian_bytes() -> None:
    assert encode_fields(0, 255, 256) == (
        _field(b"i", b"\x00") + _field(b"i", b"\xff") + _field(b"i", b"\x01\x00")
    )
    assert encode_fields(b"ab", "c") == _field(b"b", b"ab") + _field(b"s", b"c")


def test_share_associated_data_known_answer() -> None:
    ad = associated_data(SESSION, 2, "round-shares", "alice", "bob", b"k" * 32)
    assert ad == b"".join([
        _field(b"b", b"securetrees/secagg/share"), _field(b"b", SESSION), _field(b"i", b"\x02"),
        _field(b"s", b"round-shares"), _field(b"s", b"alice"), _field(b"s", b"bob"),
        _field(b"b", b"k" * 32),
    ])


def test_a_share_ciphertext_does_not_open_as_another_kind() -> None:
    ad = associated_data(SESSION, 2, "round-shares", "alice", "bob", b"k" * 32)
    blob = seal(KEY, b"payload", ad)
    with pytest.raises(InvalidCiphertext):
        open_sealed(KEY, blob, associated_data(SESSION, 2, "other-kind", "alice", "bob", b"k" * 32))


def test_empty_plaintext_opens_and_every_shorter_blob_is_truncated() -> None:
    ad = associated_data(SESSION, 1, "round-shares", "alice", "bob", b"k" * 32)
    blob = seal(KEY, b"", ad)
    assert len(blob) == NONCE_BYTES + 16
    assert open_sealed(KEY, blob, ad) == b""
    for n in range(len(blob)):
        with pytest.raises(InvalidCiphertext, match="truncated"):
            open_sealed(KEY, blob[:n], ad)


# --- PRG -------------------------------------------------------------------------------------


def test_expand_mod_at_two_and_at_powers_of_two_reads_the_keystream() -> None:
    """For modulus 2^k every candidate is accepted: the values are the keystream itself."""
    stream = keystream_bytes(KEY, 128)
    assert expand_mod(KEY, 64, 2) == [b & 1 for b in stream[:64]]
    assert expand_mod(KEY, 40, 256) == list(stream[:40])
    assert expand_mod(KEY, 20, 1 << 16) == [
        int.from_bytes(stream[i : i + 2], "little") for i in range(0, 40, 2)
    ]
    assert expand_mod(KEY, 0, 7) == []
    for bad in (0, 1):
        with pytest.raises(ParameterError, match="at least 2"):
            expand_mod(KEY, 3, bad)


def test_zero_words_from_a_fresh_expander() -> None:
    assert MaskExpander().u64(KEY, 0).shape == (0,)


def test_accumulate_refuses_an_added_vector_of_another_dtype() -> None:
    acc = np.zeros(4, np.uint64)
    for v in (np.ones(4, np.uint32), np.ones(4, np.int64)):
        with pytest.raises(ParameterError, match="uint64 array shaped like acc"):
            MaskExpander().accumulate(acc, [], plus=[v])


# --- rings -----------------------------------------------------------------------------------


def test_z2k_accepts_signed_integer_arrays_of_residues() -> None:
    ring = Z2k(8)
    src = np.array([0, 5, 255], dtype=np.int64)
    out = ring.check(src)
    assert out.dtype == np.uint64 and list(out) == [0, 5, 255]
    out[0] = 9
    assert src[0] == 0  # a private copy
    assert ring.check(np.zeros(0, np.int64)).dtype == np.uint64
    for empty in (np.array([]), np.zeros(0, np.int32)):
        got = ring.check(empty)
        assert got.dtype == np.uint64 and got.shape == (0,)
    with pytest.raises(ParameterError, match="non-negative"):
        ring.check(np.array([3, -1], dtype=np.int64))


def test_zn_smallest_modulus_and_byte_aligned_wire_width() -> None:
    ring = ZN(3)
    assert ring.add([2, 1], [2, 2]) == [1, 0]
    with pytest.raises(ParameterError, match="at least 3"):
        ZN(2)
    ring = ZN(251)  # 8 bits: one byte per value on the wire
    wire = ring.to_wire([250, 0, 7])
    assert wire.shape == (3, 1) and list(wire[:, 0]) == [250, 0, 7]
    assert ring.from_wire(wire, 3) == [250, 0, 7]


def test_fixed_point_default_and_frac_bits_limit() -> None:
    assert FixedPointVectors(1.0, 3).frac_bits == 32  # the documented default
    tiny = 2.0**-70  # passes the overflow guard, so only the frac_bits range refuses it
    FixedPointVectors(tiny, 1, frac_bits=62)
    with pytest.raises(ParameterError, match="frac_bits"):
        FixedPointVectors(tiny, 1, frac_bits=63)


def test_fixed_point_encode_refuses_huge_integers_with_a_typed_error() -> None:
    with pytest.raises(EncodingOverflowError):
        FixedPointVectors(100.0, 3).encode([2**70])


def test_fixed_point_decode_is_exact_near_the_top_of_the_ring() -> None:
    codec = FixedPointVectors(1.0, 3, frac_bits=16, bits=60)  # residues above 2^53
    tiny = 2.0**-16
    np.testing.assert_array_equal(codec.decode(codec.encode([-tiny, tiny, -1.0])), [-tiny, tiny, -1.0])
    # positive sums above a quarter of the ring read as positive
    wide = FixedPointVectors(2.0**31 - 1, 1, frac_bits=0, bits=32)
    np.testing.assert_array_equal(wide.decode(wide.encode([2.0**31 - 1, 2.0**30])), [2.0**31 - 1, 2.0**30])


def test_fixed_point_decode_reads_python_residues() -> None:
    """A total given as Python integers (residues on both sides of 2^63) decodes like the array."""
    codec = FixedPointVectors(100.0, 3, frac_bits=16)
    total = [int(v) for v in codec.encode([-1.5, 2.25])]
    np.testing.assert_array_equal(codec.decode(total), [-1.5, 2.25])  # type: ignore[arg-type]


def test_zn_addition_of_unequal_lengths_is_a_typed_error() -> None:
    from securetrees.errors import ParameterError
    from securetrees.secagg.rings import ZN

    ring = ZN(3)
    with pytest.raises(ParameterError, match="lengths 2 and 1"):
        ring.add([1, 2], [1])
    with pytest.raises(ParameterError, match="lengths 1 and 2"):
        ring.iadd([1], [1, 2])
