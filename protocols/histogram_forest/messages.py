"""Wire messages of the histogram forest (spec: ``specs/histogram_forest.md``, "Message flow").

Wire names are ``histogram_forest.<step>``.  ``__post_init__`` checks shapes and
dtypes, so a malformed message from a peer fails to decode (``DecodeError``)
instead of reaching the protocol code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.errors import ParameterError
from securetrees.runtime import Message, message

__all__ = [
    "Ack",
    "BinsReply",
    "Checkpoint",
    "CountsReply",
    "EdgesNotice",
    "GridRequest",
    "KeysRequest",
    "LayerRequest",
    "RangesReply",
    "RangesRequest",
    "Resume",
    "SetupReply",
    "SetupRequest",
]

HISTOGRAM_KINDS = ("streaming", "fixed")
TASKS = ("classification", "regression")
SAMPLING_KINDS = ("bootstrap", "subsample", "none")


def _check_array(name: str, a: np.ndarray, kind: str, ndim: int) -> None:
    if not isinstance(a, np.ndarray) or a.dtype.kind != kind or a.ndim != ndim:
        raise ParameterError(f"{name} must be a {ndim}-d array of kind {kind!r}")


@message("histogram_forest.ack", reply_to=("histogram_forest.keys", "histogram_forest.edges",
                                           "histogram_forest.checkpoint", "histogram_forest.resume"))
@dataclass(frozen=True)
class Ack(Message):
    """An empty acknowledgement."""


@message("histogram_forest.ranges", sender="server", receiver="client")
@dataclass(frozen=True)
class RangesRequest(Message):
    """Ask each client for its per-feature min and max (fixed bins without declared ranges, no DP).

    Reveals to the server: each client's local min and max of every numeric feature.
    """

    numeric: np.ndarray  # bool (n_features,)

    def __post_init__(self) -> None:
        _check_array("numeric", self.numeric, "b", 1)


@message("histogram_forest.ranges_reply", reply_to=RangesRequest)
@dataclass(frozen=True)
class RangesReply(Message):
    low: np.ndarray  # float64 (n_features,), NaN for categorical or all-missing
    high: np.ndarray

    def __post_init__(self) -> None:
        _check_array("low", self.low, "f", 1)
        _check_array("high", self.high, "f", 1)
        if self.low.shape != self.high.shape:
            raise ParameterError("low and high differ in length")


@message("histogram_forest.setup", sender="server", receiver="client")
@dataclass(frozen=True)
class SetupRequest(Message):
    """The public parameters of one training run (spec: step ``setup``)."""

    session: bytes
    n_features: int
    categories: tuple[int, ...]  # 0 for numeric, k >= 2 for a categorical feature with codes 0..k-1
    n_classes: int  # classification: >= 2; regression: 0
    n_trees: int
    histogram: str
    n_bins: int
    low: np.ndarray  # float64 (n_features,): declared ranges (empty if none)
    high: np.ndarray
    sampling: str
    subsample_fraction: float
    max_multiplicity: int
    features_per_node: int
    max_depth: int
    grid_cells: int  # > 0: bin edges from a first private round over a grid of this many cells
    epsilon: float | None  # total ε of the histogram noise over the forest; None: no noise
    input_epsilon: float | None  # ε of input perturbation; None: none
    secure: bool
    task: str = "classification"
    y_low: float = 0.0  # regression: the public target range and the fixed-point bits (spec "Regression")
    y_high: float = 1.0
    y_bits: int = 0
    n_clients: int = 0  # regression: the number of clients (each checks the ring cannot overflow)

    def __post_init__(self) -> None:
        if len(self.session) < 16:
            raise ParameterError("session ids have at least 16 bytes")
        if self.n_features < 1 or len(self.categories) != self.n_features:
            raise ParameterError("categories must have one entry per feature")
        if any(c < 0 or c == 1 for c in self.categories):
            raise ParameterError("a categorical feature has at least two values")
        if self.task not in TASKS:
            raise ParameterError(f"unknown task {self.task!r}")
        if (self.n_classes < 2) if self.task == "classification" else (self.n_classes != 0):
            raise ParameterError("need n_classes >= 2 for classification and 0 for regression")
        if self.n_trees < 1 or self.n_bins < 2:
            raise ParameterError("need n_trees >= 1, n_bins >= 2")
        if self.task == "regression" and not (
            np.isfinite(self.y_low) and np.isfinite(self.y_high) and self.y_low < self.y_high
            and 0 <= self.y_bits <= 60 and self.n_clients >= 1
        ):
            raise ParameterError(
                "regression needs a finite target range low < high, 0 <= y_bits <= 60 and n_clients >= 1"
            )
        if self.histogram not in HISTOGRAM_KINDS or self.sampling not in SAMPLING_KINDS:
            raise ParameterError("unknown histogram or sampling kind")
        _check_array("low", self.low, "f", 1)
        _check_array("high", self.high, "f", 1)
        if self.low.shape != self.high.shape or self.low.size not in (0, self.n_features):
            raise ParameterError("low/high must be empty or have one entry per feature")
        if not 0.0 < self.subsample_fraction <= 1.0 or self.max_multiplicity < 1:
            raise ParameterError("subsample_fraction must be in (0, 1] and max_multiplicity >= 1")
        if not 1 <= self.features_per_node <= self.n_features:
            raise ParameterError("features_per_node out of range")
        if self.max_depth < 1:
            raise ParameterError("max_depth must be >= 1")
        if self.grid_cells < 0 or self.grid_cells > 65535 or (self.grid_cells and self.histogram != "fixed"):
            raise ParameterError("grid_cells must be in [0, 65535], and used with fixed bins only")
        for eps in (self.epsilon, self.input_epsilon):
            if eps is not None and not (np.isfinite(eps) and eps > 0):
                raise ParameterError("epsilon must be finite and > 0")


@message("histogram_forest.setup_reply", reply_to=SetupRequest)
@dataclass(frozen=True)
class SetupReply(Message):
    n_features: int
    public_key: bytes  # X25519 public key in secure mode, else empty


@message("histogram_forest.keys", sender="server", receiver="client")
@dataclass(frozen=True)
class KeysRequest(Message):
    """Every participant's X25519 public key (secure mode)."""

    public_keys: dict[str, bytes]


@message("histogram_forest.grid", sender="server", receiver="client")
@dataclass(frozen=True)
class GridRequest(Message):
    """First private round (spec step ``grid``): counts of every numeric feature over the fine grid."""

    cells: int

    def __post_init__(self) -> None:
        if not 2 <= self.cells <= 65535:
            raise ParameterError("cells must be in [2, 65535]")


@message("histogram_forest.edges", sender="server", receiver="client")
@dataclass(frozen=True)
class EdgesNotice(Message):
    """The agreed bin edges of every feature (empty for categorical ones), from the grid round."""

    edges: list[np.ndarray]

    def __post_init__(self) -> None:
        for e in self.edges:
            _check_array("edges", e, "f", 1)


@message("histogram_forest.layer", sender="server", receiver="client")
@dataclass(frozen=True)
class LayerRequest(Message):
    """Apply the previous layer's splits, then histogram the kept nodes (spec: step ``layer``).

    ``split_*`` have one entry per node of the previous request (``split_feature``
    −1: the node became a leaf).  The children of the split nodes, two per split
    in order, form the new frontier; ``keep`` lists the frontier positions to
    histogram and ``features[i]`` the feature subset of ``keep[i]``.  At
    ``layer == 0`` the split arrays are empty and ``keep == [0]`` (the root of a
    new tree, on a fresh bootstrap sample).
    """

    step: int
    tree: int
    layer: int
    split_feature: np.ndarray  # int64
    split_threshold: np.ndarray  # float64
    split_categorical: np.ndarray  # bool
    split_missing_left: np.ndarray  # bool
    keep: np.ndarray  # int64
    features: np.ndarray  # bool (len(keep), n_features)

    def __post_init__(self) -> None:
        if self.step < 0 or self.tree < 0 or self.layer < 0:
            raise ParameterError("step, tree and layer are non-negative")
        _check_array("split_feature", self.split_feature, "i", 1)
        _check_array("split_threshold", self.split_threshold, "f", 1)
        _check_array("split_categorical", self.split_categorical, "b", 1)
        _check_array("split_missing_left", self.split_missing_left, "b", 1)
        _check_array("keep", self.keep, "i", 1)
        _check_array("features", self.features, "b", 2)
        n = self.split_feature.size
        if not (self.split_threshold.size == self.split_categorical.size == self.split_missing_left.size == n):
            raise ParameterError("split arrays differ in length")
        if self.features.shape[0] != self.keep.size or self.keep.size == 0:
            raise ParameterError("features needs one row per kept node, and some node must be kept")
        if self.layer == 0 and (n or self.keep.tolist() != [0]):
            raise ParameterError("layer 0 has no splits and keeps the root only")


@message("histogram_forest.bins", reply_to=LayerRequest)
@dataclass(frozen=True)
class BinsReply(Message):
    """Streaming histograms (Algorithm 2) of the requested (node, feature) pairs, in wire order
    (by feature, then by node).

    Pair ``j`` owns ``lengths[j]`` consecutive rows of ``centres``/``counts``;
    ``missing[j]`` holds the class counts of the rows whose value is missing.
    """

    centres: np.ndarray  # float64 (total_bins,)
    counts: np.ndarray  # int64 (total_bins, n_classes)
    lengths: np.ndarray  # int64 (pairs,)
    missing: np.ndarray  # int64 (pairs, n_classes)

    def __post_init__(self) -> None:
        _check_array("centres", self.centres, "f", 1)
        _check_array("counts", self.counts, "i", 2)
        _check_array("lengths", self.lengths, "i", 1)
        _check_array("missing", self.missing, "i", 2)
        if self.counts.shape[0] != self.centres.size or int(self.lengths.sum()) != self.centres.size:
            raise ParameterError("bin arrays disagree on the number of bins")
        if self.lengths.size and int(self.lengths.min()) < 0:
            raise ParameterError("negative bin count")
        if self.missing.shape[0] != self.lengths.size or self.missing.shape[1] != self.counts.shape[1]:
            raise ParameterError("missing counts need one row per pair")
        if not np.all(np.isfinite(self.centres)):
            raise ParameterError("bin centres must be finite")


@message("histogram_forest.counts", reply_to=("histogram_forest.grid", "histogram_forest.layer"))
@dataclass(frozen=True)
class CountsReply(Message):
    """Fixed-bin class counts, flattened as (pair, bin slot, class) with the pairs in wire order (by
    feature, then by node); int64, or uint64 masked in Z_2^64."""

    counts: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.counts, np.ndarray) or self.counts.ndim != 1 or self.counts.dtype.kind not in "iu":
            raise ParameterError("counts must be a flat integer array")


@message("histogram_forest.checkpoint", sender="server", receiver="client")
@dataclass(frozen=True)
class Checkpoint(Message):
    """Server → client, after the setup and after each tree (``specs/histogram_forest.md``,
    "Checkpoints"): save your state with ``trees`` trees grown, before step ``step``.  Reveals nothing."""

    trees: int
    step: int


@message("histogram_forest.resume", sender="server", receiver="client")
@dataclass(frozen=True)
class Resume(Message):
    """Server → client, on ``resume``: restore your checkpoint with this marker."""

    trees: int
    step: int
