"""Audit helpers: the label attacks of ``specs/federated_forest.md`` ("What the attacks
measure"), run on a finished in-process fit from one party's view.

* :func:`master_label_recovery` — the master joins the leaf values it holds with the
  partitions it relayed and labels every training sample (each tree votes its leaf's class
  distribution).
* :func:`master_purity_join` / :func:`master_purity_labels` — the master joins every node
  its view says is pure (a ``node_stats`` purity flag) across trees and, given one label per
  joined group, labels the group; everyone else gets the majority-class guess.  ``encrypted``
  mode sends the master no purity flag, so this falls to the majority-class rate.
* :func:`purity_flag_attack` — a client without labels flags as pure every leaf that stopped
  before ``max_depth`` with weight at least ``min_samples_split`` (optionally only those that
  were not in its own ``find_splits``), joins the flagged leaves across trees and, given one
  label per joined group, labels the rest of the group.
* :func:`bin_count_fingerprint` and :func:`bin_recovery` — the label holder names another
  client's anonymous candidates by their bin counts, and finds the bin of a (sample,
  candidate) pair wherever a class occurs in a single bin of a small node.

* :func:`outputs_at` — every forest output a party received (float arrays of one row per test
  sample and one column per output, whatever the message), the input of the next two.
* :func:`least_squares_labels` / :func:`leaf_average_labels` — the master, given the forest
  outputs of test rows and the leaf each reaches (it routes them), solves the leaf values by
  least squares (or averages the outputs per leaf) and spreads them to the training samples of
  each leaf through the partitions it relayed.  With no output it can only guess one class.
* :func:`cooccurrence_labels` — the master or any client, from training messages alone, scores
  each sample by how often it shares a leaf with each of a few samples whose labels it knows;
  :func:`knn_labels` is the baseline a client has without the protocol (its own columns).

They read the transcript (what the attacker received or sent) and the attacker's own
secrets; the ground truth they are scored against comes from the fit.  Used by
``tests/security/test_federated_forest_labels.py`` and printed by
``python -m securetrees.protocols.federated_forest.attacks``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ProtocolError
from securetrees.paillier import Ciphertext, PrivateKey
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.encrypted_stats import candidate_histograms
from securetrees.protocols.federated_forest.skeleton import LayerState
from securetrees.protocols.federated_forest.slots import SlotLayout
from securetrees.runtime import Message, Record, message

__all__ = [
    "PREDICTION_KNOWN",
    "FlagResult",
    "OutputToMaster",
    "SeenLeaf",
    "bin_count_fingerprint",
    "bin_recovery",
    "cooccurrence_labels",
    "join_flagged",
    "knn_labels",
    "leaf_average_labels",
    "least_squares_labels",
    "leaves_seen",
    "majority_rate",
    "master_label_recovery",
    "master_purity_join",
    "master_purity_labels",
    "outputs_at",
    "outputs_to_master",
    "predict_fresh",
    "prediction_fit",
    "prediction_report",
    "purity_flag_attack",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SeenLeaf:
    """A leaf as a party replaying the broadcast partitions sees it."""

    tree: int
    node: int
    depth: int
    samples: IntArray  # canonical indices with positive bootstrap weight
    weight: float
    asked: bool  # in this party's find_splits of its layer


@dataclass(frozen=True)
class _NodeSeen:
    tree: int
    layer: int
    position: int
    node: int
    samples: IntArray
    weights: IntArray
    pure: bool  # reported pure in a node_stats the replayed records hold


def _replay(records: Sequence[Record]) -> tuple[list[SeenLeaf], list[_NodeSeen]]:
    """Replay ``tree_start`` / ``find_splits`` / ``layer_partition`` / ``tree_end`` in order:
    every leaf, and every frontier node of every layer with its samples."""
    leaves: list[SeenLeaf] = []
    nodes: list[_NodeSeen] = []
    state: LayerState | None = None
    weights = np.zeros(0, dtype=np.int64)
    tree = -1
    asked: set[int] = set()
    counter = [0]
    pure_now = np.zeros(0, dtype=bool)

    def split(nodes_: IntArray, lw: Any, rw: Any) -> IntArray:
        first = counter[0]
        counter[0] += 2 * nodes_.size
        return np.arange(first, counter[0], dtype=np.int64)

    def close(st: LayerState, split_pos: set[int]) -> None:
        groups = st.samples_of(np.arange(st.frontier.size, dtype=np.int64))
        nw = st.node_weights(weights)
        for p, g in enumerate(groups):
            rows = st.rows[g]
            is_pure = bool(pure_now[p]) if pure_now.size == st.frontier.size else False
            nodes.append(_NodeSeen(tree, st.depth, p, int(st.frontier[p]), rows, weights[rows], is_pure))
            if p not in split_pos:
                leaves.append(SeenLeaf(tree, int(st.frontier[p]), st.depth, rows, float(nw[p]), p in asked))

    for r in records:
        msg = r.payload
        if isinstance(msg, m.TreeStart):
            tree, weights = msg.tree, np.asarray(msg.weights, dtype=np.int64)
            state, asked, counter[0] = LayerState.start(weights), set(), 1
        elif state is None:
            continue
        elif isinstance(msg, m.NodeStats):
            pure_now = np.asarray(msg.pure, dtype=bool)
        elif isinstance(msg, m.FindSplits) and msg.layer == state.depth:
            asked = set(np.asarray(msg.positions).tolist())
        elif isinstance(msg, m.LayerPartition) and msg.layer == state.depth:
            pos = np.asarray(msg.positions, dtype=np.int64)
            close(state, set(pos.tolist()))
            state.advance(pos, np.asarray(msg.left), weights, split)
            asked, pure_now = set(), np.zeros(0, dtype=bool)
        elif isinstance(msg, m.TreeEnd):
            close(state, set())
            state, pure_now = None, np.zeros(0, dtype=bool)
    return leaves, nodes


def leaves_seen(records: Sequence[Record]) -> list[SeenLeaf]:
    """Every leaf of every tree, from the broadcast messages among ``records``."""
    return _replay(records)[0]


def majority_rate(y: npt.ArrayLike) -> float:
    """Accuracy of guessing the most frequent class for everyone."""
    counts = np.bincount(np.asarray(y, dtype=np.int64))
    return float(counts.max() / counts.sum())


def master_label_recovery(master_trees: Sequence[Any], broadcast: Sequence[Record], y: npt.ArrayLike) -> float:
    """The master's attack: each tree votes its leaf's normalised class counts for every sample
    of the leaf; the guess is the vote's argmax (class 0 without a vote).  Returns the fraction
    of samples labelled correctly (``y`` in canonical order)."""
    yy = np.asarray(y, dtype=np.int64)
    n_classes = int(master_trees[0].value.shape[1])
    votes = np.zeros((yy.size, n_classes))
    for leaf in leaves_seen(broadcast):
        v = np.asarray(master_trees[leaf.tree].value[leaf.node], dtype=np.float64)
        if not np.all(np.isfinite(v)) or v.sum() <= 0:
            continue  # the master holds no value for this leaf
        votes[leaf.samples] += v / v.sum()
    return float(np.mean(np.argmax(votes, axis=1) == yy))


@dataclass(frozen=True)
class FlagResult:
    """A purity-flag attack's outcome.  Leaves of one distinct sample (bootstrap copies) are
    trivially single-label and join nothing: only leaves of two samples or more count."""

    flagged: int  # leaves of two samples or more flagged pure
    truly_pure: int  # of them, truly single-label
    groups: int  # joined groups of two samples or more
    propagated: int  # group members other than the one whose label is given
    correct: int  # of them, labelled correctly from that one label
    exact_partition: bool  # the groups are exactly the classes, every sample covered

    @property
    def propagation(self) -> float:
        """Accuracy of the labels propagated (0 when nothing is propagated)."""
        return self.correct / self.propagated if self.propagated else 0.0


def _join_roots(flagged: Sequence[IntArray], n: int) -> IntArray:
    """Union-find over shared samples: each sample's group representative (sets of fewer
    than two samples join nothing)."""
    parent = np.arange(n)

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = int(parent[a])
        return a

    for samples in flagged:
        if samples.size < 2:
            continue
        root = find(int(samples[0]))
        for s in samples[1:].tolist():
            r = find(int(s))
            if r != root:
                parent[r] = root
    return np.asarray([find(i) for i in range(n)], dtype=np.int64)


def join_flagged(flagged: Sequence[IntArray], y: npt.ArrayLike) -> FlagResult:
    """Join the sample sets flagged single-label (union-find over shared samples) and label
    each joined group from its first member's label (``y`` in canonical order)."""
    yy = np.asarray(y, dtype=np.int64)
    counted = [f for f in flagged if f.size >= 2]
    pure = sum(int(np.unique(yy[f]).size == 1) for f in counted)
    roots = _join_roots(counted, yy.size)
    correct = total = groups = 0
    exact = True
    for r in np.unique(roots):
        members = np.flatnonzero(roots == r)
        if members.size < 2:
            exact = False
            continue
        groups += 1
        correct += int(np.sum(yy[members[1:]] == yy[members[0]]))
        total += members.size - 1
        exact &= bool(np.unique(yy[members]).size == 1)
    exact = exact and groups == np.unique(yy).size
    return FlagResult(len(counted), pure, groups, total, correct, exact)


def purity_flag_attack(view: Sequence[Record], y: npt.ArrayLike, *, max_depth: int, min_samples_split: float = 2.0,
                       only_unasked: bool = True) -> FlagResult:
    """A non-label client's attack (see the module docstring): flag the leaves that stopped
    before ``max_depth`` with weight at least ``min_samples_split`` (``only_unasked``: and
    were not in the client's own ``find_splits``), join them."""
    flagged = [leaf.samples for leaf in leaves_seen(view)
               if leaf.depth < max_depth and leaf.weight >= min_samples_split and not (only_unasked and leaf.asked)]
    return join_flagged(flagged, y)


def master_purity_join(master_view: Sequence[Record], y: npt.ArrayLike) -> FlagResult:
    """The master's join: every node the label holder reported pure (``node_stats``), joined
    across trees (``master_view``: the messages the master sent and received, in order)."""
    return join_flagged([n.samples for n in _replay(master_view)[1] if n.pure], y)


def master_purity_labels(master_view: Sequence[Record], y: npt.ArrayLike) -> float:
    """The master's labelling from :func:`master_purity_join`: each joined group labelled from
    its first member's (known) label, every other sample guessed as the majority class.
    Returns the fraction of samples labelled correctly; with no purity flag in the view no
    group forms and it equals :func:`majority_rate` exactly."""
    yy = np.asarray(y, dtype=np.int64)
    guess = np.full(yy.size, int(np.argmax(np.bincount(yy))), dtype=np.int64)
    roots = _join_roots([n.samples for n in _replay(master_view)[1] if n.pure], yy.size)
    for r in np.unique(roots):
        members = np.flatnonzero(roots == r)
        if members.size >= 2:
            guess[members] = yy[members[0]]
    return float(np.mean(guess == yy))


def _score_requests(view: Sequence[Record], sender: str) -> list[m.ScoreRequest]:
    return [r.payload for r in view if r.sender == sender and isinstance(r.payload, m.ScoreRequest)]


def bin_count_fingerprint(holder_view: Sequence[Record], sender: str, sender_view: Sequence[Record]
                          ) -> tuple[float, float]:
    """The label holder's fingerprint: it names each anonymous entry from its bin count.  Returns
    ``(accuracy, baseline)``: the accuracy of the best possible naming from the count (per
    observed count, the feature most often behind it, read from the sender's ``find_splits``),
    and that of naming every entry as the most frequent feature (what a count that carries no
    information allows)."""
    asked = {(r.payload.tree, r.payload.layer): r.payload for r in sender_view if isinstance(r.payload, m.FindSplits)}
    pairs: list[tuple[int, int]] = []  # (bin count, true global feature id)
    for req in _score_requests(holder_view, sender):
        feats = np.asarray(asked[(req.tree, req.layer)].features, dtype=np.int64)
        pairs += list(zip(np.asarray(req.entry_bins, dtype=np.int64).tolist(), feats.tolist(), strict=True))
    if not pairs:
        return 0.0, 0.0
    counts: dict[tuple[int, int], int] = {}
    for p in pairs:
        counts[p] = counts.get(p, 0) + 1
    best_per_count: dict[int, int] = {}
    for (v, _), c in counts.items():
        best_per_count[v] = max(best_per_count.get(v, 0), c)
    per_feature: dict[int, int] = {}
    for (_, f), c in counts.items():
        per_feature[f] = per_feature.get(f, 0) + c
    return sum(best_per_count.values()) / len(pairs), max(per_feature.values()) / len(pairs)


def bin_recovery(holder_view: Sequence[Record], sender: str, key: PrivateKey, layout: SlotLayout, max_bins: int,
                 y: npt.ArrayLike, sender_view: Sequence[Record], sender_binned: npt.ArrayLike,
                 sender_feature_ids: Sequence[int], missing_bin: int, *, max_node: int = 40) -> tuple[float, float]:
    """The label holder's bin recovery in nodes of at most ``max_node`` samples: decrypt each
    entry's per-bin class counts; where class ``c`` occurs in one bin only, every sample of
    class ``c`` in the node is in that bin.  Returns ``(recovered, correct)``, fractions of the
    (sample, candidate) pairs of those nodes (``correct``: checked against the sender's bins,
    the candidate's feature read from the sender's ``find_splits``)."""
    yy = np.asarray(y, dtype=np.int64)
    binned = np.asarray(sender_binned)
    fids = np.asarray(sender_feature_ids, dtype=np.int64)
    _, nodes = _replay(holder_view)
    by_key = {(n.tree, n.layer, n.position): n for n in nodes}
    asked = {(r.payload.tree, r.payload.layer): r.payload for r in sender_view if isinstance(r.payload, m.FindSplits)}
    per_ct = layout.bins_per_plaintext(key.public_key.bits)
    pairs = recovered = correct = 0
    for req in _score_requests(holder_view, sender):
        node = np.asarray(req.entry_node, dtype=np.int64)
        nbins = np.asarray(req.entry_bins, dtype=np.int64)
        chunks = np.asarray(req.chunks, dtype=np.int64)
        plain = [key.decrypt_residue(Ciphertext(key.public_key, v)) for v in req.ciphertexts]
        positions, hist, table = candidate_histograms(plain, layout, node, nbins, chunks, per_ct, max_bins)
        fs = asked[(req.tree, req.layer)]
        feats = np.asarray(fs.features, dtype=np.int64)
        entry_feature = feats  # entries follow find_splits' features in order (distinct, increasing per node)
        for k, p in enumerate(positions.tolist()):
            seen = by_key[(req.tree, req.layer, p)]
            if seen.samples.size > max_node:
                continue
            for j in np.unique(table[k]).tolist():
                slot = int(np.flatnonzero(table[k] == j)[0])
                h = hist[k, slot]  # (bins + missing, classes)
                local = int(np.searchsorted(fids, entry_feature[j]))
                truth = binned[seen.samples, local].astype(np.int64)
                truth = np.where(truth == missing_bin, max_bins, truth)
                pairs += seen.samples.size
                for c in np.unique(yy[seen.samples]).tolist():
                    where = np.flatnonzero(h[:, c] > 0)
                    if where.size == 1:
                        mine = yy[seen.samples] == c
                        recovered += int(mine.sum())
                        correct += int(np.sum(truth[mine] == where[0]))
    return (recovered / pairs if pairs else 0.0, correct / pairs if pairs else 0.0)


# ---------------------------------------------------------------------------- prediction
def outputs_at(view: Sequence[Record], receiver: str, n_test: int, n_outputs: int) -> list[FloatArray]:
    """Every forest output ``receiver`` was sent: each float array field, in any message it
    received, of shape ``(n_test, n_outputs)`` (a check by shape, not by message name, so a
    step that hands the output under another name is found too)."""
    found: list[FloatArray] = []
    for r in view:
        if r.receiver != receiver or not dataclasses.is_dataclass(r.payload):
            continue
        for f in dataclasses.fields(r.payload):
            v = getattr(r.payload, f.name)
            if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.shape == (n_test, n_outputs):
                found.append(np.asarray(v, dtype=np.float64))
    return found


def _leaf_index(leaves: IntArray) -> tuple[dict[tuple[int, int], int], IntArray]:
    """A column per (tree, leaf) reached by a test row; ``cols[t, j]`` is row ``j``'s in tree ``t``."""
    index: dict[tuple[int, int], int] = {}
    cols = np.empty(leaves.shape, dtype=np.int64)
    for t in range(leaves.shape[0]):
        for j, leaf in enumerate(leaves[t].tolist()):
            cols[t, j] = index.setdefault((t, leaf), len(index))
    return index, cols


def _spread(values: dict[tuple[int, int], FloatArray], broadcast: Sequence[Record], n: int, n_outputs: int
            ) -> IntArray:
    """Each training sample's guess: the argmax of the values of the leaves it fell in (in bag),
    over the trees; class 0 where no value is known (the master knows no class frequency)."""
    votes = np.zeros((n, n_outputs))
    for leaf in leaves_seen(broadcast):
        v = values.get((leaf.tree, leaf.node))
        if v is not None:
            votes[leaf.samples] += v
    return np.asarray(np.argmax(votes, axis=1), dtype=np.int64)


def least_squares_labels(leaves: IntArray, outputs: Sequence[FloatArray], broadcast: Sequence[Record], n: int,
                         n_outputs: int) -> IntArray:
    """The master's least-squares attack: the output of test row ``j`` is the mean over the trees
    of the value of the leaf it reaches (``leaves[t, j]``, which the master routed), so the leaf
    values solve ``A v = output`` in the least-squares sense (minimum norm); each training sample
    gets the argmax of its leaves' solved values (``broadcast``: the partitions the master relayed).
    With no output (``outputs`` empty) it guesses class 0 for everyone."""
    if not outputs:
        return np.zeros(n, dtype=np.int64)
    index, cols = _leaf_index(leaves)
    a = np.zeros((leaves.shape[1], len(index)))
    for t in range(leaves.shape[0]):
        a[np.arange(leaves.shape[1]), cols[t]] += 1.0 / leaves.shape[0]
    solved = np.linalg.lstsq(a, outputs[-1], rcond=None)[0]
    return _spread({k: solved[c] for k, c in index.items()}, broadcast, n, n_outputs)


def leaf_average_labels(leaves: IntArray, outputs: Sequence[FloatArray], broadcast: Sequence[Record], n: int,
                        n_outputs: int) -> IntArray:
    """The master's simpler attack: each leaf's value guessed as the mean output of the test rows
    that reach it, spread as :func:`least_squares_labels` does (class 0 with no output)."""
    if not outputs:
        return np.zeros(n, dtype=np.int64)
    index, cols = _leaf_index(leaves)
    sums, counts = np.zeros((len(index), n_outputs)), np.zeros(len(index))
    for t in range(leaves.shape[0]):
        np.add.at(sums, cols[t], outputs[-1])
        np.add.at(counts, cols[t], 1.0)
    return _spread({k: sums[c] / counts[c] for k, c in index.items()}, broadcast, n, n_outputs)


def cooccurrence_labels(broadcast: Sequence[Record], known: IntArray, known_y: IntArray, n: int) -> IntArray:
    """The spreading attack from training messages alone (any party that sees the partitions):
    ``S[i, k]`` counts the trees in which samples ``i`` and ``k`` share a leaf (both in bag);
    each sample gets the class with the largest ``Σ S[i, k]`` over the ``known`` samples ``k``
    of that class (the most frequent known class where it shares no leaf with any)."""
    n_classes = int(known_y.max()) + 1
    at = {int(k): i for i, k in enumerate(known.tolist())}
    score = np.zeros((n, n_classes))
    for leaf in leaves_seen(broadcast):
        for i in [at[s] for s in leaf.samples.tolist() if s in at]:
            score[leaf.samples, known_y[i]] += 1.0
    fallback = int(np.argmax(np.bincount(known_y, minlength=n_classes)))
    guess = np.asarray(np.argmax(score, axis=1), dtype=np.int64)
    guess[score.sum(axis=1) == 0] = fallback
    return guess


def knn_labels(X: FloatArray, known: IntArray, known_y: IntArray, *, k: int = 5) -> IntArray:
    """The baseline without the protocol: a client's own columns (standardised, missing values at
    the column mean), each sample labelled by the majority of its ``k`` nearest known samples."""
    Z = np.asarray(X, dtype=np.float64).copy()
    mean = np.nanmean(Z, axis=0)
    Z = np.where(np.isnan(Z), mean, Z)
    sd = Z.std(axis=0)
    Z = (Z - Z.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    d = ((Z[:, None, :] - Z[None, known, :]) ** 2).sum(axis=2)
    nearest = np.argsort(d, axis=1, kind="stable")[:, :k]
    n_classes = int(known_y.max()) + 1
    votes = np.zeros((Z.shape[0], n_classes))
    for c in range(k):
        votes[np.arange(Z.shape[0]), known_y[nearest[:, c]]] += 1.0
    return np.asarray(np.argmax(votes, axis=1), dtype=np.int64)


@message("test.federated_forest.output_to_master", reply_to=m.TestLeaves)
@dataclass(frozen=True)
class OutputToMaster(Message):
    """The reply the fix removed, label holder → master: the forest output.  For audits only (a
    ``test.`` wire name: no deployment's role handles or expects it)."""

    output: np.ndarray


@contextmanager
def outputs_to_master() -> Iterator[None]:
    """Within the block, prediction's last step is the one before the fix: the label holder answers
    the master the output it computes (and keeps it), the master takes it.  For the planted-leak
    test and the cost figures of ``federated_forest_prediction``; never in a run."""
    from securetrees.protocols.federated_forest.client import Client
    from securetrees.protocols.federated_forest.master import Master

    keep, hand_leaves = Client.on_test_leaves, Master.hand_leaves

    def answer(self: Client, sender: str, msg: m.TestLeaves) -> Message:
        keep(self, sender, msg)
        if self.kept_output is None:  # pragma: no cover - the handler keeps it
            raise ProtocolError("no output kept")
        return OutputToMaster(self.kept_output)

    def hand(self: Master, leaves: IntArray) -> None:
        self.call(self.label_holder, m.TestLeaves(np.asarray(leaves, dtype=np.int64)), expect=OutputToMaster)

    Client.on_test_leaves, Master.hand_leaves = answer, hand  # type: ignore[assignment, method-assign]
    try:
        yield
    finally:
        Client.on_test_leaves, Master.hand_leaves = keep, hand_leaves  # type: ignore[method-assign]


PREDICTION_KNOWN = 30
"""How many training labels the spreading attack and its baseline are given (the first samples of
the canonical order: sorted HMAC ids, a draw no party chooses)."""


def predict_fresh(ff: Any, seed: int, n_test: int = 300) -> FloatArray:
    """One prediction, by ``ff`` fitted by :func:`attack_fit` with ``seed``, of ``n_test`` fresh
    rows of the same distribution (``mixed_data`` under another seed); returns those rows."""
    from securetrees.protocols.federated_forest.testing import mixed_data

    X_test = mixed_data(n_test, seed=seed + 1000, n_classes=int(ff.classes_.size))[0]
    ff.predict_proba(X_test)
    return X_test


def prediction_fit(seed: int, *, n_test: int = 300, **options: Any) -> tuple[Any, IntArray, FloatArray]:
    """:func:`attack_fit`, then :func:`predict_fresh`.  Returns the estimator, the training labels
    (canonical order) and the test rows."""
    ff, y = attack_fit(seed, **options)
    return ff, y, predict_fresh(ff, seed, n_test)


def _last_handed_leaves(view: Sequence[Record]) -> IntArray:
    handed = [r.payload for r in view if r.sender == "master" and isinstance(r.payload, m.TestLeaves)]
    if not handed:
        raise ProtocolError("the master handed no leaves in this view")
    return np.asarray(handed[-1].leaves, dtype=np.int64)


def prediction_report(ff: Any, y: IntArray) -> dict[str, float]:
    """The prediction attacks' figures on one fit and prediction (``y`` in canonical order):
    the master's least-squares and per-leaf attacks from the outputs in its view (``*_now``), and
    from the output the label holder keeps, as the master received it before the fix
    (``*_before``); the spreading attack with :data:`PREDICTION_KNOWN` known labels from client1's
    view, and client1's own-column kNN with the same labels."""
    tr = ff.transcript_
    broadcast = tr.view("client1")
    at_master = [r for r in tr if "master" in (r.sender, r.receiver)]
    leaves = _last_handed_leaves(at_master)
    n, c = y.size, ff.master_.n_outputs
    now = outputs_at(at_master, "master", leaves.shape[1], c)
    kept = ff.clients_[ff.label_holder].kept_output
    known = np.arange(PREDICTION_KNOWN, dtype=np.int64)
    rest = np.arange(PREDICTION_KNOWN, n)
    other = ff.clients_[1]

    def rate(guess: IntArray) -> float:
        return float(np.mean(guess == y))

    return {
        "majority": majority_rate(y),
        "least_squares_before": rate(least_squares_labels(leaves, [kept], broadcast, n, c)),
        "least_squares_now": rate(least_squares_labels(leaves, now, broadcast, n, c)),
        "leaf_average_before": rate(leaf_average_labels(leaves, [kept], broadcast, n, c)),
        "leaf_average_now": rate(leaf_average_labels(leaves, now, broadcast, n, c)),
        "outputs_at_master": float(len(now)),
        "cooccurrence": float(np.mean(cooccurrence_labels(broadcast, known, y[known], n)[rest] == y[rest])),
        "knn_own_columns": float(np.mean(knn_labels(other._X, known, y[known])[rest] == y[rest])),
    }


# ---------------------------------------------------------------------------- measurement
ATTACK_PARTITION = ((0, 2, 4), (1, 3, 5))  # client0 (label holder), client1
ATTACK_DEPTH = 6


def attack_fit(seed: int, *, n: int = 300, n_classes: int = 3, n_estimators: int = 10, **options: Any
               ) -> tuple[Any, IntArray]:
    """The fit the attacks are measured on: :func:`~securetrees.protocols.federated_forest.testing.mixed_data`
    with ``n`` samples and ``n_classes`` classes, ``n_estimators`` trees of depth 6, two clients,
    client0 holding the labels, ``encrypted`` labels under a small test key.  Returns the fitted
    estimator and the labels in its canonical order."""
    from securetrees.protocols.federated_forest.estimators import FederatedForestClassifier
    from securetrees.protocols.federated_forest.testing import mixed_data, small_key_options

    X, y, cat = mixed_data(n, seed=seed, n_classes=n_classes)
    ff = FederatedForestClassifier(n_estimators, max_depth=ATTACK_DEPTH, random_state=seed, categorical_features=cat,
                                   **{**small_key_options(), **options})
    ff.set_params(partition=[list(p) for p in ATTACK_PARTITION]).fit(X, y)
    return ff, np.asarray(y, dtype=np.int64)[ff.sample_order_]


def attack_report(ff: Any, y: IntArray) -> dict[str, float]:
    """Every attack's figure on one fit (``y`` in canonical order; see the module docstring)."""
    tr = ff.transcript_
    holder, other = ff.clients_[0], ff.clients_[1]
    to_c1 = tr.view("client1")
    flags = purity_flag_attack(to_c1, y, max_depth=ATTACK_DEPTH)
    anyflags = purity_flag_attack(to_c1, y, max_depth=ATTACK_DEPTH, only_unasked=False)
    mapper = other._mapper
    rec, ok = bin_recovery(tr.view("client0"), "client1", holder._sk, holder._layout, ff.max_bins, y, to_c1,
                           other._binned, other.feature_ids, mapper.missing_bin)
    at_master = [r for r in tr if "master" in (r.sender, r.receiver)]
    joined = master_purity_join(at_master, y)
    return {
        "master_recovery": master_label_recovery(ff.master_.trees, to_c1, y),
        "majority": majority_rate(y),
        "master_pure_join_correct": joined.correct, "master_pure_join_exact": float(joined.exact_partition),
        "master_pure_join_labels": master_purity_labels(at_master, y),
        "flagged": flags.flagged, "flagged_pure": flags.truly_pure, "flag_groups": flags.groups,
        "flag_correct": flags.correct, "flag_exact": float(flags.exact_partition),
        "any_flagged": anyflags.flagged, "any_flagged_pure": anyflags.truly_pure,
        "any_correct": anyflags.correct, "any_propagated": anyflags.propagated,
        "any_exact": float(anyflags.exact_partition),
        "fingerprint": bin_count_fingerprint(tr.view("client0"), "client1", to_c1)[0],
        "fingerprint_baseline": bin_count_fingerprint(tr.view("client0"), "client1", to_c1)[1],
        "bin_recovered": rec, "bin_correct": ok,
        "rounds": tr.rounds, "MB": tr.total_bytes / 1e6, "decryptions": holder.counters.decryptions,
    }


def main() -> None:  # pragma: no cover - the measurement command of the spec
    """Five fits (seeds 1-5), every party's secret randomness from a ``DeterministicRandom``
    so that the figures repeat exactly, each then predicting 300 fresh rows; one column per fit
    (``rounds`` and ``MB``: the training alone)."""
    from securetrees.rand import DeterministicRandom

    rows = []
    for seed in range(1, 6):
        ff, y = attack_fit(seed, rng=DeterministicRandom(f"ff-labels/{seed}"))
        training = attack_report(ff, y)  # the training's rounds and bytes, before any prediction
        predict_fresh(ff, seed)
        rows.append({**training, **prediction_report(ff, y)})
    for key in rows[0]:
        vals = [r[key] for r in rows]
        print(f"{key:26s} " + " ".join(f"{v:8.3f}" for v in vals))


if __name__ == "__main__":  # pragma: no cover
    main()
