"""The one exception hierarchy of securetrees.

Every error the library raises derives from :class:`SecureTreesError`; each
subclass also derives from the matching built-in, so ``except ValueError``
keeps working in callers that do not know this library.  A check that guards
security raises one of these; it never returns a flag for the caller to
forget, and it is never an ``assert`` (asserts vanish under ``python -O``).
"""

from __future__ import annotations

__all__ = [
    "DecodeError",
    "EncodingOverflowError",
    "InsecureParameterWarning",
    "InvalidCiphertext",
    "KeyMismatchError",
    "NotFittedError",
    "ParameterError",
    "PartyUnavailable",
    "ProtocolError",
    "RevokedError",
    "SecureTreesError",
    "UnexpectedMessage",
]


class SecureTreesError(Exception):
    """Root of every error raised by securetrees."""


class ParameterError(SecureTreesError, ValueError):
    """A parameter is out of its allowed range (key size, precision, bounds, ...)."""


class EncodingOverflowError(SecureTreesError, OverflowError):
    """A value does not fit the fixed-point range, or a decoded value lies in the overflow band."""


class KeyMismatchError(SecureTreesError, ValueError):
    """Objects bound to different keys were combined, or a key does not match its ciphertext."""


class InvalidCiphertext(SecureTreesError, ValueError):
    """A ciphertext is out of range, not a unit, or otherwise malformed."""


class DecodeError(SecureTreesError, ValueError):
    """Bytes received from a peer or read from storage do not decode to a valid object."""


class ProtocolError(SecureTreesError):
    """A party deviated from the protocol, or a protocol precondition does not hold."""


class UnexpectedMessage(ProtocolError):
    """A message arrived that the receiving party does not accept at this step."""


class PartyUnavailable(ProtocolError):
    """A peer is unknown, has dropped out, or did not answer in time."""


class RevokedError(ProtocolError):
    """An operation needs a party, key or forest epoch that has been revoked."""


class NotFittedError(SecureTreesError, ValueError, AttributeError):
    """A model was used before ``fit``."""


class InsecureParameterWarning(UserWarning):
    """An explicitly allowed insecure setting is in use (e.g. a 1024-bit key)."""
