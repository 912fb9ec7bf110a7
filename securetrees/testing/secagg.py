"""Test helpers for secure aggregation: a server that runs the rounds step by step.

:class:`ScriptedRound` sends the honest R1-R3 requests through the real server
party, then lets a test craft R4 and R5 (e.g. show different survivor sets to
different parties, or ask for both secrets of one party) to check that clients
refuse.  Test-only: it is not part of the protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from securetrees.secagg.messages import (
    AdvertiseRound,
    ConsistencyRequest,
    MaskedInput,
    MaskRequest,
    RoundDirectory,
    RoundKey,
    RoundKeyEntry,
    RoundShares,
    SealedShare,
    SurvivorSignature,
    UnmaskRequest,
    UnmaskShares,
)
from securetrees.secagg.roles import SecAggServer

__all__ = ["ScriptedRound"]


@dataclass
class ScriptedRound:
    server: SecAggServer
    round: int
    length: int
    keys: dict[str, RoundKey] = field(default_factory=dict)
    shares: dict[str, RoundShares] = field(default_factory=dict)
    masked: dict[str, MaskedInput] = field(default_factory=dict)

    def advertise(self) -> dict[str, RoundKey]:
        self.keys = self.server.call_many(
            {p: AdvertiseRound(self.round, self.length) for p in self.server.members},
            expect=RoundKey, allow_missing=True,
        )
        return self.keys

    def entries(self) -> tuple[RoundKeyEntry, ...]:
        return tuple(RoundKeyEntry(p, k.public) for p, k in sorted(self.keys.items()))

    def share(self) -> dict[str, RoundShares]:
        self.shares = self.server.call_many(
            {p: RoundDirectory(self.round, self.entries()) for p in self.keys},
            expect=RoundShares, allow_missing=True,
        )
        return self.shares

    def inbox(self, recipient: str) -> tuple[SealedShare, ...]:
        return tuple(s for r in self.shares.values() for s in r.shares if s.recipient == recipient)

    def mask(self) -> dict[str, MaskedInput]:
        u2 = tuple(sorted(self.shares))
        self.masked = self.server.call_many(
            {p: MaskRequest(self.round, u2, self.inbox(p)) for p in u2},
            expect=MaskedInput, allow_missing=True,
        )
        return self.masked

    def consistency(
        self, shown: Mapping[str, Iterable[str]] | None = None
    ) -> dict[str, SurvivorSignature]:
        """R4; ``shown`` overrides the survivor set shown to some parties."""
        u3 = tuple(sorted(self.masked))
        shown = shown or {}
        return self.server.call_many(
            {p: ConsistencyRequest(self.round, tuple(shown.get(p, u3))) for p in u3},
            expect=SurvivorSignature, allow_missing=True,
        )

    def unmask(self, to: Iterable[str], request: UnmaskRequest) -> dict[str, UnmaskShares]:
        return self.server.call_many({p: request for p in to}, expect=UnmaskShares)
