"""Byte formats of public keys and ciphertexts: round trips, strict decoding, fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees.dtpkc import Ciphertext, StrongKeyShare, WeakSecretKey, decrypt_weak, encrypt
from securetrees.dtpkc.wire import (
    MAGIC,
    decode_ciphertext,
    decode_public_key,
    decrypt_secret_key,
    encode_ciphertext,
    encode_public_key,
    encrypt_secret_key,
)
from securetrees.errors import DecodeError, InvalidCiphertext, KeyMismatchError, ParameterError
from securetrees.testing.dtpkc import decode_test_public_key, dtpkc_test_keys

KEYS = dtpkc_test_keys(512)
PK = KEYS.pk("u1")
JOINT = KEYS.pk("u1").joint(KEYS.pk("u2"))


def test_public_key_round_trip() -> None:
    for pk in (PK, JOINT):
        back = decode_test_public_key(encode_public_key(pk))
        assert back == pk and back.components == pk.components
        shared = decode_test_public_key(encode_public_key(pk), KEYS.params)
        assert shared.params is KEYS.params  # shares the table cache


def test_public_key_size_policy_on_decode() -> None:
    with pytest.raises(DecodeError):
        decode_public_key(encode_public_key(PK))  # 512 bits is below the policy


def test_public_key_with_other_params_is_refused() -> None:
    other = dtpkc_test_keys(512, label="other-system")
    with pytest.raises(KeyMismatchError):
        decode_test_public_key(encode_public_key(other.pk("u1")), KEYS.params)


@given(m=st.integers(-(2**200), 2**200))
def test_ciphertext_round_trip(m: int) -> None:
    c = encrypt(PK, m)
    back = decode_ciphertext(encode_ciphertext(c), PK)
    assert back == c and back.fresh
    assert decrypt_weak(KEYS.weak["u1"], back) == m


def check_stale_ciphertext_leaves_fresh(stale: Ciphertext) -> Ciphertext:
    assert not stale.fresh
    back = decode_ciphertext(encode_ciphertext(stale), PK)
    assert back != stale, "a stale ciphertext was encoded as it is"
    return back


def test_stale_ciphertext_is_rerandomised_on_encode() -> None:
    c = encrypt(PK, 5)
    back = check_stale_ciphertext_leaves_fresh(c + encrypt(PK, 1))
    assert decrypt_weak(KEYS.weak["u1"], back) == 6
    assert decode_ciphertext(encode_ciphertext(c), PK) == c  # a fresh one travels as is


def test_a_stale_ciphertext_encoded_as_is_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: the encoder skips the re-randomisation."""
    monkeypatch.setattr(Ciphertext, "rerandomize", lambda self, **_: self)
    with pytest.raises(AssertionError, match="encoded as it is"):
        check_stale_ciphertext_leaves_fresh(encrypt(PK, 5) + encrypt(PK, 1))


def test_ciphertext_under_another_key_is_refused() -> None:
    data = encode_ciphertext(encrypt(KEYS.pk("u2"), 1))
    with pytest.raises(KeyMismatchError):
        decode_ciphertext(data, PK)


def _ct_bytes(t1: int, t2: int) -> bytes:
    def enc(v: int) -> bytes:
        raw = v.to_bytes((v.bit_length() + 7) // 8, "big")
        return len(raw).to_bytes(4, "big") + raw

    return MAGIC + bytes([1, 2]) + PK.key_id + enc(t1) + enc(t2)


@pytest.mark.parametrize(
    "t1",
    [0, int(KEYS.params.n2), int(KEYS.params.n2) + 1, int(KEYS.params.n), 3 * int(KEYS.params.n)],
    ids=["zero", "n2", "above", "n", "multiple-of-n"],
)
def test_out_of_range_or_non_unit_components(t1: int) -> None:
    with pytest.raises(InvalidCiphertext):
        decode_ciphertext(_ct_bytes(t1, 5), PK)
    with pytest.raises(InvalidCiphertext):
        decode_ciphertext(_ct_bytes(5, t1), PK)
    with pytest.raises(InvalidCiphertext):
        Ciphertext.from_ints(PK, t1, 5)


def test_from_ints_type_checks() -> None:
    with pytest.raises(InvalidCiphertext):
        Ciphertext.from_ints(PK, True, 5)
    with pytest.raises(InvalidCiphertext):
        Ciphertext.from_ints(PK, "5", 5)  # type: ignore[arg-type]


GOOD_CT = encode_ciphertext(encrypt(PK, 77))
GOOD_PK = encode_public_key(JOINT)


@pytest.mark.parametrize("data", [GOOD_CT, GOOD_PK], ids=["ciphertext", "public-key"])
def test_structural_corruptions(data: bytes) -> None:
    def decode(d: bytes) -> object:
        return decode_ciphertext(d, PK) if data is GOOD_CT else decode_test_public_key(d)

    bad = [
        b"XXXX" + data[4:],  # magic
        data[:4] + b"\x02" + data[5:],  # version
        data[:5] + bytes([3 - data[5]]) + data[6:],  # kind
        data[:-1],  # truncated
        data + b"\x00",  # trailing
        data[:10],
        b"",
    ]
    for d in bad:
        with pytest.raises(DecodeError):
            decode(d)


def test_non_minimal_and_oversized_integers() -> None:
    t1, t2 = encrypt(PK, 1).to_ints()
    raw = t1.to_bytes((t1.bit_length() + 7) // 8, "big")
    padded = MAGIC + bytes([1, 2]) + PK.key_id + (len(raw) + 1).to_bytes(4, "big") + b"\x00" + raw
    raw2 = t2.to_bytes((t2.bit_length() + 7) // 8, "big")
    with pytest.raises(DecodeError):
        decode_ciphertext(padded + len(raw2).to_bytes(4, "big") + raw2, PK)
    huge = MAGIC + bytes([1, 2]) + PK.key_id + (1 << 30).to_bytes(4, "big")
    with pytest.raises(DecodeError):
        decode_ciphertext(huge, PK)


def test_public_key_content_checks() -> None:
    def pk_bytes(n: int, g: int, h: int, comps: list[bytes]) -> bytes:
        def enc(v: int) -> bytes:
            raw = v.to_bytes((v.bit_length() + 7) // 8, "big")
            return len(raw).to_bytes(4, "big") + raw

        return (MAGIC + bytes([1, 1]) + enc(n) + enc(g) + enc(h)
                + len(comps).to_bytes(2, "big") + b"".join(comps))

    n, g, h = int(PK.n), int(PK.params.g), int(PK.h)
    with pytest.raises(DecodeError):
        decode_test_public_key(pk_bytes(n + 1, g, h, [PK.key_id]))  # even N
    with pytest.raises(DecodeError):
        decode_test_public_key(pk_bytes(n, g, 1, [PK.key_id]))  # h = 1
    with pytest.raises(DecodeError):
        decode_test_public_key(pk_bytes(n, n, h, [PK.key_id]))  # g not a unit
    with pytest.raises(DecodeError):
        decode_test_public_key(pk_bytes(n, g, h, [b"\x00" * 16]))  # wrong self id
    with pytest.raises(DecodeError):
        decode_test_public_key(pk_bytes(n, g, h, []))  # no component
    with pytest.raises(DecodeError):
        decode_test_public_key(pk_bytes(121 * 121, g, h, [PK.key_id]))  # a square


@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data: bytes) -> None:
    with pytest.raises((DecodeError, InvalidCiphertext, KeyMismatchError)):
        decode_ciphertext(data, PK)
    with pytest.raises(DecodeError):
        decode_test_public_key(data)


@given(pos=st.integers(0, len(GOOD_CT) - 1), byte=st.integers(0, 255), cut=st.booleans())
def test_fuzz_mutated_ciphertexts(pos: int, byte: int, cut: bool) -> None:
    data = GOOD_CT[:pos] if cut else GOOD_CT[:pos] + bytes([byte]) + GOOD_CT[pos + 1 :]
    try:
        c = decode_ciphertext(data, PK)
    except (DecodeError, InvalidCiphertext, KeyMismatchError):
        return
    assert 0 < c.t1 < PK.n2 and 0 < c.t2 < PK.n2  # any accepted value is a valid ciphertext


@given(pos=st.integers(0, len(GOOD_PK) - 1), byte=st.integers(0, 255), cut=st.booleans())
def test_fuzz_mutated_public_keys(pos: int, byte: int, cut: bool) -> None:
    data = GOOD_PK[:pos] if cut else GOOD_PK[:pos] + bytes([byte]) + GOOD_PK[pos + 1 :]
    try:
        pk = decode_test_public_key(data)
    except DecodeError:
        return
    assert 1 < pk.h < pk.n2 - 1


def test_secret_keys_round_trip_under_a_passphrase() -> None:
    for key in (KEYS.weak["u1"], KEYS.cs_share, KEYS.cc_share):
        blob = encrypt_secret_key(key, b"correct horse", scrypt_log2_n=14)
        assert str(int(getattr(key, "theta", getattr(key, "share", 0)))).encode() not in blob
        back = decrypt_secret_key(blob, b"correct horse", params=KEYS.params)
        assert type(back) is type(key)
    weak = decrypt_secret_key(encrypt_secret_key(KEYS.weak["u2"], b"pw", scrypt_log2_n=14), b"pw")
    assert isinstance(weak, WeakSecretKey) and weak.theta == KEYS.weak["u2"].theta
    c = encrypt(KEYS.pk("u2"), 11)
    assert decrypt_weak(weak, Ciphertext(weak.public, c.t1, c.t2)) == 11
    share = decrypt_secret_key(encrypt_secret_key(KEYS.cc_share, b"pw", scrypt_log2_n=14), b"pw",
                               params=KEYS.params)
    assert isinstance(share, StrongKeyShare) and share.index == 2 and share.share == KEYS.cc_share.share


def test_secret_key_rejections() -> None:
    blob = encrypt_secret_key(KEYS.weak["u1"], b"pw", scrypt_log2_n=14)
    with pytest.raises(DecodeError):
        decrypt_secret_key(blob, b"wrong")
    for pos in (8, 30, len(blob) - 1):  # salt, nonce, tag: all authenticated
        bad = blob[:pos] + bytes([blob[pos] ^ 1]) + blob[pos + 1 :]
        with pytest.raises(DecodeError):
            decrypt_secret_key(bad, b"pw")
    with pytest.raises(DecodeError):
        decrypt_secret_key(blob[:5] + bytes([30]) + blob[6:], b"pw")  # scrypt cost over the cap
    with pytest.raises(KeyMismatchError):
        decrypt_secret_key(blob, b"pw", params=dtpkc_test_keys(512, label="other-system").params)
    with pytest.raises(ParameterError):
        encrypt_secret_key(KEYS.weak["u1"], b"")
    with pytest.raises(ParameterError):
        encrypt_secret_key(KEYS.strong, b"pw")  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        encrypt_secret_key(KEYS.weak["u1"], b"pw", scrypt_log2_n=10)


@settings(max_examples=10)  # each example past the header costs one scrypt
@given(st.binary(max_size=200))
def test_fuzz_secret_key_decoder(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decrypt_secret_key(data, b"pw")
    label = MAGIC + bytes([1, 3])
    header = b"STSK\x01\x0e\x08\x01" + b"\x00" * 44 + len(label).to_bytes(4, "big") + label
    with pytest.raises(DecodeError):
        decrypt_secret_key(header + data, b"pw")  # authentication fails before any parsing
