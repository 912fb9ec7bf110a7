"""The state every Federated Forest client keeps, label holder or not (``specs/federated_forest.md``).

:class:`ClientBase` holds a client's columns, its binned data, the labels or their encryptions it
received, the tree in progress and its partial trees; :mod:`~securetrees.protocols.federated_forest.label_holder`
adds the label holder's steps and :mod:`~securetrees.protocols.federated_forest.client` every client's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError, UnexpectedMessage
from securetrees.paillier import Ciphertext, Mode, PrivateKey, PublicKey
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.checkpoint import (
    CheckpointStore,
    SentScore,
)
from securetrees.protocols.federated_forest.encrypted_stats import (
    CryptoCounters,
)
from securetrees.protocols.federated_forest.ids import hash_ids
from securetrees.protocols.federated_forest.skeleton import (
    LayerState,
    TreeSkeleton,
)
from securetrees.protocols.federated_forest.slots import SlotLayout
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, Network, Party, encode
from securetrees.trees import BinMapper, Criterion, Tree

__all__ = ["ClientBase", "LabelSpec", "LocalCandidate", "ScoreAnswer", "message_digest"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class LabelSpec:
    """The label holder's labels: class codes ``0..n_classes-1`` or regression targets
    (``n_classes=None``), and how to protect them in ``encrypted`` mode."""

    y: npt.NDArray[np.generic]
    n_classes: int | None
    key_bits: int = 2048
    allow_insecure: bool = False
    keypair: tuple[PublicKey, PrivateKey] | None = None
    frac_bits: int = 32

    def __post_init__(self) -> None:
        y = np.asarray(self.y)
        if y.ndim != 1 or y.size == 0:
            raise ParameterError("labels must be a non-empty vector")
        if self.n_classes is None:
            if not np.all(np.isfinite(y.astype(np.float64))):
                raise ParameterError("regression targets must be finite (no NaN)")
        else:
            codes = y.astype(np.int64)
            if self.n_classes < 2 or codes.min() < 0 or codes.max() >= self.n_classes or not np.array_equal(codes, y):
                raise ParameterError("class codes must be integers in [0, n_classes), n_classes >= 2")


@dataclass(frozen=True, slots=True)
class ScoreAnswer:
    """A score request the label holder answered: its digest, the reply, the positions with a
    valid candidate and their gains (kept for naming the winners)."""

    digest: bytes
    reply: m.ScoreReply
    positions: IntArray
    gains: FloatArray


def message_digest(msg: Message) -> bytes:
    """SHA-256 of a message's wire encoding (the strict codec's encoding is canonical)."""
    return hashlib.sha256(encode(msg)).digest()


@dataclass(slots=True)
class LocalCandidate:
    feature: int  # local column
    bin: int
    missing_left: bool


class ClientBase(Party):
    """A client's state; its steps are in :class:`LabelHolderDuties` and :class:`Client`."""

    role = "client"

    def __init__(
        self,
        name: str,
        network: Network,
        X: npt.ArrayLike,
        ids: Sequence[object],
        feature_ids: Sequence[int],
        id_key: bytes,
        *,
        categorical: Sequence[bool] | None = None,
        labels: LabelSpec | None = None,
        paillier_mode: Mode = "djn",
        public_key_loader: Callable[[bytes], PublicKey] = PublicKey.from_bytes,
        checkpoint: CheckpointStore | None = None,
        rng: RandomSource = SYSTEM_RANDOM,
        executor: Executor | None = None,
        trusted_workers: bool = False,
    ) -> None:
        super().__init__(name, network)
        #: Runs the encryptions, sums, shifts and re-randomisations; the label holder's
        #: decryptions only with ``trusted_workers`` (``specs/batch_executors.md``, "Roles").
        self.executor = executor
        self.trusted_workers = bool(trusted_workers)
        Xa = np.asarray(X, dtype=np.float64)
        fids = [int(f) for f in feature_ids]
        if Xa.ndim != 2 or Xa.shape[1] != len(fids) or Xa.shape[0] != len(ids):
            raise ParameterError("X must have one row per id and one column per feature id")
        if len(set(fids)) != len(fids) or any(f < 0 for f in fids):
            raise ParameterError("feature ids must be distinct non-negative ints")
        if np.isinf(Xa).any():
            raise ParameterError("feature values must be finite or NaN (missing)")
        if labels is not None and np.asarray(labels.y).shape[0] != Xa.shape[0]:
            raise ParameterError("labels must have one entry per row")
        cols = np.argsort(fids, kind="stable")  # local order = increasing global id (tie-breaking)
        self._cols = cols
        self._X_raw = Xa[:, cols]
        self._feature_ids = np.asarray(fids, dtype=np.int64)[cols]
        cat = [False] * len(fids) if categorical is None else [bool(c) for c in categorical]
        if len(cat) != len(fids):
            raise ParameterError("categorical needs one flag per column")
        self._categorical = tuple(cat[int(c)] for c in cols)
        self._hashed = hash_ids(id_key, ids)
        self._id_key = id_key
        self._labels_spec = labels
        self._mode: Mode = paillier_mode
        self._load_pk = public_key_loader
        self._rng = rng
        self._cover_key = rng.token_bytes(32)  # label holder: its cover-split choices (``cover.py``)
        self._store = checkpoint
        self.counters = CryptoCounters()
        self.trees: list[Tree] = []
        self._setup: m.Setup | None = None
        self._index = -1
        self._X = np.empty((0, 0))
        self._binned: npt.NDArray[np.unsignedinteger[npt.NBitBase]] | None = None
        self._mapper: BinMapper | None = None
        self._labels: npt.NDArray[np.generic] | None = None  # canonical order (shared mode / holder)
        self._pk: PublicKey | None = None
        self._sk: PrivateKey | None = None
        self._layout: SlotLayout | None = None
        self._enc: list[Ciphertext] = []
        self._criterion: Criterion | None = None
        # per tree
        self._tree = -1
        self._weights = np.zeros(0, dtype=np.int64)
        self._state: LayerState | None = None
        self._skeleton: TreeSkeleton | None = None
        self._stats: FloatArray | None = None
        self._weighted: list[Ciphertext | None] = []
        self._candidates: dict[int, LocalCandidate] = {}
        self._won: dict[int, LocalCandidate] = {}
        self._won_left = np.zeros(0, dtype=bool)
        # label holder: every score request answered in the tree in progress, by (tree, layer, sender)
        self._answered: dict[tuple[int, int, str], ScoreAnswer] = {}
        # label holder (``encrypted``): its own valid candidates' gains of the layer, by position
        self._own_gains: dict[int, float] = {}
        # label holder: per position named a winner this layer, is the split part of the model?
        self._kept: dict[int, bool] = {}
        # label holder: per finished tree and for the tree in progress, which nodes belong to the
        # central forest's tree (the others are cover splits)
        self.reference: list[BoolArray] = []
        self._ref: list[bool] = []
        # other clients (``encrypted``): the score requests sent in the tree in progress, by (tree, layer)
        self._sent: dict[tuple[int, int], SentScore] = {}
        # prediction
        self._test_hashed: tuple[bytes, ...] = ()
        self._X_test = np.empty((0, 0))
        self._holds_labels = False  # a label holder restored from its model part (no labels then)
        #: label holder (``encrypted``): the forest output of the last test rows (canonical order)
        self.kept_output: FloatArray | None = None
        self._master: str | None = None  # the master that set this client up

    # ------------------------------------------------------------------ properties

    @property
    def is_label_holder(self) -> bool:
        return self._labels_spec is not None or self._holds_labels

    @property
    def feature_ids(self) -> tuple[int, ...]:
        return tuple(int(f) for f in self._feature_ids)

    @property
    def n_outputs(self) -> int:
        s = self._require_setup()
        return max(1, s.n_classes)

    # ------------------------------------------------------------------ senders

    def dispatch(self, sender: str, msg: Message) -> Message | None:
        """Every message passes the guard of its sender before its handler: labels come from the
        label holder, score requests from another client of the run, everything else a client
        accepts from the master (the network has checked the sender's role already)."""
        if isinstance(msg, (m.SharedLabels, m.EncryptedLabels)):
            self.check_label_holder(sender)
        elif isinstance(msg, m.ScoreRequest):
            self.check_scorer_client(sender)
        elif "master" in type(msg).sent_by:
            self.check_master(sender)
        return super().dispatch(sender, msg)

    def check_master(self, sender: str) -> None:
        """Refuse an instruction from any master but the one that set this client up (before the
        setup, and in a predict-only run, the network's role check alone applies)."""
        if self._master is not None and sender != self._master:
            raise UnexpectedMessage(f"{self.name} takes instructions from {self._master} only, not {sender}")

    def check_label_holder(self, sender: str) -> None:
        """Refuse labels (in the clear or encrypted) from any client but the setup's label holder."""
        if sender != self._require_setup().label_holder:
            raise UnexpectedMessage("labels come from the label holder only")

    def check_scorer_client(self, sender: str) -> None:
        """Refuse a score request unless this client holds the labels and the sender is another
        client of the run (a client that learns its own candidates' scores, not the label holder
        itself nor a party outside the setup)."""
        setup = self._require_setup()
        if not self.is_label_holder or sender == self.name or sender not in setup.client_names:
            raise UnexpectedMessage(f"{self.name} scores candidates of the run's other clients only, not {sender}'s")

    def _require_setup(self) -> m.Setup:
        if self._setup is None:
            raise UnexpectedMessage(f"{self.name} has not been set up")
        return self._setup

    def _require_tree(self, tree: int) -> LayerState:
        if self._state is None or tree != self._tree:
            raise UnexpectedMessage(f"{self.name} is not building tree {tree}")
        return self._state
