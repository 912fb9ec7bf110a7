"""The host's subset-sum inference of guest bins from the aggregated histograms, and its measurement.

``specs/hybridtree.md``, "Subset-sum inference".  The host knows every training
instance's fixed-point gradient and hessian, the instances of every node, and, per
guest-layer node and guest feature it did not withhold, the aggregate over guests
of ``(count, G·2^f, H·2^f)`` per bin (the missing bin follows from the node's
totals).  :class:`SubsetSumAttack` keeps, for every (instance, guest feature), the
set of bins still consistent with everything seen, and shrinks it node by node:

* a bin of residual count ``c`` whose candidates number ``c`` takes them all; an
  instance with one candidate bin is pinned, and leaves its statistics out of
  every other bin's residual;
* otherwise the bin's exact solutions (subsets of its candidates with its residual
  count, gradient sum and hessian sum; or the complementary subsets, whichever is
  smaller) are enumerated meet-in-the-middle, when their number stays within a
  budget: an instance in no solution loses the bin, an instance in every solution
  is pinned to it;
* the candidate sets carry over between features' nodes, layers and trees, and a
  second pass over every observation propagates what later trees taught.

Every step only removes bins that no assignment consistent with the aggregates
allows, so a cell whose candidate set is a single bin is *certain*; the measured
rate counts certain cells that are also correct (a wrong one raises: the solver
would be unsound).  The run uses ``plaintext`` mode, which computes the same model
and gives the host the same aggregates as ``secure`` mode (``tests/hybridtree``).

Run ``python -m securetrees.protocols.hybridtree.attack`` to measure the rates and the accuracy
cost quoted in the spec (Adult classifier and a synthetic regression).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.encoding import FixedPoint
from securetrees.errors import ParameterError, ProtocolError
from securetrees.protocols.hybridtree.coarsen import base_ends, group_bounds
from securetrees.protocols.hybridtree.estimators import HybridTreeClassifier, HybridTreeRegressor, with_guest_column
from securetrees.protocols.hybridtree.host import Host, TreeRecord
from securetrees.protocols.hybridtree.messages import SplitChoice
from securetrees.protocols.hybridtree.params import MIN_BIN_SIZE, MIN_GROUP_WIDTH, MIN_NODE_SIZE
from securetrees.protocols.hybridtree.testing import fit_layout

__all__ = ["DEFAULTS", "OFF", "LeakageReport", "RecordingHost", "Setting", "SplitObservation", "SubsetSumAttack",
           "attack", "baseline_predictable", "main", "measure"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
_HASH = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier combining (G, H) into one 64-bit key


@dataclass
class Observation:
    """One node's aggregate as the host holds it (see ``Host._observe_layer``): per built
    feature its groups of bins (each group's last bin; the group's sum sits there)."""

    tree: int
    ids: IntArray
    hist: npt.NDArray[np.int64]
    groups: dict[int, tuple[int, ...]]


@dataclass
class SplitObservation:
    """One guest split's routing as the host sees it (see ``Host._observe_split``): the node's
    instances, the feature, the group's first and last bin, and which instances went left."""

    ids: IntArray
    feature: int
    low: int
    high: int
    categorical: bool
    missing_left: bool
    left: BoolArray


class RecordingHost(Host):
    """A host that keeps what it learns: each tree's fixed-point gradients and every guest-layer
    aggregate (the attacker's input; the protocol is unchanged)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stats: list[tuple[IntArray, IntArray]] = []
        self.observations: list[Observation] = []
        self.splits: list[SplitObservation] = []

    def grow(self, tree_index: int, g: FloatArray, h: FloatArray) -> tuple[TreeRecord, FloatArray]:
        fixed = FixedPoint(self.params.frac_bits)
        self.stats.append((fixed.encode_int64(g), fixed.encode_int64(h)))
        return super().grow(tree_index, g, h)

    def _observe_layer(
        self, tree: int, layer: int,
        view: dict[int, tuple[IntArray, npt.NDArray[np.int64], dict[int, tuple[int, ...]]]],
    ) -> None:
        for ids, hist, groups in view.values():
            self.observations.append(Observation(len(self.stats) - 1, ids.copy(), hist.copy(),
                                                 dict(groups)))

    def _observe_split(self, tree: int, ids: IntArray, choice: SplitChoice, left: BoolArray) -> None:
        self.splits.append(SplitObservation(
            ids.copy(), choice.feature, choice.bin - choice.width + 1, choice.bin,
            bool(self._guest_cat[choice.feature]), choice.missing_left, left.copy()))


class _RecordingClassifier(HybridTreeClassifier):
    _host_class = RecordingHost


class _RecordingRegressor(HybridTreeRegressor):
    _host_class = RecordingHost


@functools.lru_cache(maxsize=128)
def _combos(m: int, k: int) -> IntArray:
    """All k-subsets of range(m) as rows, in lexicographic order (cached; read-only)."""
    count = math.comb(m, k)
    if k == 0:
        return np.zeros((1, 0), dtype=np.int64)
    flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(m), k)),
                       dtype=np.int64, count=count * k)
    out = flat.reshape(count, k)
    out.flags.writeable = False
    return out


def _keys(g: IntArray, h: IntArray) -> npt.NDArray[np.uint64]:
    return np.asarray(g.astype(np.uint64) * _HASH + h.astype(np.uint64), dtype=np.uint64)


@dataclass
class SubsetSumAttack:
    """Candidate bins of every (instance, guest feature); see the module docstring.

    ``held[i, f]``: instance ``i`` is owned by a guest that holds feature ``f`` (other cells
    are known to the host to sit in the missing bin).  ``budget`` bounds the subsets one bin's
    enumeration may list, ``max_solutions`` the solutions it may count (beyond either the bin
    is left unconstrained, which keeps the inference sound).
    """

    held: BoolArray
    n_bins: Sequence[int]
    width: int
    budget: int = 300_000
    max_solutions: int = 2_000_000
    cand: npt.NDArray[np.bool_] = field(init=False)

    def __post_init__(self) -> None:
        n, n_feat = self.held.shape
        self.cand = np.ones((n, n_feat, self.width), dtype=bool)
        for f, nb in enumerate(self.n_bins):
            self.cand[:, f, nb : self.width - 1] = False
        only_missing = np.zeros(self.width, dtype=bool)
        only_missing[-1] = True
        self.cand[~self.held] = only_missing

    # -- one node and feature -------------------------------------------------------------
    def observe(self, obs: Observation, g: IntArray, h: IntArray) -> None:
        """Shrink the candidates of the node's instances with each feature's histogram: solve
        over the node's groups (plus the missing bin), then drop every bin of an excluded group."""
        for f, ends in obs.groups.items():
            local = self.cand[obs.ids, f, :]
            bounds = [group_bounds(ends, j) for j in range(len(ends))]
            grouped = np.stack([local[:, lo : hi + 1].any(axis=1) for lo, hi in bounds]
                               + [local[:, -1]], axis=1)
            hist = np.concatenate([obs.hist[f, list(ends)], obs.hist[f, -1:]])
            self._solve(grouped, hist, g[obs.ids], h[obs.ids])
            for j, (lo, hi) in enumerate(bounds):
                local[:, lo : hi + 1] &= grouped[:, j : j + 1]
            local[:, -1] &= grouped[:, -1]
            self.cand[obs.ids, f, :] = local

    def route(self, split: SplitObservation) -> None:
        """Shrink the candidates with a guest split's routing: an instance that went left has its
        bin in the split's left set (or is missing, if missing values went left), and so on."""
        side = np.zeros(self.width, dtype=bool)
        if split.categorical:
            side[split.low : split.high + 1] = True
        else:
            side[: split.high + 1] = True
        side[-1] = False
        left_set = side.copy()
        left_set[-1] = split.missing_left
        right_set = ~side
        right_set[-1] = not split.missing_left
        allowed = np.where(split.left[:, None], left_set[None, :], right_set[None, :])
        self.cand[split.ids, split.feature, :] &= allowed

    def _solve(self, local: BoolArray, hist: npt.NDArray[np.int64], g: IntArray, h: IntArray) -> None:
        local[:, hist[:, 0] == 0] = False
        res = hist.copy()
        done = np.zeros(local.shape[0], dtype=bool)
        seen: dict[int, bytes] = {}
        changed = True
        while changed:
            changed = False
            n_cand = local.sum(axis=1)
            if np.any(n_cand == 0):
                raise ProtocolError("aggregates inconsistent with the gradients: unsound inference")
            for i in np.flatnonzero((n_cand == 1) & ~done).tolist():
                b = int(np.argmax(local[i]))
                res[b] -= (1, g[i], h[i])
                done[i] = True
            for b in range(local.shape[1]):
                cands = np.flatnonzero(local[:, b] & ~done)
                c = int(res[b, 0])
                if cands.size == 0:
                    if c or res[b, 1] or res[b, 2]:
                        raise ProtocolError("a bin's residual has no candidates: unsound inference")
                    continue
                key = np.int64(c).tobytes() + cands.tobytes()
                if seen.get(b) == key:
                    continue
                seen[b] = key
                if c == 0:
                    local[cands, b] = False
                    changed = True
                    continue
                if c == cands.size:
                    local[cands] = False
                    local[cands, b] = True
                    changed = True
                    continue
                found = self._enumerate(g[cands], h[cands], c, int(res[b, 1]), int(res[b, 2]))
                if found is None:
                    continue
                in_any, in_all = found
                if not in_any.all():
                    local[cands[~in_any], b] = False
                    changed = True
                if in_all.any():
                    pin = cands[in_all]
                    local[pin] = False
                    local[pin, b] = True
                    changed = True

    def _enumerate(self, g: IntArray, h: IntArray, c: int, G: int, H: int) -> tuple[BoolArray, BoolArray] | None:
        """Which candidates lie in some / every subset of size ``c`` with sums ``(G, H)``."""
        m = g.size
        if m - c < c:  # the complement: the candidates that are not in the bin
            found = self._enumerate(g, h, m - c, int(g.sum()) - G, int(h.sum()) - H)
            if found is None:
                return None
            in_any, in_all = found
            return ~in_all, ~in_any
        half = m // 2
        parts = [(j, c - j) for j in range(max(0, c - (m - half)), min(c, half) + 1)]
        if sum(math.comb(half, a) + math.comb(m - half, b) for a, b in parts) > self.budget:
            return None
        target = _keys(np.array([G]), np.array([H]))[0]
        gl, hl, gr, hr = g[:half], h[:half], g[half:], h[half:]
        plan = []
        total = 0
        for a, b in parts:
            left, right = _combos(half, a), _combos(m - half, b)
            kl = _keys(gl[left].sum(axis=1), hl[left].sum(axis=1))
            kr = _keys(gr[right].sum(axis=1), hr[right].sum(axis=1))
            order = np.argsort(kr, kind="stable")
            kr = kr[order]
            need = target - kl
            lo = np.searchsorted(kr, need, side="left")
            hi = np.searchsorted(kr, need, side="right")
            total += int((hi - lo).sum())
            if total > self.max_solutions:
                return None
            plan.append((left, right, order, lo, hi))
        if total == 0:
            raise ProtocolError("a bin has no consistent subset: unsound inference")
        count = np.zeros(m, dtype=np.int64)
        for left, right, order, lo, hi in plan:
            per_left = hi - lo
            np.add.at(count, left.ravel(), np.repeat(per_left, left.shape[1]))
            diff = np.zeros(order.size + 1, dtype=np.int64)
            np.add.at(diff, lo, 1)
            np.add.at(diff, hi, -1)
            per_right = np.empty(order.size, dtype=np.int64)
            per_right[order] = np.cumsum(diff[:-1])
            np.add.at(count, half + right.ravel(), np.repeat(per_right, right.shape[1]))
        return count > 0, count == total

    # -- results --------------------------------------------------------------------------
    def certain(self) -> BoolArray:
        """Cells whose bin is determined: exactly one candidate left."""
        return np.asarray(self.cand.sum(axis=2) == 1)

    def certain_group(self, width: int) -> BoolArray:
        """Cells whose base group of ``width`` bins is determined (the missing bin is a group of
        its own): every candidate left lies in one base group."""
        n_feat = self.cand.shape[1]
        out = np.zeros(self.cand.shape[:2], dtype=bool)
        for f in range(n_feat):
            nb = int(self.n_bins[f])
            gid = np.full(self.width, -1, dtype=np.int64)
            gid[:nb] = np.searchsorted(np.asarray(base_ends(nb, width)), np.arange(nb))
            gid[-1] = nb  # the missing bin
            c = self.cand[:, f, :]
            hi = np.where(c, gid[None, :], -2).max(axis=1)
            lo = np.where(c, gid[None, :], nb + 1).min(axis=1)
            out[:, f] = hi == lo
        return out


@dataclass(frozen=True)
class LeakageReport:
    """Recovered cells over the guests' cells (raw), those the host could not already predict
    from its own columns (beyond baseline), and the cells whose base group is recovered."""

    cells: int
    exposed: int
    recovered: int
    beyond_baseline: int
    group_recovered: int
    seconds: float
    #: Per guest feature: (recovered cells, beyond baseline, cells).
    per_feature: tuple[tuple[int, int, int], ...] = ()
    #: The recovered cells, per (training instance, guest feature).
    recovered_cells: BoolArray | None = field(default=None, compare=False, repr=False)

    @property
    def rate(self) -> float:
        return self.recovered / self.cells if self.cells else 0.0

    @property
    def beyond_rate(self) -> float:
        return self.beyond_baseline / self.cells if self.cells else 0.0

    @property
    def group_rate(self) -> float:
        return self.group_recovered / self.cells if self.cells else 0.0

    @property
    def exposed_rate(self) -> float:
        return self.recovered / self.exposed if self.exposed else 0.0


def _truth(model: Any) -> tuple[npt.NDArray[np.int64], BoolArray]:
    """Each training instance's true guest bins (from the guests' own data, for scoring only) and
    which cells a guest holds."""
    host: RecordingHost = model.host_
    width = model.params_.max_bins + 1
    n = host._owner.size
    truth = np.full((n, host._guest_n_bins.size), width - 1, dtype=np.int64)
    held = np.zeros(truth.shape, dtype=bool)
    for u, guest in enumerate(model.guests_):
        own = guest._ids[host._owner[guest._ids] == u]
        pos = np.searchsorted(guest._ids, own)
        truth[own] = guest._binned[pos]
        held[own] = guest._held[None, :]
    return truth, held


def baseline_predictable(host_X: FloatArray, truth: npt.NDArray[np.int64], held: BoolArray,
                         folds: int = 5) -> BoolArray:
    """Cells the host predicts right from its own columns alone: per guest feature, a decision
    tree (scikit-learn, at least 20 instances per leaf, seeded) fitted on the training instances
    with their true bins, each instance predicted by the tree of the folds that left it out.  An
    idealised host that knows the joint distribution; a recovered cell it already predicts
    leaks nothing beyond it."""
    from sklearn.model_selection import KFold, cross_val_predict
    from sklearn.tree import DecisionTreeClassifier

    out = np.zeros(truth.shape, dtype=bool)
    for f in range(truth.shape[1]):
        rows = np.flatnonzero(held[:, f])
        if rows.size < folds:
            continue
        y = truth[rows, f]
        if np.unique(y).size == 1:
            out[rows, f] = True
            continue
        tree = DecisionTreeClassifier(min_samples_leaf=20, random_state=0)
        pred = cross_val_predict(tree, host_X[rows], y,
                                 cv=KFold(folds, shuffle=True, random_state=0))
        out[rows, f] = pred == y
    return out


def attack(model: Any, passes: int = 2) -> LeakageReport:
    """Run :class:`SubsetSumAttack` on everything a :class:`RecordingHost` saw (the routing of
    every guest split, then every aggregate; ``passes`` times); score it against the truth and
    against :func:`baseline_predictable`."""
    start = time.process_time()
    host: RecordingHost = model.host_
    truth, held = _truth(model)
    solver = SubsetSumAttack(held, [int(b) for b in host._guest_n_bins], model.params_.max_bins + 1)
    exposed = np.zeros(held.shape, dtype=bool)
    for _ in range(passes):
        for split in host.splits:
            solver.route(split)
        for obs in host.observations:
            g, h = host.stats[obs.tree]
            solver.observe(obs, g, h)
            exposed[np.ix_(obs.ids, np.fromiter(obs.groups, dtype=np.int64))] = True
    cand = solver.cand
    n, n_feat = truth.shape
    if not cand[np.arange(n)[:, None], np.arange(n_feat)[None, :], truth].all():
        raise ProtocolError("the solver excluded a true bin: unsound inference")
    seconds = time.process_time() - start
    recovered = solver.certain() & held
    beyond = recovered & ~baseline_predictable(host._X, truth, held)
    groups = solver.certain_group(model.params_.min_group_width) & held
    per_feature = tuple((int(r), int(b), int(c)) for r, b, c in zip(
        recovered.sum(axis=0), beyond.sum(axis=0), held.sum(axis=0), strict=True))
    return LeakageReport(int(held.sum()), int((exposed & held).sum()), int(recovered.sum()),
                         int(beyond.sum()), int(groups.sum()), seconds, per_feature, recovered)


# -- the measurement of the spec ----------------------------------------------------------
@dataclass(frozen=True)
class Task:
    name: str
    classifier: bool
    X_train: FloatArray
    y_train: FloatArray
    X_test: FloatArray
    y_test: FloatArray
    host_features: list[int]
    guest_features: list[int]
    train_rows: list[IntArray]
    test_rows: list[IntArray]
    categorical: list[int]
    max_bins: int


def adult_task(rows: int | None = None, link: bool = True) -> Task:
    """Adult on the demo's hybrid split (5 guests, 64 bins; ``link``: the guests hold both
    encodings of education, see ``adult_hybrid``)."""
    from securetrees.protocols.hybridtree.demo import MAX_BINS, adult_hybrid

    d = adult_hybrid(rows=rows, link=link)
    return Task("adult", True, d.X_train, d.y_train.astype(np.float64), d.X_test,
                d.y_test.astype(np.float64), d.split.host_features, d.split.guest_features,
                d.split.train_rows, d.split.test_rows, d.categorical, MAX_BINS)


def regression_task(n_train: int = 8000, n_test: int = 4000, seed: int = 0) -> Task:
    """The synthetic hybrid regression of ``securetrees.protocols.hybridtree.testing`` (continuous target:
    every gradient distinct, the solver's best case), 5 guests, 32 bins."""
    from securetrees.protocols.hybridtree.testing import hybrid_data

    d = hybrid_data(n_train + n_test, n_guests=5, seed=seed)
    train = [r[r < n_train] for r in d.guest_rows]
    test = [r[r >= n_train] - n_train for r in d.guest_rows]
    return Task("regression", False, d.X[:n_train], d.y_reg[:n_train], d.X[n_train:],
                d.y_reg[n_train:], d.host_features, d.guest_features, train, test, [5], 32)


def fit_recorded(task: Task, n_trees: int, **kw: Any) -> Any:
    """Fit in plaintext mode (same model and aggregates as secure mode) with a recording host."""
    cls = _RecordingClassifier if task.classifier else _RecordingRegressor
    model = cls(n_trees, mode="plaintext", allow_insecure=True, max_bins=task.max_bins,
                categorical_features=task.categorical, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_layout(model, task.X_train, task.y_train, task.host_features, task.guest_features,
                   task.train_rows)
    return model


def quality(model: Any, task: Task) -> float:
    """Test accuracy (classifier) or RMSE (regressor)."""
    pred = model.predict(with_guest_column(task.X_test, task.test_rows))
    if task.classifier:
        return float(np.mean(pred == task.y_test))
    return float(np.sqrt(np.mean((pred - task.y_test) ** 2)))


@dataclass(frozen=True)
class Setting:
    """A mitigation setting ``NODE:BIN:WIDTH`` (``0:0:1`` is off)."""

    min_node_size: int
    min_bin_size: int
    min_group_width: int

    @classmethod
    def parse(cls, text: str) -> Setting:
        parts = text.split(":")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ParameterError(f"a setting is NODE:BIN:WIDTH (three integers), got {text!r}")
        return cls(int(parts[0]), int(parts[1]), int(parts[2]))

    def __str__(self) -> str:
        return f"{self.min_node_size}:{self.min_bin_size}:{self.min_group_width}"

    def params(self) -> dict[str, int]:
        return {"min_node_size": self.min_node_size, "min_bin_size": self.min_bin_size,
                "min_group_width": self.min_group_width}


DEFAULTS = Setting(MIN_NODE_SIZE, MIN_BIN_SIZE, MIN_GROUP_WIDTH)
OFF = Setting(0, 0, 1)


def measure(task: Task, n_trees: int, setting: Setting = DEFAULTS, **kw: Any) -> tuple[LeakageReport, float]:
    """Fit ``task`` with ``setting``, attack what the host saw; the report and the test quality."""
    model = fit_recorded(task, n_trees, **setting.params(), **kw)
    return attack(model), quality(model, task)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m securetrees.protocols.hybridtree.attack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=["adult", "regression"], nargs="+",
                        default=["adult", "regression"])
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--rows", type=int, default=None, help="Adult: first ROWS training rows")
    parser.add_argument("--unlinked", action="store_true",
                        help="Adult: the former split (the host holds education-num)")
    parser.add_argument("--settings", nargs="+", default=[str(OFF), str(DEFAULTS)],
                        metavar="NODE:BIN:WIDTH",
                        help="min_node_size:min_bin_size:min_group_width, several (0:0:1 = off)")
    args = parser.parse_args(argv)
    settings = [Setting.parse(t) for t in args.settings]
    for name in args.task:
        task = adult_task(args.rows, link=not args.unlinked) if name == "adult" else regression_task()
        metric = "accuracy" if task.classifier else "RMSE"
        for setting in settings:
            rep, q = measure(task, args.trees, setting)
            print(f"{task.name:>10} {args.trees} trees, setting {setting}: {metric} {q:.4f}; "
                  f"recovered {rep.recovered}/{rep.cells} cells = {100 * rep.rate:.2f}% raw, "
                  f"{100 * rep.beyond_rate:.2f}% beyond baseline, base group of "
                  f"{100 * rep.group_rate:.2f}%; per feature (raw, beyond, cells) "
                  f"{list(rep.per_feature)}; solver {rep.seconds:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
