"""FRF-Revoc (Protocol 3) with forest epochs, at the CS (``specs/revfrf.md``, "Revocation").

:meth:`CSRevocation.on_revoke` runs the paper's lines in order, one method per step:
accept the signed request (line 2, every check before any change), destroy the revoked
participant's nodes (lines 3-7), start the new epoch and have the remaining participants
re-sign their surviving nodes (line 16), refresh the destroyed splits with the CC at the
second level (lines 9-12), rebuild (line 8) and have the KGC revoke the key (line 15).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from securetrees.dtpkc import Ciphertext, PublicKey, hencref
from securetrees.errors import ProtocolError, RevokedError, UnexpectedMessage
from securetrees.protocols.revfrf.cs_state import ArchivedSplit, TreeNode
from securetrees.protocols.revfrf.cs_training import CSTraining, Draw
from securetrees.protocols.revfrf.errors import RevocationRefused
from securetrees.protocols.revfrf.forest import RevTree
from securetrees.protocols.revfrf.messages import (
    Ack,
    EpochAck,
    EpochNotice,
    KGCRevoke,
    RefreshReply,
    RefreshRequest,
    RevokeReply,
    RevokeRequest,
)
from securetrees.protocols.revfrf.signing import node_message, verify_revocation
from securetrees.runtime import Network, handles
from securetrees.signing import verify

__all__ = ["CSRevocation", "RevocationRecord"]


@dataclass(frozen=True)
class RevocationRecord:
    """What one FRF-Revoc run did: the epoch it started, the nodes it destroyed (all nodes,
    and the internal ones whose splits were destroyed), the splits it rebuilt, the wall and CPU
    time of the rebuild (FLE-Expan, all parties in this process) and the wall time of the
    second-level refresh."""

    participant: str
    level: int
    epoch: int
    destroyed: int
    destroyed_splits: int
    rebuilt: int
    rebuild_seconds: float
    rebuild_cpu_seconds: float
    refresh_seconds: float


@dataclass(frozen=True)
class Destroyed:
    """FRF-Revoc lines 3-7: the leaves put in place of the destroyed nodes (the rebuild's
    frontier), the destroyed splits with their providers, and the number of nodes destroyed."""

    frontier: list[TreeNode]
    splits: list[ArchivedSplit]
    nodes: int


class CSRevocation(CSTraining):
    """The CS's FRF-Revoc (it rebuilds with FLE-Expan, so it extends the construction steps)."""

    def __init__(self, name: str, network: Network, **kwargs: Any) -> None:
        super().__init__(name, network, **kwargs)
        self.revocations: list[RevocationRecord] = []

    @handles(RevokeRequest)
    def on_revoke(self, sender: str, msg: RevokeRequest) -> RevokeReply:
        """FRF-Revoc (Protocol 3) with forest epochs; every check comes before any change."""
        p = msg.participant
        self._accept(sender, msg)
        self.logger.info("revoking %s (level %d): destroying its nodes, then rebuilding", p, msg.level)
        destroyed = self._destroy(p)
        self.epoch += 1
        self.revoked.add(p)
        self._requesters.pop(p, None)
        self._new_epoch(msg)
        t0 = time.perf_counter()
        self._refresh(msg, destroyed.splits if msg.level == 2 else [])
        t1, c1 = time.perf_counter(), time.thread_time()
        rebuilt = self.grow_forest(destroyed.frontier, self._rebuild_draw())  # line 8
        t2, c2 = time.perf_counter(), time.thread_time()
        self.call(self.kgc, KGCRevoke(msg), expect=Ack)  # line 15
        record = RevocationRecord(p, msg.level, self.epoch, destroyed.nodes, len(destroyed.splits), rebuilt,
                                  t2 - t1, c2 - c1, t1 - t0)
        self.revocations.append(record)
        return RevokeReply(self.epoch, destroyed.nodes, rebuilt)

    def _accept(self, sender: str, msg: RevokeRequest) -> None:
        """FRF-Revoc line 2: the participant asks for its own revocation, signed by its
        registered key, in the current epoch, with a fresh nonce, at level 1 or 2, and is not
        the last participant.  Refusal changes nothing.  Reveals to the CS: the request."""
        p = msg.participant
        if p in self.revoked:
            raise RevokedError(f"{p!r} has already been revoked")
        if sender != p or p not in self._keys:
            raise RevocationRefused("a participant asks for its own revocation only")
        verify_revocation(self._verify_keys, self._session, msg)
        if msg.epoch != self.epoch or msg.nonce in self._nonces:
            raise RevocationRefused("stale or replayed revocation request")
        if msg.level not in (1, 2):
            raise RevocationRefused("revocation level is 1 or 2")
        remaining = {q for q in self._keys if q not in self.revoked and q != p}
        if not remaining:
            raise RevocationRefused("revoking the last participant leaves no features")
        self._nonces.add(msg.nonce)

    def _destroy(self, p: str) -> Destroyed:
        """FRF-Revoc lines 3-7: destroy every node ``p`` provided, with its subtree, in every
        tree; a leaf with the node's stored FLE-Expan inputs (μ, depth) takes its place.  Local."""
        frontier: list[TreeNode] = []
        splits: list[ArchivedSplit] = []
        n_destroyed = 0
        for tree in self.trees:
            for k in tree.bfs():
                node = tree.nodes.get(k)
                if node is None or node.is_leaf or node.provider != p:
                    continue
                for d in tree.subtree(k)[1:]:
                    sub = tree.nodes.pop(d)
                    n_destroyed += 1
                    if sub.split is not None and sub.provider is not None:
                        splits.append(ArchivedSplit(sub.provider, sub.split))
                if node.split is not None:
                    splits.append(ArchivedSplit(p, node.split))
                n_destroyed += 1
                frontier.append(TreeNode(tree, tree.replace_with_leaf(k)))
        return Destroyed(frontier, splits, n_destroyed)

    def _new_epoch(self, msg: RevokeRequest) -> None:
        """FRF-Revoc line 16 and forest epochs: send every remaining participant the new epoch,
        the signed request and its surviving nodes; store their new signatures (verified).
        Reveals to each participant: which of its nodes survive."""
        refs: dict[str, list[TreeNode]] = defaultdict(list)
        for tree in self.trees:
            for node in tree.internal():
                refs[node.provider or ""].append(TreeNode(tree, node))
        requests = {
            q: EpochNotice(self.epoch, msg, tuple(self._ref(t, n) for t, n in refs.get(q, [])))
            for q in self._keys if q not in self.revoked
        }
        replies = self.call_many(requests, expect=EpochAck)
        for q, reply in replies.items():
            nodes = refs.get(q, [])
            if len(reply.signature) != len(nodes):
                raise UnexpectedMessage(f"malformed epoch acknowledgement from {q}")
            for (t, n), sig in zip(nodes, reply.signature, strict=True):
                if n.split is None:
                    raise ProtocolError("internal node without a split")
                verify(self._verify_keys[q], sig, node_message(self._session, t.index, n.id, self.epoch,
                                                               int(n.split.t1), int(n.split.t2)),
                       ProtocolError, "re-signed node")
                n.epoch, n.signature = self.epoch, sig

    def _refresh(self, msg: RevokeRequest, splits: list[ArchivedSplit]) -> None:
        """FRF-Revoc lines 9-12 (second level; empty at the first): the CC, then the CS, apply
        HEncRef to every destroyed split with a fresh ρ each, then forgotten; the CS archives
        the results.  Reveals to the CC: the destroyed ciphertexts."""
        reply = self.call(self.cc, RefreshRequest(msg, tuple(s.provider for s in splits),
                                                  tuple(int(s.split.t1) for s in splits),
                                                  tuple(int(s.split.t2) for s in splits)), expect=RefreshReply)
        if not len(reply.t1) == len(reply.t2) == len(reply.h) == len(splits):
            raise UnexpectedMessage("malformed refresh reply")
        for s, a, b, h in zip(splits, reply.t1, reply.t2, reply.h, strict=True):
            refreshed, _rho = hencref(Ciphertext.from_ints(PublicKey(self.params, h), a, b), rng=self._rng)
            self.archive.append(ArchivedSplit(s.provider, refreshed))  # ρ_CS is dropped here (line 12)

    def _rebuild_draw(self) -> Draw:
        """Per-node features for rebuilt nodes (line 8): ``max_features`` of the remaining
        columns, from a Generator per (tree, epoch) seeded by the forest's ML seed (not secret
        randomness)."""
        active = self.active_columns
        k = min(self.max_features, active.size)
        gens: dict[int, np.random.Generator] = {}

        def draw(tree: RevTree) -> np.ndarray[Any, np.dtype[np.int64]]:
            g = gens.get(tree.index)
            if g is None:
                g = gens[tree.index] = np.random.default_rng([self.ml_seed, tree.index, self.epoch])
            if k >= active.size:
                return active
            return np.sort(g.choice(active, size=k, replace=False)).astype(np.int64)

        return draw
