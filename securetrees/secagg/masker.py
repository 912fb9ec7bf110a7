"""Pairwise masks from session keys: the reusable core of secure aggregation (``specs/secagg.md``, "Two layers").

HybridTree (Algorithm 1, lines 5-6 and 20) and the histogram forest use this
directly from their own roles: each party makes one :class:`AgreementKey` per
session, publishes its public half, and builds a :class:`PairwiseMasker` from
the peers' public keys (one X25519 agreement per peer, once per session).  For
every round and purpose (a label such as ``"hybridtree/tree=3/leaves"``) it
derives fresh pair keys with HKDF and expands them with the PRG::

    y_u = x_u + sum_{v > u} PRG(k_uv) - sum_{v < u} PRG(k_uv)      (in the ring)

so the masks of one round and purpose cancel in the sum over all parties.  For
Paillier (HybridTree's guests) use ``ring = ZN(public_key.n)`` and add
:meth:`PairwiseMasker.net_mask` to the ciphertexts as plaintext constants; the
host decrypts the sum of ciphertexts and removes nothing.

Reveals: nothing beyond the sum, provided every party of the round contributes.
This layer has no dropout recovery: if a party is missing the masks do not
cancel.  The dropout-tolerant protocol is :mod:`securetrees.secagg.roles`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from securetrees.errors import ParameterError
from securetrees.secagg.keyagree import AgreementKey, KeyContext, derive_key
from securetrees.secagg.prg import MaskExpander, MaskTerm
from securetrees.secagg.rings import Ring, Vector

__all__ = ["MIN_PARTIES", "PairwiseMasker", "check_party_count"]

MIN_PARTIES = 3


def check_party_count(count: int) -> None:
    """Refuse fewer than three parties: with two, the sum reveals each input to the other party."""
    if count < MIN_PARTIES:
        raise ParameterError(
            f"secure aggregation needs at least {MIN_PARTIES} parties, got {count}: with two, "
            "each party learns the other's input from the sum"
        )


def mask_purpose(purpose: str, ring: Ring) -> str:
    """The purpose label bound into a mask key (includes the ring, so rings never share masks)."""
    return f"mask/{ring.label}/{purpose}"


class PairwiseMasker:
    """One party's pairwise-mask keys for one session.

    ``peers`` maps every other party of the session to its X25519 public key.
    """

    def __init__(
        self, me: str, key: AgreementKey, peers: Mapping[str, bytes], *, session: bytes
    ) -> None:
        if me in peers:
            raise ParameterError("a party is not its own peer")
        check_party_count(len(peers) + 1)
        if len(session) < 16:
            raise ParameterError("a session id must have at least 16 bytes")
        self.me = me
        self.session = bytes(session)
        self._shared = {peer: key.agree(public) for peer, public in peers.items()}
        self._expander = MaskExpander()

    @property
    def peers(self) -> tuple[str, ...]:
        return tuple(sorted(self._shared))

    def __repr__(self) -> str:
        return f"PairwiseMasker(me={self.me!r}, peers={list(self.peers)!r})"

    def pair_key(self, peer: str, *, round: int, purpose: str) -> bytes:
        """The 32-byte mask key shared with ``peer`` for one round and purpose."""
        shared = self._shared.get(peer)
        if shared is None:
            raise ParameterError(f"{peer!r} is not a peer of this session")
        return derive_key(shared, KeyContext(self.session, round, purpose, (self.me, peer)))

    def net_mask(
        self,
        length: int,
        *,
        ring: Ring,
        round: int,
        purpose: str,
        peers: Iterable[str] | None = None,
    ) -> Vector:
        """``sum_{v > me} PRG(k) - sum_{v < me} PRG(k)`` over ``peers`` (default: all)."""
        return self._add_masks(ring.zeros(length), ring, round, purpose, peers)

    def mask(
        self,
        values: Any,
        *,
        ring: Ring,
        round: int,
        purpose: str,
        peers: Iterable[str] | None = None,
    ) -> Vector:
        """``values + net_mask`` in ``ring``."""
        return self._add_masks(ring.check(values), ring, round, purpose, peers)

    def _add_masks(
        self, acc: Vector, ring: Ring, round: int, purpose: str, peers: Iterable[str] | None
    ) -> Vector:
        """``acc`` (a private ring vector, reused) plus the net mask, in one pass."""
        chosen = self.peers if peers is None else tuple(sorted(set(peers) - {self.me}))
        check_party_count(len(chosen) + 1)
        label = mask_purpose(purpose, ring)
        masks = [
            MaskTerm(self.pair_key(peer, round=round, purpose=label), subtract=peer < self.me)
            for peer in chosen
        ]
        return ring.finish(ring.accumulate(acc, masks, self._expander))
