"""Wire messages of the secure-aggregation protocol (specs/secagg.md, "Messages").

Vectors travel as numpy arrays (raw bytes with dtype and shape); keys,
signatures and share ciphertexts as bytes.  Nothing secret is ever a field.
Session keys travel signed (:class:`SignedKey`, :class:`KeyEntry`); a round's
mask keys travel bare (:class:`RoundKey`, :class:`RoundKeyEntry`) and are
authenticated by the share ciphertexts, whose associated data binds the
sender's round key.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.runtime import Message, message

__all__ = [
    "Ack",
    "AdvertiseRound",
    "ConsistencyRequest",
    "KeyEntry",
    "MaskRequest",
    "MaskedInput",
    "NamedShare",
    "RoundDirectory",
    "RoundKey",
    "RoundKeyEntry",
    "RoundShares",
    "SealedShare",
    "SessionDirectory",
    "SessionStart",
    "SignedKey",
    "SurvivorSignature",
    "UnmaskRequest",
    "UnmaskShares",
]


@message("secagg.signed_key", reply_to="secagg.session_start")
@dataclass(frozen=True)
class SignedKey(Message):
    """A party's share-encryption X25519 public key, signed with its roster key (reply to S1)."""

    public: bytes
    signature: bytes


@message("secagg.key_entry")
@dataclass(frozen=True)
class KeyEntry(Message):
    name: str
    public: bytes
    signature: bytes


@message("secagg.session_start", sender="server", receiver="client")
@dataclass(frozen=True)
class SessionStart(Message):
    """Setup step 1 (server to every roster party): advertise a share-encryption key."""

    session: bytes


@message("secagg.session_directory", sender="server", receiver="client")
@dataclass(frozen=True)
class SessionDirectory(Message):
    """Setup step 2 (server to U1): everybody's signed share-encryption keys."""

    entries: tuple[KeyEntry, ...]


@message("secagg.ack", reply_to="secagg.session_directory")
@dataclass(frozen=True)
class Ack(Message):
    ok: bool


@message("secagg.advertise_round", sender="server", receiver="client")
@dataclass(frozen=True)
class AdvertiseRound(Message):
    """Round step 1, AdvertiseKeys: make a fresh mask key pair and self-mask seed."""

    round: int
    length: int


@message("secagg.round_key", reply_to=AdvertiseRound)
@dataclass(frozen=True)
class RoundKey(Message):
    """A party's fresh X25519 mask public key for one round (reply to R1)."""

    public: bytes


@message("secagg.round_key_entry")
@dataclass(frozen=True)
class RoundKeyEntry(Message):
    name: str
    public: bytes


@message("secagg.round_directory", sender="server", receiver="client")
@dataclass(frozen=True)
class RoundDirectory(Message):
    """Round step 2, ShareKeys: the round keys of U1 (checked through the shares in step 3)."""

    round: int
    entries: tuple[RoundKeyEntry, ...]


@message("secagg.sealed_share")
@dataclass(frozen=True)
class SealedShare(Message):
    """Shares of a sender's mask key and self-mask seed, AEAD-encrypted to one recipient."""

    sender: str
    recipient: str
    blob: bytes


@message("secagg.round_shares", reply_to=RoundDirectory)
@dataclass(frozen=True)
class RoundShares(Message):
    round: int
    shares: tuple[SealedShare, ...]


@message("secagg.mask_request", sender="server", receiver="client")
@dataclass(frozen=True)
class MaskRequest(Message):
    """Round step 3, MaskedInputCollection: U2 and the shares addressed to the recipient."""

    round: int
    participants: tuple[str, ...]
    shares: tuple[SealedShare, ...]


@message("secagg.masked_input", reply_to=MaskRequest)
@dataclass(frozen=True)
class MaskedInput(Message):
    round: int
    vector: np.ndarray


@message("secagg.consistency_request", sender="server", receiver="client")
@dataclass(frozen=True)
class ConsistencyRequest(Message):
    """Round step 4, ConsistencyCheck: the survivor set U3 to sign."""

    round: int
    survivors: tuple[str, ...]


@message("secagg.survivor_signature", reply_to=ConsistencyRequest)
@dataclass(frozen=True)
class SurvivorSignature(Message):
    name: str
    signature: bytes


@message("secagg.unmask_request", sender="server", receiver="client")
@dataclass(frozen=True)
class UnmaskRequest(Message):
    """Round step 5, Unmasking: which secrets the server asks for, with U4's signatures on U3."""

    round: int
    survivors: tuple[str, ...]
    dropped: tuple[str, ...]
    signatures: tuple[SurvivorSignature, ...]


@message("secagg.named_share")
@dataclass(frozen=True)
class NamedShare(Message):
    owner: str
    share: bytes


@message("secagg.unmask_shares", reply_to=UnmaskRequest)
@dataclass(frozen=True)
class UnmaskShares(Message):
    """Self-mask seed shares of survivors and mask-key shares of dropped parties."""

    round: int
    seed_shares: tuple[NamedShare, ...]
    key_shares: tuple[NamedShare, ...]
