"""The party runtime: messages, the wire codec, networks and transcripts.

Roles subclass :class:`Party`, declare their messages with :func:`message`,
and talk only through a :class:`Network`, which carries every message as
bytes and records a :class:`Transcript` of who received what.
See ``specs/runtime.md``.
"""

from securetrees.runtime.codec import decode, encode
from securetrees.runtime.messages import ANY_ROLE, Message, message, registered_messages
from securetrees.runtime.network import InProcessNetwork, Network
from securetrees.runtime.party import Party, handles
from securetrees.runtime.transcript import Mark, Record, Refusal, Transcript, TranscriptStats

__all__ = [
    "ANY_ROLE",
    "InProcessNetwork",
    "Mark",
    "Message",
    "Network",
    "Party",
    "Record",
    "Refusal",
    "Transcript",
    "TranscriptStats",
    "decode",
    "encode",
    "handles",
    "message",
    "registered_messages",
]
