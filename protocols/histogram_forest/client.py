"""The client role (an organisation holding rows of the shared features): Algorithm 2 per layer.

Spec: ``specs/histogram_forest.md``, "Client per layer".  A client answers the
server's ``setup``, ``ranges``, ``keys`` and ``layer`` requests; it draws its own
bootstrap samples (under DP: independent per-row weights from the cryptographic
source, :mod:`securetrees.protocols.histogram_forest.sampling`), enforces its own privacy
budget and never releases a count that is not noisy (DP) or masked (secure mode)
when those are configured.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import numpy.typing as npt

from securetrees.errors import DecodeError, EncodingOverflowError, ParameterError, ProtocolError, UnexpectedMessage
from securetrees.protocols.histogram_forest.accountant import (
    PrivacyAccountant,
    Release,
    budget_split,
    layer_sensitivity,
)
from securetrees.protocols.histogram_forest.checkpoint import JOURNAL, ClientState, Ledger, ReplyJournal, SentReply
from securetrees.protocols.histogram_forest.mechanisms import (
    check_epsilon,
    geometric_noise,
    laplace_noise,
    randomized_response,
)
from securetrees.protocols.histogram_forest.messages import (
    TASKS,
    Ack,
    BinsReply,
    Checkpoint,
    CountsReply,
    EdgesNotice,
    GridRequest,
    KeysRequest,
    LayerRequest,
    RangesReply,
    RangesRequest,
    Resume,
    SetupReply,
    SetupRequest,
)
from securetrees.protocols.histogram_forest.ring import RING, check_capacity, encode_targets
from securetrees.protocols.histogram_forest.sampling import RowLaw, dp_row_law
from securetrees.protocols.histogram_forest.schema import fixed_mapper, mapper_from_edges
from securetrees.protocols.histogram_forest.streaming import sorted_node_bins
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, Network, Party, decode, encode, handles
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.secagg.keyagree import AgreementKey
from securetrees.secagg.masker import PairwiseMasker
from securetrees.trees.binning import BinMapper
from securetrees.trees.histogram import build_histograms
from securetrees.trees.sampling import TreeDraws, tree_generators

__all__ = ["GRID_PURPOSE", "MASK_PURPOSE", "Client", "perturb_inputs"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MASK_PURPOSE = "histogram_forest/layer"
GRID_PURPOSE = "histogram_forest/grid"


def perturb_inputs(
    X: FloatArray,
    y: IntArray,
    categories: tuple[int, ...],
    n_classes: int,
    low: FloatArray,
    high: FloatArray,
    epsilon: float,
    *,
    rng: RandomSource = SYSTEM_RANDOM,
) -> tuple[FloatArray, IntArray]:
    """Input perturbation (paper Section 5.0.2): ε-local DP per row, ε split over the d + 1 attributes.

    Numeric: clip to the declared range, add Laplace((high - low) / ε_attr).  Categorical: k-ary
    randomised response over the k codes plus "missing".  Label: randomised response over the classes.
    Missing numeric values are refused (their missingness would be released as is).
    """
    n, d = X.shape
    eps_attr = epsilon / (d + 1)
    out = np.empty_like(X)
    for f, k in enumerate(categories):
        col = X[:, f]
        if k:
            codes = np.where(np.isnan(col), k, col).astype(np.int64)
            noisy = randomized_response(codes, k + 1, eps_attr, rng=rng)
            out[:, f] = np.where(noisy == k, np.nan, noisy.astype(np.float64))
        else:
            if np.isnan(col).any():
                raise ParameterError("input perturbation needs every numeric value present")
            lo, hi = float(low[f]), float(high[f])
            if not lo < hi:
                raise ParameterError("input perturbation needs a declared range low < high per numeric feature")
            out[:, f] = np.clip(col, lo, hi) + laplace_noise(n, (hi - lo) / eps_attr, rng=rng)
    return out, randomized_response(y, n_classes, eps_attr, rng=rng)


class Client(Party):
    """One data holder.  ``X`` float (NaN = missing; categorical columns hold integer codes),
    ``y`` class indices ``0..n_classes-1`` (``task="classification"``) or finite real targets
    (``task="regression"``); ``seed`` seeds its bootstrap draws without DP (ML randomness); ``rng``
    supplies noise, key material and, under DP, the row sampling (cryptographic).  Every request is
    admitted from the server role only (the message declarations)."""

    role = "client"

    def __init__(
        self,
        name: str,
        network: Network,
        X: npt.ArrayLike,
        y: npt.ArrayLike,
        *,
        seed: int | None = None,
        max_epsilon: float | None = None,
        rng: RandomSource = SYSTEM_RANDOM,
        task: str = "classification",
        checkpoint: CheckpointStore | None = None,
    ) -> None:
        super().__init__(name, network)
        self._store = checkpoint
        self._journal: dict[int, SentReply] = {}
        """Layer replies sent since the checkpoint before last, by step (with a checkpoint store)."""
        self._marks: list[int] = []
        """The steps of the last two checkpoints."""
        self._edges: list[FloatArray] = []
        self._peers: dict[str, bytes] = {}
        Xa = np.asarray(X, dtype=np.float64)
        ya = np.asarray(y)
        if Xa.ndim != 2 or Xa.shape[0] == 0 or Xa.shape[1] == 0:
            raise ParameterError(f"client {name}: X must be a non-empty 2-d array")
        if task not in TASKS:
            raise ParameterError(f"unknown task {task!r}")
        if task == "classification" and (ya.shape != (Xa.shape[0],) or ya.dtype.kind not in "iu"):
            raise ParameterError(f"client {name}: y must hold one integer class index per row")
        if task == "regression" and (
            ya.shape != (Xa.shape[0],) or ya.dtype.kind not in "iuf" or not np.all(np.isfinite(ya))
        ):
            raise ParameterError(f"client {name}: y must hold one finite real target per row")
        if np.isinf(Xa).any():
            raise ParameterError(f"client {name}: infinite feature values")
        self._X = Xa.copy()
        self._task = task
        self._y = ya.astype(np.int64) if task == "classification" else np.zeros(Xa.shape[0], dtype=np.int64)
        self._targets = ya.astype(np.float64) if task == "regression" else np.zeros(0, dtype=np.float64)
        self._encoded = np.zeros((0, 2), dtype=np.int64)  # regression: (t1, t2) per row, set at setup
        self._seed = seed
        self._max_epsilon = None if max_epsilon is None else check_epsilon(max_epsilon)
        self._eps_release: float | None = None
        self._eps_grid: float | None = None
        self._grid_done = False
        self._ranges_sent = False
        self._row_law: RowLaw | None = None
        self._rng = rng
        self._setup: SetupRequest | None = None
        self._mapper: BinMapper | None = None
        self._binned: npt.NDArray[np.unsignedinteger[npt.NBitBase]] | None = None
        self._generators: list[np.random.Generator] = []
        self._key: AgreementKey | None = None
        self._masker: PairwiseMasker | None = None
        self._accountant: PrivacyAccountant | None = None
        self._last_step = -1
        self._tree = -1
        self._layer = -1
        self._weights = np.zeros(0, dtype=np.int64)
        self._pos = np.zeros(0, dtype=np.int64)
        self._n_kept = 0
        self._columns: dict[int, tuple[IntArray, FloatArray, IntArray]] = {}

    @property
    def privacy_spent(self) -> float:
        """The ε this client has released so far (0 without histogram noise)."""
        return 0.0 if self._accountant is None else self._accountant.spent

    # -- setup -------------------------------------------------------------------------------

    @handles(RangesRequest)
    def on_ranges(self, sender: str, msg: RangesRequest) -> RangesReply:
        """Step ``ranges``.  Reveals: this client's min and max of each numeric feature (so a client
        with a privacy cap refuses it, and so does a client in a session whose ε is set; a client that
        answered it refuses a later setup with ε)."""
        if self._max_epsilon is not None:
            raise ProtocolError(f"{self.name} shares nothing without differential privacy")
        setup = self._setup
        if setup is not None and (setup.epsilon is not None or setup.input_epsilon is not None):
            raise ProtocolError(f"{self.name} reveals no ranges in a differentially private session")
        if msg.numeric.size != self._X.shape[1]:
            raise ProtocolError("ranges request for a different number of features")
        low = np.full(self._X.shape[1], np.nan)
        high = np.full(self._X.shape[1], np.nan)
        for f in np.flatnonzero(msg.numeric):
            col = self._X[:, f]
            if not np.isnan(col).all():
                low[f], high[f] = np.nanmin(col), np.nanmax(col)
        self._ranges_sent = True
        return RangesReply(low=low, high=high)

    @handles(SetupRequest)
    def on_setup(self, sender: str, msg: SetupRequest) -> SetupReply:
        """Step ``setup``: check the schema against the local data and prepare the bins."""
        if self._setup is not None:
            raise UnexpectedMessage("this client is already set up")
        if msg.n_features != self._X.shape[1]:
            raise ProtocolError(f"{self.name} holds {self._X.shape[1]} features, the schema {msg.n_features}")
        if msg.task != self._task:
            raise ProtocolError(f"{self.name} holds {self._task} data, the session is {msg.task}")
        if msg.task == "regression":
            self._check_regression(msg)
        elif self._y.min() < 0 or self._y.max() >= msg.n_classes:
            raise ProtocolError(f"{self.name} holds labels outside the {msg.n_classes} declared classes")
        for f, k in enumerate(msg.categories):
            col = self._X[:, f]
            col = col[~np.isnan(col)]
            if k and col.size and (col.min() < 0 or col.max() >= k or np.any(col != np.floor(col))):
                raise ProtocolError(f"{self.name}: feature {f} holds codes outside the declared {k} categories")
        self.logger.info("%s set up: %d rows, %s histograms", self.name, self._X.shape[0], msg.histogram)
        if msg.secure and msg.histogram != "fixed":
            raise ProtocolError("secure aggregation needs fixed bins")
        if msg.epsilon is not None and (msg.histogram != "fixed" or msg.low.size == 0):
            raise ProtocolError("histogram noise needs fixed bins from declared ranges")
        for eps in (msg.epsilon, msg.input_epsilon):
            if eps is not None and self._max_epsilon is not None and eps > self._max_epsilon:
                raise ProtocolError(f"{self.name} allows at most ε = {self._max_epsilon}, asked for {eps}")
            if eps is not None and self._ranges_sent:
                raise ProtocolError(f"{self.name} revealed its ranges: this session cannot be differentially private")
        if msg.input_epsilon is not None:
            self._X, self._y = perturb_inputs(
                self._X, self._y, msg.categories, msg.n_classes, msg.low, msg.high, msg.input_epsilon, rng=self._rng
            )
        if msg.histogram == "fixed" and msg.low.size == 0:
            raise ProtocolError("fixed bins need ranges")
        self._adopt(msg, [])
        public = b""
        if msg.secure:
            self._key = AgreementKey.generate(rng=self._rng)
            public = self._key.public
        return SetupReply(n_features=self._X.shape[1], public_key=public)

    def _adopt(self, msg: SetupRequest, edges: list[FloatArray], releases: list[Release] | None = None) -> None:
        """The session's bins (fixed: from the ranges, or the agreed ``edges`` of a grid round),
        row law, privacy accountant (with ``releases`` already charged) and tree generators."""
        if msg.histogram == "fixed" and (not msg.grid_cells or edges):
            self._mapper = (mapper_from_edges(msg.categories, edges, msg.n_bins) if msg.grid_cells
                            else fixed_mapper(msg.categories, msg.low, msg.high, msg.n_bins))
            self._binned = self._mapper.transform(self._X)
        if msg.epsilon is not None:
            self._row_law = dp_row_law(msg.sampling, msg.subsample_fraction, msg.max_multiplicity)
            self._accountant = PrivacyAccountant(msg.epsilon, list(releases or []))
            self._eps_grid, self._eps_release = budget_split(
                msg.epsilon, msg.n_trees, msg.max_depth, grid=msg.grid_cells > 0
            )
        self._generators = tree_generators(self._seed, msg.n_trees)
        self._setup = msg

    def _check_regression(self, msg: SetupRequest) -> None:
        """Regression setup: fixed bins, no DP (not implemented for sums, spec "Regression"), targets
        inside the public range, and no sum of any cell able to overflow the ring (:func:`check_capacity`).
        Encodes the targets once."""
        if msg.histogram != "fixed":
            raise ProtocolError("regression needs fixed bins (streaming bins carry class counts)")
        if msg.epsilon is not None or msg.input_epsilon is not None:
            raise ProtocolError("differential privacy is not implemented for regression")
        try:
            check_capacity(self._X.shape[0], msg.n_clients, msg.y_bits)
            self._encoded = encode_targets(self._targets, msg.y_low, msg.y_high, msg.y_bits)
        except EncodingOverflowError as exc:
            raise EncodingOverflowError(f"{self.name}: {exc}") from exc
        except ParameterError as exc:
            raise ProtocolError(f"{self.name}: {exc}") from exc

    @handles(KeysRequest)
    def on_keys(self, sender: str, msg: KeysRequest) -> Ack:
        """Step ``keys``: one X25519 agreement per peer (secure mode)."""
        if self._setup is None or not self._setup.secure or self._key is None or self._masker is not None:
            raise UnexpectedMessage("keys arrive once, after a secure setup")
        if msg.public_keys.get(self.name) != self._key.public:
            raise ProtocolError("the key directory does not hold this client's own public key")
        peers = {name: key for name, key in msg.public_keys.items() if name != self.name}
        self._masker = PairwiseMasker(self.name, self._key, peers, session=self._setup.session)
        self._peers = peers
        return Ack()

    @handles(GridRequest)
    def on_grid(self, sender: str, msg: GridRequest) -> CountsReply:
        """Step ``grid`` (first private round): per numeric feature, the count of this client's rows in
        each cell of the fine grid, noisy under DP and masked in secure mode.

        Reveals to the server: this client's grid counts (plain), or only their sum (secure)."""
        setup = self._setup
        if setup is None or not setup.grid_cells or self._grid_done or msg.cells != setup.grid_cells:
            raise UnexpectedMessage("one grid round, after a setup that announced it")
        if setup.secure and self._masker is None:
            raise UnexpectedMessage("grid before the key exchange")
        self._grid_done = True
        grid = fixed_mapper(setup.categories, setup.low, setup.high, msg.cells)
        binned = grid.transform(self._X)
        numeric = [f for f, k in enumerate(setup.categories) if not k]
        counts = np.zeros((len(numeric), msg.cells), dtype=np.int64)
        for j, f in enumerate(numeric):
            codes = binned[:, f].astype(np.int64)
            counts[j] = np.bincount(codes[codes < grid.missing_bin], minlength=msg.cells)[: msg.cells]
        if self._eps_grid is not None and self._accountant is not None and numeric:
            delta = len(numeric)  # a row adds 1 to one cell per numeric feature
            self._accountant.charge(Release(-1, -1, 1, delta, delta, self._eps_grid))
            counts = counts + geometric_noise(counts.shape, self._eps_grid, delta, rng=self._rng)
        return self._seal(counts.reshape(-1), round=0, purpose=GRID_PURPOSE)

    @handles(EdgesNotice)
    def on_edges(self, sender: str, msg: EdgesNotice) -> Ack:
        """Step ``edges``: the agreed bin edges (computed by the server from the summed grid)."""
        setup = self._setup
        if setup is None or not self._grid_done or self._mapper is not None:
            raise UnexpectedMessage("edges arrive once, after the grid round")
        try:
            self._mapper = mapper_from_edges(setup.categories, msg.edges, setup.n_bins)
        except ParameterError as exc:
            raise ProtocolError(f"unusable bin edges: {exc}") from exc
        self._binned = self._mapper.transform(self._X)
        self._edges = list(msg.edges)
        return Ack()

    def _seal(self, flat: IntArray, *, round: int, purpose: str) -> CountsReply:
        """The reply carrying ``flat``: as is, or masked with this client's net pairwise mask."""
        setup = self._setup
        if setup is None or not setup.secure:
            return CountsReply(counts=flat)
        if self._masker is None:  # pragma: no cover - checked by the callers
            raise UnexpectedMessage("no masker")
        masked = self._masker.mask(flat.view(np.uint64), ring=RING, round=round, purpose=purpose)
        return CountsReply(counts=RING.to_wire(masked))

    # -- one layer -------------------------------------------------------------------------------

    @handles(LayerRequest)
    def on_layer(self, sender: str, msg: LayerRequest) -> Message:
        """Step ``layer``: route rows through the previous splits, then histogram the kept nodes.

        Reveals to the server: streaming: this client's bins; fixed: its counts (noisy with DP);
        secure: a masked vector (only the sum over clients is learned).
        """
        setup = self._setup
        if setup is None:
            raise UnexpectedMessage("layer before setup")
        if setup.secure and self._masker is None:
            raise UnexpectedMessage("layer before the key exchange")
        if setup.histogram == "fixed" and self._mapper is None:
            raise UnexpectedMessage("layer before the bin edges are agreed")
        if msg.step != self._last_step + 1:
            raise UnexpectedMessage(f"step {msg.step} after {self._last_step}: steps are never repeated or skipped")
        if msg.features.shape[1] != setup.n_features:
            raise ProtocolError("feature mask of the wrong width")
        per_node = msg.features.sum(axis=1)
        if per_node.min() < 1 or per_node.max() > setup.features_per_node:
            raise ProtocolError(f"each node must ask for 1..{setup.features_per_node} features")
        sent = self._sent_before(msg)
        if msg.layer == 0:
            if msg.tree != self._tree + 1 or msg.tree >= setup.n_trees:
                raise UnexpectedMessage(f"tree {msg.tree} cannot start after tree {self._tree}")
            self._start_tree(msg.tree, None if sent is None else sent.weights)
        else:
            if msg.tree != self._tree or msg.layer != self._layer + 1:
                raise UnexpectedMessage("layers of a tree arrive in order")
            self._route(msg)
        self._last_step, self._tree, self._layer = msg.step, msg.tree, msg.layer
        self._n_kept = int(msg.keep.size)
        if sent is not None:  # a resumed server repeats the request: the same release, not a new one
            if setup.histogram == "fixed":
                self._charge(msg)
            return self._kept_reply(sent)
        reply: Message = self._streaming_reply(msg) if setup.histogram == "streaming" else self._counts_reply(msg)
        self._journal_reply(msg, reply)
        return reply

    # -- checkpoints (``specs/histogram_forest.md``, "Checkpoints") --------------------------------

    def _sent_before(self, msg: LayerRequest) -> SentReply | None:
        """The journaled reply to this very request (step and SHA-256), or None if this step was
        never answered; another request for an answered step is refused (one release per step)."""
        sent = self._journal.get(msg.step)
        if sent is None:
            return None
        if sent.digest != hashlib.sha256(encode(msg)).digest():
            raise UnexpectedMessage(f"{self.name} already answered step {msg.step} with another request")
        return sent

    def _kept_reply(self, sent: SentReply) -> Message:
        reply = decode(sent.reply)
        if not isinstance(reply, CountsReply | BinsReply):
            raise DecodeError("a journaled reply is not a histogram")
        return reply

    def _journal_reply(self, msg: LayerRequest, reply: Message) -> None:
        """Journal the reply before it leaves (with the tree's row weights at layer 0)."""
        if self._store is None:
            return
        weights = self._weights.copy() if msg.layer == 0 else np.zeros(0, dtype=np.int64)
        self._journal[msg.step] = SentReply(msg.step, hashlib.sha256(encode(msg)).digest(), weights, encode(reply))
        self._store.save_side(JOURNAL, ReplyJournal(tuple(self._journal.values())))

    @handles(Checkpoint)
    def on_checkpoint(self, sender: str, msg: Checkpoint) -> Ack:
        """Save this client's state with ``trees`` trees answered, before step ``step`` (local); the
        journal keeps the replies since the checkpoint before this one (a server that dies before
        saving its own resumes from that one)."""
        setup = self._setup
        if self._store is None:
            raise UnexpectedMessage(f"{self.name} keeps no checkpoints")
        if setup is None or msg.trees != self._tree + 1 or msg.step != self._last_step + 1:
            raise UnexpectedMessage("a checkpoint marker that does not match this client's progress")
        noisy_inputs = setup.input_epsilon is not None
        self._store.save(ClientState(
            msg.trees, msg.step, setup, self._key.secret() if self._key is not None else b"", dict(self._peers),
            list(self._edges), self._X if noisy_inputs else np.zeros((0, 0)),
            self._y if noisy_inputs else np.zeros(0, dtype=np.int64),
            None if self._accountant is None else Ledger.of(self._accountant.releases), self._grid_done,
            self._ranges_sent))
        self._marks = [*self._marks[-1:], msg.step]
        self._journal = {k: v for k, v in self._journal.items() if k >= self._marks[0]}
        self._store.save_side(JOURNAL, ReplyJournal(tuple(self._journal.values())))
        return Ack()

    @handles(Resume)
    def on_resume(self, sender: str, msg: Resume) -> Ack:
        """Restore the checkpoint with the server's marker (current or previous file) and the journal
        of sent replies (local)."""
        if self._store is None:
            raise UnexpectedMessage(f"{self.name} keeps no checkpoints")
        saved = self._store.latest(ClientState, lambda s: (s.trees, s.step) == (msg.trees, msg.step))
        if saved is None:
            raise ProtocolError(f"{self.name} has no checkpoint at {msg.trees} trees, step {msg.step}")
        journal = self._store.load_side(JOURNAL, ReplyJournal)
        self._journal = {e.step: e for e in journal.sent} if journal is not None else {}
        self._restore(saved)
        return Ack()

    def _restore(self, saved: ClientState) -> None:
        setup = saved.setup
        if setup.n_features != self._X.shape[1] or setup.task != self._task:
            raise ProtocolError("the checkpoint does not belong to this client's run")
        if setup.input_epsilon is not None:
            X, y = np.asarray(saved.X), np.asarray(saved.y)
            if X.shape != self._X.shape or y.shape != self._y.shape or X.dtype.kind != "f" or y.dtype.kind not in "iu":
                raise DecodeError("the checkpoint's perturbed inputs do not fit this client's data")
            self._X, self._y = X.astype(np.float64), y.astype(np.int64)
        self._mapper = self._binned = None
        self._adopt(setup, [np.asarray(e, dtype=np.float64) for e in saved.edges],
                    None if saved.ledger is None else saved.ledger.releases())
        self._key = AgreementKey.from_secret(saved.key_secret) if setup.secure else None
        self._peers = dict(saved.peers)
        self._masker = (PairwiseMasker(self.name, self._key, self._peers, session=setup.session)
                        if self._key is not None and self._peers else None)
        self._edges = list(saved.edges)
        self._grid_done, self._ranges_sent = bool(saved.grid_done), bool(saved.ranges_sent)
        self._last_step, self._tree, self._layer = saved.step - 1, saved.trees - 1, -1
        self._weights = np.zeros(0, dtype=np.int64)
        self._pos = np.zeros(0, dtype=np.int64)
        self._n_kept = 0
        self._columns = {}

    def _start_tree(self, tree: int, kept: IntArray | None = None) -> None:
        """The tree's row weights (``kept``: those journaled with the tree's first reply)."""
        setup = self._setup
        if setup is None:  # pragma: no cover - checked by the caller
            raise UnexpectedMessage("no setup")
        n = self._X.shape[0]
        gen = self._generators[tree]
        if kept is not None:
            if kept.shape != (n,) or kept.dtype.kind != "i":
                raise DecodeError("journaled row weights do not fit this client's data")
            w = kept.astype(np.int64)
        elif self._row_law is not None:  # DP: independent per-row weights from the cryptographic source
            w = self._row_law.draw(n, self._rng)
        elif setup.sampling == "bootstrap":
            w = TreeDraws(gen, n, setup.n_features, bootstrap=True).sample_weight.astype(np.int64)
        elif setup.sampling == "subsample":
            w = np.zeros(n, dtype=np.int64)
            w[gen.choice(n, size=max(1, math.ceil(setup.subsample_fraction * n)), replace=False)] = 1
        else:
            w = np.ones(n, dtype=np.int64)
        self._weights = w
        self._pos = np.where(w > 0, 0, -1).astype(np.int64)

    def _route(self, msg: LayerRequest) -> None:
        if msg.split_feature.size != self._n_kept:
            raise ProtocolError("split arrays must have one entry per node of the previous request")
        n_features = self._X.shape[1]
        if msg.split_feature.size and (msg.split_feature.max() >= n_features or msg.split_feature.min() < -1):
            raise ProtocolError("split feature out of range")
        found = msg.split_feature >= 0
        child_base = np.where(found, 2 * (np.cumsum(found) - 1), -1)
        n_children = 2 * int(found.sum())
        keep = msg.keep
        if keep.min() < 0 or keep.max() >= n_children or np.any(np.diff(keep) <= 0):
            raise ProtocolError("kept nodes must be increasing positions of the new frontier")
        inverse = np.full(n_children, -1, dtype=np.int64)
        inverse[keep] = np.arange(keep.size)
        rows = np.flatnonzero(self._pos >= 0)
        node = self._pos[rows]
        split = found[node]
        rows, node = rows[split], node[split]
        f = msg.split_feature[node]
        x = self._X[rows, f]
        thr = msg.split_threshold[node]
        test = np.where(msg.split_categorical[node], x == thr, x <= thr)
        left = np.where(np.isnan(x), msg.split_missing_left[node], test)
        new_pos = np.full_like(self._pos, -1)
        new_pos[rows] = inverse[child_base[node] + (~left).astype(np.int64)]
        self._pos = new_pos

    def _pairs(self, msg: LayerRequest) -> tuple[IntArray, IntArray]:
        """The requested (node, feature) pairs in wire order: by feature, then by node."""
        feature, node = np.nonzero(msg.features.T)
        return node.astype(np.int64), feature.astype(np.int64)

    def _sorted_column(self, f: int) -> tuple[IntArray, FloatArray, IntArray]:
        """Feature ``f``'s rows in increasing order of value without the NaN rows, those values
        (contiguous: a layer then reads them in order instead of gathering a strided column), and
        the NaN rows; computed once (the data never changes after setup)."""
        if f not in self._columns:
            col = self._X[:, f]
            order = np.argsort(col, kind="stable")  # NaN last
            nan = np.isnan(col)
            kept = order[: order.size - int(nan.sum())]
            index = np.int32 if col.size < 2**31 else np.int64
            self._columns[f] = (kept.astype(index), np.ascontiguousarray(col[kept]),
                                np.flatnonzero(nan).astype(index))
        return self._columns[f]

    def _streaming_reply(self, msg: LayerRequest) -> BinsReply:
        setup = self._setup
        if setup is None:  # pragma: no cover - checked by the caller
            raise UnexpectedMessage("no setup")
        C = setup.n_classes
        n_nodes = int(msg.keep.size)
        centres: list[FloatArray] = []
        counts: list[IntArray] = []
        lengths: list[IntArray] = []
        missing: list[IntArray] = []
        for f in np.flatnonzero(msg.features.any(axis=0)).tolist():
            order, values, nan_rows = self._sorted_column(f)
            asking = np.append(np.where(msg.features[:, f], np.arange(n_nodes), -1), -1)  # [-1]: retired rows
            node = asking[self._pos[order]]
            asked = node >= 0
            rows = order[asked]
            c, k, bounds = sorted_node_bins(
                values[asked], node[asked], self._y[rows], self._weights[rows], n_nodes, C,
                None if setup.categories[f] else setup.n_bins,
            )
            nan_node = asking[self._pos[nan_rows]]
            nan = nan_rows[nan_node >= 0]
            node_missing = np.zeros((n_nodes, C), dtype=np.int64)
            np.add.at(node_missing, (nan_node[nan_node >= 0], self._y[nan]), self._weights[nan])
            requested = np.flatnonzero(msg.features[:, f])
            centres.append(c)
            counts.append(k)
            lengths.append(np.diff(bounds)[requested])
            missing.append(node_missing[requested])
        return BinsReply(
            centres=np.concatenate(centres).astype(np.float64),
            counts=np.concatenate(counts).reshape(-1, C),
            lengths=np.concatenate(lengths).astype(np.int64),
            missing=np.concatenate(missing).reshape(-1, C),
        )

    def _counts_reply(self, msg: LayerRequest) -> CountsReply:
        setup, mapper, binned = self._setup, self._mapper, self._binned
        if setup is None or mapper is None or binned is None:  # pragma: no cover - checked by the caller
            raise UnexpectedMessage("no setup")
        rows = np.flatnonzero(self._pos >= 0)
        node, feature = self._pairs(msg)
        if setup.task == "regression":
            counts = self._sum_histograms(binned, rows, node, feature, mapper.max_bins)
        else:
            C = setup.n_classes
            stats = np.zeros((rows.size, C), dtype=np.float64)
            stats[np.arange(rows.size), self._y[rows]] = self._weights[rows]
            used = np.flatnonzero(msg.features.any(axis=0)).astype(np.int64)
            hist = build_histograms(binned[rows], self._pos[rows], stats, int(msg.keep.size), mapper.max_bins, used)
            counts = np.rint(hist[node, feature]).astype(np.int64)  # (pairs, slots + 1, classes)
        charged = self._charge(msg)
        if charged is not None:
            counts = counts + geometric_noise(counts.shape, charged[0], charged[1], rng=self._rng)
        return self._seal(counts.reshape(-1), round=msg.step, purpose=MASK_PURPOSE)

    def _charge(self, msg: LayerRequest) -> tuple[float, int] | None:
        """Charge this layer's release to the privacy accountant (DP): its ε and sensitivity."""
        setup, eps = self._setup, self._eps_release
        if setup is None or eps is None or self._accountant is None:
            return None
        if self._row_law is None:  # pragma: no cover - set with the accountant in on_setup
            raise ProtocolError("a DP session without its row law")
        delta = layer_sensitivity(self._row_law.max_weight, setup.features_per_node)
        self._accountant.charge(Release(msg.tree, msg.layer, int(msg.keep.size), setup.features_per_node, delta, eps))
        return eps, delta


    def _sum_histograms(
        self,
        binned: npt.NDArray[np.unsignedinteger[npt.NBitBase]],
        rows: IntArray,
        node: IntArray,
        feature: IntArray,
        max_bins: int,
    ) -> IntArray:
        """Regression statistics ``(Σw, Σw·t1, Σw·t2)`` per (pair, bin slot), in exact int64 arithmetic
        (shape ``(pairs, max_bins + 1, 3)``; the same layout as the class counts).  Reveals nothing by
        itself (the caller masks it in secure mode)."""
        width = max_bins + 1
        w = self._weights[rows]
        per_row = np.column_stack([w, w * self._encoded[rows, 0], w * self._encoded[rows, 1]])
        pair_of = np.full((self._n_kept, self._X.shape[1]), -1, dtype=np.int64)
        pair_of[node, feature] = np.arange(node.size)
        out = np.zeros((node.size * width, 3), dtype=np.int64)
        pos = self._pos[rows]
        for f in np.unique(feature).tolist():
            pair = pair_of[pos, f]
            sel = np.flatnonzero(pair >= 0)
            flat = pair[sel] * width + binned[rows[sel], f].astype(np.int64)
            np.add.at(out, flat, per_row[sel])
        return out.reshape(node.size, width, 3)
