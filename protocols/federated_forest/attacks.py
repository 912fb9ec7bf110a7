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

They read the transcript (what the attacker received or sent) and the attacker's own
secrets; the ground truth they are scored against comes from the fit.  Used by
``tests/security/test_federated_forest_labels.py`` and printed by
``python -m securetrees.protocols.federated_forest.attacks``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.paillier import Ciphertext, PrivateKey
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.encrypted_stats import candidate_histograms
from securetrees.protocols.federated_forest.skeleton import LayerState
from securetrees.protocols.federated_forest.slots import SlotLayout
from securetrees.runtime import Record

__all__ = [
    "FlagResult",
    "SeenLeaf",
    "bin_count_fingerprint",
    "bin_recovery",
    "join_flagged",
    "leaves_seen",
    "majority_rate",
    "master_label_recovery",
    "master_purity_join",
    "master_purity_labels",
    "purity_flag_attack",
]

IntArray = npt.NDArray[np.int64]


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
    so that the figures repeat exactly; one column per fit."""
    from securetrees.rand import DeterministicRandom

    rows = [attack_report(*attack_fit(seed, rng=DeterministicRandom(f"ff-labels/{seed}"))) for seed in range(1, 6)]
    for key in rows[0]:
        vals = [r[key] for r in rows]
        print(f"{key:26s} " + " ".join(f"{v:8.3f}" for v in vals))


if __name__ == "__main__":  # pragma: no cover
    main()
