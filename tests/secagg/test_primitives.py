"""Key agreement, PRG, Shamir sharing and the share channel (specs/secagg.md, "Primitives")."""

from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import InvalidCiphertext, ParameterError, ProtocolError
from securetrees.rand import DeterministicRandom
from securetrees.secagg import prg, shamir
from securetrees.secagg.channel import associated_data, open_sealed, seal
from securetrees.secagg.keyagree import AgreementKey, KeyContext, derive_key, derive_own_key
from securetrees.secagg.prg import MaskExpander, MaskTerm, expand_mod, keystream_bytes

SESSION = b"s" * 16
KEY = bytes(range(32))


# --- key agreement -----------------------------------------------------------------------


def test_agreement_known_answer() -> None:
    rng = DeterministicRandom("secagg-kat")
    a, b = AgreementKey.generate(rng=rng), AgreementKey.generate(rng=rng)
    assert a.public.hex() == "078ff3b174e933243f57a19049a3c0cff98906ac35dc30b4d77e2fb0fd984478"
    assert b.public.hex() == "eaf2405855d3422e523a06ca83836bd53a6bc4a4373bb6309b521e3ee495c16b"
    ctx = KeyContext(SESSION, 3, "mask/test", ("alice", "bob"))
    key = derive_key(a.agree(b.public), ctx)
    assert key.hex() == "97cc04cbc32652eb5a9f505357432c140d59987e565d13c8527f437f046c6e1d"
    own = derive_own_key(bytes(32), session=SESSION, round=1, purpose="p", party="alice")
    assert own.hex() == "eac4ff92b8b0963bc3151522145ce0bcbe78d3a99137ab41c958e3b3bb35a876"


def test_both_ends_derive_the_same_key_and_contexts_separate() -> None:
    a, b = AgreementKey.generate(), AgreementKey.generate()
    ab = derive_key(a.agree(b.public), KeyContext(SESSION, 1, "mask", ("a", "b")))
    ba = derive_key(b.agree(a.public), KeyContext(SESSION, 1, "mask", ("b", "a")))
    assert ab == ba
    others = {
        derive_key(a.agree(b.public), ctx)
        for ctx in (
            KeyContext(SESSION, 2, "mask", ("a", "b")),
            KeyContext(SESSION, 1, "share-enc", ("a", "b")),
            KeyContext(SESSION, 1, "mask", ("a", "c")),
            KeyContext(b"t" * 16, 1, "mask", ("a", "b")),
        )
    }
    assert ab not in others and len(others) == 4


def check_agreement_repr_hides_the_secret(a: AgreementKey) -> None:
    assert a.secret().hex() not in repr(a) and a.secret().hex()[:16] not in repr(a), "the secret is printed"


def test_secret_round_trip_and_repr_hides_secret() -> None:
    a = AgreementKey.generate()
    assert AgreementKey.from_secret(a.secret()).public == a.public
    check_agreement_repr_hides_the_secret(a)


def test_a_repr_printing_the_agreement_secret_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AgreementKey, "__repr__", lambda self: f"AgreementKey({self.secret().hex()[:16]})")
    with pytest.raises(AssertionError, match="secret is printed"):
        check_agreement_repr_hides_the_secret(AgreementKey.generate())


@pytest.mark.parametrize("public", [b"\x00" * 32, b"\x01" + b"\x00" * 31])
def test_low_order_public_key_is_rejected(public: bytes) -> None:
    with pytest.raises(ProtocolError, match="low-order"):
        AgreementKey.generate().agree(public)


def test_malformed_inputs_are_rejected() -> None:
    with pytest.raises(ProtocolError, match="32 bytes"):
        AgreementKey.generate().agree(b"\x09" * 31)
    with pytest.raises(ParameterError, match="16 bytes"):
        KeyContext(b"short", 1, "mask", ("a", "b"))
    with pytest.raises(ParameterError, match="distinct"):
        KeyContext(SESSION, 1, "mask", ("a", "a"))
    with pytest.raises(ParameterError, match="32 bytes"):
        AgreementKey.from_secret(b"\x01" * 31)
    with pytest.raises(ParameterError, match="32-byte"):
        derive_key(b"\x01" * 16, KeyContext(SESSION, 1, "mask", ("a", "b")))


# --- PRG ---------------------------------------------------------------------------------


def test_keystream_is_aes256_of_the_counter_blocks() -> None:
    ecb = Cipher(algorithms.AES(KEY), modes.ECB()).encryptor()  # noqa: S305 (reference only)
    blocks = b"".join(i.to_bytes(16, "big") for i in range(4))
    assert keystream_bytes(KEY, 64) == ecb.update(blocks)
    assert keystream_bytes(KEY, 16).hex() == "f29000b62a499fd0a9f39a6add2e7780"


def test_u64_masks_are_the_keystream_words() -> None:
    words = MaskExpander().u64(KEY, 3)
    assert words.tolist() == [15032814528976949490, 9256919087594533801, 16546147286388202992]
    assert words.tobytes() == keystream_bytes(KEY, 24)
    short = MaskExpander().u64(KEY, 3, bits=20)
    assert (short == words % (1 << 20)).all()


@given(st.integers(1, 3000), st.booleans())
def test_accumulate_adds_or_subtracts_the_stream(count: int, subtract: bool) -> None:
    ex = MaskExpander()
    acc = np.arange(count, dtype=np.uint64)
    ex.accumulate(acc, [MaskTerm(KEY, subtract)])
    stream = ex.u64(KEY, count)
    back = acc + stream if subtract else acc - stream
    assert (back == np.arange(count, dtype=np.uint64)).all()


@pytest.mark.parametrize("count", [1, prg._CHUNK_WORDS - 1, prg._CHUNK_WORDS, 2 * prg._CHUNK_WORDS + 5])
def test_blocked_accumulate_equals_whole_streams_one_by_one(count: int) -> None:
    """The cache-blocked pass (vectors and streams block by block) is exactly the plain sum."""
    ex = MaskExpander()
    keys = [bytes([i]) * 32 for i in range(4)]
    signs = [False, True, True, False]
    plus = [np.full(count, 3, np.uint64), np.arange(count, dtype=np.uint64)]
    acc = np.full(count, 7, np.uint64)
    ex.accumulate(acc, [MaskTerm(k, s) for k, s in zip(keys, signs, strict=True)], plus=plus)
    expected = np.full(count, 7, np.uint64) + plus[0] + plus[1]
    for k, s in zip(keys, signs, strict=True):
        stream = MaskExpander().u64(k, count)
        expected = expected - stream if s else expected + stream
    assert (acc == expected).all()


def test_expander_reuses_buffers_across_lengths() -> None:
    ex = MaskExpander()
    big = ex.u64(KEY, 100)
    small = ex.u64(KEY, 10)
    assert (big[:10] == small).all()


def test_expand_mod_known_answer_and_range() -> None:
    assert expand_mod(KEY, 4, 1000003) == [37106, 600758, 643231, 695027]
    n = (1 << 127) - 1
    values = expand_mod(KEY, 500, n)
    assert all(0 <= v < n for v in values) and len(set(values)) == 500


def test_expand_mod_rejects_rather_than_reduces() -> None:
    # modulus 5 takes 3-bit candidates; a candidate of 5, 6 or 7 is dropped, never folded.
    raw = keystream_bytes(KEY, 200)
    candidates = [b & 7 for b in raw]
    expected = [c for c in candidates if c < 5][:50]
    assert expand_mod(KEY, 50, 5) == expected


def test_prg_parameter_errors() -> None:
    with pytest.raises(ParameterError):
        keystream_bytes(b"\x00" * 16, 8)
    with pytest.raises(ParameterError):
        expand_mod(KEY, 3, 1)
    with pytest.raises(ParameterError):
        MaskExpander().accumulate(np.zeros(3, np.int64), [MaskTerm(KEY)])  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="writable"):
        MaskExpander().accumulate(np.frombuffer(bytes(24), np.uint64), [MaskTerm(KEY)])
    with pytest.raises(ParameterError, match="shaped like"):
        MaskExpander().accumulate(np.zeros(3, np.uint64), [], plus=[np.zeros(4, np.uint64)])


# --- Shamir ------------------------------------------------------------------------------


def test_shamir_known_answer() -> None:
    shares = shamir.split(KEY, 2, [1, 2, 3], rng=DeterministicRandom("shamir-kat"))
    assert shares[1] == (
        5635989050401446320263053176749717403897995662739255471385233272320143292733
    )
    assert shares[3] - shares[2] == shares[2] - shares[1]  # degree 1: equally spaced
    assert shamir.reconstruct({2: shares[2], 3: shares[3]}, 2) == KEY


@given(
    st.binary(min_size=32, max_size=32),
    st.integers(3, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(n // 2 + 1, n))),
    st.data(),
)
def test_any_t_shares_reconstruct(secret: bytes, nt: tuple[int, int], data: st.DataObject) -> None:
    n, t = nt
    shares = shamir.split(secret, t, list(range(1, n + 1)))
    chosen = data.draw(st.lists(st.sampled_from(sorted(shares)), min_size=t, unique=True))
    assert shamir.reconstruct({x: shares[x] for x in chosen}, t) == secret


def test_shamir_refusals() -> None:
    shares = shamir.split(KEY, 3, [1, 2, 3, 4])
    with pytest.raises(ProtocolError, match="cannot reconstruct"):
        shamir.reconstruct({1: shares[1], 2: shares[2]}, 3)
    bad = dict(shares)
    bad[4] = (bad[4] + 1) % shamir.PRIME
    with pytest.raises(ProtocolError, match="inconsistent"):
        shamir.reconstruct(bad, 3)
    with pytest.raises(ParameterError):
        shamir.split(KEY, 5, [1, 2, 3])
    with pytest.raises(ParameterError):
        shamir.split(KEY, 2, [1, 1, 2])
    with pytest.raises(ProtocolError):
        shamir.share_from_bytes(b"\xff" * shamir.SHARE_BYTES)
    assert shamir.share_from_bytes(shamir.share_to_bytes(shares[1])) == shares[1]


# --- share channel -----------------------------------------------------------------------


def test_channel_round_trip_and_rejections() -> None:
    pk = b"k" * 32
    ad = associated_data(SESSION, 2, "round-shares", "alice", "bob", pk)
    blob = seal(KEY, b"payload", ad)
    assert open_sealed(KEY, blob, ad) == b"payload"
    tampered = blob[:-1] + bytes([blob[-1] ^ 1])
    for wrong_blob, wrong_ad in (
        (tampered, ad),
        (blob, associated_data(SESSION, 3, "round-shares", "alice", "bob", pk)),  # replayed round
        (blob, associated_data(SESSION, 2, "round-shares", "carol", "bob", pk)),  # another sender
        (blob, associated_data(SESSION, 2, "round-shares", "alice", "carol", pk)),  # redirected
        (blob, associated_data(b"x" * 16, 2, "round-shares", "alice", "bob", pk)),  # other session
        (blob, associated_data(SESSION, 2, "round-shares", "alice", "bob", b"m" * 32)),  # other key
        (blob[:20], ad),
    ):
        with pytest.raises(InvalidCiphertext):
            open_sealed(KEY, wrong_blob, wrong_ad)


def test_client_round_state_repr_hides_the_seed_and_shares() -> None:
    """Review finding: a debug repr of a client's round state must not print its secrets."""
    from securetrees.secagg.keyagree import AgreementKey
    from securetrees.secagg.roles import _ClientRound

    state = _ClientRound(length=3, mask_key=AgreementKey.generate(), seed=b"\x01" * 32,
                         held={"peer": (918273645, 564738291)})
    check_round_state_repr_hides_its_secrets(repr(state))


def check_round_state_repr_hides_its_secrets(text: str) -> None:
    assert "918273645" not in text and "564738291" not in text, "a held share is printed"
    assert repr(b"\x01" * 32) not in text and "seed" not in text, "the seed is printed"


def test_a_round_state_repr_with_every_field_is_caught() -> None:
    """Planted leak: the dataclass repr with every field shown (repr=False forgotten)."""
    import dataclasses

    from securetrees.secagg.keyagree import AgreementKey
    from securetrees.secagg.roles import _ClientRound

    state = _ClientRound(length=3, mask_key=AgreementKey.generate(), seed=b"\x01" * 32,
                         held={"peer": (918273645, 564738291)})
    text = ", ".join(f"{f.name}={getattr(state, f.name)!r}" for f in dataclasses.fields(state))
    with pytest.raises(AssertionError, match="is printed"):
        check_round_state_repr_hides_its_secrets(text)
