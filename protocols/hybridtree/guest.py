"""The guest role: GuestTrain on encrypted gradients and the guest half of inference.

``specs/hybridtree.md``: a guest never sees a gradient, a hessian or a label in
secure mode.  Per layer it adds the ciphertexts of its instances into one
accumulator per (accumulator set, guest feature, bin) (step G1), adds its
pairwise mask in Z_N and re-randomises, then applies the split the host chose
(step G3).  In ``paper`` mode it instead grows its own subtrees on plaintext
gradients (the authors' simulation).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees._nt import mpz
from securetrees.errors import DecodeError, ParameterError, ProtocolError, UnexpectedMessage
from securetrees.executors import scatter_products
from securetrees.paillier import Mode, PublicKey
from securetrees.paillier.batch import obfuscators
from securetrees.paillier.wire import decode_public_key, key_id
from securetrees.protocols.hybridtree.checkpoint import GuestState
from securetrees.protocols.hybridtree.coarsen import base_ends, check_grouping
from securetrees.protocols.hybridtree.messages import (
    Ack,
    Checkpoint,
    Directory,
    Gradients,
    HistogramRequest,
    MaskedHistogram,
    NodeRouting,
    PlainGradients,
    PredictLeaves,
    PredictRequest,
    PredictValues,
    Routing,
    Setup,
    SetupReply,
    SplitDecision,
    Values,
)
from securetrees.protocols.hybridtree.model import GuestModel, SplitState
from securetrees.protocols.hybridtree.params import HybridTreeParams
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Network, Party, handles
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.runtime.journal import SingleUseJournal
from securetrees.secagg import ZN, AgreementKey, PairwiseMasker
from securetrees.trees import BinMapper, GradientGain, GrowParams, Tree, grow_tree, persistence

__all__ = ["Guest", "GuestSplit", "add_plain_sums", "agree_bins", "guest_matrix"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


#: Limb width (bits) of :func:`add_plain_sums`: float64 sums of up to 2^36 limbs of 16 bits are exact.
_LIMB_BITS = 16


def add_plain_sums(acc: list[Any], values: Sequence[Any], keys: IntArray) -> None:
    """``acc[k] += values[i]`` for every ``k >= 0`` in row ``i`` of ``keys`` (plaintext mode's G1 on
    non-negative integers), exactly and in linear time: the values, shifted down by their common
    trailing zero bits, are cut into 16-bit limbs whose per-key sums ``np.bincount`` adds exactly
    in float64 (below 2^53 for fewer than 2^36 rows); the limbs' sums are put back together as
    integers.  Reveals nothing: a local computation with the same result as the plain loop."""
    n = len(values)
    if n == 0 or keys.size == 0:
        return
    if n >= 1 << (52 - _LIMB_BITS):
        raise ParameterError("too many rows for exact limb sums")
    ints = [int(v) for v in values]
    if any(v < 0 for v in ints):
        raise ProtocolError("plaintext values are non-negative")
    nonzero = [v for v in ints if v]
    if not nonzero:
        return
    low = min((v & -v).bit_length() for v in nonzero) - 1
    width = max(v.bit_length() for v in nonzero) - low
    n_bytes = 2 * -(-width // _LIMB_BITS)
    raw = b"".join((v >> low).to_bytes(n_bytes, "little") for v in ints)
    limbs = np.frombuffer(raw, dtype="<u2").reshape(n, n_bytes // 2).astype(np.float64)
    flat = keys.reshape(n, -1)
    valid = flat >= 0
    rows = np.nonzero(valid)[0]
    k = flat[valid]
    if k.size == 0:
        return
    first = int(k.min())
    local = k - first
    span = int(local.max()) + 1
    hit = np.flatnonzero(np.bincount(local, minlength=span))
    sums = np.column_stack([np.bincount(local, weights=limbs[rows, j], minlength=span)[hit]
                            for j in range(limbs.shape[1])])
    for key, parts in zip((hit + first).tolist(), np.rint(sums).astype(np.int64).tolist(), strict=True):
        total = 0
        for j, part in enumerate(parts):
            total += part << (_LIMB_BITS * j)
        acc[key] += total << low


@dataclass(frozen=True)
class GuestSplit:
    """A guest-layer split as every guest stores it (feature of the guest space, threshold;
    a categorical split sends the codes ``low..threshold`` left, one group of categories)."""

    feature: int
    threshold: float
    categorical: bool
    missing_left: bool
    left: int
    right: int
    low: float | None = None

    def goes_left(self, x: FloatArray) -> npt.NDArray[np.bool_]:
        nan = np.isnan(x)
        if self.categorical:
            low = self.threshold if self.low is None else self.low
            test = (x >= low) & (x <= self.threshold)
        else:
            test = x <= self.threshold
        return np.asarray(np.where(nan, self.missing_left, test))


def guest_matrix(X: npt.ArrayLike, space: Sequence[int], held: Sequence[int]) -> FloatArray:
    """A guest's rows in the guest feature space: column ``j`` is the guest's column ``space[j]``
    if it holds it (``held``), else all NaN (a feature it lacks is missing, spec "Roles").
    ``X`` is indexed by the original column numbers."""
    Xa = np.asarray(X, dtype=np.float64)
    mine = set(held)
    out = np.full((Xa.shape[0], len(space)), np.nan)
    for j, c in enumerate(space):
        if c in mine:
            out[:, j] = Xa[:, c]
    return out


def agree_bins(
    guest_X: Sequence[npt.ArrayLike], *, max_bins: int, categorical: Sequence[bool] | None = None,
) -> BinMapper:
    """The guests' common bins of the guest feature space (spec, "Bin edges"): quantile edges of
    the pooled guest training columns, the one-process setup shortcut, which shows the edges
    to every guest and never to the host.  A deployment can give every guest the same
    data-independent edges instead (``BinMapper.fit(strategy="uniform", ranges=...)``)."""
    if len(guest_X) == 0:
        raise ParameterError("bins are agreed among at least one guest")
    pooled = np.vstack([np.asarray(x, dtype=np.float64) for x in guest_X])
    return BinMapper.fit(pooled, max_bins=max_bins, categorical=categorical)


def _sorted_ids(ids: npt.ArrayLike) -> IntArray:
    arr = np.asarray(ids)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise ParameterError("instance IDs must be a one-dimensional integer array")
    out = arr.astype(np.int64)
    if np.unique(out).size != out.size:
        raise ParameterError("instance IDs must be distinct")
    return out


class Guest(Party):
    """One guest: its rows (by instance ID) of the guest feature space, and the agreed bins.

    ``X`` has one column per guest feature (NaN where the value is missing or the
    guest does not hold the feature).  ``host_key`` pins the host's Paillier key
    (a setup with another key raises :class:`ProtocolError`); without it the key
    received must pass the size policy (1024 bits only with ``allow_insecure``).  Every
    request is admitted from the host role only (the message declarations).  ``executor``
    (optional) runs G1's homomorphic sums and re-randomisations: its workers receive N²,
    ciphertext values, the public key and random exponents, never a mask or a feature value.
    """

    role = "guest"

    def __init__(
        self, name: str, network: Network, *, params: HybridTreeParams, ids: npt.ArrayLike,
        X: npt.ArrayLike, mapper: BinMapper, host: str = "host", host_key: PublicKey | None = None,
        allow_insecure: bool = False, rng: RandomSource = SYSTEM_RANDOM,
        executor: Executor | None = None, checkpoint: CheckpointStore | None = None,
    ) -> None:
        super().__init__(name, network)
        self.params = params
        self.executor = executor
        self.host = host
        self._store = checkpoint
        ids_arr = _sorted_ids(ids)
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape != (ids_arr.size, mapper.n_features):
            raise ParameterError(f"X must have shape ({ids_arr.size}, {mapper.n_features})")
        if np.isinf(Xa).any():
            raise ParameterError("feature values must be finite or NaN (missing)")
        order = np.argsort(ids_arr, kind="stable")
        self._ids = ids_arr[order]
        self._X = Xa[order]
        self._mapper = mapper
        self._binned = mapper.transform(self._X).astype(np.int64)
        n_bins = np.asarray(mapper.n_bins, dtype=np.int64)
        self._feat_offset = np.concatenate([[0], np.cumsum(n_bins)[:-1]]).astype(np.int64)
        self._n_acc = int(n_bins.sum())
        #: The features of the guest space this guest holds: a value in at least one row.
        self._held: npt.NDArray[np.bool_] = np.asarray(~np.isnan(self._X).all(axis=0), dtype=bool)
        self._host_key = host_key
        self._allow_insecure = allow_insecure
        self._rng = rng
        self._pk: PublicKey | None = None
        self._agreement: AgreementKey | None = None
        self._session = b""
        self._masker: PairwiseMasker | None = None
        self._tree = -1
        self._values: list[Any] = []  # per own instance: ciphertext (mpz) or plaintext int
        self._nodes: dict[int, IntArray] = {}  # node -> positions of own instances
        #: The histogram requests answered, per (tree, layer, attempt).
        self._journal = SingleUseJournal(
            lambda slot: ProtocolError("a histogram request is answered once: a repeat could unmask"), store=checkpoint)
        self.splits: dict[int, dict[int, GuestSplit]] = {}
        self.paper_trees: dict[tuple[int, int], Tree] = {}
        self._test_ids = np.zeros(0, dtype=np.int64)
        self._test_X = np.zeros((0, mapper.n_features))
        #: Operation counts for the benchmark's floor: homomorphic additions, mask elements
        #: expanded (one per accumulator and peer), re-randomisations.
        self.op_counts = {"add": 0, "mask": 0, "rerandomize": 0}
        self._restore()

    # -- local inputs ----------------------------------------------------------------------
    def load_test(self, ids: npt.ArrayLike, X: npt.ArrayLike) -> None:
        """The guest's rows of a test set (instance IDs linked with the host's test rows)."""
        ids_arr = _sorted_ids(ids)
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.shape != (ids_arr.size, self._mapper.n_features):
            raise ParameterError(f"X must have shape ({ids_arr.size}, {self._mapper.n_features})")
        order = np.argsort(ids_arr, kind="stable")
        self._test_ids, self._test_X = ids_arr[order], Xa[order]

    # -- setup -----------------------------------------------------------------------------
    @handles(Setup)
    def on_setup(self, sender: str, msg: Setup) -> SetupReply:
        """Setup step 1: accept the host's key (pinned or size-checked); return our agreement key."""
        self.logger.info("%s set up by %s (mode %s)", self.name, sender, msg.mode)
        if msg.mode != self.params.mode:
            raise ProtocolError(f"host runs mode {msg.mode!r}, this guest {self.params.mode!r}")
        if self.name not in msg.guests:
            raise ProtocolError("this guest is not on the roster")
        self._session = msg.session
        self._tree = -1  # a resumed host may send the gradients of a tree again
        public = b""
        if self.params.mode == "secure":
            self._pk = self._load_key(msg.public_key)
            self._agreement = AgreementKey.generate(rng=self._rng)
            public = self._agreement.public
        return SetupReply(public, tuple(int(b) for b in self._mapper.n_bins),
                          tuple(bool(c) for c in self._mapper.categorical),
                          tuple(bool(h) for h in self._held))

    def _load_key(self, data: bytes) -> PublicKey:
        if self._host_key is not None:
            n, hs = decode_public_key(data)
            if key_id(n, hs) != self._host_key.key_id:
                raise ProtocolError("the host's public key differs from the pinned key")
            return self._host_key
        return PublicKey.from_bytes(data, allow_insecure=self._allow_insecure)

    @handles(Directory)
    def on_directory(self, sender: str, msg: Directory) -> Ack:
        """Setup step 2: pairwise mask keys with every other guest (one X25519 agreement each)."""
        if self.params.mode == "secure":
            if self._agreement is None:
                raise UnexpectedMessage("directory before setup")
            peers = {g: pub for g, pub in zip(msg.guests, msg.publics, strict=True) if g != self.name}
            if msg.publics[msg.guests.index(self.name)] != self._agreement.public:
                raise ProtocolError("the directory does not carry this guest's key")
            self._masker = PairwiseMasker(self.name, self._agreement, peers, session=self._session)
        return Ack()

    # -- H3: gradients ---------------------------------------------------------------------
    def _positions(self, ids: IntArray) -> IntArray:
        pos = np.searchsorted(self._ids, ids)
        if ids.size and (pos.max() >= self._ids.size or not np.array_equal(self._ids[pos], ids)):
            raise ProtocolError("the host named an instance this guest does not hold")
        if ids.size > 1 and np.any(np.diff(ids) <= 0):
            raise ProtocolError("instance IDs must be sorted and distinct")
        return pos.astype(np.int64)

    @handles(Gradients)
    def on_gradients(self, sender: str, msg: Gradients) -> Ack:
        """H3: keep this tree's ciphertexts (validated under the host's key) per host leaf."""
        if self.params.mode == "paper":
            raise UnexpectedMessage("paper mode receives plain gradients")
        if msg.tree <= self._tree:
            raise UnexpectedMessage("gradients of an old tree")
        self._tree = msg.tree
        self._values = [None] * self._ids.size
        self._nodes = {}
        self.splits = {t: table for t, table in self.splits.items() if t < msg.tree}
        self.splits[msg.tree] = {}
        pk = self._pk
        for block in msg.blocks:
            pos = self._positions(block.ids)
            if block.leaf in self._nodes:
                raise ProtocolError("a host leaf was sent twice")
            for p, v in zip(pos.tolist(), block.values, strict=True):
                if pk is not None:
                    c = mpz(v)
                    pk.check_ciphertext_value(c)
                    self._values[p] = c
                else:
                    if v < 0:
                        raise ProtocolError("plaintext values are non-negative")
                    self._values[p] = v
            self._nodes[block.leaf] = pos
        return Ack()

    # -- G1: masked histograms -------------------------------------------------------------
    @handles(HistogramRequest)
    def on_histogram(self, sender: str, msg: HistogramRequest) -> MaskedHistogram:
        """G1: one accumulator per (set, feature, bin), filled for the listed features only (the
        host withholds the others, "Subset-sum inference"); mask in Z_N; re-randomise."""
        if msg.tree != self._tree or not 1 <= msg.layer <= self.params.guest_depth:
            raise UnexpectedMessage("histogram request for another tree or layer")
        if self.name not in msg.peers or msg.n_sets < 1 or msg.n_sets > 1 << 16:
            raise ProtocolError("malformed histogram request")
        self._answer_once(msg)
        length = msg.n_sets * self._n_acc
        pk = self._pk
        n2 = mpz(pk.n_square) if pk is not None else mpz(0)
        acc: list[Any] = [0] * length
        rows_v: list[Any] = []
        rows_k: list[list[int]] = []
        missing = self._mapper.missing_bin
        for item in msg.build:
            if not 0 <= item.acc_set < msg.n_sets:
                raise ProtocolError("accumulator set out of range")
            feats = np.asarray(item.features, dtype=np.int64)
            if feats.size and (feats.min() < 0 or feats.max() >= self._mapper.n_features
                               or np.any(np.diff(feats) <= 0)):
                raise ProtocolError("features to build must be distinct, sorted guest features")
            ends = self._groupings(feats, item.groups)
            pos = self._nodes.get(item.node)
            if pos is None or pos.size == 0:
                continue
            bins = self._binned[pos][:, feats]
            for j, e in enumerate(ends):  # each bin counts at its group's last bin
                col = bins[:, j]
                real = col != missing
                col[real] = e[np.searchsorted(e, col[real])]
            base = item.acc_set * self._n_acc + self._feat_offset[feats]
            idx = np.where(bins == missing, -1, bins + base[None, :])
            self.op_counts["add"] += int(np.count_nonzero(idx >= 0))
            values = [self._values[p] for p in pos.tolist()]
            if pk is not None:
                rows_v += values
                rows_k += idx.tolist()
            else:
                add_plain_sums(acc, values, idx)
        if pk is not None:
            acc = scatter_products(rows_v, rows_k, length, n2, self.executor)
        if pk is not None:
            if self._masker is None:
                raise UnexpectedMessage("histogram request before the key directory")
            n = mpz(pk.n)
            masks = self._masker.net_mask(
                length, ring=ZN(pk.n), round=msg.tree,
                purpose=f"hybridtree/layer={msg.layer}/attempt={msg.attempt}", peers=msg.peers,
            )
            mode: Mode = "djn-short" if self.params.encryption == "djn-short" else "djn"
            self.op_counts["mask"] += length * (len(msg.peers) - 1)
            self.op_counts["rerandomize"] += length
            fresh = obfuscators(pk, mode, length, executor=self.executor, rng=self._rng)
            out = tuple(
                int(a * (1 + m * n) % n2 * r % n2) for a, m, r in zip(acc, masks, fresh, strict=True)
            )
        else:
            out = tuple(int(a) for a in acc)
        return MaskedHistogram(msg.tree, msg.layer, msg.attempt, out)

    def _answer_once(self, msg: HistogramRequest) -> None:
        """Admit a histogram request once per ``(tree, layer, attempt)``: the same request again (a
        resumed host repeats it byte for byte) passes, any other is refused (a second histogram
        under the same mask could unmask).  Journaled before the reply leaves, so a restart
        remembers it (``specs/hybridtree.md``, "Checkpoints")."""
        key = (msg.tree, msg.layer, msg.attempt)
        if self._journal.lookup(key, msg) is None:
            self._journal.record(key, msg)

    @handles(Checkpoint)
    def on_checkpoint(self, sender: str, msg: Checkpoint) -> Ack:
        """Save the splits of the ``msg.trees`` trees finished (local)."""
        if self._store is None:
            raise UnexpectedMessage(f"{self.name} keeps no checkpoints")
        if msg.trees != self._tree + 1:
            raise UnexpectedMessage("a checkpoint marker that is not the tree just finished")
        self._store.save(GuestState(msg.trees, self.model_state({})))
        return Ack()

    def _restore(self) -> None:
        """Adopt this guest's latest checkpoint, if any: the splits of the trees before it and the
        journal of answered histogram requests (local)."""
        if self._store is None:
            return
        self._journal.reload()
        saved = self._store.latest(GuestState)
        if saved is not None:
            self.restore_model(saved.model)
            if any(t >= saved.trees for t in self.splits):
                raise DecodeError("a HybridTree guest checkpoint with splits of later trees")

    def _groupings(self, feats: IntArray, groups: Sequence[Sequence[int]]) -> list[IntArray]:
        """The requested grouping of each feature, refused (:class:`ProtocolError`) unless it is
        a union of base groups of ``min_group_width`` bins (spec, "Coarsened guest bins")."""
        out = []
        for f, ends in zip(feats.tolist(), groups, strict=True):
            try:
                ok = check_grouping(ends, int(self._mapper.n_bins[f]), self.params.min_group_width)
            except ParameterError as exc:
                raise ProtocolError(f"grouping of guest feature {f} refused: {exc}") from exc
            out.append(np.asarray(ok, dtype=np.int64))
        return out

    # -- G3: apply the chosen splits -------------------------------------------------------
    @handles(SplitDecision)
    def on_split(self, sender: str, msg: SplitDecision) -> Routing:
        """G3: record every split of the layer; route own instances of split nodes."""
        if msg.tree != self._tree:
            raise UnexpectedMessage("split decision for another tree")
        table = self.splits[msg.tree]
        routed: list[NodeRouting] = []
        new_nodes: dict[int, IntArray] = {}
        for ch in msg.choices:
            if ch.is_leaf:
                continue
            if not 0 <= ch.feature < self._mapper.n_features or ch.node in table:
                raise ProtocolError("split on an unknown feature or a node split twice")
            n_bins = int(self._mapper.n_bins[ch.feature])
            if not 0 <= ch.bin < n_bins:
                raise ProtocolError("split bin out of range")
            lo = ch.bin - ch.width + 1
            base = base_ends(n_bins, self.params.min_group_width)
            if ch.bin not in base or (lo > 0 and lo - 1 not in base):
                raise ProtocolError("a split's group is not a union of base groups")
            cat = bool(self._mapper.categorical[ch.feature])
            split = GuestSplit(
                feature=ch.feature, threshold=self._mapper.threshold(ch.feature, ch.bin),
                categorical=cat, missing_left=ch.missing_left, left=ch.left, right=ch.right,
                low=self._mapper.threshold(ch.feature, lo) if cat else None,
            )
            table[ch.node] = split
            pos = self._nodes.pop(ch.node, None)
            if pos is None or pos.size == 0:
                continue
            left = split.goes_left(self._X[pos, ch.feature])
            new_nodes[ch.left], new_nodes[ch.right] = pos[left], pos[~left]
            routed.append(NodeRouting(ch.node, np.ascontiguousarray(left, dtype=np.bool_)))
        self._nodes.update(new_nodes)
        return Routing(msg.tree, msg.layer, tuple(routed))

    # -- paper mode ------------------------------------------------------------------------
    @handles(PlainGradients)
    def on_plain_gradients(self, sender: str, msg: PlainGradients) -> Values:
        """Paper mode: grow own subtrees under each host leaf on plaintext gradients."""
        if self.params.mode != "paper":
            raise UnexpectedMessage("plain gradients are sent in paper mode only")
        self._tree = msg.tree
        crit = GradientGain(self.params.reg_lambda, self.params.second_order)
        grow = GrowParams(max_depth=self.params.guest_depth,
                          min_samples_leaf=float(self.params.min_samples_leaf))
        out = []
        for leaf, ids, g, h in zip(msg.leaves, msg.ids, msg.g, msg.h, strict=True):
            pos = self._positions(np.asarray(ids, dtype=np.int64))
            stats = np.column_stack([np.ones(pos.size), g, h]).astype(np.float64)
            tree = grow_tree(self._binned[pos].astype(self._mapper.dtype), self._mapper, stats,
                             crit, grow)
            self.paper_trees[(msg.tree, leaf)] = tree
            out.append(tree.leaf_values(self._X[pos])[:, 0])
        return Values(msg.tree, tuple(out))

    # -- model part ------------------------------------------------------------------------
    def model_state(self, bins: dict[str, np.ndarray]) -> GuestModel:
        """What this guest keeps of the fitted model, with the agreed ``bins`` (local; :mod:`.model`)."""
        splits = tuple(SplitState(t, node, s.feature, s.threshold, s.categorical, s.missing_left, s.left, s.right,
                                  s.low)
                       for t, table in sorted(self.splits.items()) for node, s in sorted(table.items()))
        keys = sorted(self.paper_trees)
        return GuestModel(splits, np.asarray(keys, dtype=np.int64).reshape(len(keys), 2),
                          tuple(persistence.dumps(self.paper_trees[k]) for k in keys), dict(bins))

    def restore_model(self, model: GuestModel) -> None:
        """Adopt a saved model instead of training (a predict-only run; local)."""
        splits: dict[int, dict[int, GuestSplit]] = {}
        for s in model.splits:
            if not 0 <= s.feature < self._mapper.n_features or s.node in splits.get(s.tree, {}):
                raise DecodeError("inconsistent HybridTree guest split")
            splits.setdefault(s.tree, {})[s.node] = GuestSplit(s.feature, s.threshold, s.categorical,
                                                                 s.missing_left, s.left, s.right, s.low)
        keys = np.asarray(model.paper_keys)
        if keys.shape != (len(model.paper_trees), 2) or keys.dtype.kind not in "iu":
            raise DecodeError("inconsistent HybridTree guest subtrees")
        paper: dict[tuple[int, int], Tree] = {}
        for (t, leaf), doc in zip(keys.tolist(), model.paper_trees, strict=True):
            tree = persistence.loads(doc)
            if not isinstance(tree, Tree):
                raise DecodeError("a HybridTree guest subtree is not a tree")
            paper[(int(t), int(leaf))] = tree
        self.splits, self.paper_trees = splits, paper

    # -- inference -------------------------------------------------------------------------
    def _test_positions(self, ids: IntArray) -> IntArray:
        pos = np.searchsorted(self._test_ids, ids)
        if ids.size and (pos.max() >= self._test_ids.size
                         or not np.array_equal(self._test_ids[pos], ids)):
            raise ProtocolError("the host named a test instance this guest does not hold")
        return pos.astype(np.int64)

    @handles(PredictRequest)
    def on_predict(self, sender: str, msg: PredictRequest) -> PredictLeaves | PredictValues:
        """Inference step 2: route each instance from its host leaf through the guest splits."""
        X = self._test_X[self._test_positions(msg.ids)]
        n_trees = msg.host_leaves.shape[1]
        if self.params.mode == "paper":
            values = np.full(msg.host_leaves.shape, np.nan)
            for t in range(n_trees):
                col = msg.host_leaves[:, t]
                for leaf in np.unique(col).tolist():
                    tree = self.paper_trees.get((t, leaf))
                    if tree is not None:
                        rows = col == leaf
                        values[rows, t] = tree.leaf_values(X[rows])[:, 0]
            return PredictValues(msg.batch, values)
        leaves = msg.host_leaves.copy()
        for t in range(n_trees):
            table = self.splits.get(t, {})
            pos = leaves[:, t]
            for _ in range(self.params.guest_depth):
                for node in np.unique(pos).tolist():
                    split = table.get(node)
                    if split is None:
                        continue
                    rows = np.flatnonzero(pos == node)
                    go = split.goes_left(X[rows, split.feature])
                    pos[rows] = np.where(go, split.left, split.right)
        return PredictLeaves(msg.batch, leaves)
