"""Sealed checkpoints: a party's own state at rest, pickle-free (``specs/deployment.md``, "Resume").

One store serves every protocol.  A protocol declares its :class:`CheckpointFormat` once (a
4-byte magic, its name in the associated data, a version) and a state message of the runtime's
strict codec (any :func:`~securetrees.runtime.message` class); each party opens a
:class:`CheckpointStore` on its own folder with its own 32-byte key (``checkpoint_key`` in its
key file)::

    FORMAT = CheckpointFormat(b"SBCK", "secureboost")
    store = CheckpointStore(folder, "active", key, FORMAT)
    store.save(ActiveState(...))           # <folder>/active.ckpt, the previous kept as active.prev.ckpt
    state = store.latest(ActiveState)      # or None before the first save
    store.save_side("alignment", record)   # <folder>/active.alignment.ckpt, a separate slot
    store.load_side("alignment", AlignmentRecord)

File format (version 1): the magic, the version byte, a 12-byte nonce from the store's random
source, then AES-256-GCM under the party's key of the state message's encoding
(:mod:`securetrees.runtime.codec`), with associated data
``b"securetrees/<protocol>/checkpoint/v<version>/" + [slot + "/"] + party name``.  Opening never
unpickles; a wrong key, another party's or protocol's file, another slot's file, or any modified
byte raises :class:`DecodeError`, and so does a state of another message class than expected.
Writes are atomic and durable (:func:`securetrees.files.write_private`: a private temporary file,
fsync, then a rename) and private to the owner (0600).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from securetrees.errors import DecodeError, ParameterError
from securetrees.files import write_private
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime.codec import decode, encode
from securetrees.runtime.messages import Message

__all__ = ["KEY_BYTES", "CheckpointFormat", "CheckpointStore"]

KEY_BYTES = 32
"""A checkpoint key is 32 bytes (AES-256)."""
_NONCE, _TAG = 12, 16
S = TypeVar("S", bound=Message)
_SLOT = re.compile(r"[a-z][a-z0-9_]{0,31}")


@dataclass(frozen=True)
class CheckpointFormat:
    """What tells one protocol's checkpoints from another's: ``magic`` (4 bytes, the file's
    first), ``protocol`` (in the associated data) and ``version`` (the byte after the magic)."""

    magic: bytes
    protocol: str
    version: int = 1

    def __post_init__(self) -> None:
        if len(self.magic) != 4 or not 0 < self.version < 256 or not self.protocol:
            raise ParameterError("a checkpoint format has a 4-byte magic, a protocol name and a version in 1..255")

    def associated_data(self, party: str, slot: str = "") -> bytes:
        """The AEAD's associated data of ``party``'s file in ``slot`` (``""``: the main checkpoint)."""
        prefix = f"securetrees/{self.protocol}/checkpoint/v{self.version}/"
        return (prefix + (f"{slot}/" if slot else "") + party).encode("utf-8")


class CheckpointStore:
    """``<directory>/<party>.ckpt`` (the latest state), ``<party>.prev.ckpt`` (the one before) and
    side slots ``<party>.<slot>.ckpt``, sealed under ``key`` in ``fmt``."""

    def __init__(self, directory: str | os.PathLike[str], party: str, key: bytes, fmt: CheckpointFormat, *,
                 rng: RandomSource = SYSTEM_RANDOM) -> None:
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise ParameterError(f"a checkpoint key is {KEY_BYTES} bytes")
        if not party or "/" in party or party.startswith("."):
            raise ParameterError(f"{party!r} is not a party name a checkpoint file can carry")
        self.directory = Path(directory)
        self.party = party
        self.format = fmt
        self._aead = AESGCM(key)
        self._rng = rng

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r}, {self.party!r}, key=<hidden>)"

    # -- paths -------------------------------------------------------------------------------------
    @property
    def current(self) -> Path:
        return self.directory / f"{self.party}.ckpt"

    @property
    def previous(self) -> Path:
        return self.directory / f"{self.party}.prev.ckpt"

    def side(self, slot: str) -> Path:
        """The file of side slot ``slot`` (lower-case letters, digits and ``_``; not ``prev``)."""
        if not _SLOT.fullmatch(slot) or slot == "prev":
            raise ParameterError(f"{slot!r} is not a checkpoint slot name")
        return self.directory / f"{self.party}.{slot}.ckpt"

    # -- the envelope ------------------------------------------------------------------------------
    def seal(self, state: Message, *, slot: str = "") -> bytes:
        """The sealed bytes of ``state`` (a fresh nonce each time)."""
        fmt = self.format
        nonce = self._rng.token_bytes(_NONCE)
        return (fmt.magic + bytes([fmt.version]) + nonce
                + self._aead.encrypt(nonce, encode(state), fmt.associated_data(self.party, slot)))

    def open(self, blob: bytes, expect: type[S], *, slot: str = "") -> S:
        """The state sealed in ``blob``; :class:`DecodeError` unless it opens under this key, party,
        protocol and slot unmodified and holds an ``expect``."""
        fmt = self.format
        head = len(fmt.magic) + 1
        if len(blob) < head + _NONCE + _TAG or blob[:len(fmt.magic)] != fmt.magic:
            raise DecodeError(f"not a {fmt.protocol} checkpoint")
        if blob[len(fmt.magic)] != fmt.version:
            raise DecodeError(f"unsupported checkpoint version {blob[len(fmt.magic)]}")
        try:
            data = self._aead.decrypt(blob[head:head + _NONCE], blob[head + _NONCE:],
                                      fmt.associated_data(self.party, slot))
        except InvalidTag as exc:
            raise DecodeError("checkpoint does not open under this key and party (or was modified)") from exc
        state = decode(data)
        if not isinstance(state, expect):
            raise DecodeError(f"checkpoint holds {state.wire_type}, expected {expect.wire_type}")
        return state

    # -- the main checkpoint -----------------------------------------------------------------------
    def save(self, state: Message) -> None:
        """Write ``state`` as the latest checkpoint, keeping the one before (a crash between the two
        renames leaves the one before as the latest, which :meth:`latest` then returns)."""
        blob = self.seal(state)
        if self.current.exists():
            os.replace(self.current, self.previous)
        write_private(self.current, blob)

    def latest(self, expect: type[S], accept: Callable[[S], bool] | None = None) -> S | None:
        """The latest checkpoint (or, with ``accept``, the latest of the current and previous one
        that it accepts); ``None`` when there is none."""
        for path in (self.current, self.previous):
            if path.exists():
                state = self.open(path.read_bytes(), expect)
                if accept is None or accept(state):
                    return state
        return None

    # -- side slots (a record kept apart from the state: a journal, the aligned rows) --------------
    def save_side(self, slot: str, state: Message) -> None:
        """Replace slot ``slot`` atomically with ``state``."""
        write_private(self.side(slot), self.seal(state, slot=slot))

    def load_side(self, slot: str, expect: type[S]) -> S | None:
        """Slot ``slot``'s state, or ``None`` when this party has not written it."""
        path = self.side(slot)
        if not path.exists():
            return None
        return self.open(path.read_bytes(), expect, slot=slot)
