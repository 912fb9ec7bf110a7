"""RevFRF's servers: the CS (label owner, split scoring, prediction, revocation), the CC
(HoLT helper and HEncRef refresher) and the KGC role.

The CS and the CC extend :mod:`securetrees.dtpkc.twoserver`'s roles, so HoLT is the
one implementation of the project (batched: one CS↔CC round per tree level).  Steps
and what each party learns: ``specs/revfrf.md``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from protocols.revfrf.defaults import DEFAULT_HOLT
from protocols.revfrf.errors import RevocationRefused
from protocols.revfrf.forest import Node, RevTree, aggregate
from protocols.revfrf.messages import (
    Ack,
    EpochAck,
    EpochNotice,
    ExpandReply,
    ExpandRequest,
    KGCRevoke,
    NodeRef,
    ParHDecReply,
    ParHDecRequest,
    PathReply,
    PathRequest,
    PredictReply,
    PredictRequest,
    RefreshReply,
    RefreshRequest,
    RevokeReply,
    RevokeRequest,
    SplitReply,
    SplitRequest,
    TestReply,
    TestRequest,
)
from protocols.revfrf.signing import node_message, revocation_message
from securetrees.dtpkc import (
    KGC,
    Ciphertext,
    PublicKey,
    StrongKeyShare,
    WeakSecretKey,
    decrypt_weak,
    hencref,
    twoserver,
)
from securetrees.dtpkc.twoserver import HoLTParams
from securetrees.errors import KeyMismatchError, ProtocolError, RevokedError, UnexpectedMessage
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Network, Party, handles
from securetrees.signing import verify
from securetrees.trees import Criterion, GrowParams, best_splits, build_histograms

__all__ = ["CentralServer", "ComputationServer", "KeyCentre", "RevocationRecord"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Draw = Callable[[RevTree], IntArray]


def _verify_revocation(verify_keys: Mapping[str, bytes], session: bytes, msg: RevokeRequest) -> None:
    key = verify_keys.get(msg.participant)
    if key is None:
        raise RevocationRefused(f"no verification key registered for {msg.participant!r}")
    verify(key, msg.signature, revocation_message(session, msg.participant, msg.epoch, msg.level, msg.nonce),
           RevocationRefused, "revocation request")


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
class Level:
    """The (row, tree, node) triples of one prediction level whose node is internal."""

    row: IntArray
    tree: IntArray
    node: IntArray


@dataclass
class _Entry:
    tree: RevTree
    node: Node
    columns: IntArray


class CentralServer(twoserver.CentralServer):
    """The CS: label owner, FLE-Expan/FOS-Find driver, FT-Predict/FT-Test, FRF-Revoc."""

    def __init__(
        self,
        name: str,
        network: Network,
        *,
        share: StrongKeyShare,
        weak_key: WeakSecretKey,
        stats: Sequence[FloatArray],
        criterion: Criterion,
        task: str,
        grow: GrowParams,
        columns: Mapping[str, Sequence[int]],
        participant_keys: Mapping[str, PublicKey],
        verify_keys: Mapping[str, bytes],
        session: bytes,
        n_features: int,
        max_features: int,
        voting: str = "soft",
        ml_seed: int = 0,
        cc: str = "cc",
        kgc: str = "kgc",
        holt_params: HoLTParams = DEFAULT_HOLT,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> None:
        super().__init__(name, network, share=share, weak_key=weak_key, cc=cc, holt_params=holt_params, rng=rng)
        self.ml_seed = ml_seed
        self.criterion = criterion
        self.task = task
        self.grow = grow
        self.voting = voting
        self.kgc = kgc
        self.n_features = n_features
        self.max_features = max_features
        self._owner = {int(c): p for p, cols in columns.items() for c in cols}
        self._keys = dict(participant_keys)
        self._verify_keys = dict(verify_keys)
        self._session = session
        self.trees = [RevTree(t, np.asarray(s, dtype=np.float64)) for t, s in enumerate(stats)]
        self.epoch = 0
        self.revoked: set[str] = set()
        self.revocations: list[RevocationRecord] = []
        self.archive: list[tuple[str, Ciphertext]] = []
        self._nonces: set[bytes] = set()
        self._round = 0
        self._requesters: dict[str, PublicKey] = {}

    # ------------------------------------------------------------------ set-up

    def register_requester(self, name: str, pk: PublicKey) -> None:
        """Accept prediction requests from ``name`` under its weak key ``pk``."""
        if pk.params != self.params or pk.is_joint:
            raise KeyMismatchError("a requester's key is a weak key of this system")
        if name in self.revoked:
            raise RevokedError(f"{name!r} has been revoked")
        self._requesters[name] = pk

    @property
    def active_columns(self) -> IntArray:
        return np.array(sorted(c for c, p in self._owner.items() if p not in self.revoked), dtype=np.int64)

    # ------------------------------------------------------------------ construction

    def _may_split(self, node: Node) -> bool:
        g = self.grow
        if g.max_depth is not None and node.depth >= g.max_depth:
            return False
        if node.weight < g.min_samples_split or node.weight < 2 * g.min_samples_leaf:
            return False
        return not bool(self.criterion.is_pure(node.stats))

    def plant(self, sample_weight: Sequence[FloatArray]) -> list[tuple[RevTree, Node]]:
        """The root of every tree: its samples (weight > 0) and their statistics."""
        frontier = []
        for tree, w in zip(self.trees, sample_weight, strict=True):
            samples = np.flatnonzero(np.asarray(w) > 0).astype(np.int64)
            s = tree.sample_stats[samples].sum(axis=0)
            root = tree.new_node(0, samples, s, float(self.criterion.weight(s)), self.criterion.leaf_value(s))
            tree.root = root.id
            frontier.append((tree, root))
        return frontier

    def expand_layer(self, frontier: Sequence[tuple[RevTree, Node]], draw: Draw) -> list[tuple[RevTree, Node]]:
        """FLE-Expan + FOS-Find for one layer of the whole forest (spec steps 1-8): two rounds.
        Returns the next frontier (the new children, per tree in node order)."""
        layer = [_Entry(t, n, draw(t)) for t, n in frontier if self._may_split(n)]
        if not layer:
            return []
        rnd = self._round
        self._round += 1
        tasks: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for li, e in enumerate(layer):
            for c in e.columns.tolist():
                tasks[self._owner[c]].append((li, c))
        requests, node_lists = {}, {}
        for p, tl in tasks.items():
            if p in self.revoked:
                raise RevokedError(f"{p!r} has been revoked")
            lis = sorted({li for li, _ in tl})
            pos = {li: k for k, li in enumerate(lis)}
            sizes = [layer[li].node.samples.size for li in lis]
            offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            requests[p] = ExpandRequest(
                rnd,
                np.array([layer[li].tree.index for li in lis], dtype=np.int64),
                np.array([layer[li].node.id for li in lis], dtype=np.int64),
                offsets,
                np.concatenate([layer[li].node.samples for li in lis]).astype(np.int64),
                np.array([pos[li] for li, _ in tl], dtype=np.int64),
                np.array([c for _, c in tl], dtype=np.int64),
            )
            node_lists[p] = lis
        replies = self.call_many(requests, expect=ExpandReply)
        codes: dict[tuple[int, int], tuple[npt.NDArray[np.uint16], int, str, int]] = {}
        for p, reply in replies.items():
            tl = tasks[p]
            flat = np.asarray(reply.codes)
            n_codes = np.asarray(reply.n_codes, dtype=np.int64)
            need = sum(layer[li].node.samples.size for li, _ in tl)
            if reply.round != rnd or flat.shape != (need,) or n_codes.shape != (len(tl),):
                raise UnexpectedMessage(f"malformed expansion reply from {p}")
            at = 0
            for t, (li, c) in enumerate(tl):
                m = layer[li].node.samples.size
                part = flat[at:at + m].astype(np.uint16)
                at += m
                if not 1 <= n_codes[t] < 65535 or (m and int(part.max()) >= n_codes[t]):
                    raise UnexpectedMessage(f"candidate codes out of range from {p}")
                codes[(li, c)] = (part, int(n_codes[t]), p, t)
        wins = self._score(layer, codes)
        return self._upload(rnd, layer, codes, wins)

    def _score(self, layer: list[_Entry], codes: Mapping[tuple[int, int], tuple[npt.NDArray[np.uint16], int, str, int]]
               ) -> dict[int, tuple[int, int, FloatArray, FloatArray, bool]]:
        """FOS-Find lines 1-6, per tree with ``trees.best_splits``: li → (column, candidate,
        left stats, right stats, missing_left) for each node with a valid split."""
        by_tree: dict[int, list[int]] = defaultdict(list)
        for li, e in enumerate(layer):
            by_tree[e.tree.index].append(li)
        wins = {}
        for lis in by_tree.values():
            tree = layer[lis[0]].tree
            used = sorted({c for li in lis for c in layer[li].columns.tolist()})
            local = {c: j for j, c in enumerate(used)}
            n_rows = sum(layer[li].node.samples.size for li in lis)
            Xb = np.zeros((n_rows, len(used)), dtype=np.uint16)
            pos = np.empty(n_rows, dtype=np.int64)
            k_max = max(layer[li].columns.size for li in lis)
            slots = np.full((len(lis), k_max), -1, dtype=np.int64)
            n_bins = np.ones(len(used), dtype=np.int64)
            row = 0
            for i, li in enumerate(lis):
                e = layer[li]
                m = e.node.samples.size
                pos[row:row + m] = i
                for j, c in enumerate(e.columns.tolist()):
                    part, nc, _, _ = codes[(li, c)]
                    Xb[row:row + m, local[c]] = part
                    slots[i, j] = local[c]
                    n_bins[local[c]] = max(n_bins[local[c]], nc)
                row += m
            samples = np.concatenate([layer[li].node.samples for li in lis])
            stats = tree.sample_stats[samples]
            hist = build_histograms(Xb, pos, stats, len(lis), int(n_bins.max()), slots)  # type: ignore[arg-type]
            res = best_splits(hist, self.criterion, categorical=np.zeros(len(used), dtype=bool), n_bins=n_bins,
                              features=slots, min_samples_leaf=self.grow.min_samples_leaf,
                              min_gain=self.grow.min_gain)
            for i in np.flatnonzero(res.found).tolist():
                wins[lis[i]] = (used[int(res.feature[i])], int(res.bin[i]), res.left_stats[i], res.right_stats[i],
                                bool(res.missing_left[i]))
        return wins

    def _upload(self, rnd: int, layer: list[_Entry],
                codes: Mapping[tuple[int, int], tuple[npt.NDArray[np.uint16], int, str, int]],
                wins: Mapping[int, tuple[int, int, FloatArray, FloatArray, bool]]) -> list[tuple[RevTree, Node]]:
        """FOS-Find lines 7-9 (one round to every winner) and the children of each split node."""
        per_party: dict[str, list[int]] = defaultdict(list)
        for li in sorted(wins):
            col = wins[li][0]
            per_party[codes[(li, col)][2]].append(li)
        requests = {}
        for p, lis in per_party.items():
            requests[p] = SplitRequest(
                rnd, self.epoch,
                np.array([codes[(li, wins[li][0])][3] for li in lis], dtype=np.int64),
                np.array([wins[li][1] for li in lis], dtype=np.int64),
                np.array([layer[li].tree.index for li in lis], dtype=np.int64),
                np.array([layer[li].node.id for li in lis], dtype=np.int64),
            )
        replies = self.call_many(requests, expect=SplitReply) if requests else {}
        uploaded: dict[int, tuple[Ciphertext, bytes]] = {}
        for p, lis in per_party.items():
            r = replies[p]
            if not len(r.t1) == len(r.t2) == len(r.signature) == len(lis):
                raise UnexpectedMessage(f"malformed split upload from {p}")
            for li, a, b, sig in zip(lis, r.t1, r.t2, r.signature, strict=True):
                c = Ciphertext.from_ints(self._keys[p], a, b)
                e = layer[li]
                verify(self._verify_keys[p], sig, node_message(self._session, e.tree.index, e.node.id, self.epoch,
                                                               a, b), ProtocolError, "uploaded split")
                uploaded[li] = (c, sig)
        nxt: list[tuple[RevTree, Node]] = []
        crit = self.criterion
        for li, e in enumerate(layer):
            if li not in wins:
                continue
            col, b, ls, rs, miss = wins[li]
            part, _, p, _ = codes[(li, col)]
            go = part <= b
            n = e.node
            lft = e.tree.new_node(n.depth + 1, n.samples[go], ls, float(crit.weight(ls)), crit.leaf_value(ls), n.id)
            rgt = e.tree.new_node(n.depth + 1, n.samples[~go], rs, float(crit.weight(rs)), crit.leaf_value(rs), n.id)
            n.left, n.right = lft.id, rgt.id
            n.provider, n.column, n.missing_left = p, col, miss
            n.split, n.signature = uploaded[li]
            n.epoch = self.epoch
            nxt += [(e.tree, lft), (e.tree, rgt)]
        return nxt

    def grow_forest(self, frontier: list[tuple[RevTree, Node]], draw: Draw,
                    on_layer: Callable[[int], None] | None = None) -> int:
        """Expand layer after layer until no node can split; returns the number of splits made."""
        made = 0
        while frontier:
            nxt = self.expand_layer(frontier, draw)
            made += len(nxt) // 2
            self.logger.info("layer of %d nodes expanded: %d splits", len(frontier), len(nxt) // 2)
            frontier = nxt
            if on_layer is not None:
                on_layer(len(nxt) // 2)
        return made

    # ------------------------------------------------------------------ prediction

    def _ref(self, tree: RevTree, node: Node) -> NodeRef:
        if node.split is None:
            raise ProtocolError("a leaf has no split")
        return NodeRef(tree.index, node.id, node.epoch, int(node.split.t1), int(node.split.t2), node.signature)

    def _decide(self, requester: str, level: Level, xs: Sequence[Ciphertext]) -> BoolArray:
        """FT-Predict lines 4-7 for a level: batched HoLT of ``x < s + 1`` (i.e. ``x ≤ s``: left)
        for each (tree, node) with its ``[[x]]``, then ParHDec1 by each provider (one round) and
        ParHDec2 here.  Reveals to the CS: the path bits."""
        nodes = [self.trees[t].nodes[n] for t, n in zip(level.tree.tolist(), level.node.tolist(), strict=True)]
        pairs = []
        for node, cx in zip(nodes, xs, strict=True):
            if node.split is None or node.provider is None:
                raise ProtocolError("comparison at a leaf")
            pairs.append((cx, node.split.add_constant(1)))
        bits_enc = self.holt_many(pairs)
        groups = self._groups(level)
        for p in groups:
            if p in self.revoked:
                raise RevokedError(f"{p!r} has been revoked")
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

    def _walk(self, n_rows: int, decide: Callable[[Level], BoolArray]) -> FloatArray:
        """Level by level across the forest: ``decide`` answers "left?" for every (row, tree,
        node) whose current node is internal (arrays; one round or two per level)."""
        tabs = [t.arrays() for t in self.trees]
        cur = [np.full(n_rows, t.root, dtype=np.int64) for t in self.trees]
        while True:
            acts = [np.flatnonzero(~tab.leaf[c]) for tab, c in zip(tabs, cur, strict=True)]
            if not any(a.size for a in acts):
                break
            level = Level(
                np.concatenate(acts),
                np.concatenate([np.full(a.size, i, dtype=np.int64) for i, a in enumerate(acts)]),
                np.concatenate([c[a] for c, a in zip(cur, acts, strict=True)]),
            )
            left = np.asarray(decide(level), dtype=bool)
            at = 0
            for tab, c, a in zip(tabs, cur, acts, strict=True):
                go, nodes = left[at:at + a.size], c[a]
                c[a] = np.where(go, tab.left[nodes], tab.right[nodes])
                at += a.size
        leaves = [tab.value[c] for tab, c in zip(tabs, cur, strict=True)]
        return aggregate(leaves, self.task, self.voting)

    def _groups(self, level: Level) -> dict[str, IntArray]:
        """Positions of the level's items by provider of their node."""
        prov = np.array([self.trees[t].nodes[n].provider or "" for t, n in zip(level.tree.tolist(),
                                                                                   level.node.tolist(), strict=True)])
        return {str(p): np.flatnonzero(prov == p) for p in np.unique(prov).tolist()}

    def predict_vertical(self, batch: str, n_rows: int) -> FloatArray:
        """``predict(X)`` on rows held by the providers: one round per level (path bits only)."""

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
        then the comparison runs as in FT-Predict."""

        def decide(level: Level) -> BoolArray:
            groups = self._groups(level)
            replies = self.call_many({p: TestRequest(batch, level.row[idx], level.tree[idx], level.node[idx])
                                      for p, idx in groups.items()}, expect=TestReply)
            cts: dict[int, Ciphertext] = {}
            for p, idx in groups.items():
                r = replies[p]
                if not len(r.t1) == len(r.t2) == idx.size:
                    raise UnexpectedMessage(f"malformed FT-Test reply from {p}")
                for i, a, b in zip(idx.tolist(), r.t1, r.t2, strict=True):
                    cts[i] = Ciphertext.from_ints(self._keys[p], a, b)
            return self._decide(self.name, level, [cts[i] for i in range(level.row.size)])

        return self._walk(n_rows, decide)

    @handles(PredictRequest)
    def on_predict(self, sender: str, msg: PredictRequest) -> PredictReply:
        """FRF-Predict (Protocol 4) for one encrypted request; returns the output to the requester."""
        if sender in self.revoked:
            raise RevokedError(f"{sender!r} has been revoked")
        pk = self._requesters.get(sender)
        if pk is None:
            raise KeyMismatchError(f"unknown requester {sender!r}")
        if not len(msg.t1) == len(msg.t2) == self.n_features:
            raise UnexpectedMessage(f"a request has {self.n_features} encrypted features")
        x = [Ciphertext.from_ints(pk, a, b) for a, b in zip(msg.t1, msg.t2, strict=True)]

        def decide(level: Level) -> BoolArray:
            cols = [self.trees[t].nodes[n].column for t, n in zip(level.tree.tolist(), level.node.tolist(),
                                                                   strict=True)]
            return self._decide(sender, level, [x[c] for c in cols])

        return PredictReply(self._walk(1, decide)[0])

    # ------------------------------------------------------------------ revocation

    @handles(RevokeRequest)
    def on_revoke(self, sender: str, msg: RevokeRequest) -> RevokeReply:
        """FRF-Revoc (Protocol 3) with forest epochs; every check comes before any change."""
        p = msg.participant
        if p in self.revoked:
            raise RevokedError(f"{p!r} has already been revoked")
        if sender != p or p not in self._keys:
            raise RevocationRefused("a participant asks for its own revocation only")
        _verify_revocation(self._verify_keys, self._session, msg)
        if msg.epoch != self.epoch or msg.nonce in self._nonces:
            raise RevocationRefused("stale or replayed revocation request")
        if msg.level not in (1, 2):
            raise RevocationRefused("revocation level is 1 or 2")
        remaining = {q for q in self._keys if q not in self.revoked and q != p}
        if not remaining:
            raise RevocationRefused("revoking the last participant leaves no features")
        self._nonces.add(msg.nonce)
        self.logger.info("revoking %s (level %d): destroying its nodes, then rebuilding", p, msg.level)
        # Line 3-7: destroy every node p provided, with its subtree.
        frontier: list[tuple[RevTree, Node]] = []
        destroyed: list[tuple[str, Ciphertext]] = []
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
                        destroyed.append((sub.provider, sub.split))
                if node.split is not None:
                    destroyed.append((p, node.split))
                n_destroyed += 1
                frontier.append((tree, tree.replace_with_leaf(k)))
        self.epoch += 1
        self.revoked.add(p)
        self._requesters.pop(p, None)
        # Line 16 and forest epochs: survivors re-signed under the new epoch.
        self._new_epoch(msg)
        # Lines 9-12: second level, CC then CS refresh every destroyed split (HEncRef).
        t0 = time.perf_counter()
        splits = destroyed if msg.level == 2 else []
        reply = self.call(self.cc, RefreshRequest(msg, tuple(q for q, _ in splits),
                                                  tuple(int(c.t1) for _, c in splits),
                                                  tuple(int(c.t2) for _, c in splits)), expect=RefreshReply)
        if not len(reply.t1) == len(reply.t2) == len(reply.h) == len(splits):
            raise UnexpectedMessage("malformed refresh reply")
        for (q, _), a, b, h in zip(splits, reply.t1, reply.t2, reply.h, strict=True):
            refreshed, _rho = hencref(Ciphertext.from_ints(PublicKey(self.params, h), a, b), rng=self._rng)
            self.archive.append((q, refreshed))  # ρ_CS is dropped here (FRF-Revoc line 12)
        t1, c1 = time.perf_counter(), time.thread_time()
        # Line 8: rebuild the destroyed nodes without p.
        rebuilt = self.grow_forest(frontier, self._rebuild_draw())
        t2, c2 = time.perf_counter(), time.thread_time()
        # Line 15: the KGC revokes the key.
        self.call(self.kgc, KGCRevoke(msg), expect=Ack)
        record = RevocationRecord(p, msg.level, self.epoch, n_destroyed, len(destroyed), rebuilt, t2 - t1, c2 - c1,
                                  t1 - t0)
        self.revocations.append(record)
        return RevokeReply(self.epoch, n_destroyed, rebuilt)

    def _new_epoch(self, msg: RevokeRequest) -> None:
        """Send every remaining participant the new epoch and its surviving nodes; store the
        new signatures (verified)."""
        refs: dict[str, list[tuple[RevTree, Node]]] = defaultdict(list)
        for tree in self.trees:
            for node in tree.internal():
                refs[node.provider or ""].append((tree, node))
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

    def _rebuild_draw(self) -> Draw:
        """Per-node features for rebuilt nodes: ``max_features`` of the remaining columns, from a
        Generator per (tree, epoch) seeded by the forest's ML seed (not secret randomness)."""
        active = self.active_columns
        k = min(self.max_features, active.size)
        gens: dict[int, np.random.Generator] = {}

        def draw(tree: RevTree) -> IntArray:
            g = gens.get(tree.index)
            if g is None:
                g = gens[tree.index] = np.random.default_rng([self.ml_seed, tree.index, self.epoch])
            if k >= active.size:
                return active
            return np.sort(g.choice(active, size=k, replace=False)).astype(np.int64)

        return draw


class ComputationServer(twoserver.ComputationServer):
    """The CC: HoLT's second server, and HEncRef at second-level revocation (FRF-Revoc line 11)."""

    def __init__(
        self,
        name: str,
        network: Network,
        *,
        share: StrongKeyShare,
        weak_key: WeakSecretKey,
        directory: Mapping[str, PublicKey],
        verify_keys: Mapping[str, bytes],
        session: bytes,
        holt_params: HoLTParams = DEFAULT_HOLT,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> None:
        super().__init__(name, network, share=share, weak_key=weak_key, directory=directory,
                         holt_params=holt_params, rng=rng)
        self._names = dict(directory)
        self._verify_keys = dict(verify_keys)
        self._session = session
        self.revoked: set[str] = set()

    @handles(RefreshRequest)
    def on_refresh(self, sender: str, msg: RefreshRequest) -> RefreshReply:
        """Verify the revocation, HEncRef each destroyed split with a fresh ρ (then forgotten),
        and drop the revoked key from the directory.  Learns: the destroyed ciphertexts."""
        rev = msg.revocation
        _verify_revocation(self._verify_keys, self._session, rev)
        if rev.participant in self.revoked:
            raise RevokedError(f"{rev.participant!r} has already been revoked")
        if not len(msg.provider) == len(msg.t1) == len(msg.t2):
            raise UnexpectedMessage("one provider per split")
        self.logger.info("revocation of %s: refreshing %d destroyed splits", rev.participant, len(msg.t1))
        out1, out2, hs = [], [], []
        for q, a, b in zip(msg.provider, msg.t1, msg.t2, strict=True):
            pk = self._names.get(q)
            if pk is None:
                raise KeyMismatchError(f"no key for provider {q!r}")
            refreshed, _rho = hencref(Ciphertext.from_ints(pk, a, b), rng=self._rng)
            out1.append(int(refreshed.t1))
            out2.append(int(refreshed.t2))
            hs.append(int(refreshed.pk.h))
        self.revoked.add(rev.participant)
        self.remove_key(rev.participant)
        return RefreshReply(tuple(out1), tuple(out2), tuple(hs))


class KeyCentre(Party):
    """The KGC as a party: registered Ed25519 verification keys and key revocation
    (FRF-Revoc line 15).  Key issuance happens at set-up, offline (paper §5.2)."""

    role = "kgc"

    def __init__(self, name: str, network: Network, *, kgc: KGC, verify_keys: Mapping[str, bytes],
                 session: bytes) -> None:
        super().__init__(name, network)
        self.kgc = kgc
        self._verify_keys = dict(verify_keys)
        self._session = session

    @handles(KGCRevoke)
    def on_revoke(self, sender: str, msg: KGCRevoke) -> Ack:
        """Verify the participant's signed request, then revoke its key for good."""
        _verify_revocation(self._verify_keys, self._session, msg.revocation)
        self.logger.info("revoking the key of %s", msg.revocation.participant)
        self.kgc.revoke(msg.revocation.participant)
        return Ack()
