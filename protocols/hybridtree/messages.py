"""Wire messages of HybridTree (``specs/hybridtree.md``); wire names ``hybridtree.<step>``.

Ciphertexts travel as plain ints and are re-validated by the receiving role
against its own copy of the key.  Instance IDs travel as int64 arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.errors import ParameterError
from securetrees.runtime import Message, message

__all__ = [
    "Ack",
        "BuildNode",
    "Checkpoint",
    "Directory",
    "GradientBlock",
    "Gradients",
    "HistogramRequest",
    "MaskedHistogram",
    "NodeRouting",
    "PlainGradients",
    "PredictLeaves",
    "PredictRequest",
    "PredictValues",
    "Routing",
    "Setup",
    "SetupReply",
    "SplitChoice",
    "SplitDecision",
    "Values",
]


def _check_ids(ids: np.ndarray) -> None:
    if ids.dtype != np.int64 or ids.ndim != 1:
        raise ParameterError("instance IDs are a one-dimensional int64 array")


@message("hybridtree.setup", sender="host", receiver="guest")
@dataclass(frozen=True)
class Setup(Message):
    """Host → guests: session id, the host's Paillier public key (empty if not secure), roster."""

    session: bytes
    public_key: bytes
    guests: tuple[str, ...]
    mode: str


@message("hybridtree.setup_reply", reply_to=Setup)
@dataclass(frozen=True)
class SetupReply(Message):
    """Guest → host: its X25519 public key (empty outside secure mode) and the guest schema:
    bins per guest feature and which are categorical (the accumulator layout, public), and
    which features of the guest space this guest holds (Appendix C.4; the host counts
    contributing guests per node and feature)."""

    public: bytes
    n_bins: tuple[int, ...]
    categorical: tuple[bool, ...]
    held: tuple[bool, ...]

    def __post_init__(self) -> None:
        if not len(self.n_bins) == len(self.categorical) == len(self.held):
            raise ParameterError("one bin count, categorical flag and held flag per guest feature")


@message("hybridtree.directory", sender="host", receiver="guest")
@dataclass(frozen=True)
class Directory(Message):
    """Host → guests: every guest's X25519 public key, in roster order."""

    guests: tuple[str, ...]
    publics: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if len(self.guests) != len(self.publics):
            raise ParameterError("one public key per guest")


@message("hybridtree.checkpoint", sender="host", receiver="guest")
@dataclass(frozen=True)
class Checkpoint(Message):
    """Host → guests, after a boosting round when the host keeps checkpoints: save your state with
    ``trees`` trees finished (``specs/hybridtree.md``, "Checkpoints")."""

    trees: int


@message("hybridtree.ack", reply_to=("hybridtree.directory", "hybridtree.gradients", "hybridtree.checkpoint"))
@dataclass(frozen=True)
class Ack(Message):
    """An empty acknowledgement."""


@message("hybridtree.gradient_block")
@dataclass(frozen=True)
class GradientBlock(Message):
    """The guest's instances of one host leaf with their encrypted (or plaintext) ``P_i``."""

    leaf: int
    block: int
    ids: np.ndarray
    values: tuple[int, ...]

    def __post_init__(self) -> None:
        _check_ids(self.ids)
        if len(self.values) != self.ids.shape[0]:
            raise ParameterError("one value per instance")


@message("hybridtree.gradients", sender="host", receiver="guest")
@dataclass(frozen=True)
class Gradients(Message):
    """Host → guest (H3): one tree's gradient blocks."""

    tree: int
    blocks: tuple[GradientBlock, ...]


@message("hybridtree.build_node")
@dataclass(frozen=True)
class BuildNode(Message):
    """A node whose histogram the guest builds, into accumulator set ``acc_set``, for the
    guest features ``features`` only (the others are withheld and stay zero); ``groups[j]``
    is the grouping of feature ``features[j]``: the last bin of each group of adjacent bins
    (``protocols/hybridtree/coarsen.py``); a group's sum goes to its last bin's accumulator."""

    node: int
    acc_set: int
    features: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if len(self.groups) != len(self.features):
            raise ParameterError("one grouping per feature to build")


@message("hybridtree.histogram_request", sender="host", receiver="guest")
@dataclass(frozen=True)
class HistogramRequest(Message):
    """Host → guests (G1): build and mask the histograms of these nodes."""

    tree: int
    layer: int
    attempt: int
    peers: tuple[str, ...]
    n_sets: int
    build: tuple[BuildNode, ...]


@message("hybridtree.masked_histogram", reply_to=HistogramRequest)
@dataclass(frozen=True)
class MaskedHistogram(Message):
    """Guest → host (G1 reply): ``n_sets × A`` masked, re-randomised accumulators."""

    tree: int
    layer: int
    attempt: int
    values: tuple[int, ...]


@message("hybridtree.split_choice")
@dataclass(frozen=True)
class SplitChoice(Message):
    """A node's chosen split and its children; or a leaf.  The split is on the group of
    ``width`` adjacent bins of guest feature ``feature`` that ends at bin ``bin``: "bin <= ``bin``"
    (numeric) or "bin in [``bin - width + 1``, ``bin``]" (categorical)."""

    node: int
    is_leaf: bool
    feature: int
    bin: int
    missing_left: bool
    left: int
    right: int
    width: int

    def __post_init__(self) -> None:
        if not self.is_leaf and not 1 <= self.width <= self.bin + 1:
            raise ParameterError("a split's group holds 1..bin+1 bins")


@message("hybridtree.split", sender="host", receiver="guest")
@dataclass(frozen=True)
class SplitDecision(Message):
    """Host → guests (G3): the decisions for every node of the layer the guest holds."""

    tree: int
    layer: int
    choices: tuple[SplitChoice, ...]


@message("hybridtree.node_routing")
@dataclass(frozen=True)
class NodeRouting(Message):
    """For one split node: left (True) or right per guest instance, in sorted-ID order."""

    node: int
    left: np.ndarray

    def __post_init__(self) -> None:
        if self.left.dtype != np.bool_ or self.left.ndim != 1:
            raise ParameterError("routing is a one-dimensional boolean array")


@message("hybridtree.routing", reply_to="hybridtree.split")
@dataclass(frozen=True)
class Routing(Message):
    """Guest → host (G3 reply)."""

    tree: int
    layer: int
    nodes: tuple[NodeRouting, ...]


@message("hybridtree.plain_gradients", sender="host", receiver="guest")
@dataclass(frozen=True)
class PlainGradients(Message):
    """Host → guest, paper mode only: per host leaf the IDs and plaintext ``g``, ``h``."""

    tree: int
    leaves: tuple[int, ...]
    ids: tuple[np.ndarray, ...]
    g: tuple[np.ndarray, ...]
    h: tuple[np.ndarray, ...]


@message("hybridtree.values", reply_to=PlainGradients)
@dataclass(frozen=True)
class Values(Message):
    """Guest → host, paper mode: the new value of each instance, in the order received."""

    tree: int
    values: tuple[np.ndarray, ...]


@message("hybridtree.predict_request", sender="host", receiver="guest")
@dataclass(frozen=True)
class PredictRequest(Message):
    """Host → guest (inference step 2): test IDs and, per tree (column), their host leaf."""

    batch: int
    ids: np.ndarray
    host_leaves: np.ndarray

    def __post_init__(self) -> None:
        _check_ids(self.ids)
        if self.host_leaves.dtype != np.int64 or self.host_leaves.ndim != 2 or (
            self.host_leaves.shape[0] != self.ids.shape[0]
        ):
            raise ParameterError("host_leaves is an int64 array of shape (len(ids), trees)")


@message("hybridtree.predict_leaves", reply_to=PredictRequest)
@dataclass(frozen=True)
class PredictLeaves(Message):
    """Guest → host (inference step 3): leaf id per instance and tree."""

    batch: int
    leaves: np.ndarray


@message("hybridtree.predict_values", reply_to=PredictRequest)
@dataclass(frozen=True)
class PredictValues(Message):
    """Guest → host, paper mode: leaf value per instance and tree."""

    batch: int
    values: np.ndarray
