"""Messages of Federated Forest (``specs/federated_forest.md``, "Message flow").

Wire names are ``federated_forest.<step>``.  Sample indices are positions in the
canonical order (the sorted HMAC ids); per-node data is concatenated in the
order of the node positions it accompanies.  Each request names its sender and
receiver roles (``master``, ``client``), each reply the requests it answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.errors import ParameterError
from securetrees.runtime import Message, message

__all__ = [
    "Ack",
    "ApplySplit",
    "Checkpoint",
    "ClientInfo",
    "ClientTestIds",
    "DistributeLabels",
    "EncryptedLabels",
    "FindSplits",
    "Hello",
    "LayerPartition",
    "LeafSets",
    "LocalBest",
    "NodeStats",
    "NodeStatsRequest",
    "Partition",
    "PredictRequest",
    "Resume",
    "RouteReply",
    "RouteRequest",
    "ScoreReply",
    "ScoreRequest",
    "Setup",
    "SharedLabels",
    "TestIds",
    "TestLeaves",
    "TreeEnd",
    "TreeStart",
    "Winners",
    "WinnersRequest",
]


@message("federated_forest.ack", reply_to=(
    "federated_forest.setup", "federated_forest.distribute_labels", "federated_forest.shared_labels",
    "federated_forest.encrypted_labels", "federated_forest.tree_start", "federated_forest.layer_partition",
    "federated_forest.tree_end", "federated_forest.checkpoint", "federated_forest.resume",
    "federated_forest.test_leaves"))
@dataclass(frozen=True)
class Ack(Message):
    """Acknowledges a one-step instruction."""


@message("federated_forest.hello", sender="master", receiver="client")
@dataclass(frozen=True)
class Hello(Message):
    """Master → client: report ids and features (setup)."""


@message("federated_forest.client_info", reply_to=Hello)
@dataclass(frozen=True)
class ClientInfo(Message):
    """Client → master: HMAC ids of its rows (32-byte digests, concatenated), its global
    feature ids, whether it holds the labels and (label holder) the number of classes (0 for
    regression)."""

    hashed_ids: bytes
    feature_ids: tuple[int, ...]
    label_holder: bool
    n_classes: int


@message("federated_forest.setup", sender="master", receiver="client")
@dataclass(frozen=True)
class Setup(Message):
    """Master → client: the run's public settings."""

    n_samples: int
    n_features: int
    n_classes: int
    label_protection: str
    criterion: str
    min_samples_leaf: float
    max_bins: int
    client_names: tuple[str, ...]
    label_holder: str


@message("federated_forest.distribute_labels", sender="master", receiver="client")
@dataclass(frozen=True)
class DistributeLabels(Message):
    """Master → label holder: send the labels (shared) or their encryptions to the other clients."""


@message("federated_forest.shared_labels", sender="client", receiver="client")
@dataclass(frozen=True)
class SharedLabels(Message):
    """Label holder → client (``shared`` mode): the labels in canonical order (codes or targets)."""

    labels: np.ndarray


@message("federated_forest.encrypted_labels", sender="client", receiver="client")
@dataclass(frozen=True)
class EncryptedLabels(Message):
    """Label holder → client (``encrypted`` mode): public key, slot layout, per-sample ciphertexts."""

    public_key: bytes
    n_slots: int
    slot_bits: int
    ciphertexts: tuple[int, ...]


@message("federated_forest.tree_start", sender="master", receiver="client")
@dataclass(frozen=True)
class TreeStart(Message):
    """Master → client: tree index, bootstrap weights, the client's own features of the tree."""

    tree: int
    weights: np.ndarray
    features: tuple[int, ...]


@message("federated_forest.node_stats_request", sender="master", receiver="client")
@dataclass(frozen=True)
class NodeStatsRequest(Message):
    """Master → label holder (``shared`` mode only): values and purity of the current frontier."""

    tree: int
    layer: int


@message("federated_forest.node_stats", reply_to=NodeStatsRequest)
@dataclass(frozen=True)
class NodeStats(Message):
    """Label holder → master (``shared`` mode): purity of each frontier node and its value
    (class counts or mean).  In ``encrypted`` mode there is no such message: values, purity
    and which nodes belong to the model stay with the label holder."""

    values: np.ndarray
    pure: np.ndarray


@message("federated_forest.find_splits", sender="master", receiver="client")
@dataclass(frozen=True)
class FindSplits(Message):
    """Master → client: for each listed frontier position, ``counts[k]`` of the client's own
    global feature ids (concatenated in ``features``) drawn for that node."""

    tree: int
    layer: int
    positions: np.ndarray
    counts: np.ndarray
    features: np.ndarray


@message("federated_forest.local_best", reply_to=FindSplits)
@dataclass(frozen=True)
class LocalBest(Message):
    """Client → master: per listed position whether a valid split exists, its gain (always 0 in
    ``encrypted`` mode, the label holder's own included: gains stay with the label holder), its
    feature id."""

    positions: np.ndarray
    found: np.ndarray
    gains: np.ndarray
    feature_ids: np.ndarray


@message("federated_forest.score_request", sender="client", receiver="client")
@dataclass(frozen=True)
class ScoreRequest(Message):
    """Client → label holder (``encrypted``): anonymous candidate entries (node position,
    bin count, categorical) and ``chunks[e]`` packed, re-randomised ciphertexts each."""

    tree: int
    layer: int
    entry_node: np.ndarray
    entry_bins: np.ndarray
    entry_categorical: np.ndarray
    chunks: np.ndarray
    ciphertexts: tuple[int, ...]


@message("federated_forest.score_reply", reply_to=ScoreRequest)
@dataclass(frozen=True)
class ScoreReply(Message):
    """Label holder → client: per requested node the best entry, bin and missing side (not the
    gain, which stays with the label holder: ``winners_request``)."""

    positions: np.ndarray
    found: np.ndarray
    entries: np.ndarray
    bins: np.ndarray
    missing_left: np.ndarray


@message("federated_forest.winners_request", sender="master", receiver="client")
@dataclass(frozen=True)
class WinnersRequest(Message):
    """Master → label holder (``encrypted``): the frontier positions with at least one valid
    candidate (increasing), how many clients offered one at each (``counts``), and those
    clients' indices (``clients``, concatenated), each node's in increasing order of the
    feature id the client proposed (the central search's tie-break)."""

    tree: int
    layer: int
    positions: np.ndarray
    counts: np.ndarray
    clients: np.ndarray

    def __post_init__(self) -> None:
        if self.tree < 0 or self.layer < 0:
            raise ParameterError("tree and layer are non-negative")
        for a in (self.positions, self.counts, self.clients):
            if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype.kind not in "iu":
                raise ParameterError("positions, counts and clients are integer vectors")
        if self.counts.shape != self.positions.shape or self.positions.size == 0:
            raise ParameterError("one count per position, at least one position")
        if self.counts.min() < 1 or self.clients.size != int(self.counts.sum()):
            raise ParameterError("every position has offers, and clients holds counts.sum() entries")
        if self.positions.min() < 0 or np.any(np.diff(self.positions) <= 0) or self.clients.min() < 0:
            raise ParameterError("positions are increasing, clients non-negative")


@message("federated_forest.winners", reply_to=WinnersRequest)
@dataclass(frozen=True)
class Winners(Message):
    """Label holder → master: per requested position, the index of the client whose candidate
    splits the node (never a gain, never whether the split is part of the model)."""

    clients: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.clients, np.ndarray) or self.clients.ndim != 1 or self.clients.dtype.kind not in "iu" \
                or (self.clients.size and self.clients.min() < 0):
            raise ParameterError("winners are a vector of client indices")


@message("federated_forest.apply_split", sender="master", receiver="client")
@dataclass(frozen=True)
class ApplySplit(Message):
    """Master → winning client: the frontier positions whose split it provides."""

    tree: int
    layer: int
    positions: np.ndarray


@message("federated_forest.partition", reply_to=ApplySplit)
@dataclass(frozen=True)
class Partition(Message):
    """Winning client → master: per position, which of the node's samples go left (concatenated)."""

    left: np.ndarray


@message("federated_forest.layer_partition", sender="master", receiver="client")
@dataclass(frozen=True)
class LayerPartition(Message):
    """Master → client: the positions split (in order) and their left indicators (concatenated)."""

    tree: int
    layer: int
    positions: np.ndarray
    left: np.ndarray


@message("federated_forest.tree_end", sender="master", receiver="client")
@dataclass(frozen=True)
class TreeEnd(Message):
    tree: int


@message("federated_forest.checkpoint", sender="master", receiver="client")
@dataclass(frozen=True)
class Checkpoint(Message):
    """Master → client: save your state under the progress marker ``(tree, layer)``."""

    tree: int
    layer: int


@message("federated_forest.resume", sender="master", receiver="client")
@dataclass(frozen=True)
class Resume(Message):
    """Master → client: restore the checkpoint with this progress marker."""

    tree: int
    layer: int


@message("federated_forest.test_ids", sender="master", receiver="client")
@dataclass(frozen=True)
class TestIds(Message):
    """Master → client: report the HMAC ids of your test rows."""


@message("federated_forest.client_test_ids", reply_to=TestIds)
@dataclass(frozen=True)
class ClientTestIds(Message):
    """Client → master: HMAC ids of its test rows (32-byte digests, concatenated)."""

    hashed_ids: bytes


@message("federated_forest.predict_request", sender="master", receiver="client")
@dataclass(frozen=True)
class PredictRequest(Message):
    """Master → client (one-round prediction): route the test set through all partial trees."""


@message("federated_forest.leaf_sets", reply_to=PredictRequest)
@dataclass(frozen=True)
class LeafSets(Message):
    """Client → master: per tree, ``packbits`` of the (n_test, n_leaves) reachability matrix."""

    n_test: int
    n_leaves: np.ndarray
    bits: tuple[np.ndarray, ...]


@message("federated_forest.test_leaves", sender="master", receiver="client")
@dataclass(frozen=True)
class TestLeaves(Message):
    """Master → label holder (``encrypted`` prediction): ``leaves[t, j]``, the leaf of tree ``t``
    test sample ``j`` reaches (cover leaves included: the label holder maps them to the
    reference leaf whose value they take).  The label holder keeps the forest output it
    computes; the master gets an :class:`Ack` only."""

    leaves: np.ndarray


@message("federated_forest.route_request", sender="master", receiver="client")
@dataclass(frozen=True)
class RouteRequest(Message):
    """Master → owner (classical prediction): which of these test samples go left at a node?"""

    tree: int
    node: int
    samples: np.ndarray


@message("federated_forest.route_reply", reply_to=RouteRequest)
@dataclass(frozen=True)
class RouteReply(Message):
    left: np.ndarray
