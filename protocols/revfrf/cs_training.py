"""The CS's construction steps: FLE-Expan (Protocol 1) and FOS-Find (Protocol 2), one layer of
the whole forest per round pair (``specs/revfrf.md``, "Construction", steps 1-8).

:meth:`CSTraining.expand_layer` runs one layer: :meth:`~CSTraining._expand` (FLE-Expan, one
round to the column owners), :meth:`~CSTraining._score` (FOS-Find lines 1-6, local) and
:meth:`~CSTraining._upload` (FOS-Find lines 7-9, one round to the winners), then
:meth:`~CSTraining._place` moves the samples to the children.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from securetrees.dtpkc import Ciphertext
from securetrees.errors import ProtocolError, UnexpectedMessage
from securetrees.protocols.revfrf.cs_state import CSState, TreeNode
from securetrees.protocols.revfrf.forest import Node, RevTree
from securetrees.protocols.revfrf.messages import ExpandReply, ExpandRequest, SplitReply, SplitRequest
from securetrees.protocols.revfrf.missing import MISSING_CODE
from securetrees.protocols.revfrf.signing import node_message
from securetrees.signing import verify
from securetrees.trees import best_splits, build_histograms

__all__ = ["CSTraining", "Draw", "Entry", "Task", "TaskCodes", "Upload", "Win"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Codes = npt.NDArray[np.uint16]
Draw = Callable[[RevTree], IntArray]
"""The features drawn for a node of a tree (``TreeDraws.node_features``, or the rebuild's)."""


class Entry(NamedTuple):
    """A node of the layer that may split, with the columns drawn for it."""

    tree: RevTree
    node: Node
    columns: IntArray


class Task(NamedTuple):
    """One (node, column) task of a participant: the node's position in the layer and the column."""

    entry: int
    column: int


class TaskCodes(NamedTuple):
    """A participant's answer to one task: the candidate code of each of the node's samples,
    the number of codes, the participant, and the task's index in its request."""

    codes: Codes
    n_codes: int
    provider: str
    task: int


class Win(NamedTuple):
    """The best split of a node (FOS-Find lines 1-6)."""

    column: int
    candidate: int
    left_stats: FloatArray
    right_stats: FloatArray
    missing_left: bool


class Upload(NamedTuple):
    """A winner's upload (FOS-Find line 8): ``[[s]]`` under its key and its node signature."""

    split: Ciphertext
    signature: bytes


class CSTraining(CSState):
    """The CS's FLE-Expan/FOS-Find driver."""

    def _may_split(self, node: Node) -> bool:
        """FLE-Expan lines 1-4: the stopping rules (depth, weight, purity)."""
        g = self.grow
        if g.max_depth is not None and node.depth >= g.max_depth:
            return False
        if node.weight < g.min_samples_split or node.weight < 2 * g.min_samples_leaf:
            return False
        return not bool(self.criterion.is_pure(node.stats))

    def plant(self, sample_weight: Sequence[FloatArray]) -> list[TreeNode]:
        """The root of every tree: its samples (weight > 0) and their statistics."""
        frontier = []
        for tree, w in zip(self.trees, sample_weight, strict=True):
            samples = np.flatnonzero(np.asarray(w) > 0).astype(np.int64)
            s = tree.sample_stats[samples].sum(axis=0)
            root = tree.new_node(0, samples, s, float(self.criterion.weight(s)), self.criterion.leaf_value(s))
            tree.root = root.id
            frontier.append(TreeNode(tree, root))
        return frontier

    def expand_layer(self, frontier: Sequence[tuple[RevTree, Node]], draw: Draw) -> list[TreeNode]:
        """FLE-Expan + FOS-Find for one layer of the whole forest (spec steps 1-8): two rounds.
        Returns the next frontier (the new children, per tree in node order)."""
        layer = [Entry(t, n, draw(t)) for t, n in frontier if self._may_split(n)]
        if not layer:
            return []
        rnd = self._round
        self._round += 1
        codes = self._expand(rnd, layer)
        wins = self._score(layer, codes)
        uploads = self._upload(rnd, layer, codes, wins)
        return self._place(layer, codes, wins, uploads)

    def _expand(self, rnd: int, layer: Sequence[Entry]) -> dict[Task, TaskCodes]:
        """FLE-Expan lines 5-13 (spec steps 2-4): each owner of a drawn column gets the sample
        selection μ of the nodes that drew its columns and returns each sample's candidate code
        per (node, column).  Reveals to the participant: μ of those nodes and which of its
        columns were drawn; to the CS: the codes (at most k ordered groups of each node)."""
        tasks: dict[str, list[Task]] = defaultdict(list)
        for li, e in enumerate(layer):
            for c in e.columns.tolist():
                tasks[self._owner[c]].append(Task(li, c))
        requests = {}
        for p, tl in tasks.items():
            self._check_not_revoked(p)
            lis = sorted({t.entry for t in tl})
            pos = {li: k for k, li in enumerate(lis)}
            sizes = [layer[li].node.samples.size for li in lis]
            offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            requests[p] = ExpandRequest(
                rnd,
                np.array([layer[li].tree.index for li in lis], dtype=np.int64),
                np.array([layer[li].node.id for li in lis], dtype=np.int64),
                offsets,
                np.concatenate([layer[li].node.samples for li in lis]).astype(np.int64),
                np.array([pos[t.entry] for t in tl], dtype=np.int64),
                np.array([t.column for t in tl], dtype=np.int64),
            )
        replies = self.call_many(requests, expect=ExpandReply)
        codes: dict[Task, TaskCodes] = {}
        for p, reply in replies.items():
            tl = tasks[p]
            flat = np.asarray(reply.codes)
            n_codes = np.asarray(reply.n_codes, dtype=np.int64)
            need = sum(layer[t.entry].node.samples.size for t in tl)
            if reply.round != rnd or flat.shape != (need,) or n_codes.shape != (len(tl),):
                raise UnexpectedMessage(f"malformed expansion reply from {p}")
            at = 0
            for k, task in enumerate(tl):
                m = layer[task.entry].node.samples.size
                part = flat[at:at + m].astype(np.uint16)
                at += m
                present = part[part != MISSING_CODE]
                if not 1 <= n_codes[k] < MISSING_CODE or (present.size and int(present.max()) >= n_codes[k]):
                    raise UnexpectedMessage(f"candidate codes out of range from {p}")
                codes[task] = TaskCodes(part, int(n_codes[k]), p, k)
        return codes

    def _score(self, layer: Sequence[Entry], codes: Mapping[Task, TaskCodes]) -> dict[int, Win]:
        """FOS-Find lines 1-6 (spec step 5), per tree with ``trees.best_splits`` over a histogram
        of (node, column, code), missing codes in the missing slot (tried on both sides): the
        best split of each node that has a valid one, by its position in the layer.  Local;
        reveals nothing to anyone."""
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
                    tc = codes[Task(li, c)]
                    Xb[row:row + m, local[c]] = tc.codes
                    slots[i, j] = local[c]
                    n_bins[local[c]] = max(n_bins[local[c]], tc.n_codes)
                row += m
            samples = np.concatenate([layer[li].node.samples for li in lis])
            stats = tree.sample_stats[samples]
            hist = build_histograms(Xb, pos, stats, len(lis), int(n_bins.max()), slots,  # type: ignore[arg-type]
                                    missing_bin=MISSING_CODE)
            res = best_splits(hist, self.criterion, categorical=np.zeros(len(used), dtype=bool), n_bins=n_bins,
                              features=slots, min_samples_leaf=self.grow.min_samples_leaf,
                              min_gain=self.grow.min_gain)
            for i in np.flatnonzero(res.found).tolist():
                wins[lis[i]] = Win(used[int(res.feature[i])], int(res.bin[i]), res.left_stats[i],
                                   res.right_stats[i], bool(res.missing_left[i]))
        return wins

    def _upload(self, rnd: int, layer: Sequence[Entry], codes: Mapping[Task, TaskCodes],
                wins: Mapping[int, Win]) -> dict[int, Upload]:
        """FOS-Find lines 7-9 (spec steps 6-8): one round to every winner, which uploads
        ``HoEnc(pk_u, s)`` and its signature; the CS validates both.  Reveals to the winner:
        which of its candidates won and the split's missing side; to the CS: a ciphertext per node."""
        per_party: dict[str, list[int]] = defaultdict(list)
        for li in sorted(wins):
            per_party[codes[Task(li, wins[li].column)].provider].append(li)
        requests = {}
        for p, lis in per_party.items():
            requests[p] = SplitRequest(
                rnd, self.epoch,
                np.array([codes[Task(li, wins[li].column)].task for li in lis], dtype=np.int64),
                np.array([wins[li].candidate for li in lis], dtype=np.int64),
                np.array([layer[li].tree.index for li in lis], dtype=np.int64),
                np.array([layer[li].node.id for li in lis], dtype=np.int64),
                np.array([wins[li].missing_left for li in lis], dtype=bool),
            )
        replies = self.call_many(requests, expect=SplitReply) if requests else {}
        uploaded: dict[int, Upload] = {}
        for p, lis in per_party.items():
            r = replies[p]
            if not len(r.t1) == len(r.t2) == len(r.signature) == len(lis):
                raise UnexpectedMessage(f"malformed split upload from {p}")
            for li, a, b, sig in zip(lis, r.t1, r.t2, r.signature, strict=True):
                c = Ciphertext.from_ints(self._keys[p], a, b)
                e = layer[li]
                verify(self._verify_keys[p], sig, node_message(self._session, e.tree.index, e.node.id, self.epoch,
                                                               a, b), ProtocolError, "uploaded split")
                uploaded[li] = Upload(c, sig)
        return uploaded

    def _place(self, layer: Sequence[Entry], codes: Mapping[Task, TaskCodes], wins: Mapping[int, Win],
               uploads: Mapping[int, Upload]) -> list[TreeNode]:
        """FOS-Find line 9 (spec step 8): store each split node and move its samples to the
        children (the CS knows the winning partition from the codes).  Local."""
        nxt: list[TreeNode] = []
        crit = self.criterion
        for li, e in enumerate(layer):
            win = wins.get(li)
            if win is None:
                continue
            tc = codes[Task(li, win.column)]
            go = np.where(tc.codes == MISSING_CODE, win.missing_left, tc.codes <= win.candidate)
            n = e.node
            ls, rs = win.left_stats, win.right_stats
            lft = e.tree.new_node(n.depth + 1, n.samples[go], ls, float(crit.weight(ls)), crit.leaf_value(ls), n.id)
            rgt = e.tree.new_node(n.depth + 1, n.samples[~go], rs, float(crit.weight(rs)), crit.leaf_value(rs), n.id)
            n.left, n.right = lft.id, rgt.id
            n.provider, n.column, n.missing_left = tc.provider, win.column, win.missing_left
            n.split, n.signature = uploads[li]
            n.epoch = self.epoch
            nxt += [TreeNode(e.tree, lft), TreeNode(e.tree, rgt)]
        return nxt

    def grow_forest(self, frontier: list[TreeNode], draw: Draw,
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
