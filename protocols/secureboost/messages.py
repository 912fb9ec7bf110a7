"""Wire messages of SecureBoost (``specs/secureboost.md``); wire names ``secureboost.<step>``.

Requests go from the active party (role ``active``, the label holder) to the passive
parties (role ``passive``) only; every passive message is a reply.  Ciphertexts travel
as plain ints and are re-validated by the receiver against its own copy of the key;
instance ids travel as int64 arrays (row positions of the aligned training table).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.errors import ParameterError
from securetrees.runtime import Message, message

__all__ = [
    "BUCKET_EMPTY",
    "BUCKET_REST",
    "BUCKET_SENT",
    "Ack",
    "Checkpoint",
    "End",
    "Gradients",
    "HistogramReply",
    "HistogramRequest",
    "NodeJob",
    "PredictReply",
    "PredictRequest",
    "Resume",
    "Setup",
    "SetupReply",
    "SplitOrder",
    "SplitReply",
    "SplitRequest",
]


BUCKET_SENT, BUCKET_EMPTY, BUCKET_REST = 0, 1, 2
"""Kinds of a bucket in a :class:`HistogramReply`: its sum is in the packed ciphertexts; it is
empty (count 0); it is the first most populous bucket of its feature in its node, whose sum the
active party derives as the node's total minus the feature's other buckets."""


def check_ids(ids: np.ndarray) -> None:
    """Raise :class:`ParameterError` unless ``ids`` is a one-dimensional int64 array."""
    if not isinstance(ids, np.ndarray) or ids.dtype != np.int64 or ids.ndim != 1:
        raise ParameterError("instance ids are a one-dimensional int64 array")


@message("secureboost.setup", sender="active", receiver="passive")
@dataclass(frozen=True)
class Setup(Message):
    """Active → passive (step S0): the active party's Paillier public key, the number of
    aligned training instances and the bin budget every party uses."""

    public_key: bytes
    n_instances: int
    max_bins: int


@message("secureboost.setup_reply", reply_to=Setup)
@dataclass(frozen=True)
class SetupReply(Message):
    """Passive → active: its bucket schema (real bins per local feature, categorical flags);
    the layout of its histograms, public, no edge or value."""

    n_bins: tuple[int, ...]
    categorical: tuple[bool, ...]

    def __post_init__(self) -> None:
        if len(self.n_bins) != len(self.categorical) or not self.n_bins:
            raise ParameterError("one bin count and one categorical flag per feature, at least one feature")


@message("secureboost.gradients", sender="active", receiver="passive")
@dataclass(frozen=True)
class Gradients(Message):
    """Active → passive (step S1): one tree's fresh ciphertexts of the packed ``(1, g, h)``, one per
    instance in row order (:func:`~securetrees.paillier.batch.ciphertexts_to_bytes`), with the
    public layout parameters."""

    tree: int
    frac_bits: int
    g_bound: int
    h_bound: int
    ciphertexts: bytes


@message("secureboost.ack", reply_to=("secureboost.gradients", "secureboost.end", "secureboost.checkpoint",
                                      "secureboost.resume"))
@dataclass(frozen=True)
class Ack(Message):
    """An empty acknowledgement."""


@message("secureboost.node_job")
@dataclass(frozen=True)
class NodeJob(Message):
    """One node whose bucket sums the passive party computes: its id, its parent and sibling
    (``-1``: none in this request), and its instance space."""

    node: int
    parent: int
    sibling: int
    ids: np.ndarray

    def __post_init__(self) -> None:
        check_ids(self.ids)


@message("secureboost.histogram_request", sender="active", receiver="passive")
@dataclass(frozen=True)
class HistogramRequest(Message):
    """Active → passive (step S2): the nodes of one layer to be split."""

    tree: int
    layer: int
    jobs: tuple[NodeJob, ...]


@message("secureboost.histogram_reply", reply_to=HistogramRequest)
@dataclass(frozen=True)
class HistogramReply(Message):
    """Passive → active: the kind of every bucket in (job, feature, bin, missing last) order, and
    the re-randomised packed sums of the buckets of kind :data:`BUCKET_SENT`, ``k`` per ciphertext
    in the same order.  The kinds are a function of the bucket counts (which the active party
    decrypts or derives anyway); the active party recomputes them and refuses a mismatch."""

    n_buckets: int
    kinds: np.ndarray
    packed: tuple[int, ...]

    def __post_init__(self) -> None:
        k = self.kinds
        if not isinstance(k, np.ndarray) or k.dtype != np.uint8 or k.shape != (self.n_buckets,):
            raise ParameterError("one uint8 kind per bucket")
        if k.size and int(k.max()) > BUCKET_REST:
            raise ParameterError("a bucket kind is not sent, empty or rest")


@message("secureboost.split_order")
@dataclass(frozen=True)
class SplitOrder(Message):
    """"Split node ``node`` on your feature ``feature`` at bucket ``bin``; missing values go left
    if ``missing_left``." (step S4)"""

    node: int
    feature: int
    bin: int
    missing_left: bool


@message("secureboost.split_request", sender="active", receiver="passive")
@dataclass(frozen=True)
class SplitRequest(Message):
    """Active → the owner of the chosen splits of a layer."""

    tree: int
    orders: tuple[SplitOrder, ...]


@message("secureboost.split_reply", reply_to=SplitRequest)
@dataclass(frozen=True)
class SplitReply(Message):
    """Owner → active: the lookup-table record id of each split and the ids going left."""

    records: tuple[int, ...]
    left: tuple[np.ndarray, ...]

    def __post_init__(self) -> None:
        if len(self.records) != len(self.left):
            raise ParameterError("one record id and one left instance set per split")
        for ids in self.left:
            check_ids(ids)


@message("secureboost.predict_request", sender="active", receiver="passive")
@dataclass(frozen=True)
class PredictRequest(Message):
    """Active → passive (step P1, one round per tree level): for each query, a record id of the
    passive's lookup table and a row of the prediction batch."""

    records: np.ndarray
    rows: np.ndarray

    def __post_init__(self) -> None:
        check_ids(self.records)
        check_ids(self.rows)
        if self.records.shape != self.rows.shape:
            raise ParameterError("one row per record query")


@message("secureboost.predict_reply", reply_to=PredictRequest)
@dataclass(frozen=True)
class PredictReply(Message):
    """Passive → active: for each query, does the row go left?"""

    left: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.left, np.ndarray) or self.left.dtype != np.bool_ or self.left.ndim != 1:
            raise ParameterError("left is a one-dimensional boolean array")


@message("secureboost.end", sender="active", receiver="passive")
@dataclass(frozen=True)
class End(Message):
    """Active → passive: training is over; drop the gradient ciphertexts and node caches."""


@message("secureboost.checkpoint", sender="active", receiver="passive")
@dataclass(frozen=True)
class Checkpoint(Message):
    """Active → passive, after each boosting round (``specs/secureboost.md``, "Checkpoints"): save
    your state with the first ``trees`` trees finished.  Reveals nothing new (the round count)."""

    trees: int


@message("secureboost.resume", sender="active", receiver="passive")
@dataclass(frozen=True)
class Resume(Message):
    """Active → passive, on ``resume``: restore your checkpoint with ``trees`` trees finished
    (``0``: none, an empty lookup table)."""

    trees: int
