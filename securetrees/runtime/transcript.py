"""Who received what: the record every network keeps of a protocol run.

Each delivered message becomes a :class:`Record` in the receiver's view: its
round, sender, receiver, wire type, size in bytes, and (unless disabled for
large benchmarks) the exact bytes and the decoded payload.  Benchmarks read
bytes and rounds from here; security tests scan the views.  A message refused
before delivery (its sender's role may not send it) is not in any view: it
becomes a :class:`Refusal`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from securetrees.runtime.messages import Message

__all__ = ["Mark", "Record", "Refusal", "Transcript", "TranscriptStats"]


@dataclass(frozen=True, slots=True)
class Record:
    """One delivered message, as its receiver saw it."""

    round: int
    sender: str
    receiver: str
    type_name: str
    size: int
    data: bytes | None = field(repr=False)
    payload: Message | None = field(repr=False)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A message the receiving side refused before any handler saw it (never delivered)."""

    round: int
    sender: str
    receiver: str
    type_name: str
    size: int
    reason: str


@dataclass(frozen=True, slots=True)
class Mark:
    """A position in a transcript (see :meth:`Transcript.since`)."""

    records: int
    rounds: int


@dataclass(frozen=True, slots=True)
class TranscriptStats:
    """Messages, bytes and rounds between a mark and now."""

    messages: int
    bytes: int
    rounds: int


class Transcript:
    """Every message a network delivered, in order.

    ``rounds`` counts communication rounds: one per call, one per fan-out to
    several parties (they travel in parallel), one per one-way send.  With
    ``keep_payloads=False`` only sizes are kept (for benchmarks moving
    hundreds of megabytes); views then hold no bytes or payloads.
    """

    def __init__(self, *, keep_payloads: bool = True) -> None:
        self.keep_payloads = keep_payloads
        self.records: list[Record] = []
        self.refusals: list[Refusal] = []
        self.rounds = 0
        self._lock = threading.Lock()  # networked transports record from several threads

    def new_round(self) -> int:
        with self._lock:
            self.rounds += 1
            return self.rounds

    def record(self, round_: int, sender: str, receiver: str, msg: Message, data: bytes) -> None:
        keep = self.keep_payloads
        rec = Record(round_, sender, receiver, msg.wire_type, len(data), data if keep else None, msg if keep else None)
        with self._lock:
            self.records.append(rec)

    def refuse(self, round_: int, sender: str, receiver: str, type_name: str, size: int, reason: str) -> None:
        """Record a message refused before delivery (it appears in no view)."""
        with self._lock:
            self.refusals.append(Refusal(round_, sender, receiver, type_name, size, reason))

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def view(self, party: str) -> list[Record]:
        """Every message ``party`` received (requests and replies), in order."""
        return [r for r in self.records if r.receiver == party]

    def sent(self, party: str) -> list[Record]:
        """Every message ``party`` sent."""
        return [r for r in self.records if r.sender == party]

    def types_received(self, party: str) -> Counter[str]:
        """How many messages of each wire type ``party`` received."""
        return Counter(r.type_name for r in self.view(party))

    @property
    def total_bytes(self) -> int:
        return sum(r.size for r in self.records)

    def bytes_sent(self, party: str) -> int:
        return sum(r.size for r in self.records if r.sender == party)

    def bytes_received(self, party: str) -> int:
        return sum(r.size for r in self.records if r.receiver == party)

    def mark(self) -> Mark:
        """The current position, for measuring one operation with :meth:`since`."""
        return Mark(len(self.records), self.rounds)

    def since(self, mark: Mark) -> TranscriptStats:
        recent = self.records[mark.records :]
        return TranscriptStats(len(recent), sum(r.size for r in recent), self.rounds - mark.rounds)

    def clear(self) -> None:
        with self._lock:
            self.records.clear()
            self.refusals.clear()
            self.rounds = 0
