"""The master role of Federated Forest (Algorithms 2, 4 / 6, 8).

The master draws the bootstrap sample and the candidate features exactly as
``securetrees.trees.train_forest(..., node_keyed_draws=True)`` does (each node's features
keyed by its heap index, so no draw depends on which nodes stopped), tells each client only
its own candidates, expands a whole layer per round of each step, has the global best picked
(by itself from the clients' gains in ``shared`` mode, by the label holder in ``encrypted``
mode), relays the winner's partition, and keeps per tree the shape, each node's owner and
weight (``shared``: and value), never a threshold.  Prediction:
one round per forest (intersection of the clients' leaf sets, Proposition 1) or
the classical round trip per node.  See ``specs/federated_forest.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from securetrees.errors import DecodeError, ParameterError, ProtocolError, UnexpectedMessage
from securetrees.progress import note as progress_note
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
from securetrees.protocols.federated_forest.ids import check_aligned, split_digests
from securetrees.protocols.federated_forest.model import MasterModel
from securetrees.protocols.federated_forest.params import LABEL_MODES, ForestParams
from securetrees.protocols.federated_forest.skeleton import LayerState, TreeSkeleton, forest_output
from securetrees.runtime import Network, Party
from securetrees.trees import Tree, TreeDraws, heap_indices, make_criterion, tree_generators

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
        self.trees = []
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
        self.trees = trees
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
                          max_features_tree=k_tree, max_features=k_node, node_keyed=True)
        if saved is not None and saved.work is not None:
            skeleton, weights, state = saved.work.restore()
            if not (np.array_equal(weights, draws.sample_weight)
                    and np.array_equal(saved.tree_features, draws.tree_features)):
                raise ProtocolError("the checkpoint's draws do not match this forest's random_state")
            set_rng_state(draws.rng, saved.rng_state)
        else:
            weights = draws.sample_weight.astype(np.int64)
            tree_feats = set(draws.tree_features.tolist())
            self.call_many({c: m.TreeStart(t, weights, tuple(f for f in self._features_of(i) if f in tree_feats))
                            for i, c in enumerate(self.clients)}, expect=m.Ack)
            state = LayerState.start(weights)
            skeleton = TreeSkeleton(self.n_features, self.n_outputs)
            skeleton.add(float(weights.sum()))
        while state.frontier.size and state.rows.size:
            progress_note(f"tree {t + 1}, layer {state.depth + 1}")  # a deployed master's status shows it
            if not self.expand_layer(t, state, skeleton, draws, weights):
                break
            if self.params.checkpoint == "layer":
                self._checkpoint(t, state.depth, (skeleton, weights, state, draws))
        self.call_many(dict.fromkeys(self.clients, m.TreeEnd(t)), expect=m.Ack)
        return skeleton.build()

    def _checkpoint(self, tree: int, layer: int,
                    work: tuple[TreeSkeleton, npt.NDArray[np.int64], LayerState, TreeDraws] | None) -> None:
        """Every client saves its state under ``(tree, layer)``, then the master saves its own."""
        if self._store is None:
            return
        self.call_many(dict.fromkeys(self.clients, m.Checkpoint(tree, layer)), expect=m.Ack)
        trees = tuple(TreeState.of(x) for x in self.trees)
        if work is None:
            state = MasterState(tree, layer, trees, None, (0, 0, 0, 0), np.zeros(0, dtype=np.int64))
        else:
            skeleton, weights, layer_state, draws = work
            state = MasterState(tree, layer, trees, WorkState.of(skeleton, weights, layer_state),
                                rng_state(draws.rng), draws.tree_features)
        self._store.save(state)

    def _features_of(self, i: int) -> list[int]:
        return [int(f) for f in np.flatnonzero(self._owner == i)]

    def expand_layer(self, t: int, state: LayerState, skeleton: TreeSkeleton, draws: TreeDraws,
                     weights: npt.NDArray[np.int64]) -> bool:
        """One layer; returns False when no node of the layer splits (the tree is finished).

        ``encrypted`` mode (``specs``, "Cover splits" and "Winners"): every node the depth and
        weight rules allow is asked about, whatever its labels, with its node-keyed features,
        and the label holder names each node's winner: the best candidate where the central
        forest splits, a uniformly random valid one elsewhere (a cover split, whose subtree is
        not part of the model; only the label holder knows which).  The master sees no purity,
        no gain and no reference flag.  ``shared`` mode: the master asks the label holder for
        the frontier's values and purity and picks the best gain itself."""
        layer = state.depth
        encrypted = self.label_protection == "encrypted"
        asked = self._asked(t, state, skeleton, weights)
        if not asked.any():
            return False
        split_pos = np.flatnonzero(asked).astype(np.int64)
        heap = heap_indices(skeleton.left, skeleton.right)
        node_feats = np.vstack([draws.node_features_at(heap[int(state.frontier[p])])
                                for p in split_pos.tolist()]).astype(np.int64)
        owner = self._owner[node_feats]
        requests = {}
        for i, c in enumerate(self.clients):  # each client hears only its own candidates
            mine = owner == i
            counts = mine.sum(axis=1)
            requests[c] = m.FindSplits(t, layer, split_pos[counts > 0], counts[counts > 0].astype(np.int64),
                                       node_feats[mine].astype(np.int64))
        bests = self.call_many(requests, expect=m.LocalBest)
        offers = self._local_bests(requests, bests)
        if encrypted:
            winner = self._holder_winners(t, layer, offers)
        else:
            winner = {p: max(o, key=lambda x: (x[0], -x[1]))[2] for p, o in offers.items()
                      if max(g for g, _, _ in o) > 0}
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
        return True

    def _asked(self, t: int, state: LayerState, skeleton: TreeSkeleton, weights: npt.NDArray[np.int64]
               ) -> npt.NDArray[np.bool_]:
        """Layer step 1: the frontier nodes to ask about.  ``encrypted``: every node the depth
        and weight rules allow (bootstrap weights only, no label: cover splits); ``shared``:
        those the label holder does not report pure, as the central forest."""
        may = self.params.grow.may_split(state.depth, state.node_weights(weights))
        if self.label_protection == "encrypted":
            return may
        return may & ~self._frontier_purity(t, state, skeleton)

    def _frontier_purity(self, t: int, state: LayerState, skeleton: TreeSkeleton) -> npt.NDArray[np.bool_]:
        """Layer step 1b (``shared`` mode only): the label holder's purity flags and values of the
        frontier, the values recorded in the master's tree."""
        stats = self.call(self.label_holder, m.NodeStatsRequest(t, state.depth), expect=m.NodeStats)
        n_front = state.frontier.size
        values, pure = np.asarray(stats.values, dtype=np.float64), np.asarray(stats.pure)
        if values.shape != (n_front, self.n_outputs) or pure.shape != (n_front,) or pure.dtype != np.bool_:
            raise ProtocolError("node statistics do not match the frontier")
        skeleton.set_values(state.frontier, values)
        return pure

    def _local_bests(self, requests: dict[str, m.FindSplits], bests: dict[str, m.LocalBest]
                     ) -> dict[int, list[tuple[float, int, int]]]:
        """Check the clients' local bests; per node, the valid candidates offered as
        ``(gain, feature, client)`` in increasing feature id (the central search's tie-break:
        ``best_splits``).  Gains are 0 in ``encrypted`` mode (the label holder keeps them)."""
        offers: dict[int, list[tuple[float, int, int]]] = {}
        encrypted = self.label_protection == "encrypted"
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
            for p, ok, g, f in zip(pos.tolist(), found.tolist(), gains.tolist(), fids.tolist(), strict=True):
                if not ok:
                    continue
                if f not in allowed or not np.isfinite(g) or (encrypted and g != 0.0):
                    raise ProtocolError(f"{c} proposed a feature it was not asked about, or a gain")
                offers.setdefault(p, []).append((g, f, i))
        return {p: sorted(o, key=lambda x: x[1]) for p, o in offers.items()}

    def _holder_winners(self, t: int, layer: int, offers: dict[int, list[tuple[float, int, int]]]
                        ) -> dict[int, int]:
        """Layer step 2c (``encrypted``): the label holder names the winning client of every node
        with a valid candidate (Reveals to the label holder: which clients offered a candidate
        at each node and the order of their proposed feature ids; to the master: the winner)."""
        if not offers:
            return {}
        positions = sorted(offers)
        clients = [i for p in positions for _, _, i in offers[p]]
        request = m.WinnersRequest(t, layer, np.asarray(positions, dtype=np.int64),
                                   np.asarray([len(offers[p]) for p in positions], dtype=np.int64),
                                   np.asarray(clients, dtype=np.int64))
        reply = self.call(self.label_holder, request, expect=m.Winners)
        won = np.asarray(reply.clients, dtype=np.int64)
        if won.shape != (len(positions),) or any(
                w not in {i for _, _, i in offers[p]} for p, w in zip(positions, won.tolist(), strict=True)):
            raise ProtocolError("the label holder named a winner that offered no candidate")
        return dict(zip(positions, won.tolist(), strict=True))

    # ------------------------------------------------------------------ model part
    def model_state(self) -> MasterModel:
        """What the master keeps of the fitted forest: the layout and its skeletons (local)."""
        self._require_model()
        return MasterModel(self.clients, self.label_holder, self.n_classes, self.n_features, self.label_protection,
                           str(self._criterion_name), self._owner, tuple(TreeState.of(t) for t in self.trees))

    def restore_model(self, model: MasterModel) -> None:
        """Adopt a saved skeleton instead of training (a predict-only run; local)."""
        if tuple(model.clients) != self.clients or model.label_protection != self.label_protection:
            raise ProtocolError("the saved forest was fitted with other clients or another label protection")
        trees = [t.tree() for t in model.trees]
        owner = np.asarray(model.owner, dtype=np.int64)
        if not trees or owner.shape != (model.n_features,) or model.label_holder not in self.clients or any(
                t.n_features != model.n_features for t in trees) or (owner.size and (
                owner.min() < 0 or owner.max() >= len(self.clients))):
            raise DecodeError("inconsistent forest skeleton in a model file")
        self.trees, self.n_features, self._owner = trees, model.n_features, owner
        self.n_classes, self.label_holder, self._criterion_name = model.n_classes, model.label_holder, model.criterion

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
        """``shared`` mode: the forest output from the leaf of each sample in each tree, as
        ``trees.Forest`` does (mean of the per-tree class distributions, or of the values), from
        the values the master holds in this mode.  Refused in ``encrypted`` mode, where the master
        holds no value and sees no output: :meth:`hand_leaves` instead."""
        self._require_model()
        if self.label_protection == "encrypted":
            raise UnexpectedMessage("in encrypted mode the label holder keeps the forest output: hand_leaves")
        return forest_output(self.trees, leaves, classification=bool(self.n_classes))

    def hand_leaves(self, leaves: IntArray) -> None:
        """Prediction's last step (``encrypted``): hand the leaf of each test sample in each tree
        to the label holder, which maps cover leaves to the reference leaf they grew from,
        computes the forest output and keeps it (one more round).  Reveals: to the label holder,
        the leaf each test sample reaches in each tree; to the master, nothing (an ``Ack``): no
        output and no leaf value, so it cannot solve the leaf values from its routed leaves."""
        self._require_model()
        if self.label_protection != "encrypted":
            raise UnexpectedMessage("in shared mode the master aggregates the output itself")
        self.call(self.label_holder, m.TestLeaves(np.asarray(leaves, dtype=np.int64)), expect=m.Ack)
