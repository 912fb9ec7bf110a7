"""Single-use requests: the journal of what a party has answered (``specs/deployment.md``, "Resume").

Some requests may be answered once only: a second histogram under the same mask could unmask, a
second expansion over other samples would show more codes.  Yet a resumed peer repeats the
requests of the step it was in byte for byte, and those must still be answered.  A
:class:`SingleUseJournal` keeps, per *slot* (a protocol-defined tuple of integers such as
``(tree, layer, attempt)``), the SHA-256 of the answered request's encoding and, where the
protocol answers a repeat with the same reply, the reply's encoding::

    journal = SingleUseJournal(lambda slot: ProtocolError("answered once"), store=store)
    journal.reload()                             # after a restart: what was answered before
    kept = journal.lookup(slot, request)         # None: not answered yet; refused: another request
    if kept is None:
        reply = ...
        journal.record(slot, request, reply)     # sealed before the reply leaves
    else:
        reply = decode(kept)                     # the same request again: the same reply

With a store the journal seals itself to the store's side slot (``journal`` unless told) at every
:meth:`record` and :meth:`prune`; without one, a protocol that keeps the journal in its own state
(RevFRF: atomically with the rest of it) embeds :meth:`state` and gives it back to :meth:`restore`.
Stored as :class:`JournalState` (``securetrees.journal``), never sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from securetrees.errors import SecureTreesError
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.runtime.codec import encode
from securetrees.runtime.messages import Message, message

__all__ = ["JournalEntry", "JournalState", "SingleUseJournal", "Slot"]

Slot = tuple[int, ...]
"""Which answer a request asks for, as its protocol numbers it (``(kind, tree, layer)``, ...)."""


@message("securetrees.journal.entry")
@dataclass(frozen=True)
class JournalEntry(Message):
    """One answered request: its slot, the SHA-256 of its encoding and the reply's encoding
    (``b""`` where the protocol keeps the digest only)."""

    slot: tuple[int, ...]
    digest: bytes
    reply: bytes


@message("securetrees.journal")
@dataclass(frozen=True)
class JournalState(Message):
    """A journal as sealed: its entries in the order they were recorded."""

    entries: tuple[JournalEntry, ...]


class SingleUseJournal:
    """The requests a party answered, one per slot; a different request for an answered slot raises
    ``refusal(slot)`` (each protocol's typed error).  ``store``: sealed to its side slot ``side``."""

    def __init__(self, refusal: Callable[[Slot], SecureTreesError], *, store: CheckpointStore | None = None,
                 side: str = "journal") -> None:
        if store is not None:
            store.side(side)  # a valid slot name, checked once
        self._refusal = refusal
        self._store = store
        self._side = side
        self._entries: dict[Slot, JournalEntry] = {}

    def lookup(self, slot: Slot, request: Message) -> bytes | None:
        """``None`` if ``slot`` was not answered; the reply kept for it (``b""`` if none was kept) if
        ``request`` is the request answered there, byte for byte; else ``refusal(slot)`` is raised."""
        known = self._entries.get(slot)
        if known is None:
            return None
        if known.digest != _digest(request):
            raise self._refusal(slot)
        return known.reply

    def slots(self) -> list[Slot]:
        """The slots answered so far, in the order they were recorded."""
        return list(self._entries)

    def record(self, slot: Slot, request: Message, reply: Message | None = None) -> None:
        """Journal ``request`` as the one answered in ``slot`` (after :meth:`lookup` found it
        unanswered), with ``reply``'s encoding when the protocol replays it; with a store, the
        journal is sealed before this returns, so call it before the reply leaves."""
        self._entries[slot] = JournalEntry(slot, _digest(request), b"" if reply is None else encode(reply))
        self._save()

    def prune(self, keep: Callable[[Slot], bool]) -> None:
        """Forget the slots ``keep`` rejects (a step never asked again)."""
        kept = {slot: e for slot, e in self._entries.items() if keep(slot)}
        if len(kept) != len(self._entries):
            self._entries = kept
            self._save()

    def state(self) -> JournalState:
        """The journal as a stored message."""
        return JournalState(tuple(self._entries.values()))

    def restore(self, state: JournalState | None) -> None:
        """Adopt the entries of ``state`` (``None``: nothing) for the slots this journal has not
        answered since it was built."""
        for entry in state.entries if state is not None else ():
            self._entries.setdefault(entry.slot, entry)

    def reload(self) -> None:
        """:meth:`restore` the journal sealed in the store (nothing without a store or a file)."""
        if self._store is not None:
            self.restore(self._store.load_side(self._side, JournalState))

    def _save(self) -> None:
        if self._store is not None:
            self._store.save_side(self._side, self.state())


def _digest(request: Message) -> bytes:
    return hashlib.sha256(encode(request)).digest()
