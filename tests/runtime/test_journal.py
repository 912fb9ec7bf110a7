"""The single-use journal (``securetrees.runtime.journal``): the same request again gets its kept
reply, a different request for an answered slot is refused with the protocol's typed error, in
memory, after a reload from the sealed store and after a restore of an embedded state; pruned slots
are forgotten (in the store too).  Planted companion: a journal that is not reloaded after a restart
answers a different request for an answered slot."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from securetrees.errors import ProtocolError, UnexpectedMessage
from securetrees.rand import DeterministicRandom
from securetrees.runtime import Message, message
from securetrees.runtime.checkpoint import CheckpointFormat, CheckpointStore
from securetrees.runtime.codec import decode, encode
from securetrees.runtime.journal import JournalState, SingleUseJournal, Slot

FMT = CheckpointFormat(b"TJCK", "test_journal")


@message("test.journal.request")
@dataclass(frozen=True)
class Ask(Message):
    tree: int
    rows: tuple[int, ...]


@message("test.journal.reply")
@dataclass(frozen=True)
class Answer(Message):
    value: int


class Refused(UnexpectedMessage):
    """The refusal the tests' protocol raises."""


def _refusal(slot: Slot) -> Refused:
    return Refused(f"slot {slot} was answered for another request")


def _store(d: Path) -> CheckpointStore:
    return CheckpointStore(d, "alice", b"\x07" * 32, FMT, rng=DeterministicRandom("journal"))


def _journal(d: Path | None = None) -> SingleUseJournal:
    return SingleUseJournal(_refusal, store=None if d is None else _store(d))


ASK, OTHER = Ask(1, (0, 2)), Ask(1, (0, 3))


def test_an_unanswered_slot_is_free_and_a_repeat_gets_the_kept_reply() -> None:
    journal = _journal()
    assert journal.lookup((1, 0), ASK) is None
    journal.record((1, 0), ASK, Answer(42))
    assert decode(journal.lookup((1, 0), ASK) or b"") == Answer(42)
    assert journal.lookup((1, 1), OTHER) is None  # another slot is independent
    journal.record((1, 1), OTHER)
    assert journal.lookup((1, 1), OTHER) == b""  # digest only: answered, nothing to replay


def test_a_different_request_for_an_answered_slot_is_refused() -> None:
    journal = _journal()
    journal.record((1, 0), ASK, Answer(42))
    with pytest.raises(Refused, match=r"slot \(1, 0\)"):
        journal.lookup((1, 0), OTHER)
    with pytest.raises(Refused):
        journal.lookup((1, 0), Answer(42))  # another message type with the slot's numbers


def test_the_refusal_is_the_protocols_own_error() -> None:
    journal = SingleUseJournal(lambda slot: ProtocolError("answered once"))
    journal.record((0,), ASK)
    with pytest.raises(ProtocolError, match="answered once") as info:
        journal.lookup((0,), OTHER)
    assert type(info.value) is ProtocolError


def test_the_journal_survives_a_reload_from_its_store(tmp_path: Path) -> None:
    first = _journal(tmp_path)
    first.record((1, 0), ASK, Answer(42))
    assert _store(tmp_path).side("journal").exists()  # sealed before record returned
    again = _journal(tmp_path)
    again.reload()
    assert decode(again.lookup((1, 0), ASK) or b"") == Answer(42)
    with pytest.raises(Refused):
        again.lookup((1, 0), OTHER)


def test_planted_a_journal_not_reloaded_after_a_restart_answers_a_second_request(tmp_path: Path) -> None:
    _journal(tmp_path).record((1, 0), ASK)
    forgetful = _journal(tmp_path)  # restarted without reload()
    assert forgetful.lookup((1, 0), OTHER) is None  # the refusal above would not happen


def test_an_embedded_state_restores_and_keeps_what_memory_answered() -> None:
    old = _journal()
    old.record((1, 0), ASK, Answer(1))
    old.record((1, 1), ASK, Answer(2))
    state = decode(encode(old.state()))
    assert isinstance(state, JournalState)
    new = _journal()
    new.record((1, 1), OTHER, Answer(3))  # answered since this journal was built: kept
    new.restore(state)
    new.restore(None)
    assert decode(new.lookup((1, 0), ASK) or b"") == Answer(1)
    assert decode(new.lookup((1, 1), OTHER) or b"") == Answer(3)
    with pytest.raises(Refused):
        new.lookup((1, 0), OTHER)
    with pytest.raises(Refused):
        new.lookup((1, 1), ASK)


def test_pruning_forgets_old_slots_in_memory_and_in_the_store(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    for rnd in range(3):
        journal.record((0, rnd), ASK)
    journal.prune(lambda slot: slot[1] >= 2)
    assert journal.lookup((0, 1), OTHER) is None  # pruned: the slot is free again
    with pytest.raises(Refused):
        journal.lookup((0, 2), OTHER)
    reloaded = _journal(tmp_path)
    reloaded.reload()
    assert [e.slot for e in reloaded.state().entries] == [(0, 2)]


def test_a_journal_without_a_file_reloads_empty_and_a_bad_side_slot_is_refused(tmp_path: Path) -> None:
    from securetrees.errors import ParameterError

    journal = _journal(tmp_path)
    journal.reload()
    assert journal.state() == JournalState(())
    with pytest.raises(ParameterError):
        SingleUseJournal(_refusal, store=_store(tmp_path), side="prev")


def test_slots_lists_the_answered_slots_in_order_and_forgets_pruned_ones(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    assert journal.slots() == []
    journal.record((2, 5), ASK)
    journal.record((1, 6), OTHER, Answer(1))
    assert journal.slots() == [(2, 5), (1, 6)]
    journal.prune(lambda slot: slot[1] >= 6)
    reloaded = _journal(tmp_path)
    reloaded.reload()
    assert journal.slots() == reloaded.slots() == [(1, 6)]


@pytest.mark.parametrize("protocol", ["hybridtree", "secureboost", "revfrf"])
def test_a_checkpoint_from_before_the_shared_journal_is_refused_by_its_version(tmp_path: Path, protocol: str) -> None:
    import importlib
    from dataclasses import replace

    from securetrees.errors import DecodeError

    fmt = importlib.import_module(f"securetrees.protocols.{protocol}.checkpoint").FORMAT
    assert fmt.version == 2
    old = CheckpointStore(tmp_path, "alice", b"\x07" * 32, replace(fmt, version=1))
    old.save(Answer(1))
    with pytest.raises(DecodeError, match="unsupported checkpoint version 1"):
        CheckpointStore(tmp_path, "alice", b"\x07" * 32, fmt).latest(Answer)
