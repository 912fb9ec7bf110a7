"""The one sealing envelope (securetrees/sealing.py): round trips, tampering, and the scrypt cap.

The cap is shared by Paillier private keys, DT-PKC secret keys and deployment key files, and
is checked before scrypt runs: a hostile header costs the reader nothing.  Whether scrypt ran
is observed by counting calls to the key derivation, never by timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from securetrees import sealing
from securetrees.dtpkc import wire as dwire
from securetrees.errors import DecodeError, ParameterError
from securetrees.net.keyfile import open_key_file, write_key_file
from securetrees.rand import DeterministicRandom
from securetrees.testing.dtpkc import dtpkc_test_keys
from securetrees.testing.paillier import small_keypair

KID = b"k" * 16
RNG = DeterministicRandom(b"sealing-tests")


def _sealed(**kw: Any) -> bytes:
    return sealing.seal(b"label", KID, b"secret bytes", "pw", rng=RNG, log2_n=14, **kw)


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The scrypt costs run during the test (the real derivation still runs)."""
    seen: list[int] = []
    real = sealing._derive

    def counting(passphrase: bytes, salt: bytes, log2_n: int) -> bytes:
        seen.append(log2_n)
        return real(passphrase, salt, log2_n)

    monkeypatch.setattr(sealing, "_derive", counting)
    return seen


def test_round_trip_and_tampering() -> None:
    blob = _sealed()
    assert sealing.open_sealed(blob, "pw") == (b"label", KID, b"secret bytes")
    assert sealing.open_sealed(blob, b"pw") == (b"label", KID, b"secret bytes")
    assert b"secret bytes" not in blob
    with pytest.raises(DecodeError):
        sealing.open_sealed(blob, "wrong")
    for pos in (8, 30, 40, 57, len(blob) - 1):  # salt, nonce, key id, label, tag: all authenticated
        with pytest.raises(DecodeError):
            sealing.open_sealed(blob[:pos] + bytes([blob[pos] ^ 1]) + blob[pos + 1:], "pw")
    for bad in (blob[:20], blob[:-17], b"XXXX" + blob[4:], blob[:4] + b"\x02" + blob[5:]):
        with pytest.raises(DecodeError):
            sealing.open_sealed(bad, "pw")


def test_sealing_refuses_bad_arguments() -> None:
    for log2_n in (13, 19, 20, True, 14.0):
        with pytest.raises(ParameterError):
            sealing.seal(b"", KID, b"s", "pw", rng=RNG, log2_n=log2_n)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        sealing.seal(b"", b"short", b"s", "pw", rng=RNG, log2_n=14)
    with pytest.raises(ParameterError):
        sealing.seal(b"", KID, b"s", "", rng=RNG, log2_n=14)
    with pytest.raises(ParameterError):
        sealing.seal(b"x" * (sealing.MAX_LABEL_BYTES + 1), KID, b"s", "pw", rng=RNG, log2_n=14)


def _with_cost(blob: bytes, log2_n: int, r: int = 8, p: int = 1) -> bytes:
    return blob[:5] + bytes([log2_n, r, p]) + blob[8:]


def test_header_over_the_cap_is_refused_before_scrypt(derivations: list[int]) -> None:
    """Issue 14: a sealed DT-PKC key with scrypt log2 n = 20 cost 1 GB and 2.5 s before failing.
    Now any header over the cap is refused without running scrypt at all."""
    blob = _sealed()
    over = _with_cost(blob, 20)
    derivations.clear()  # sealing derived once
    for log2_n, r, p in [(19, 8, 1), (20, 8, 1), (30, 8, 1), (255, 8, 1), (14, 255, 1), (14, 8, 16), (13, 8, 1)]:
        with pytest.raises(DecodeError, match="unsupported scrypt parameters"):
            sealing.open_sealed(_with_cost(blob, log2_n, r, p), "pw")
    assert derivations == []
    # The old 51-byte DT-PKC sealed-key layout with log2 n = 20: refused by its magic, unopened.
    old = b"STDK\x01\x03" + b"\x00" * 16 + bytes([20]) + b"\x00" * 12 + b"\x00" * 16
    assert len(old) == 51
    for opener in (lambda d: dwire.decrypt_secret_key(d, b"pw"), lambda d: sealing.open_sealed(d, "pw")):
        with pytest.raises(DecodeError):
            opener(old)
        with pytest.raises(DecodeError):
            opener(over)
    assert derivations == []
    sealing.open_sealed(blob, "pw")  # the counter sees a derivation that does run
    assert derivations == [14]


def test_the_cap_check_is_observable(monkeypatch: pytest.MonkeyPatch, derivations: list[int]) -> None:
    """Planted leak: with the cap check removed, the over-cap header reaches scrypt (the counter
    sees log2 n = 20), so the test above would fail.  The derivation itself is stubbed here so
    the leaky variant costs nothing."""
    monkeypatch.setattr(sealing, "check_scrypt_cost", lambda *a, **k: a[0])
    monkeypatch.setattr(sealing, "Scrypt", _NoScrypt)
    over = _with_cost(_sealed(), 20)
    derivations.clear()
    with pytest.raises(DecodeError):
        sealing.open_sealed(over, "pw")
    assert derivations == [20]


class _NoScrypt:
    def __init__(self, **kwargs: Any) -> None:
        pass

    def derive(self, passphrase: bytes) -> bytes:
        return b"\x00" * 32


def test_one_cap_for_paillier_dtpkc_and_key_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every sealer reads the one cap: narrowing it in securetrees.sealing narrows all three."""
    _, sk = small_keypair(512)
    share = dtpkc_test_keys(512).cs_share
    sealers = [
        lambda n: sk.to_encrypted_bytes("pw", scrypt_log2_n=n, rng=RNG),
        lambda n: dwire.encrypt_secret_key(share, b"pw", scrypt_log2_n=n, rng=RNG),
        lambda n: sealing.seal(b"", KID, b"s", "pw", rng=RNG, log2_n=n),
    ]
    for seal in sealers:
        with pytest.raises(ParameterError):
            seal(19)
    blobs = [seal(15) for seal in sealers]
    path = tmp_path / "k"
    write_key_file(path, "cs", {"a": b"1"}, b"pw", rng=RNG)  # at the default cost, 17
    monkeypatch.setattr(sealing, "SCRYPT_LOG2_N_RANGE", (14, 14))
    for seal in sealers:
        with pytest.raises(ParameterError):
            seal(15)
    with pytest.raises(DecodeError, match="unsupported scrypt"):
        type(sk).from_encrypted_bytes(blobs[0], "pw", allow_insecure=True)
    with pytest.raises(DecodeError, match="unsupported scrypt"):
        dwire.decrypt_secret_key(blobs[1], b"pw")
    with pytest.raises(DecodeError, match="unsupported scrypt"):
        open_key_file(path, "cs", b"pw")


def test_dtpkc_label_is_checked() -> None:
    """A Paillier key sealed under the same passphrase is not a DT-PKC secret key."""
    _, sk = small_keypair(512)
    with pytest.raises(DecodeError, match="not a sealed DT-PKC secret key"):
        dwire.decrypt_secret_key(sk.to_encrypted_bytes(b"pw", scrypt_log2_n=14, rng=RNG), b"pw")
