"""Byte formats: round trips, every rejection, and fuzzing of every decoder (specs/paillier.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import DecodeError, EncodingOverflowError, InvalidCiphertext, ParameterError
from securetrees.paillier import Ciphertext, PrivateKey, PublicKey, generate_keypair, wire
from securetrees.rand import DeterministicRandom
from securetrees.testing.paillier import load_test_public_key, small_keypair

PK, SK = small_keypair(512)
OTHER, _ = small_keypair(520)
BIG_PK, BIG_SK = generate_keypair(rng=DeterministicRandom("wire/sealed-key"))
SEALED = BIG_SK.to_encrypted_bytes("correct horse", scrypt_log2_n=14,
                                   rng=DeterministicRandom("seal"))


def test_ciphertext_round_trip() -> None:
    c = PK.encrypt(-77)
    data = c.to_bytes()
    assert len(data) == 5 + 16 + 2 * PK.modulus_bytes
    back = Ciphertext.from_bytes(data, PK)
    assert back.value == c.value and SK.decrypt(back) == -77
    assert not back.fresh  # received values are re-randomised before they are forwarded


def check_stale_ciphertexts_leave_fresh(d: Ciphertext) -> None:
    b1, b2 = d.to_bytes(), d.to_bytes()
    assert b1 != b2, "a stale ciphertext was sent twice as the same bytes"  # a new encryption of 0 each time
    assert Ciphertext.from_bytes(b1, PK).value != d.value, "a stale ciphertext was sent as it is"
    assert SK.decrypt(Ciphertext.from_bytes(b1, PK)) == SK.decrypt(Ciphertext.from_bytes(b2, PK))


def test_to_bytes_rerandomises_unless_fresh() -> None:
    c = PK.encrypt(5)
    assert c.to_bytes() == c.to_bytes()  # fresh: sent as is
    d = c + 1
    check_stale_ciphertexts_leave_fresh(d)
    assert SK.decrypt(Ciphertext.from_bytes(d.to_bytes(), PK)) == 6


def test_a_stale_ciphertext_sent_as_is_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: re-randomisation skipped on the way out (the result of c + 1 is linkable to c)."""
    monkeypatch.setattr(Ciphertext, "rerandomize", lambda self, **_: self)
    with pytest.raises(AssertionError, match="stale ciphertext was sent"):
        check_stale_ciphertexts_leave_fresh(PK.encrypt(5) + 1)


def test_ciphertext_rejections() -> None:
    data = PK.encrypt(3).to_bytes()
    cases: dict[str, tuple[bytes, type[Exception]]] = {
        "truncated": (data[:-1], DecodeError),
        "extended": (data + b"\0", DecodeError),
        "wrong version": (data[:4] + b"\x02" + data[5:], DecodeError),
        "wrong magic": (b"STPK" + data[4:], DecodeError),
        "flipped key id": (data[:5] + bytes([data[5] ^ 1]) + data[6:], DecodeError),
        "empty": (b"", DecodeError),
        "zero value": (data[:21] + bytes(len(data) - 21), InvalidCiphertext),
        "too large": (data[:21] + b"\xff" * (len(data) - 21), InvalidCiphertext),
        "not a unit": (data[:21] + (PK.n * 5).to_bytes(len(data) - 21, "big"), InvalidCiphertext),
    }
    for name, (bad, error) in cases.items():
        with pytest.raises(error):
            Ciphertext.from_bytes(bad, PK)
        assert name
    with pytest.raises(DecodeError):
        Ciphertext.from_bytes(data, OTHER)  # another key's ciphertext
    with pytest.raises(DecodeError):
        Ciphertext.from_bytes("not bytes", PK)  # type: ignore[arg-type]


def test_flipped_value_byte_is_rejected_or_changes_the_plaintext() -> None:
    data = bytearray(PK.encrypt(3).to_bytes())
    data[-1] ^= 1
    try:
        c = Ciphertext.from_bytes(bytes(data), PK)
    except InvalidCiphertext:
        return
    try:
        m = SK.decrypt(c)
    except EncodingOverflowError:
        return
    assert m != 3


def test_validating_constructor() -> None:
    for bad in (0, -1, PK.n_square, PK.n):
        with pytest.raises(InvalidCiphertext):
            Ciphertext(PK, bad)
    assert SK.decrypt(Ciphertext(PK, PK.encrypt(9).value)) == 9


def test_public_key_round_trip_and_rejections() -> None:
    data = PK.to_bytes()
    assert load_test_public_key(data) == PK
    for bad in (data[:-1], data + b"\0", data[:4] + b"\x09" + data[5:], b"XXXX" + data[4:],
                data[:5] + b"\x00\x00" + data[7:], data[:7] + b"\0" + data[8:]):
        with pytest.raises(DecodeError):
            load_test_public_key(bad)


def test_key_id_binds_n_and_hs() -> None:
    assert wire.key_id(PK.n, PK.hs) == PK.key_id
    assert wire.key_id(PK.n, PK.hs + 1) != PK.key_id


def test_private_key_round_trip() -> None:
    sk = PrivateKey.from_encrypted_bytes(SEALED, "correct horse")
    assert sk.public_key == BIG_PK
    assert sk.decrypt(BIG_PK.encrypt(-31)) == -31
    assert b"correct horse" not in SEALED
    assert int(BIG_SK._p).to_bytes(128, "big") not in SEALED
    assert int(BIG_SK._q).to_bytes(128, "big") not in SEALED


def test_private_key_size_policy_on_load() -> None:
    sealed = SK.to_encrypted_bytes("pw", scrypt_log2_n=14)
    with pytest.raises(ParameterError):
        PrivateKey.from_encrypted_bytes(sealed, "pw")


def test_private_key_rejections() -> None:
    with pytest.raises(DecodeError):
        PrivateKey.from_encrypted_bytes(SEALED, "wrong horse")
    for i in (5, 10, 30, 60, len(SEALED) - 1):
        flipped = bytearray(SEALED)
        flipped[i] ^= 0x40
        with pytest.raises(DecodeError):
            PrivateKey.from_encrypted_bytes(bytes(flipped), "correct horse")
    for bad in (SEALED[:40], SEALED[:-1], b""):
        with pytest.raises(DecodeError):
            PrivateKey.from_encrypted_bytes(bad, "correct horse")
    with pytest.raises(ParameterError):
        SK.to_encrypted_bytes("")
    with pytest.raises(ParameterError):
        SK.to_encrypted_bytes("x", scrypt_log2_n=10)


@given(st.binary(max_size=300))
def test_fuzz_ciphertext_decoder(data: bytes) -> None:
    try:
        Ciphertext.from_bytes(data, PK)
    except (DecodeError, InvalidCiphertext):
        pass


@given(st.binary(max_size=200))
def test_fuzz_ciphertext_decoder_with_a_valid_header(tail: bytes) -> None:
    try:
        Ciphertext.from_bytes(b"STCT\x01" + PK.key_id + tail, PK)
    except (DecodeError, InvalidCiphertext):
        pass


@given(st.binary(max_size=300))
def test_fuzz_public_key_decoder(data: bytes) -> None:
    for attempt in (data, b"STPK\x01" + data):
        try:
            PublicKey.from_bytes(attempt)
        except DecodeError:
            pass
        except ParameterError:  # the size policy, after a successful format check
            pass


@given(st.binary(max_size=200))
def test_fuzz_private_key_decoder(data: bytes) -> None:
    for attempt in (data, b"STSK\x01\x0e\x08\x01" + data):
        try:
            PrivateKey.from_encrypted_bytes(attempt, "pw")
        except DecodeError:
            pass
