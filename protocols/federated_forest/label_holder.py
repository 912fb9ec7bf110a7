"""The label holder's steps in Federated Forest (a client built with ``labels``).

It distributes the labels (``shared``) or their encryptions (``encrypted``), answers the node
statistics (``shared`` only), and in ``encrypted`` mode scores the other clients' encrypted
candidates, names each node's winner, and alone keeps the node values, the purity of every node and
which nodes are cover splits.  See ``specs/federated_forest.md``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from securetrees.errors import ProtocolError, UnexpectedMessage
from securetrees.paillier import Ciphertext, generate_keypair
from securetrees.paillier.batch import decrypt_residues, encrypt_many
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.client_base import ClientBase, ScoreAnswer, message_digest
from securetrees.protocols.federated_forest.cover import random_valid_splits, reference_ancestor
from securetrees.protocols.federated_forest.encrypted_stats import (
    candidate_histograms,
)
from securetrees.protocols.federated_forest.skeleton import (
    check_positions,
    forest_output,
)
from securetrees.protocols.federated_forest.slots import classification_units, regression_units
from securetrees.rand import KeyedRandom, RandomSource
from securetrees.runtime import handles
from securetrees.trees import best_splits, node_totals

__all__ = ["LabelHolderDuties"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class LabelHolderDuties(ClientBase):
    """The steps only the label holder answers (each refuses a client without labels)."""

    @handles(m.DistributeLabels)
    def on_distribute_labels(self, sender: str, msg: m.DistributeLabels) -> m.Ack:
        """Setup (label holder): labels to every other client (``shared``), or one fresh
        ciphertext of each sample's packed unit statistics (``encrypted``)."""
        setup = self._require_setup()
        spec, labels = self._labels_spec, self._labels
        if spec is None or labels is None:
            raise UnexpectedMessage(f"{self.name} holds no labels")
        others = [c for c in setup.client_names if c != self.name]
        request: m.SharedLabels | m.EncryptedLabels
        if setup.label_protection == "shared":
            request = m.SharedLabels(np.asarray(labels, dtype=np.float64 if spec.n_classes is None else np.int64))
        else:
            if spec.keypair is not None:
                self._sk = spec.keypair[1]
            elif self._sk is None:  # a repeated setup (resume) keeps the key: sent requests stay valid
                self._sk = generate_keypair(spec.key_bits, rng=self._rng, allow_insecure=spec.allow_insecure)[1]
            pk = self._pk = self._sk.public_key if spec.keypair is None else spec.keypair[0]
            if spec.n_classes is None:
                layout, units = regression_units(np.asarray(labels, dtype=np.float64), spec.frac_bits)
            else:
                layout, units = classification_units(np.asarray(labels, dtype=np.int64), spec.n_classes)
            self._layout = layout
            layout.bins_per_plaintext(pk.bits)
            cts = encrypt_many(pk, units, mode=self._mode, rng=self._rng, executor=self.executor)
            self.counters.encryptions += len(cts)
            request = m.EncryptedLabels(pk.to_bytes(), layout.n_slots, layout.slot_bits,
                                        tuple(c.value for c in cts))
        if others:
            self.call_many(dict.fromkeys(others, request), expect=m.Ack)
        return m.Ack()

    def _frontier_totals(self) -> FloatArray:
        """The label holder's summed label statistics of each frontier node."""
        state = self._state
        if self._stats is None or state is None:
            raise UnexpectedMessage(f"{self.name} holds no labels")
        return node_totals(state.pos, self._stats, state.frontier.size, rows=state.rows)

    def _record_values(self) -> None:
        """``encrypted`` (label holder): the frontier's values, kept in the own tree for
        prediction's last step; nobody is sent them."""
        if self._criterion is None or self._skeleton is None or self._state is None:
            raise UnexpectedMessage(f"{self.name} holds no labels")
        values = self._criterion.leaf_value(self._frontier_totals()).reshape(self._state.frontier.size, -1)
        self._skeleton.set_values(self._state.frontier, values)

    @handles(m.NodeStatsRequest)
    def on_node_stats(self, sender: str, msg: m.NodeStatsRequest) -> m.NodeStats:
        """Layer step 1 (label holder, ``shared`` mode only): purity of each frontier node and
        its value (Reveals: to the master, which nodes are pure and the node values, the complete
        model's leaves; every client holds the labels in this mode anyway).  Refused in
        ``encrypted`` mode: values and purity stay with the label holder."""
        setup = self._require_setup()
        state = self._require_tree(msg.tree)
        if self._stats is None or not self.is_label_holder or self._criterion is None:
            raise UnexpectedMessage(f"{self.name} holds no labels")
        if setup.label_protection == "encrypted":
            raise UnexpectedMessage("node statistics stay with the label holder in encrypted mode")
        totals = self._frontier_totals()
        values = self._criterion.leaf_value(totals).reshape(state.frontier.size, -1)
        return m.NodeStats(np.ascontiguousarray(values), np.asarray(self._criterion.is_pure(totals)))

    def _cover(self, hist: FloatArray, slots: BoolArray, n_bins: IntArray, categorical: BoolArray,
               positions: IntArray, found: BoolArray, gain: FloatArray, bins: IntArray, mleft: BoolArray,
               feature_of: Callable[[int, int], int], feat: IntArray, label: str) -> None:
        """Cover splits (label holder, ``encrypted``): where no candidate gains, a uniformly random
        valid candidate is reported as found with gain 0, so the scored client cannot tell a
        pure or gainless node from one that splits (``specs``, "Cover splits").  In place."""
        setup = self._require_setup()
        need = np.flatnonzero(~found)
        if need.size == 0:
            return
        channel = np.ones(hist.shape[-1]) if setup.n_classes else np.eye(hist.shape[-1])[0]
        streams: list[RandomSource] = [KeyedRandom(self._cover_key, f"split/{self._tree}/{label}/{int(positions[k])}")
                                       for k in need.tolist()]
        ok, slot, b, ml = random_valid_splits(hist[need], slots[need], n_bins[need], categorical[need], channel,
                                              setup.min_samples_leaf, streams)
        for i, k in enumerate(need.tolist()):
            if ok[i]:
                found[k], gain[k], bins[k], mleft[k] = True, 0.0, b[i], ml[i]
                feat[k] = feature_of(k, int(slot[i]))

    @handles(m.ScoreRequest)
    def on_score_request(self, sender: str, msg: m.ScoreRequest) -> m.ScoreReply:
        """Layer step 2b (label holder): decrypt the packed statistics, score each node's
        candidates with ``best_splits`` (Reveals: the per-bin label statistics of the sender's
        candidates, their number and bin counts; not which features they are).

        One request per sender, tree and layer: the scoring oracle is single-use.  A resend
        (the sender or the master restarted) is answered from the kept reply if it is byte
        for byte the request already answered, and refused otherwise."""
        if self._sk is None or self._layout is None or self._criterion is None:
            raise UnexpectedMessage(f"{self.name} cannot score encrypted statistics")
        setup = self._require_setup()
        state = self._require_tree(msg.tree)
        if msg.layer != state.depth:
            raise UnexpectedMessage("score request for another layer")
        digest = message_digest(msg)
        answered = self._answered.get((msg.tree, msg.layer, sender))
        if answered is not None:
            if answered.digest != digest:
                raise UnexpectedMessage(f"{sender} already sent other candidates for this layer "
                                        "(a resend must repeat them byte for byte)")
            return answered.reply
        node = np.asarray(msg.entry_node, dtype=np.int64)
        nbins = np.asarray(msg.entry_bins, dtype=np.int64)
        cat = np.asarray(msg.entry_categorical, dtype=bool)
        chunks = np.asarray(msg.chunks, dtype=np.int64)
        n_entries = node.size
        if not (nbins.shape == cat.shape == chunks.shape == (n_entries,)) or n_entries == 0:
            raise ProtocolError("malformed score request")
        max_bins = setup.max_bins
        per_ct = self._layout.bins_per_plaintext(self._sk.public_key.bits)
        if nbins.min() < 1 or nbins.max() > max_bins or np.any(chunks != -(-(nbins + 1) // per_ct)):
            raise ProtocolError("a candidate's bin count or chunk count is out of range")
        if int(chunks.sum()) != len(msg.ciphertexts):
            raise ProtocolError("wrong number of packed ciphertexts")
        if node.min() < 0 or node.max() >= state.frontier.size or np.any(np.diff(node) < 0):
            raise ProtocolError("candidates must be grouped by increasing node position")
        pk = self._sk.public_key
        plain = decrypt_residues(self._sk, [Ciphertext(pk, v) for v in msg.ciphertexts],  # InvalidCiphertext
                                 executor=self.executor, trusted_workers=self.trusted_workers)
        self.counters.decryptions += len(plain)
        positions, hist, table = candidate_histograms(plain, self._layout, node, nbins, chunks, per_ct, max_bins)
        res = best_splits(hist, self._criterion, categorical=cat, n_bins=nbins, features=table,
                          min_samples_leaf=setup.min_samples_leaf)
        found, gain, feat = res.found.copy(), res.gain.copy(), res.feature.astype(np.int64)
        bins, mleft = res.bin.astype(np.int64), res.missing_left.copy()
        first = np.ones(table.shape, dtype=bool)  # each entry's first slot (shorter nodes repeat their last)
        first[:, 1:] = table[:, 1:] != table[:, :-1]
        self._cover(hist, first, nbins[table], cat[table], positions, found, gain, bins, mleft,
                    lambda k, j: int(table[k, j]), feat, f"{msg.layer}/{sender}")
        reply = m.ScoreReply(positions.astype(np.int64), found, feat, bins, mleft)
        self._answered[(msg.tree, msg.layer, sender)] = ScoreAnswer(
            digest, reply, positions[found].astype(np.int64), gain[found].astype(np.float64))
        return reply

    @handles(m.WinnersRequest)
    def on_winners_request(self, sender: str, msg: m.WinnersRequest) -> m.Winners:
        """Layer step 2c (label holder, ``encrypted``): name each offered node's winning client:
        where the central forest splits (not pure, in the reference tree, a positive gain) the
        client of the best gain, ties to the earliest in the master's order (increasing feature
        id, the central tie-break); elsewhere a uniformly random offering client, a cover split
        whose subtree is not part of the model (Reveals: to the master, the winner only: no
        gain, no purity, no reference flag; to the label holder, which clients offered a
        candidate at each node and the order of their proposed feature ids).

        The offers must be exactly those the label holder saw: its own valid candidates and
        those it reported found in each client's score reply."""
        setup = self._require_setup()
        state = self._require_tree(msg.tree)
        if not self.is_label_holder or setup.label_protection != "encrypted" or self._criterion is None:
            raise UnexpectedMessage(f"{self.name} names no winners")
        if msg.layer != state.depth:
            raise UnexpectedMessage("winners requested for another layer")
        positions = np.asarray(msg.positions, dtype=np.int64)
        check_positions(positions, state.frontier.size)
        counts = np.asarray(msg.counts, dtype=np.int64)
        clients = np.asarray(msg.clients, dtype=np.int64)
        names = setup.client_names
        if clients.max() >= len(names):
            raise ProtocolError("unknown client in the offers")
        starts = np.concatenate([[0], np.cumsum(counts)]).tolist()
        offers = {p: clients[starts[k]:starts[k + 1]].tolist() for k, p in enumerate(positions.tolist())}
        if any(len(set(o)) != len(o) for o in offers.values()):
            raise ProtocolError("a client offered twice at one node")
        gains: dict[int, dict[int, float]] = {self._index: self._own_gains}
        for i, name in enumerate(names):
            if i != self._index:
                answer = self._answered.get((msg.tree, msg.layer, name))
                gains[i] = {} if answer is None else dict(zip(answer.positions.tolist(), answer.gains.tolist(),
                                                              strict=True))
        for i, g in gains.items():
            if {p for p, o in offers.items() if i in o} != set(g):
                raise ProtocolError(f"the offers of {names[i]} differ from the candidates the label holder saw")
        pure = np.asarray(self._criterion.is_pure(self._frontier_totals()), dtype=bool)
        real = ~pure & np.asarray(self._ref, dtype=bool)[state.frontier]
        won: list[int] = []
        self._kept = {}
        for p, o in offers.items():
            top = max(gains[i][p] for i in o)
            if real[p] and top > 0:
                won.append(next(i for i in o if gains[i][p] == top))
                self._kept[p] = True
            else:
                choice = KeyedRandom(self._cover_key, f"winner/{msg.tree}/{int(state.frontier[p])}")
                won.append(o[choice.randbelow(len(o))])
                self._kept[p] = False
        return m.Winners(np.asarray(won, dtype=np.int64))

    @handles(m.TestLeaves)
    def on_test_leaves(self, sender: str, msg: m.TestLeaves) -> m.Ack:
        """Prediction's last step (label holder, ``encrypted``): map each leaf to the reference
        leaf it grew from (cover subtrees are not part of the model), compute the forest output of
        each test sample from the values it kept and keep it (:attr:`kept_output`, canonical test
        order); the master gets an ``Ack`` only (Reveals: the label holder learns the leaf, cover
        leaves included, each test sample reaches in each tree; the master learns nothing, so no
        output from which leaf values follow)."""
        setup = self._require_setup()
        if not self.is_label_holder or setup.label_protection != "encrypted":
            raise UnexpectedMessage(f"{self.name} keeps no leaf values")
        leaves = np.asarray(msg.leaves)
        n_test = self._X_test.shape[0]
        if not self.trees or leaves.dtype.kind not in "iu" or leaves.shape != (len(self.trees), n_test):
            raise ProtocolError("leaves handed for the wrong trees or test rows")
        mapped = np.empty(leaves.shape, dtype=np.int64)
        for k, (t, r, row) in enumerate(zip(self.trees, self.reference, leaves, strict=True)):
            if row.size and (row.min() < 0 or row.max() >= t.n_nodes or np.any(t.left[row] != -1)):
                raise ProtocolError("a handed node is not a leaf")
            mapped[k] = reference_ancestor(t, r)[row]
        self.keep_output(forest_output(self.trees, mapped, classification=bool(setup.n_classes)))
        return m.Ack()

    def keep_output(self, output: FloatArray) -> None:
        """Keep the forest output of the test rows (canonical order; local).  A deployment adds
        where it writes it and to whom it releases it."""
        self.kept_output = output
