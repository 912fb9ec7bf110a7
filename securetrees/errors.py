"""The one exception hierarchy of securetrees.

Every error the library raises derives from :class:`SecureTreesError`; each
subclass also derives from the matching built-in, so ``except ValueError``
keeps working in callers that do not know this library.  A check that guards
security raises one of these; it never returns a flag for the caller to
forget, and it is never an ``assert`` (asserts vanish under ``python -O``).
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "CertificateRequestError",
    "CollusionError",
    "DecodeError",
    "DuplicateIdError",
    "EncodingOverflowError",
    "ExponentRangeError",
    "InsecureParameterWarning",
    "InvalidCiphertext",
    "KeyMismatchError",
    "MissingDependencyError",
    "MissingKeyMaterialError",
    "NamespaceError",
    "NotFittedError",
    "OutputExistsError",
    "ParameterError",
    "PartyUnavailable",
    "PeerTimeout",
    "PointRefusedError",
    "ProtocolError",
    "RemoteError",
    "RevokedError",
    "RunStopped",
    "SecureTreesError",
    "SetSizeError",
    "TableError",
    "TypeMismatchError",
    "UnauthorizedSender",
    "UnboundReply",
    "UnexpectedMessage",
    "UnknownKeyError",
    "UnsupportedActionError",
]


class SecureTreesError(Exception):
    """Root of every error raised by securetrees."""


class NamespaceError(SecureTreesError, ImportError):
    """A securetrees package was imported under a name other than its own (the protocols
    package as a top-level ``protocols``), which would load every module twice."""


class ParameterError(SecureTreesError, ValueError):
    """A parameter is out of its allowed range (key size, precision, bounds, ...)."""


class ExponentRangeError(ParameterError):
    """A secret exponent lies outside the bound its fixed-operation-count exponentiation was
    declared for (``[0, 2^bits)``), or the bound exceeds what the precomputed table covers."""


class EncodingOverflowError(SecureTreesError, OverflowError):
    """A value does not fit the fixed-point range, or a decoded value lies in the overflow band."""


class TypeMismatchError(SecureTreesError, TypeError):
    """A value of the wrong type was given or combined (a plain integer where a ciphertext is
    needed, a ciphertext times a ciphertext), or an object refuses an operation for its type
    (pickling or copying a secret)."""


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


class UnauthorizedSender(UnexpectedMessage):
    """A message came from a party whose role may not send it (or send it to this role), or a
    reply answered a request it is not declared for; refused before any handler ran."""


class UnboundReply(UnexpectedMessage):
    """A reply's binding does not match the request the caller sent (a reply to another request or
    to another caller, an earlier reply replayed); refused before it is decoded."""


class PartyUnavailable(ProtocolError):
    """A peer is unknown, has dropped out, or did not answer in time."""


class PeerTimeout(PartyUnavailable):
    """A peer did not answer within the call's deadline (networked transports)."""


class RunStopped(SecureTreesError):
    """The operator stopped a party before its protocol role started (``securetrees operator stop``
    during the alignment phase): the party ends without serving its role."""


class AuthenticationError(ProtocolError):
    """A peer's identity was refused: untrusted certificate, a name not in the run's roster,
    or a claim that does not match the certificate (networked transports)."""


class RemoteError(ProtocolError):
    """A peer's handler failed with an error that is not one of securetrees' own types;
    ``remote_type`` names it (the peer's traceback is never sent)."""

    def __init__(self, message: str, remote_type: str = "") -> None:
        super().__init__(message)
        self.remote_type = remote_type


class RevokedError(ProtocolError):
    """An operation needs a party, key or forest epoch that has been revoked."""


class MissingDependencyError(SecureTreesError, ImportError):
    """An optional dependency needed by the called function is not installed; the message
    names the extra that provides it (``pip install 'securetrees[EXTRA]'``)."""


class NotFittedError(SecureTreesError, ValueError, AttributeError):
    """A model was used before ``fit``."""


class OutputExistsError(SecureTreesError, FileExistsError):
    """A command would overwrite existing files (a trial folder with keys) and was not told to
    (``--force``)."""


class DuplicateIdError(ParameterError):
    """A party's id set for private set intersection holds the same id twice (rows would be
    ambiguous), or a peer sent the same blinded point twice."""


class SetSizeError(ParameterError):
    """An id set, one's own or a peer's announced one, is larger than the run's ``max_set_size``
    (the cap that bounds how many guessed ids a party can probe in one run)."""


class UnknownKeyError(ParameterError):
    """A configuration section holds a key its reader does not know (a typo, or a secret put
    where secrets never go); the message names the key, the section and the allowed keys."""


class UnsupportedActionError(ParameterError):
    """An operator action the run's protocol does not offer (e.g. ``revoke`` outside RevFRF)."""


class CollusionError(ParameterError):
    """A run layout in which one organisation hosts two roles that the protocol's threat model
    requires to be held by different organisations (e.g. RevFRF's CS and CC)."""


class CertificateRequestError(ParameterError):
    """A certificate signing request the run's CA refuses: its signature does not verify, or its
    common name and single DNS name are not one and the same valid party name."""


class MissingParameterError(ParameterError):
    """A configuration section lacks keys its reader requires; :attr:`keys` names them."""

    def __init__(self, message: str, keys: tuple[str, ...]) -> None:
        super().__init__(message)
        self.keys = keys


class MissingKeyMaterialError(ParameterError):
    """A run configuration lacks public key material its protocol's roles need at start-up (e.g.
    SecureBoost's ``active_public_key``); the message names the ``[protocol]`` key and the set-up
    command that makes it."""


class TableError(ParameterError):
    """A party's own data table cannot be used: the file is unreadable or has no rows, the id
    or label column is missing, a declared column is not in the file, or a value does not parse
    under the schema (``securetrees.net.tables``)."""


class DataChangedError(TableError):
    """A restarted party's data file is not the one its rows were aligned on: the file's SHA-256
    differs from the digest in its checkpoint (the message names the file); the run cannot resume
    on it (``specs/deployment.md``, "Resume")."""


class PointRefusedError(ProtocolError):
    """A group element from a peer is refused: a non-canonical encoding, or a point libsodium
    refuses (of small order: an all-zero X25519 result); the run aborts, nothing is dropped."""


class InsecureParameterWarning(UserWarning):
    """An explicitly allowed insecure setting is in use (e.g. a 1024-bit key)."""
