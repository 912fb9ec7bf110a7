"""The master role of Federated Forest (Algorithms 2, 4 / 6, 8).

The master draws the bootstrap sample and the candidate features exactly as
``securetrees.trees.train_forest`` does, tells each client only its own
candidates, expands a whole layer per round of each step, picks the global best
of the clients' local bests, relays the winner's partition, and keeps per tree
the shape, each node's owner, weight and value, never a threshold.  Prediction:
one round per forest (intersection of the clients' leaf sets, Proposition 1) or
the classical round trip per node.  See ``specs/federated_forest.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError, ProtocolError, UnexpectedMessage
from securetrees.progress import progress as progress_bar
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.checkpoint import (
    CheckpointStore,
    MasterState,
    TreeState,
    WorkState,
    rng_state,
    set_rng_state,
)
from securetrees.protocols.federated_forest.cover import cover_features, reference_ancestor
from securetrees.protocols.federated_forest.ids import check_aligned, split_digests
from securetrees.protocols.federated_forest.params import LABEL_MODES, ForestParams
from securetrees.protocols.federated_forest.skeleton import LayerState, TreeSkeleton, forest_output
from securetrees.rand import SYSTEM_RANDOM, KeyedRandom, RandomSource
from securetrees.runtime import Network, Party
from securetrees.trees import Tree, TreeDraws, make_criterion, tree_generators

__all__ = ["Master"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class Master(Party):
    """Coordinates ``clients`` (party names; the provider index of a client is its position)."""

    role = "master"

    def __init__(
        self,
        name: str,
        network: Network,
        clients: Sequence[str],
        params: ForestParams,
        *,
        label_protection: str = "encrypted",
        criterion: str | None = None,
        max_bins: int = 255,
        checkpoint: CheckpointStore | None = None,
        progress: bool = False,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> None:
        super().__init__(name, network)
        if len(clients) < 2 or len(set(clients)) != len(clients):
            raise ParameterError("Federated Forest needs at least two distinct clients")
        if label_protection not in LABEL_MODES:
            raise ParameterError(f"label_protection must be one of {LABEL_MODES}")
        self.clients = tuple(clients)
        self.params = params
        self.label_protection = label_protection
        self._criterion_name = criterion
        self.max_bins = max_bins
        self.progress = progress
        self._store = checkpoint
        self.trees: list[Tree] = []
        # per tree, which nodes belong to the central forest's tree (the rest are cover splits)
        self.reference: list[npt.NDArray[np.bool_]] = []
        self._ref: list[bool] = []  # the same for the tree in progress
        self._cover_key = rng.token_bytes(32)  # the cover splits' draws (``cover.py``)
        self.n_samples = 0
        self.n_features = 0
        self.n_classes = 0
        self.label_holder = ""
        self._owner = np.zeros(0, dtype=np.int64)  # client index of each global feature
        self.n_test = 0

    @property
    def n_outputs(self) -> int:
        return max(1, self.n_classes)

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """Setup: collect ids and features, check the alignment and the partition, announce
        the run, have the label holder distribute the labels or their encryptions."""
        infos = self.call_many(dict.fromkeys(self.clients, m.Hello()), expect=m.ClientInfo)
        holders = [c for c in self.clients if infos[c].label_holder]
        if len(holders) != 1:
            raise ParameterError(f"exactly one client must hold the labels, found {len(holders)}")
        reported = [split_digests(infos[c].hashed_ids) for c in self.clients]
        check_aligned(reported)
        owner: dict[int, int] = {}
        for i, c in enumerate(self.clients):
            for f in infos[c].feature_ids:
                if f in owner:
                    raise ParameterError(f"feature {f} is held by two clients")
                owner[f] = i
        n_features = len(owner)
        if n_features == 0 or sorted(owner) != list(range(n_features)):
            raise ParameterError("the clients' features must be exactly 0..n_features-1")
        self.label_holder = holders[0]
        self.n_classes = infos[self.label_holder].n_classes
        self.n_samples = len(reported[0])
        self.n_features = n_features
        self._owner = np.asarray([owner[f] for f in range(n_features)], dtype=np.int64)
        criterion = self._criterion_name or ("gini" if self.n_classes else "squared_error")
        if (criterion in ("gini", "entropy")) != bool(self.n_classes):
            raise ParameterError(f"criterion {criterion!r} does not fit the label holder's task")
        make_criterion(criterion)
        self._criterion_name = criterion
        setup = m.Setup(self.n_samples, n_features, self.n_classes, self.label_protection, criterion,
                        float(self.params.min_samples_leaf), self.max_bins, self.clients, self.label_holder)
        self.call_many(dict.fromkeys(self.clients, setup), expect=m.Ack)
        self.logger.info("set up: %d clients, %d rows, %d features, %s labels at %s", len(self.clients),
                         self.n_samples, n_features, self.label_protection, self.label_holder)
        self.call(self.label_holder, m.DistributeLabels(), expect=m.Ack)

    # ------------------------------------------------------------------ training
    def fit(self) -> list[Tree]:
        """Setup, then every tree (Algorithm 2 / 6)."""
        self.setup()
        self.trees, self.reference = [], []
        self._train_from(0, None)
        return self.trees

    def resume(self) -> list[Tree]:
        """Restart from the master's latest checkpoint: repeat the setup (deterministic in the
        data and the id key), have every client restore the same progress marker, finish."""
        if self._store is None:
            raise ParameterError("this master keeps no checkpoints")
        saved = self._store.load(MasterState)
        self.setup()
        trees = [t.tree() for t in saved.trees]
        if len(trees) != saved.tree or any(t.n_features != self.n_features for t in trees):
            raise ProtocolError("the checkpoint does not belong to this run")
        self.call_many(dict.fromkeys(self.clients, m.Resume(saved.tree, saved.layer)), expect=m.Ack)
        if len(saved.reference) != len(trees) or any(r.shape != (t.n_nodes,) for r, t in
                                                     zip(saved.reference, trees, strict=False)):
            raise ProtocolError("the checkpoint does not belong to this run")
        self.trees = trees
        self.reference = [np.asarray(r, dtype=bool) for r in saved.reference]
        self._cover_key = saved.cover_key
        self._train_from(saved.tree, saved if saved.work is not None else None)
        return self.trees

    def _train_from(self, first: int, saved: MasterState | None) -> None:
        gens = tree_generators(self.params.random_state, self.params.n_estimators)
        for t in progress_bar(range(first, self.params.n_estimators), desc="federated forest",
                          total=self.params.n_estimators - first, enabled=self.progress):
            self.trees.append(self.build_tree(t, gens[t], saved if t == first else None))
            self._checkpoint(t + 1, 0, None)

    def build_tree(self, t: int, rng: np.random.Generator, saved: MasterState | None = None) -> Tree:
        """One tree, layer by layer: node statistics, candidate features, local bests,
        global best, the winners' partitions, the broadcast.  ``saved`` continues a tree
        from a layer checkpoint."""
        self.logger.info("tree %d of %d", t + 1, self.params.n_estimators)
        k_tree, k_node = self.params.feature_counts(self.n_features)
        draws = TreeDraws(rng, self.n_samples, self.n_features, bootstrap=self.params.bootstrap,
                          max_features_tree=k_tree, max_features=k_node)
        if saved is not None and saved.work is not None:
            skeleton, weights, state = saved.work.restore()
            if not (np.array_equal(weights, draws.sample_weight)
                    and np.array_equal(saved.tree_features, draws.tree_features)):
                raise ProtocolError("the checkpoint's draws do not match this forest's random_state")
            set_rng_state(draws.rng, saved.rng_state)
            self._ref = np.asarray(saved.work_reference, dtype=bool).tolist()
            if len(self._ref) != len(skeleton.left):
                raise ProtocolError("the checkpoint's tree does not match its reference flags")
        else:
            weights = draws.sample_weight.astype(np.int64)
            tree_feats = set(draws.tree_features.tolist())
            self.call_many({c: m.TreeStart(t, weights, tuple(f for f in self._features_of(i) if f in tree_feats))
                            for i, c in enumerate(self.clients)}, expect=m.Ack)
            state = LayerState.start(weights)
            skeleton = TreeSkeleton(self.n_features, self.n_outputs)
            skeleton.add(float(weights.sum()))
            self._ref = [True]
        while state.frontier.size and state.rows.size:
            if not self.expand_layer(t, state, skeleton, draws, weights):
                break
            if self.params.checkpoint == "layer":
                self._checkpoint(t, state.depth, (skeleton, weights, state, draws))
        self.call_many(dict.fromkeys(self.clients, m.TreeEnd(t)), expect=m.Ack)
        self.reference.append(np.asarray(self._ref, dtype=bool))
        return skeleton.build()

    def _checkpoint(self, tree: int, layer: int,
                    work: tuple[TreeSkeleton, npt.NDArray[np.int64], LayerState, TreeDraws] | None) -> None:
        """Every client saves its state under ``(tree, layer)``, then the master saves its own."""
        if self._store is None:
            return
        self.call_many(dict.fromkeys(self.clients, m.Checkpoint(tree, layer)), expect=m.Ack)
        trees = tuple(TreeState.of(x) for x in self.trees)
        ref = tuple(self.reference)
        if work is None:
            state = MasterState(tree, layer, trees, None, (0, 0, 0, 0), np.zeros(0, dtype=np.int64),
                                ref, np.zeros(0, dtype=bool), self._cover_key)
        else:
            skeleton, weights, layer_state, draws = work
            state = MasterState(tree, layer, trees, WorkState.of(skeleton, weights, layer_state),
                                rng_state(draws.rng), draws.tree_features, ref,
                                np.asarray(self._ref, dtype=bool), self._cover_key)
        self._store.save(state)

    def _features_of(self, i: int) -> list[int]:
        return [int(f) for f in np.flatnonzero(self._owner == i)]

    def expand_layer(self, t: int, state: LayerState, skeleton: TreeSkeleton, draws: TreeDraws,
                     weights: npt.NDArray[np.int64]) -> bool:
        """One layer; returns False when no node of the layer splits (the tree is finished).

        ``encrypted`` mode adds cover splits (``specs``, "Cover splits"): a node the central
        forest would not split although the depth and weight rules allow it (it is pure, no
        candidate gains, or it lies in a cover subtree) is asked about like any other, with
        features from the cover stream, and split by a random client among those the label
        holder gave a valid candidate; its subtree is not part of the model."""
        layer = state.depth
        encrypted = self.label_protection == "encrypted"
        pure = self._frontier_purity(t, state, skeleton)
        may = self.params.grow.may_split(layer, state.node_weights(weights))
        real, asked = self._plan_layer(may, pure, np.asarray(self._ref, dtype=bool)[state.frontier])
        if not asked.any():
            return False
        split_pos = np.flatnonzero(asked).astype(np.int64)
        k_node = self.params.feature_counts(self.n_features)[1]
        rows = []
        for p in split_pos.tolist():  # the forest's draws in node order; cover nodes from their own stream
            if not draws.draws_per_node:
                rows.append(draws.tree_features)
            elif real[p]:
                rows.append(draws.node_features())
            else:
                rows.append(cover_features(self._cover_key, t, int(state.frontier[p]), draws.tree_features, k_node))
        node_feats = np.vstack(rows).astype(np.int64)
        owner = self._owner[node_feats]
        requests = {}
        for i, c in enumerate(self.clients):  # each client hears only its own candidates
            mine = owner == i
            counts = mine.sum(axis=1)
            requests[c] = m.FindSplits(t, layer, split_pos[counts > 0], counts[counts > 0].astype(np.int64),
                                       node_feats[mine].astype(np.int64))
        bests = self.call_many(requests, expect=m.LocalBest)
        held: dict[str, dict[int, float]] = {}
        if encrypted:
            g = self.call(self.label_holder, m.GainsRequest(t, layer), expect=m.GainsReply)
            g_counts = np.asarray(g.counts, dtype=np.int64)
            g_pos, g_val = np.asarray(g.positions, dtype=np.int64), np.asarray(g.gains, dtype=np.float64)
            if g_counts.shape != (len(g.clients),) or g_pos.shape != g_val.shape or g_pos.size != g_counts.sum() \
                    or not set(g.clients) <= set(self.clients) - {self.label_holder}:
                raise ProtocolError("malformed gains from the label holder")
            bounds = np.concatenate([[0], np.cumsum(g_counts)])
            held = {c: dict(zip(g_pos[bounds[k]:bounds[k + 1]].tolist(), g_val[bounds[k]:bounds[k + 1]].tolist(),
                                strict=True)) for k, c in enumerate(g.clients)}
        best, offered = self._global_best(split_pos, requests, bests, held)
        winner: dict[int, int] = {}
        kept: dict[int, bool] = {}  # is the split part of the model?
        for p in split_pos.tolist():
            if real[p] and p in best and best[p][0] > 0:
                winner[p], kept[p] = best[p][2], True
            elif encrypted and offered.get(p):
                choice = KeyedRandom(self._cover_key, f"winner/{t}/{int(state.frontier[p])}")
                winner[p], kept[p] = offered[p][choice.randbelow(len(offered[p]))], False
        found = np.asarray(sorted(winner), dtype=np.int64)
        if found.size == 0:
            return False
        by_client: dict[str, list[int]] = {}
        for p in found.tolist():
            by_client.setdefault(self.clients[winner[p]], []).append(p)
        parts = self.call_many({c: m.ApplySplit(t, layer, np.asarray(ps, dtype=np.int64))
                                for c, ps in by_client.items()}, expect=m.Partition)
        groups = state.samples_of(found)
        size = {p: g.size for p, g in zip(found.tolist(), groups, strict=True)}
        pieces: dict[int, npt.NDArray[np.bool_]] = {}
        for c, ps in by_client.items():
            left = np.asarray(parts[c].left)
            if left.dtype != np.bool_ or left.shape != (sum(size[p] for p in ps),):
                raise ProtocolError(f"{c} sent a partition of the wrong size")
            offset = 0
            for p in ps:
                pieces[p] = left[offset:offset + size[p]]
                offset += size[p]
        left_all = np.concatenate([pieces[p] for p in found.tolist()])
        self.call_many(dict.fromkeys(self.clients, m.LayerPartition(t, layer, found, left_all)), expect=m.Ack)
        owners = np.asarray([winner[p] for p in found.tolist()], dtype=np.int64)
        state.advance(found, left_all, weights,
                      lambda nodes, lw, rw: skeleton.split_layer(nodes, lw, rw, provider=owners))
        for p in found.tolist():  # children in split order, left then right
            self._ref += [kept[p], kept[p]]
        return True

    def _frontier_purity(self, t: int, state: LayerState, skeleton: TreeSkeleton) -> npt.NDArray[np.bool_]:
        """Layer step 1: the label holder's purity flags of the frontier; in ``shared`` mode
        also the node values, recorded in the master's tree."""
        stats = self.call(self.label_holder, m.NodeStatsRequest(t, state.depth), expect=m.NodeStats)
        n_front = state.frontier.size
        values, pure = np.asarray(stats.values, dtype=np.float64), np.asarray(stats.pure)
        cols = 0 if self.label_protection == "encrypted" else self.n_outputs
        if values.shape != (n_front, cols) or pure.shape != (n_front,) or pure.dtype != np.bool_:
            raise ProtocolError("node statistics do not match the frontier")
        if cols:
            skeleton.set_values(state.frontier, values)
        return pure

    def _plan_layer(self, may: npt.NDArray[np.bool_], pure: npt.NDArray[np.bool_], ref: npt.NDArray[np.bool_]
                    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """Which frontier nodes the central forest would try to split (``real``: the depth and
        weight rules allow it, it is not pure, it is in the central forest's tree) and which
        are asked about: in ``encrypted`` mode every node the depth and weight rules allow,
        so that the clients' ``find_splits`` do not depend on purity (cover splits)."""
        real = may & ~pure & ref
        return real, (may if self.label_protection == "encrypted" else real)

    def _global_best(self, split_pos: IntArray, requests: dict[str, m.FindSplits],
                     bests: dict[str, m.LocalBest], held: dict[str, dict[int, float]]
                     ) -> tuple[dict[int, tuple[float, int, int]], dict[int, list[int]]]:
        """Algorithm 2 line "argmax": per node the ``(gain, feature, client)`` with the largest
        gain; ties go to the smallest feature id, as in the central search (``best_splits``).
        ``held``: the gains the label holder reports for other clients (``encrypted`` mode).
        Also returns, per node, the clients that offered a valid candidate (in client order)."""
        best: dict[int, tuple[float, int, int]] = {}
        offered: dict[int, list[int]] = {}
        for i, c in enumerate(self.clients):
            reply, asked = bests[c], requests[c]
            pos = np.asarray(reply.positions, dtype=np.int64)
            if not np.array_equal(pos, asked.positions):
                raise ProtocolError(f"{c} answered for other nodes")
            found = np.asarray(reply.found)
            gains = np.asarray(reply.gains, dtype=np.float64)
            fids = np.asarray(reply.feature_ids, dtype=np.int64)
            if found.shape != pos.shape or gains.shape != pos.shape or fids.shape != pos.shape:
                raise ProtocolError(f"{c} sent a malformed local best")
            allowed = set(np.asarray(asked.features).tolist())
            from_holder = self.label_protection == "encrypted" and c != self.label_holder
            if from_holder and {p for p, ok in zip(pos.tolist(), found.tolist(), strict=True) if ok} != \
                    set(held.get(c, {})):
                raise ProtocolError(f"the label holder's gains do not match {c}'s candidates")
            for p, ok, g, f in zip(pos.tolist(), found.tolist(), gains.tolist(), fids.tolist(), strict=True):
                if not ok:
                    continue
                if from_holder:
                    g = held[c][p]
                if f not in allowed or not np.isfinite(g):
                    raise ProtocolError(f"{c} proposed a feature it was not asked about")
                offered.setdefault(p, []).append(i)
                cur = best.get(p)
                if cur is None or g > cur[0] or (g == cur[0] and f < cur[1]):
                    best[p] = (g, f, i)
        return best, offered

    # ------------------------------------------------------------------ prediction
    def align_test(self) -> int:
        """Collect the clients' HMAC test ids and check they agree (canonical order: sorted)."""
        reports = self.call_many(dict.fromkeys(self.clients, m.TestIds()), expect=m.ClientTestIds)
        reported = [split_digests(reports[c].hashed_ids) for c in self.clients]
        check_aligned(reported)
        self.n_test = len(reported[0])
        return self.n_test

    def _require_model(self) -> None:
        if not self.trees:
            raise UnexpectedMessage("the forest has not been trained")

    def leaf_of_one_round(self) -> IntArray:
        """One-round prediction (Algorithm 4): gather every client's leaf sets for all trees in
        one round, intersect them; returns ``(n_trees, n_test)`` leaf node ids (Proposition 1)."""
        self._require_model()
        replies = self.call_many(dict.fromkeys(self.clients, m.PredictRequest()), expect=m.LeafSets)
        n = self.n_test
        out = np.empty((len(self.trees), n), dtype=np.int64)
        for ti, tree in enumerate(self.trees):
            leaves = tree.leaves
            acc = np.ones((n, leaves.size), dtype=bool)
            for c in self.clients:
                r = replies[c]
                if r.n_test != n or len(r.bits) != len(self.trees) or int(r.n_leaves[ti]) != leaves.size:
                    raise ProtocolError(f"{c} sent leaf sets of the wrong shape")
                bits = np.asarray(r.bits[ti], dtype=np.uint8)
                if bits.shape != ((n * leaves.size + 7) // 8,):
                    raise ProtocolError(f"{c} sent leaf sets of the wrong size")
                acc &= np.unpackbits(bits, count=n * leaves.size).astype(bool).reshape(n, leaves.size)
            if not np.all(acc.sum(axis=1) == 1):
                raise ProtocolError("the leaf sets do not intersect in exactly one leaf (Proposition 1)")
            out[ti] = leaves[np.argmax(acc, axis=1)]
        return out

    def leaf_of_classical(self) -> IntArray:
        """Classical prediction: per tree, a round trip to the owner of every internal node
        that test samples reach."""
        self._require_model()
        n = self.n_test
        out = np.empty((len(self.trees), n), dtype=np.int64)
        for ti, tree in enumerate(self.trees):
            at: dict[int, IntArray] = {0: np.arange(n, dtype=np.int64)}
            for k in range(tree.n_nodes):
                samples = at.pop(k, None)
                if samples is None:
                    continue
                if tree.left[k] == -1:
                    out[ti, samples] = k
                    continue
                owner = self.clients[int(tree.provider[k])]
                reply = self.call(owner, m.RouteRequest(ti, k, samples), expect=m.RouteReply)
                go = np.asarray(reply.left)
                if go.dtype != np.bool_ or go.shape != samples.shape:
                    raise ProtocolError(f"{owner} sent a routing reply of the wrong shape")
                at[int(tree.left[k])] = samples[go]
                at[int(tree.right[k])] = samples[~go]
        return out

    def aggregate(self, leaves: IntArray) -> FloatArray:
        """Forest output from the leaf of each sample in each tree, as ``trees.Forest`` does:
        mean of the per-tree class distributions (classification) or of the values.  In
        ``encrypted`` mode the values are the label holder's: a cover leaf is mapped to the
        reference leaf it grew from and the label holder answers the output (one more round)."""
        self._require_model()
        if self.label_protection != "encrypted":
            return forest_output(self.trees, leaves, classification=bool(self.n_classes))
        mapped = np.stack([reference_ancestor(t, r)[row] for t, r, row in zip(self.trees, self.reference, leaves,
                                                                              strict=True)])
        reply = self.call(self.label_holder, m.LeafValuesRequest(mapped), expect=m.ForestOutput)
        out = np.asarray(reply.output)
        if out.dtype != np.float64 or out.shape != (leaves.shape[1], self.n_outputs):
            raise ProtocolError("the label holder's forest output has the wrong shape")
        return out
