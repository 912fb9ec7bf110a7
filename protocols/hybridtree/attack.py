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
from securetrees.errors import ProtocolError
from securetrees.protocols.hybridtree.estimators import HybridTreeClassifier, HybridTreeRegressor
from securetrees.protocols.hybridtree.host import Host, TreeRecord
from securetrees.protocols.hybridtree.params import MIN_NODE_SIZE

__all__ = ["LeakageReport", "RecordingHost", "SubsetSumAttack", "main", "measure"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
_HASH = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier combining (G, H) into one 64-bit key


@dataclass
class Observation:
    """One node's aggregate as the host holds it (see ``Host._observe_layer``)."""

    tree: int
    ids: IntArray
    hist: npt.NDArray[np.int64]
    features: BoolArray


class RecordingHost(Host):
    """A host that keeps what it learns: each tree's fixed-point gradients and every guest-layer
    aggregate (the attacker's input; the protocol is unchanged)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stats: list[tuple[IntArray, IntArray]] = []
        self.observations: list[Observation] = []

    def grow(self, tree_index: int, g: FloatArray, h: FloatArray) -> tuple[TreeRecord, FloatArray]:
        fixed = FixedPoint(self.params.frac_bits)
        self.stats.append((fixed.encode_int64(g), fixed.encode_int64(h)))
        return super().grow(tree_index, g, h)

    def _observe_layer(
        self, tree: int, layer: int, view: dict[int, tuple[IntArray, npt.NDArray[np.int64], BoolArray]],
    ) -> None:
        for ids, hist, feats in view.values():
            self.observations.append(Observation(len(self.stats) - 1, ids.copy(), hist.copy(),
                                                 feats.copy()))


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
        """Shrink the candidates of the node's instances with each feature's histogram."""
        for f in np.flatnonzero(obs.features).tolist():
            local = self.cand[obs.ids, f, :].copy()
            self._solve(local, obs.hist[f], g[obs.ids], h[obs.ids])
            self.cand[obs.ids, f, :] = local

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
            for b in range(self.width):
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


@dataclass(frozen=True)
class LeakageReport:
    """Recovered cells over the guests' cells, and over the cells the host saw in an aggregate."""

    cells: int
    exposed: int
    recovered: int
    seconds: float
    #: Per guest feature: (recovered cells, cells).
    per_feature: tuple[tuple[int, int], ...] = ()

    @property
    def rate(self) -> float:
        return self.recovered / self.cells if self.cells else 0.0

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


def attack(model: Any, passes: int = 2) -> LeakageReport:
    """Run :class:`SubsetSumAttack` on everything a :class:`RecordingHost` saw; score it."""
    start = time.process_time()
    host: RecordingHost = model.host_
    truth, held = _truth(model)
    solver = SubsetSumAttack(held, [int(b) for b in host._guest_n_bins], model.params_.max_bins + 1)
    exposed = np.zeros(held.shape, dtype=bool)
    for _ in range(passes):
        for obs in host.observations:
            g, h = host.stats[obs.tree]
            solver.observe(obs, g, h)
            exposed[np.ix_(obs.ids, obs.features)] = True
    cand = solver.cand
    n, n_feat = truth.shape
    if not cand[np.arange(n)[:, None], np.arange(n_feat)[None, :], truth].all():
        raise ProtocolError("the solver excluded a true bin: unsound inference")
    recovered = solver.certain() & held
    per_feature = tuple((int(r), int(c)) for r, c in zip(recovered.sum(axis=0), held.sum(axis=0),
                                                         strict=True))
    return LeakageReport(int(held.sum()), int((exposed & held).sum()), int(recovered.sum()),
                         time.process_time() - start, per_feature)


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


def adult_task(rows: int | None = None) -> Task:
    """Adult on the pinned hybrid split of the demo (5 guests, 64 bins)."""
    from securetrees.protocols.hybridtree.demo import MAX_BINS, adult_hybrid

    d = adult_hybrid(rows=rows)
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
        model.fit(task.X_train, task.y_train, task.host_features, task.guest_features,
                  task.train_rows)
    return model


def quality(model: Any, task: Task) -> float:
    """Test accuracy (classifier) or RMSE (regressor)."""
    pred = model.predict(task.X_test, task.test_rows)
    if task.classifier:
        return float(np.mean(pred == task.y_test))
    return float(np.sqrt(np.mean((pred - task.y_test) ** 2)))


def measure(task: Task, n_trees: int, min_node_size: int, **kw: Any) -> tuple[LeakageReport, float]:
    model = fit_recorded(task, n_trees, min_node_size=min_node_size, **kw)
    return attack(model), quality(model, task)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m securetrees.protocols.hybridtree.attack", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=["adult", "regression", "both"], default="both")
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--rows", type=int, default=None, help="Adult: first ROWS training rows")
    parser.add_argument("--min-node-size", type=int, nargs="+", default=[0, MIN_NODE_SIZE])
    args = parser.parse_args(argv)
    tasks = []
    if args.task in ("adult", "both"):
        tasks.append(adult_task(args.rows))
    if args.task in ("regression", "both"):
        tasks.append(regression_task())
    for task in tasks:
        metric = "accuracy" if task.classifier else "RMSE"
        for size in args.min_node_size:
            rep, q = measure(task, args.trees, size)
            print(f"{task.name:>10} min_node_size={size:<5} {metric} {q:.4f}  recovered "
                  f"{rep.recovered}/{rep.cells} cells = {100 * rep.rate:.2f}% "
                  f"({100 * rep.exposed_rate:.2f}% of the {rep.exposed} cells in an aggregate); "
                  f"per guest feature {list(rep.per_feature)}; solver {rep.seconds:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
