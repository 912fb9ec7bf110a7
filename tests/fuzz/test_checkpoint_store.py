"""The shared sealed checkpoint store's decoder (``securetrees.runtime.checkpoint``).

Whatever the bytes, opening a checkpoint gives the sealed state back or raises ``DecodeError``:
any modified byte, a wrong key, another party's, protocol's or slot's file, another version.
The planted companion is a store whose associated data does not name the party: another
party's file then opens, and the same check fails.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import DecodeError, ParameterError
from securetrees.protocols.federated_forest.messages import Checkpoint, Resume
from securetrees.rand import DeterministicRandom
from securetrees.runtime.checkpoint import CheckpointFormat, CheckpointStore

FMT = CheckpointFormat(b"TSCK", "test_protocol")
KEY = b"\x05" * 32
STATE = Checkpoint(3, 1)


def _store(party: str = "alice", key: bytes = KEY, fmt: CheckpointFormat = FMT) -> CheckpointStore:
    return CheckpointStore(Path("/nonexistent"), party, key, fmt, rng=DeterministicRandom(f"fuzz/{party}"))


BLOB = _store().seal(STATE)
SIDE = _store().seal(STATE, slot="alignment")


def _opens(store: CheckpointStore, blob: bytes, slot: str = "") -> bool:
    try:
        store.open(blob, Checkpoint, slot=slot)
    except DecodeError:
        return False
    return True


def test_a_sealed_state_opens_unchanged() -> None:
    assert _store().open(BLOB, Checkpoint) == STATE
    assert _store().open(SIDE, Checkpoint, slot="alignment") == STATE


@given(st.integers(0, len(BLOB) - 1), st.integers(1, 255))
def test_any_modified_byte_is_refused(at: int, xor: int) -> None:
    blob = bytearray(BLOB)
    blob[at] ^= xor
    with pytest.raises(DecodeError):
        _store().open(bytes(blob), Checkpoint)


@given(st.integers(0, len(BLOB)), st.binary(max_size=24))
def test_truncated_or_extended_is_refused(cut: int, tail: bytes) -> None:
    data = BLOB[:cut] + tail
    if data == BLOB:
        return
    with pytest.raises(DecodeError):
        _store().open(data, Checkpoint)


@given(st.binary(max_size=128))
def test_arbitrary_bytes_are_refused(data: bytes) -> None:
    with pytest.raises(DecodeError):
        _store().open(data, Checkpoint)


@given(st.binary(min_size=32, max_size=32).filter(lambda k: k != KEY))
def test_a_wrong_key_is_refused(key: bytes) -> None:
    assert not _opens(_store(key=key), BLOB)


@pytest.mark.parametrize("party", ["bob", "alice2", "Alice"])
def test_another_partys_file_is_refused(party: str) -> None:
    assert not _opens(_store(party), BLOB)


def test_another_protocol_slot_or_version_is_refused() -> None:
    assert not _opens(_store(fmt=CheckpointFormat(b"TSCK", "other_protocol")), BLOB)
    assert not _opens(_store(fmt=CheckpointFormat(b"XXCK", "test_protocol")), BLOB)
    assert not _opens(_store(fmt=CheckpointFormat(b"TSCK", "test_protocol", 2)), BLOB)
    assert not _opens(_store(), SIDE)  # a side slot's file is not the main checkpoint
    assert not _opens(_store(), BLOB, slot="alignment")
    with pytest.raises(DecodeError, match="expected"):
        _store().open(BLOB, Resume)


def test_save_keeps_the_previous_and_files_are_private(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "ck", "alice", KEY, FMT)
    assert store.latest(Checkpoint) is None and store.load_side("alignment", Checkpoint) is None
    store.save(Checkpoint(1, 0))
    store.save(Checkpoint(2, 0))
    store.save_side("alignment", Checkpoint(9, 9))
    assert store.latest(Checkpoint) == Checkpoint(2, 0)
    assert store.latest(Checkpoint, lambda s: s.tree == 1) == Checkpoint(1, 0)
    assert store.latest(Checkpoint, lambda s: s.tree == 7) is None
    assert store.load_side("alignment", Checkpoint) == Checkpoint(9, 9)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "ck").iterdir()}
    assert modes == dict.fromkeys(["alice.ckpt", "alice.prev.ckpt", "alice.alignment.ckpt"], 0o600)


def test_bad_keys_parties_and_slots_are_refused() -> None:
    for key in (b"short", "x" * 32):
        with pytest.raises(ParameterError):
            _store(key=key)  # type: ignore[arg-type]
    for party in ("", "../x", ".hidden"):
        with pytest.raises(ParameterError):
            _store(party)
    for slot in ("prev", "Up", "a/b", ""):
        with pytest.raises(ParameterError):
            _store().side(slot)
    with pytest.raises(ParameterError):
        CheckpointFormat(b"abc", "p")


def test_the_federated_forest_format_is_unchanged() -> None:
    """Its files still start ``FFCK``, version 1, and bind the party in the same associated data."""
    from securetrees.protocols.federated_forest.checkpoint import FORMAT

    assert FORMAT.associated_data("c0") == b"securetrees/federated_forest/checkpoint/v1/c0"
    assert FORMAT.associated_data("c0", "journal") == b"securetrees/federated_forest/checkpoint/v1/journal/c0"
    assert (FORMAT.magic, FORMAT.version) == (b"FFCK", 1)


# ---------------------------------------------------------------------------- planted companion
class PartyBlindFormat(CheckpointFormat):
    """Planted leak: the associated data does not name the party."""

    def associated_data(self, party: str, slot: str = "") -> bytes:
        return super().associated_data("", slot)


def test_planted_a_store_blind_to_the_party_opens_another_partys_file() -> None:
    blind = PartyBlindFormat(b"TSCK", "test_protocol")
    blob = _store("alice", fmt=blind).seal(STATE)
    assert _opens(_store("bob", fmt=blind), blob)  # the check above would fail on this store


def test_states_with_arrays_round_trip(tmp_path: Path) -> None:
    from securetrees.protocols.federated_forest.checkpoint import TreeState
    from securetrees.trees import RandomForestClassifier

    X = np.arange(40.0).reshape(20, 2)
    tree = RandomForestClassifier(n_estimators=1, max_depth=2, random_state=0).fit(X, np.arange(20) % 2).model_.trees[0]
    store = CheckpointStore(tmp_path, "alice", KEY, FMT)
    store.save(TreeState.of(tree))
    back = store.latest(TreeState)
    assert back is not None and back.tree().same_as(tree)
