"""The CS's prediction steps (``specs/revfrf.md``, "Prediction"): FRF-Predict / FT-Predict
(Protocols 4-5) for an encrypted request, FRF-Test / FT-Test (Protocols 6-7) and plain
vertical prediction for rows held by the providers.

Every path walks the forest level by level (:meth:`CSPrediction._walk`): for all trees at
once, one question per (row, tree, node) whose node is internal ("left?"), answered by the
providers (vertical), or by HoLT and the providers' ParHDec1 (:meth:`CSPrediction._decide`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.dtpkc import Ciphertext, PublicKey, decrypt_weak
from securetrees.errors import KeyMismatchError, ProtocolError, RevokedError, UnexpectedMessage
from securetrees.protocols.revfrf.cs_state import CSState
from securetrees.protocols.revfrf.forest import aggregate
from securetrees.protocols.revfrf.messages import (
    ParHDecReply,
    ParHDecRequest,
    PathReply,
    PathRequest,
    PredictReply,
    PredictRequest,
    TestReply,
    TestRequest,
)
from securetrees.psi.roles import random_permutation
from securetrees.runtime import handles

__all__ = ["MAX_HOLT_OUTPUTS", "CSPrediction", "Level"]

MAX_HOLT_OUTPUTS = 1 << 16
"""The most ciphertexts one HoLT reply carries (comparisons × keys): a level's comparisons go in
as many rounds as that needs (about 64 MiB a reply at 2048 bits, within the message limit); the
split depends only on the level's size and the number of keys."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Level:
    """The (row, tree, node) comparisons of one prediction level.  ``real`` marks those whose
    node is the path's current (internal) node; the others pad a path that already reached
    its leaf by repeating its last comparison (:meth:`CSPrediction._walk`)."""

    row: IntArray
    tree: IntArray
    node: IntArray
    real: BoolArray


class CSPrediction(CSState):
    """The CS's FRF-Predict, FRF-Test and vertical prediction."""

    @property
    def padded_depth(self) -> int:
        """The number of levels a padded walk runs: the depth of the forest's deepest leaf
        (a forest parameter, the same for every request)."""
        return max((n.depth - t.nodes[t.root].depth for t in self.trees for n in t.nodes.values() if n.is_leaf),
                   default=0)

    def _holt_keys(self) -> list[PublicKey]:
        """Every live participant's key: each HoLT batch of prediction asks the CC for every
        comparison's bit under ``h_CS · h_u`` for each of them, so the keys the CC sees are
        the same in every batch and never name a node's provider."""
        return [self._keys[p] for p in sorted(self._keys) if p not in self.revoked]

    def _decide(self, requester: str, level: Level, xs: Sequence[Ciphertext]) -> BoolArray:
        """FT-Predict lines 4-7 for a level: batched HoLT of ``x < s + 1`` (i.e. ``x ≤ s``: left)
        for each (tree, node) with its ``[[x]]``, in a secret random order and with every bit
        under every live participant's key (:meth:`_holt_keys`), in rounds of at most
        :data:`MAX_HOLT_OUTPUTS` ciphertexts, then ParHDec1 of the real
        comparisons by each provider (one round) and ParHDec2 here; a padding comparison's bit
        is dropped unopened.  Reveals to the CS: the path bits; to the CC: the batch size and
        per comparison HoLT's blurred magnitude (``specs/revfrf.md``)."""
        nodes = [self.trees[t].nodes[n] for t, n in zip(level.tree.tolist(), level.node.tolist(), strict=True)]
        pairs = []
        for node, cx in zip(nodes, xs, strict=True):
            if node.split is None or node.provider is None:
                raise ProtocolError("comparison at a leaf")
            pairs.append((cx, node.split.add_constant(1)))
        order = random_permutation(len(pairs), self._rng)
        keys = self._holt_keys()
        per_call = max(1, MAX_HOLT_OUTPUTS // max(1, len(keys)))
        queue = [pairs[i] for i in order.tolist()]
        shuffled = [c for at in range(0, len(queue), per_call)
                    for c in self.holt_many(queue[at:at + per_call], fan_out=keys)]
        bits_enc: list[Ciphertext] = [shuffled[0]] * len(pairs)
        for j, i in enumerate(order.tolist()):
            bits_enc[i] = shuffled[j]
        groups = self._groups(level)
        for p in groups:
            self._check_not_revoked(p)
        requests = {
            p: ParHDecRequest(requester,
                              tuple(self._ref(self.trees[int(level.tree[i])], nodes[i]) for i in idx.tolist()),
                              tuple(int(bits_enc[i].t1) for i in idx.tolist()),
                              tuple(int(bits_enc[i].t2) for i in idx.tolist()))
            for p, idx in groups.items()
        }
        replies = self.call_many(requests, expect=ParHDecReply)
        out = np.zeros(len(nodes), dtype=bool)
        for p, idx in groups.items():
            r = replies[p]
            if not len(r.t1) == len(r.t2) == idx.size:
                raise UnexpectedMessage(f"malformed ParHDec1 reply from {p}")
            for i, a, b in zip(idx.tolist(), r.t1, r.t2, strict=True):
                bit = decrypt_weak(self._weak, Ciphertext.from_ints(self.public_key, a, b))
                if bit not in (0, 1):
                    raise ProtocolError("HoLT result is not a bit")
                out[i] = bit == 1
        return out

    def _walk(self, n_rows: int, decide: Callable[[Level], BoolArray], *, pad: bool = False) -> FloatArray:
        """Level by level across the forest: ``decide`` answers "left?" for every (row, tree,
        node) whose current node is internal (arrays; one round or two per level), then
        FRF-Predict lines 5-9 aggregate the leaves.  Reveals to the CS: the paths and the output.

        ``pad`` (the paths through HoLT): every level holds one comparison per row and per
        tree whose root is internal, for :attr:`padded_depth` levels; a path at its leaf
        repeats its last comparison (a real node, the same inputs, fresh blinding).  So the
        number of levels and each batch's size depend only on the request's size and the
        forest, never on where the paths go."""
        tabs = [t.arrays() for t in self.trees]
        cur = [np.full(n_rows, t.root, dtype=np.int64) for t in self.trees]
        last = [c.copy() for c in cur]
        levels = self.padded_depth if pad else None
        done = 0
        while levels is None or done < levels:
            internal = [~tab.leaf[c] for tab, c in zip(tabs, cur, strict=True)]
            if pad:
                acts = [np.arange(n_rows) if not tab.leaf[t.root] else np.zeros(0, dtype=np.int64)
                        for tab, t in zip(tabs, self.trees, strict=True)]
            else:
                acts = [np.flatnonzero(i) for i in internal]
            if not any(a.size for a in acts):
                break
            asked = [np.where(i[a], c[a], p[a]) for i, c, p, a in zip(internal, cur, last, acts, strict=True)]
            level = Level(
                np.concatenate(acts).astype(np.int64),
                np.concatenate([np.full(a.size, i, dtype=np.int64) for i, a in enumerate(acts)]),
                np.concatenate(asked).astype(np.int64),
                np.concatenate([i[a] for i, a in zip(internal, acts, strict=True)]),
            )
            left = np.asarray(decide(level), dtype=bool)
            at = 0
            for tab, c, p, i, a, q in zip(tabs, cur, last, internal, acts, asked, strict=True):
                go, real = left[at:at + a.size], i[a]
                moving = a[real]
                c[moving] = np.where(go[real], tab.left[c[moving]], tab.right[c[moving]])
                p[a] = q
                at += a.size
            done += 1
        if any((~tab.leaf[c]).any() for tab, c in zip(tabs, cur, strict=True)):
            raise ProtocolError("a path did not reach its leaf within the forest's depth")
        leaves = [tab.value[c] for tab, c in zip(tabs, cur, strict=True)]
        return aggregate(leaves, self.task, self.voting)

    def _groups(self, level: Level) -> dict[str, IntArray]:
        """Positions of the level's real comparisons by provider of their node."""
        prov = np.array([self.trees[t].nodes[n].provider or "" for t, n in zip(level.tree.tolist(),
                                                                                   level.node.tolist(), strict=True)])
        return {str(p): np.flatnonzero((prov == p) & level.real) for p in np.unique(prov[level.real]).tolist()}

    def predict_vertical(self, batch: str, n_rows: int) -> FloatArray:
        """``predict(X)`` on rows held by the providers: one round per level.  Reveals to the
        CS: the path bits only; to each provider: which of its nodes each row reaches."""

        def decide(level: Level) -> BoolArray:
            groups = self._groups(level)
            replies = self.call_many({p: PathRequest(batch, level.row[idx], level.tree[idx], level.node[idx])
                                      for p, idx in groups.items()}, expect=PathReply)
            out = np.zeros(level.row.size, dtype=bool)
            for p, idx in groups.items():
                bits = np.asarray(replies[p].left)
                if bits.shape != idx.shape or bits.dtype != np.bool_:
                    raise UnexpectedMessage(f"malformed path bits from {p}")
                out[idx] = bits
            return out

        return self._walk(n_rows, decide)

    def predict_test(self, batch: str, n_rows: int) -> FloatArray:
        """FRF-Test / FT-Test (Protocols 6-7, erratum 7): each provider encrypts its own value,
        then the comparison runs as in FT-Predict, padded (:meth:`_walk`); a padding comparison
        reuses the value's ciphertext from its earlier level, so the providers are asked only
        for the real ones.  Reveals to the CS: the path bits; to the CC: the batch sizes and
        HoLT's blurred magnitude per comparison."""
        known: dict[tuple[int, int, int], Ciphertext] = {}

        def decide(level: Level) -> BoolArray:
            groups = self._groups(level)
            replies = self.call_many({p: TestRequest(batch, level.row[idx], level.tree[idx], level.node[idx])
                                      for p, idx in groups.items()}, expect=TestReply)
            for p, idx in groups.items():
                r = replies[p]
                if not len(r.t1) == len(r.t2) == idx.size:
                    raise UnexpectedMessage(f"malformed FT-Test reply from {p}")
                for i, a, b in zip(idx.tolist(), r.t1, r.t2, strict=True):
                    key = (int(level.row[i]), int(level.tree[i]), int(level.node[i]))
                    known[key] = Ciphertext.from_ints(self._keys[p], a, b)
            cts = [known[(int(r), int(t), int(n))] for r, t, n in zip(level.row, level.tree, level.node, strict=True)]
            return self._decide(self.name, level, cts)

        return self._walk(n_rows, decide, pad=True)

    @handles(PredictRequest)
    def on_predict(self, sender: str, msg: PredictRequest) -> PredictReply:
        """FRF-Predict (Protocol 4) for one encrypted request; returns the output to the
        requester.  At each node the CS compares the feature's ciphertext for the node's
        missing side (``PredictRequest``), which it knows.  Reveals to the CS: the request's
        path in every tree and the output."""
        if sender in self.revoked:
            raise RevokedError(f"{sender!r} has been revoked")
        pk = self._requesters.get(sender)
        if pk is None:
            raise KeyMismatchError(f"unknown requester {sender!r}")
        if not len(msg.t1) == len(msg.t2) == self.n_features:
            raise UnexpectedMessage(f"a request has {self.n_features} encrypted features")
        high = [Ciphertext.from_ints(pk, a, b) for a, b in zip(msg.t1, msg.t2, strict=True)]
        if len(msg.low_t1) != len(msg.low_t2) or len(msg.low_t1) not in (0, self.n_features):
            raise UnexpectedMessage(f"a request has none or {self.n_features} missing-left ciphertexts")
        low = [Ciphertext.from_ints(pk, a, b) for a, b in zip(msg.low_t1, msg.low_t2, strict=True)] or high

        def decide(level: Level) -> BoolArray:
            nodes = [self.trees[t].nodes[n] for t, n in zip(level.tree.tolist(), level.node.tolist(), strict=True)]
            return self._decide(sender, level, [(low if n.missing_left else high)[n.column] for n in nodes])

        return PredictReply(self._walk(1, decide, pad=True)[0])
