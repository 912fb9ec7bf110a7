"""The client role of Federated Forest (Algorithms 1, 3 / 5, 7), label holder included.

A client holds some columns of every sample; it finds the best split among its
own candidate features at each node (plaintext statistics in ``shared`` mode,
encrypted label statistics scored by the label holder in ``encrypted`` mode),
splits the nodes it wins, keeps a partial tree per tree and routes test samples
through it.  The label holder is the client constructed with ``labels``; its own steps
(distributing the labels, scoring encrypted candidates, naming winners, keeping the node
values) are in :mod:`~securetrees.protocols.federated_forest.label_holder`, the state both
share in :mod:`~securetrees.protocols.federated_forest.client_base`.
See ``specs/federated_forest.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from securetrees.errors import DecodeError, ParameterError, ProtocolError, UnexpectedMessage
from securetrees.paillier import Ciphertext
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.checkpoint import (
    ClientState,
    ScoreJournal,
    SentScore,
    TreeState,
    WorkState,
)
from securetrees.protocols.federated_forest.client_base import LabelSpec, LocalCandidate, message_digest
from securetrees.protocols.federated_forest.encrypted_stats import (
    CryptoCounters,
    bin_sums,
    pack_bins,
)
from securetrees.protocols.federated_forest.ids import canonical_order, hash_ids
from securetrees.protocols.federated_forest.label_holder import LabelHolderDuties
from securetrees.protocols.federated_forest.model import ClientModel
from securetrees.protocols.federated_forest.skeleton import (
    LayerState,
    OwnSplit,
    TreeSkeleton,
    check_positions,
)
from securetrees.protocols.federated_forest.slots import SlotLayout
from securetrees.runtime import handles
from securetrees.trees import BinMapper, best_splits, build_histograms, make_criterion
from securetrees.trees.grow import goes_left_binned
from securetrees.trees.train import class_stats, regression_stats

__all__ = ["Client", "CryptoCounters", "LabelSpec"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class Client(LabelHolderDuties):
    """One organisation's columns ``X`` (rows in its own order, named by ``ids``).

    ``feature_ids`` are the global ids of the columns (the encoded features the
    master samples from); ``id_key`` is the HMAC key all clients share.  Instructions are
    admitted from the master role only, score requests and labels from other clients (the
    message declarations); :meth:`dispatch` further admits instructions only from the master that
    set the client up, labels only from the setup's label holder, and score requests only at the
    label holder from the run's other clients.
    """

    # ------------------------------------------------------------------ setup

    @handles(m.Hello)
    def on_hello(self, sender: str, msg: m.Hello) -> m.ClientInfo:
        """Setup: report the HMAC ids, the global feature ids, the label role (Reveals: the
        master learns pseudonymous ids, the feature layout and the number of classes)."""
        spec = self._labels_spec
        n_classes = 0 if spec is None or spec.n_classes is None else spec.n_classes
        return m.ClientInfo(b"".join(self._hashed), self.feature_ids, spec is not None, n_classes)

    @handles(m.Setup)
    def on_setup(self, sender: str, msg: m.Setup) -> m.Ack:
        """Setup: adopt the canonical order, bin the own columns."""
        if msg.n_samples != len(self._hashed) or self.name not in msg.client_names:
            raise ProtocolError("setup does not match this client's data")
        if msg.label_protection not in ("shared", "encrypted"):
            raise ProtocolError(f"unknown label protection {msg.label_protection!r}")
        self._setup, self._master = msg, sender
        self._index = msg.client_names.index(self.name)
        self._criterion = make_criterion(msg.criterion)
        order = canonical_order(self._hashed)
        self._X = self._X_raw[order]
        if self._X.shape[1]:
            self._mapper = BinMapper.fit(self._X, max_bins=msg.max_bins, categorical=self._categorical)
            self._binned = self._mapper.transform(self._X)
        if self._labels_spec is not None:
            self._labels = np.asarray(self._labels_spec.y)[order]
        self.logger.info("%s set up: %d rows, %d own features", self.name, msg.n_samples, self._X.shape[1])
        return m.Ack()

    @handles(m.SharedLabels)
    def on_shared_labels(self, sender: str, msg: m.SharedLabels) -> m.Ack:
        """Setup (``shared``): keep the labels (Reveals: every label, the paper's practice)."""
        setup = self._require_setup()
        if setup.label_protection != "shared" or self.is_label_holder:
            raise UnexpectedMessage("labels in the clear are only accepted in shared mode")
        y = msg.labels
        if y.shape != (setup.n_samples,):
            raise ProtocolError("wrong number of labels")
        if setup.n_classes and (y.dtype.kind not in "iu" or (y.size and (y.min() < 0 or y.max() >= setup.n_classes))):
            raise ProtocolError("class codes out of range")
        if not setup.n_classes and (y.dtype.kind != "f" or not np.all(np.isfinite(y))):
            raise ProtocolError("regression targets must be finite floats")
        self._labels = msg.labels
        return m.Ack()

    @handles(m.EncryptedLabels)
    def on_encrypted_labels(self, sender: str, msg: m.EncryptedLabels) -> m.Ack:
        """Setup (``encrypted``): validate and keep the public key and every ciphertext."""
        setup = self._require_setup()
        if setup.label_protection != "encrypted" or self.is_label_holder:
            raise UnexpectedMessage("encrypted labels are only accepted in encrypted mode")
        if len(msg.ciphertexts) != setup.n_samples:
            raise ProtocolError("wrong number of encrypted labels")
        pk = self._load_pk(msg.public_key)
        layout = SlotLayout(msg.n_slots, msg.slot_bits)
        layout.bins_per_plaintext(pk.bits)
        self._enc = [Ciphertext(pk, v) for v in msg.ciphertexts]  # raises InvalidCiphertext
        self._pk, self._layout = pk, layout
        return m.Ack()

    # ------------------------------------------------------------------ training

    @handles(m.TreeStart)
    def on_tree_start(self, sender: str, msg: m.TreeStart) -> m.Ack:
        """Tree start (Algorithm 1 line 2): the bootstrap weights and the own selected features."""
        setup = self._require_setup()
        w = np.asarray(msg.weights)
        if w.shape != (setup.n_samples,) or w.dtype.kind not in "iu" or (w.size and w.min() < 0):
            raise ProtocolError("bootstrap weights must be n non-negative integers")
        if not set(msg.features) <= set(self.feature_ids):
            raise ProtocolError("the master selected a feature this client does not hold")
        skeleton = TreeSkeleton(self._X.shape[1], self.n_outputs)
        skeleton.add(float(w.sum()))
        self._ref = [True]
        self._begin_tree(msg.tree, w.astype(np.int64), LayerState.start(w.astype(np.int64)), skeleton)
        return m.Ack()

    def _begin_tree(self, tree: int, weights: IntArray, state: LayerState, skeleton: TreeSkeleton) -> None:
        """Adopt a tree's weights and state; derive the weighted label statistics or ciphertexts."""
        setup = self._require_setup()
        self._tree = tree
        self._forget_before(tree)
        self._weights = weights
        self._state = state
        self._skeleton = skeleton
        self._candidates, self._won = {}, {}
        self._own_gains, self._kept = {}, {}
        self._stats = None
        if self._labels is not None:
            if setup.n_classes:
                self._stats = class_stats(np.asarray(self._labels, dtype=np.int64), setup.n_classes,
                                          self._weights.astype(np.float64))
            else:
                self._stats = regression_stats(np.asarray(self._labels, dtype=np.float64),
                                               self._weights.astype(np.float64))
            if self.is_label_holder and setup.label_protection == "encrypted":
                self._record_values()
        elif setup.label_protection == "encrypted":
            self._weight_ciphertexts()

    def _forget_before(self, tree: int) -> None:
        """Drop the score requests of finished trees (no resume goes back before ``tree``)."""
        self._answered = {k: a for k, a in self._answered.items() if k[0] >= tree}
        self._sent = {k: s for k, s in self._sent.items() if k[0] >= tree}

    @handles(m.Checkpoint)
    def on_checkpoint(self, sender: str, msg: m.Checkpoint) -> m.Ack:
        """Save this client's own state under the progress marker (``specs``, "Checkpoints")."""
        self._require_setup()
        if self._store is None:
            raise UnexpectedMessage(f"{self.name} keeps no checkpoints")
        work = None
        if msg.layer:
            state = self._require_tree(msg.tree)
            if state.depth != msg.layer or self._skeleton is None:
                raise UnexpectedMessage("checkpoint marker does not match the tree in progress")
            work = WorkState.of(self._skeleton, self._weights, state)
        elif self._state is not None or len(self.trees) != msg.tree:
            raise UnexpectedMessage("checkpoint marker does not match the finished trees")
        self._store.save(ClientState(msg.tree, msg.layer, tuple(TreeState.of(t) for t in self.trees), work,
                                     self._cover_key, tuple(self.reference),
                                     np.asarray(self._ref if work is not None else [], dtype=bool)))
        return m.Ack()

    @handles(m.Resume)
    def on_resume(self, sender: str, msg: m.Resume) -> m.Ack:
        """Restore the checkpoint with the master's progress marker (current or previous file)."""
        self._require_setup()
        if self._store is None:
            raise UnexpectedMessage(f"{self.name} keeps no checkpoints")
        saved = self._store.load(ClientState, (msg.tree, msg.layer))
        journal = self._store.load_journal(ScoreJournal)
        for s in journal.sent if journal is not None else ():  # a restarted client resends these
            self._sent.setdefault((s.tree, s.layer), s)
        self._forget_before(msg.tree)
        trees = [t.tree() for t in saved.trees]
        if len(trees) != msg.tree or any(t.n_features != self._X.shape[1] for t in trees):
            raise ProtocolError("the checkpoint does not belong to this client's run")
        reference = [np.asarray(r, dtype=bool) for r in saved.reference]
        if self.is_label_holder and (len(reference) != len(trees) or any(
                r.shape != (t.n_nodes,) for r, t in zip(reference, trees, strict=True))):
            raise ProtocolError("the checkpoint's reference flags do not match its trees")
        self.trees, self.reference, self._cover_key = trees, reference, saved.cover_key
        self._state, self._skeleton, self._weighted = None, None, []
        if saved.work is not None:
            skeleton, weights, state = saved.work.restore()
            if weights.shape != (self._require_setup().n_samples,):
                raise ProtocolError("the checkpoint does not belong to this client's run")
            self._ref = np.asarray(saved.work_reference, dtype=bool).tolist()
            if self.is_label_holder and len(self._ref) != len(skeleton.left):
                raise ProtocolError("the checkpoint's reference flags do not match its tree")
            self._begin_tree(msg.tree, weights, state, skeleton)
        return m.Ack()

    def _weight_ciphertexts(self) -> None:
        """``Enc(w_i · unit_i) = Enc(unit_i)^{w_i}``: the bootstrap weight as a short exponent."""
        weighted: list[Ciphertext | None] = []
        for c, w in zip(self._enc, self._weights.tolist(), strict=True):
            if w == 0:
                weighted.append(None)
            elif w == 1:
                weighted.append(c)
            else:
                weighted.append(c * w)
                self.counters.weightings += 1
        self._weighted = weighted

    def _node_features(self, msg: m.FindSplits, n_frontier: int) -> tuple[IntArray, IntArray, IntArray]:
        """Requested positions, their own local features (padded by repetition to one width)
        and how many each has."""
        positions = np.asarray(msg.positions, dtype=np.int64)
        counts = np.asarray(msg.counts, dtype=np.int64)
        feats = np.asarray(msg.features, dtype=np.int64)
        check_positions(positions, n_frontier)
        if counts.shape != positions.shape or (counts.size and counts.min() < 1) or feats.shape != (counts.sum(),):
            raise ProtocolError("malformed feature lists")
        # own columns are stored in increasing global id: the local index is the rank
        local = np.searchsorted(self._feature_ids, feats)
        if feats.size and (local.max() >= self._feature_ids.size or np.any(self._feature_ids[local] != feats)):
            raise ProtocolError("the master selected a feature this client does not hold")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        segment = np.repeat(np.arange(counts.size), counts)
        if feats.size and np.any((np.diff(feats) <= 0) & (segment[1:] == segment[:-1])):
            raise ProtocolError("a node's features must be distinct and increasing")
        width = int(counts.max()) if counts.size else 0
        j = np.minimum(np.arange(width)[None, :], counts[:, None] - 1)  # pad by repeating the last
        table = local[starts[:, None] + j] if width else np.zeros((positions.size, 0), dtype=np.int64)
        return positions, table.astype(np.int64), counts

    @handles(m.FindSplits)
    def on_find_splits(self, sender: str, msg: m.FindSplits) -> m.LocalBest:
        """Layer step 2 (Algorithm 1 lines 10-15): the local best split of each listed node
        (Reveals: the master learns the best feature's id, not the threshold, and in ``shared``
        mode the best gain; in ``encrypted`` mode every gain is sent as 0 (the label holder keeps
        its own for naming the winners) and a client other than the label holder learns which
        of its candidates is best at each node, never the gain)."""
        setup = self._require_setup()
        state = self._require_tree(msg.tree)
        if msg.layer != state.depth:
            raise UnexpectedMessage("find_splits for another layer")
        positions, table, counts = self._node_features(msg, state.frontier.size)
        self._candidates, self._own_gains = {}, {}
        if positions.size == 0:
            e = np.zeros(0)
            return m.LocalBest(e.astype(np.int64), e.astype(bool), e, e.astype(np.int64))
        if self._stats is not None:
            found, gains, feat, bins, mleft = self._score_plain(state, positions, table, counts)
        elif setup.label_protection == "encrypted":
            found, gains, feat, bins, mleft = self._score_encrypted(state, positions, table, msg)
        else:
            raise UnexpectedMessage(f"{self.name} has no labels to score splits with")
        ok = np.flatnonzero(found)
        self._candidates = {
            p: LocalCandidate(f, b, ml) for p, f, b, ml in zip(
                positions[ok].tolist(), feat[ok].tolist(), bins[ok].tolist(), mleft[ok].tolist(), strict=True)
        }
        fids = np.where(found, self._feature_ids[feat], -1).astype(np.int64)
        if setup.label_protection == "encrypted":  # the gains stay here (``on_winners_request``)
            self._own_gains = dict(zip(positions[ok].tolist(), gains[ok].tolist(), strict=True))
            gains = np.zeros_like(gains)
        return m.LocalBest(positions, found.astype(bool), np.where(found, gains, 0.0), fids)

    def _score_plain(self, state: LayerState, positions: IntArray, table: IntArray, counts: IntArray
                     ) -> tuple[BoolArray, FloatArray, IntArray, IntArray, BoolArray]:
        """Plaintext histograms of the own features, scored as the central grower does, all
        requested nodes in one pass: a node's row of candidates is padded with ``-1`` (empty
        slots), so within a node the slots keep increasing global id (the central tie-break).
        The histograms stop at the largest bin count of the candidates (then the missing
        slot follows): the bins above it are always empty, so the candidates, the sums and
        their order, and hence the result, are those of the full width, with less work."""
        if self._stats is None or self._binned is None or self._mapper is None or self._criterion is None:
            raise UnexpectedMessage("no statistics to score")
        mapper = self._mapper
        n_bins = np.asarray(mapper.n_bins, dtype=np.int64)
        rank = np.full(state.frontier.size, -1, dtype=np.int64)  # requested node -> its row
        rank[positions] = np.arange(positions.size)
        node = rank[state.pos]
        rows = state.rows
        if positions.size < state.frontier.size:
            inside = np.flatnonzero(node >= 0)
            node, rows = node[inside], rows[inside]
        features = np.where(np.arange(table.shape[1]) < counts[:, None], table, -1)
        top = int(n_bins[table].max())  # bins above every candidate's count stay empty
        hist = build_histograms(self._binned, node, self._stats, positions.size, top, features, rows=rows,
                                missing_bin=mapper.missing_bin)
        setup = self._require_setup()
        cat = np.asarray(mapper.categorical, dtype=bool)
        res = best_splits(hist, self._criterion, categorical=cat, n_bins=n_bins, features=features,
                          min_samples_leaf=setup.min_samples_leaf)
        found, gain, feat = res.found.copy(), res.gain.copy(), res.feature.copy()
        bins, mleft = res.bin.copy(), res.missing_left.copy()
        if setup.label_protection == "encrypted":  # the label holder's own nodes without gain
            fz = np.maximum(features, 0)
            self._cover(hist, features >= 0, n_bins[fz], cat[fz], positions, found, gain, bins, mleft,
                        lambda k, j: int(features[k, j]), feat, f"{state.depth}/{self.name}")
        return found, gain, feat, bins, mleft

    def _score_encrypted(self, state: LayerState, positions: IntArray, table: IntArray, msg: m.FindSplits
                         ) -> tuple[BoolArray, FloatArray, IntArray, IntArray, BoolArray]:
        """Encrypted per-bin label statistics of every candidate, packed, re-randomised and
        scored by the label holder (``specs/federated_forest.md``, "Encrypted label statistics")."""
        if self._pk is None or self._layout is None or self._binned is None or self._mapper is None:
            raise UnexpectedMessage("encrypted labels have not arrived")
        setup = self._require_setup()
        pk = self._pk
        groups = state.samples_of(positions)
        entry_node: list[int] = []
        entry_feat: list[int] = []
        for k, p in enumerate(positions.tolist()):
            for f in dict.fromkeys(table[k].tolist()):  # distinct, in increasing global id
                entry_node.append(p)
                entry_feat.append(f)
        asked, key_id = message_digest(msg), hashlib.sha256(pk.to_bytes()).digest()
        sent = self._sent.get((msg.tree, msg.layer))
        if sent is None or sent.asked != asked or sent.public_key != key_id:
            request = self._pack_request(state, positions, groups, table, msg)
            sent = SentScore(msg.tree, msg.layer, asked, key_id, request)
            self._sent[(msg.tree, msg.layer)] = sent
            if self._store is not None:  # on disk before it leaves: a restart resends these bytes
                self._store.save_journal(ScoreJournal(tuple(self._sent.values())))
        reply = self.call(setup.label_holder, sent.request, expect=m.ScoreReply)
        if not np.array_equal(reply.positions, positions):
            raise ProtocolError("the label holder scored other nodes")
        entries = np.asarray(reply.entries, dtype=np.int64)
        found = np.asarray(reply.found, dtype=bool)
        if entries.shape != positions.shape or (found.any() and (
                entries[found].min() < 0 or entries[found].max() >= len(entry_feat))):
            raise ProtocolError("the label holder named an unknown candidate")
        feat = np.asarray(entry_feat, dtype=np.int64)[np.where(found, entries, 0)]
        if np.any(found & (np.asarray(entry_node)[np.where(found, entries, 0)] != positions)):
            raise ProtocolError("the label holder chose a candidate of another node")
        gains = np.zeros(positions.size, dtype=np.float64)  # the label holder tells the master
        return found, gains, feat, np.asarray(reply.bins, dtype=np.int64), np.asarray(reply.missing_left, dtype=bool)

    def _pack_request(self, state: LayerState, positions: IntArray, groups: list[IntArray], table: IntArray,
                      msg: m.FindSplits) -> m.ScoreRequest:
        """Each candidate's encrypted per-bin statistics, packed and re-randomised."""
        if self._pk is None or self._layout is None or self._binned is None or self._mapper is None:
            raise UnexpectedMessage("encrypted labels have not arrived")
        pk, layout, mapper = self._pk, self._layout, self._mapper
        per_ct = layout.bins_per_plaintext(pk.bits)
        entry_node: list[int] = []
        entry_feat: list[int] = []
        node_samples: list[IntArray] = []
        node_bins: list[IntArray] = []
        node_widths: list[list[int]] = []
        for k, p in enumerate(positions.tolist()):
            samples = state.rows[groups[k]]
            feats = list(dict.fromkeys(table[k].tolist()))  # distinct, in increasing global id
            nbs = [self._padded_bins(f) for f in feats]
            bins = self._binned[np.ix_(samples, feats)].astype(np.int64)
            node_samples.append(samples)
            node_bins.append(np.where(bins == mapper.missing_bin, np.asarray(nbs, dtype=np.int64)[None, :],
                                      bins))  # missing after the padded bins
            node_widths.append(nbs)
            entry_node += [p] * len(feats)
            entry_feat += feats
        sums = bin_sums(self._weighted, node_samples, node_bins, node_widths, self.counters, self.executor)
        cts = pack_bins(sums, per_ct, layout, pk, self.counters, mode=self._mode, rng=self._rng,
                        executor=self.executor)
        chunks = [len(c) for c in cts]
        packed = [v for c in cts for v in c]
        return m.ScoreRequest(
            msg.tree, msg.layer, np.asarray(entry_node, dtype=np.int64),
            np.asarray([self._padded_bins(f) for f in entry_feat], dtype=np.int64),
            np.asarray([mapper.categorical[f] for f in entry_feat], dtype=bool),
            np.asarray(chunks, dtype=np.int64), tuple(packed))

    def _padded_bins(self, feature: int) -> int:
        """The bin count a candidate is sent with: this client's largest bin count, the same for
        every feature, the bins above the feature's own count empty (encryptions of zero), so
        that the label holder cannot name a candidate by its bin count (it learns that one number
        per client).  ``best_splits`` reports the same split: the empty bins repeat the partition
        of the last real bin, and ties go to the lowest bin."""
        del feature
        if self._mapper is None:
            raise UnexpectedMessage(f"{self.name} has no features")
        return int(max(self._mapper.n_bins))

    @handles(m.ApplySplit)
    def on_apply_split(self, sender: str, msg: m.ApplySplit) -> m.Partition:
        """Layer step 3 (Algorithm 1 line 19): split the nodes this client won
        (Reveals: the master learns the partition of each)."""
        state = self._require_tree(msg.tree)
        positions = np.asarray(msg.positions, dtype=np.int64)
        check_positions(positions, state.frontier.size)
        if msg.layer != state.depth or not set(positions.tolist()) <= set(self._candidates):
            raise UnexpectedMessage("apply_split for a node without a local candidate")
        groups = state.samples_of(positions)
        cands = [self._candidates[p] for p in positions.tolist()]
        left = self._goes_left(cands, groups, state)
        self._won = dict(zip(positions.tolist(), cands, strict=True))
        self._won_left = left
        return m.Partition(left)

    def _goes_left(self, cands: list[LocalCandidate], groups: list[IntArray], state: LayerState) -> BoolArray:
        """Which samples of each node go left under the node's own split (the grower's binned
        rule), concatenated over the nodes."""
        if self._binned is None or self._mapper is None:
            raise UnexpectedMessage("no features")
        if not groups:
            return np.zeros(0, dtype=bool)
        mapper = self._mapper
        sizes = [g.size for g in groups]
        rows = state.rows[np.concatenate(groups)]
        feat = np.repeat([c.feature for c in cands], sizes)
        return goes_left_binned(self._binned[rows, feat], np.repeat([c.bin for c in cands], sizes),
                                np.asarray(mapper.categorical, dtype=bool)[feat],
                                np.repeat([c.missing_left for c in cands], sizes), mapper.missing_bin)

    @handles(m.LayerPartition)
    def on_layer_partition(self, sender: str, msg: m.LayerPartition) -> m.Ack:
        """Layer step 4: apply the broadcast partitions; store feature and threshold only at
        the nodes this client won (paper Section 4.1, "Model Storage")."""
        state = self._require_tree(msg.tree)
        if msg.layer != state.depth or self._skeleton is None:
            raise UnexpectedMessage("partition for another layer")
        positions = np.asarray(msg.positions, dtype=np.int64)
        check_positions(positions, state.frontier.size)
        if not set(self._won) <= set(positions.tolist()):
            raise ProtocolError("a split this client applied is missing from the broadcast")
        skeleton, mapper, won = self._skeleton, self._mapper, self._won
        own: list[OwnSplit] = []  # feature and threshold only at the nodes this client won
        if won:
            if mapper is None:
                raise UnexpectedMessage("no features")
            own = [OwnSplit(int(state.frontier[p]), c.feature, mapper.threshold(c.feature, c.bin),
                            mapper.categorical[c.feature], c.missing_left) for p, c in sorted(won.items())]
        provider = np.where(np.isin(positions, list(won)), self._index, -1).astype(np.int64)
        pos_list = positions.tolist()

        if won:  # the broadcast must carry this client's own partitions unchanged
            groups = state.samples_of(positions)
            offsets = np.cumsum([0] + [g.size for g in groups])
            broadcast = np.asarray(msg.left)
            mine = [broadcast[offsets[i]:offsets[i + 1]] for i, p in enumerate(pos_list) if p in won]
            if sum(x.size for x in mine) != self._won_left.size or \
                    not np.array_equal(np.concatenate(mine), self._won_left):
                raise ProtocolError("the broadcast partition differs from this client's split")
        setup = self._require_setup()
        encrypted = setup.label_protection == "encrypted"
        if self.is_label_holder and encrypted and set(pos_list) != set(self._kept):
            raise ProtocolError("the nodes split differ from those the label holder named winners for")
        state.advance(positions, np.asarray(msg.left), self._weights,
                      lambda nodes, lw, rw: skeleton.split_layer(nodes, lw, rw, provider=provider, own=own))
        if self.is_label_holder:  # children in split order, left then right
            for p in pos_list:
                kept = self._kept[p] if encrypted else True
                self._ref += [kept, kept]
            if encrypted:
                self._record_values()
        self._candidates, self._won, self._kept, self._own_gains = {}, {}, {}, {}
        return m.Ack()

    @handles(m.TreeEnd)
    def on_tree_end(self, sender: str, msg: m.TreeEnd) -> m.Ack:
        """Tree end (Algorithm 1 line 31): keep the partial tree ``T_i``."""
        self._require_tree(msg.tree)
        if self._skeleton is None:
            raise UnexpectedMessage("no tree")
        self.trees.append(self._skeleton.build())
        if self.is_label_holder:
            self.reference.append(np.asarray(self._ref, dtype=bool))
        self._state, self._skeleton, self._weighted = None, None, []
        return m.Ack()

    # ------------------------------------------------------------------ model part
    def model_state(self) -> ClientModel:
        """What this client keeps of the fitted forest: its partial trees (its own splits'
        features and thresholds), the run's settings and, label holder, the reference flags (local)."""
        setup = self._require_setup()
        if not self.trees:
            raise UnexpectedMessage(f"{self.name} holds no trained trees")
        return ClientModel(setup, self._feature_ids, tuple(TreeState.of(t) for t in self.trees),
                           tuple(self.reference), self.is_label_holder)

    def restore_model(self, model: ClientModel) -> None:
        """Adopt a saved part instead of training (a predict-only run, built without rows; local)."""
        setup = model.setup
        if not np.array_equal(np.asarray(model.feature_ids, dtype=np.int64), self._feature_ids) \
                or self.name not in setup.client_names:
            raise ProtocolError(f"the saved part is not {self.name}'s over its columns")
        trees = [t.tree() for t in model.trees]
        reference = [np.asarray(r, dtype=bool) for r in model.reference]
        holder = setup.label_holder == self.name
        if not trees or model.label_holder != holder or any(t.n_features != self._feature_ids.size for t in trees) \
                or (holder and (len(reference) != len(trees) or any(
                    r.shape != (t.n_nodes,) for r, t in zip(reference, trees, strict=True)))):
            raise DecodeError("inconsistent partial trees in a model file")
        self._setup, self._index = setup, setup.client_names.index(self.name)
        self._criterion = make_criterion(setup.criterion)
        self.trees, self.reference, self._holds_labels = trees, reference, holder

    # ------------------------------------------------------------------ prediction

    def load_test(self, X: npt.ArrayLike, ids: Sequence[object]) -> None:
        """Local: the own columns of the test rows (same column order as training)."""
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape != (len(ids), self._feature_ids.size):
            raise ParameterError("test X must have one row per id and the client's columns")
        hashed = hash_ids(self._id_key, ids)
        self._test_hashed = hashed
        self._X_test = Xa[:, self._cols][canonical_order(hashed)]

    @handles(m.TestIds)
    def on_test_ids(self, sender: str, msg: m.TestIds) -> m.ClientTestIds:
        return m.ClientTestIds(b"".join(self._test_hashed))

    @handles(m.PredictRequest)
    def on_predict(self, sender: str, msg: m.PredictRequest) -> m.LeafSets:
        """One-round prediction (Algorithm 3): per tree, the leaves each test sample can reach
        in the partial tree, both branches at withheld nodes (Reveals: to the master, the side
        of each of this client's splits every test sample takes)."""
        n_test = self._X_test.shape[0]
        bits, n_leaves = [], []
        for t in self.trees:
            reach = t.reachable_leaves(self._X_test)
            n_leaves.append(reach.shape[1])
            bits.append(np.packbits(reach, axis=None))
        return m.LeafSets(n_test, np.asarray(n_leaves, dtype=np.int64), tuple(bits))

    @handles(m.RouteRequest)
    def on_route(self, sender: str, msg: m.RouteRequest) -> m.RouteReply:
        """Classical prediction: one node's test, by :meth:`securetrees.trees.Tree.goes_left`."""
        if not 0 <= msg.tree < len(self.trees):
            raise ProtocolError("unknown tree")
        t = self.trees[msg.tree]
        k = msg.node
        if not 0 <= k < t.n_nodes or t.left[k] == -1 or t.withheld[k]:
            raise ProtocolError(f"{self.name} does not hold the split of node {k}")
        idx = np.asarray(msg.samples, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self._X_test.shape[0]):
            raise ProtocolError("test sample index out of range")
        return m.RouteReply(t.goes_left(self._X_test[idx, t.feature[k]], k))
