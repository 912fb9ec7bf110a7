"""One-process RevFRF with scikit-learn conventions: every role in one process, every
message still crossing the in-process network as bytes (``network_.transcript``).

    clf = RevFRFClassifier(n_estimators=10, max_depth=10, random_state=0,
                           partition=[[0, 1], [2], [3, 4]])   # one column list per participant
    clf.fit(X, y)                                        # X: an array or a DataFrame (names in partition)
    clf.predict(X_test)                                  # providers compare, CS sees path bits
    clf.predict(X_test, method="encrypted")              # FRF-Predict (HoLT per node)
    clf.revoke("u2", level=2)                            # FRF-Revoc + new forest epoch
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.dtpkc import KGC
from securetrees.dtpkc.twoserver import HoLTParams
from securetrees.encoding import FixedPoint
from securetrees.errors import ParameterError
from securetrees.estimator import ClassifierMixin, Estimator, RegressorMixin, check_targets, encode_labels
from securetrees.executors import role_executor
from securetrees.progress import phase, tracked
from securetrees.protocols.revfrf.candidates import CoarseCodes, Proposer, QuantileBins, RandomRange
from securetrees.protocols.revfrf.cc import ComputationServer
from securetrees.protocols.revfrf.checkpoint import FORMAT
from securetrees.protocols.revfrf.cs import CentralServer
from securetrees.protocols.revfrf.cs_resume import grow_with_checkpoints
from securetrees.protocols.revfrf.kgc import KeyCentre
from securetrees.protocols.revfrf.participant import Participant
from securetrees.protocols.revfrf.requester import Requester
from securetrees.protocols.revfrf.revocation import RevocationRecord
from securetrees.rand import SYSTEM_RANDOM
from securetrees.runtime import InProcessNetwork, Transcript
from securetrees.runtime.checkpoint import KEY_BYTES, CheckpointStore
from securetrees.schema import ColumnRef
from securetrees.signing import make_roster
from securetrees.trees import (
    Forest,
    GrowParams,
    TreeDraws,
    class_stats,
    make_criterion,
    resolve_max_features,
    tree_generators,
)
from securetrees.trees.train import regression_stats

__all__ = ["RevFRFClassifier", "RevFRFRegressor"]

FloatArray = npt.NDArray[np.float64]
METHODS = ("vertical", "test", "encrypted")
_SETTINGS = ("n_estimators", "max_depth", "max_features", "bootstrap", "min_samples_split", "min_samples_leaf",
             "splitter", "rho", "n_candidates", "max_bins", "code_resolution", "frac_bits", "voting", "random_state")
"""The public settings every party of a run agrees on (see :func:`plan_run`)."""


@dataclass(frozen=True)
class RunPlan:
    """What every party derives from the run's public settings and the table's shape."""

    grow: GrowParams
    max_features: int
    codec: FixedPoint
    holt: HoLTParams
    draws: list[TreeDraws]
    ml_seed: int


def plan_run(settings: Mapping[str, Any], n: int, d: int) -> RunPlan:
    """The run's derived parameters (the one-process facade and the networked roles share it):
    ``settings`` holds the facade's constructor arguments (defaults for any left out)."""
    st = {**_defaults(), **settings}
    if st["splitter"] not in ("random_range", "bins"):
        raise ParameterError("splitter is 'random_range' (the paper) or 'bins' (the central reference's)")
    if st["voting"] not in ("soft", "hard"):
        raise ParameterError("voting is 'soft' or 'hard'")
    k = st["code_resolution"]
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 2 <= k < 65535):
        raise ParameterError("code_resolution is None (the proposer's full resolution) or an int in [2, 65534]")
    k_node = resolve_max_features(st["max_features"], d)
    grow = GrowParams(max_depth=st["max_depth"], min_samples_split=st["min_samples_split"],
                      min_samples_leaf=st["min_samples_leaf"])
    gens = tree_generators(st["random_state"], st["n_estimators"])
    draws = [TreeDraws(g, n, d, bootstrap=st["bootstrap"], max_features=k_node) for g in gens]
    seed = int(np.random.SeedSequence(st["random_state"]).generate_state(1)[0])
    return RunPlan(grow, k_node, FixedPoint(st["frac_bits"]), HoLTParams(), draws, seed)


def make_proposer(settings: Mapping[str, Any], X_own: FloatArray, columns: Sequence[int]) -> Proposer:
    """A participant's candidate-threshold proposer (FLE-Expan step 1)."""
    st = {**_defaults(), **settings}
    inner: Proposer
    if st["splitter"] == "random_range":
        inner = RandomRange(st["rho"], st["n_candidates"])
    else:
        inner = QuantileBins.fit(X_own, tuple(columns), st["max_bins"])
    k = st["code_resolution"]
    return inner if k is None else CoarseCodes(inner, int(k))


class _RevFRF(Estimator):
    """Shared facade (the contract of :mod:`securetrees.estimator`).  ``partition`` lists each
    participant's columns (names of a DataFrame's columns, or indexes; ``None``: two halves).
    Fitted attributes: ``cs_``, ``cc_``, ``kgc_``, ``participants_`` (the roles), ``network_``,
    ``partition_`` (column indexes), ``n_features_in_``, ``schema_``, ``timings_`` (wall and CPU
    seconds of key set-up and of the growth, all parties in this thread)."""

    _task = ""
    _fitted_attribute = "timings_"
    _predicts_with_parties = True
    timings_: dict[str, float]

    def __init__(
        self,
        n_estimators: int = 10,
        max_depth: int | None = 10,
        max_features: int | float | str | None = "sqrt",
        *,
        bootstrap: bool = True,
        min_samples_split: int = 2,
        min_samples_leaf: int = 1,
        splitter: str = "random_range",
        rho: int = 64,
        n_candidates: int = 16,
        max_bins: int = 255,
        code_resolution: int | None = 8,
        key_bits: int = 2048,
        allow_insecure: bool = False,
        frac_bits: int = 32,
        voting: str = "soft",
        random_state: int | None = None,
        kgc_factory: Callable[[], KGC] | None = None,
        partition: Sequence[Sequence[ColumnRef]] | None = None,
        progress: bool = False,
        executor: Executor | None = None,
        n_jobs: int | None = None,
        checkpoint_dir: str | None = None,
    ) -> None:
        self.checkpoint_dir = checkpoint_dir
        self.partition = partition
        self.executor = executor
        self.n_jobs = n_jobs
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.max_features = max_features
        self.bootstrap = bootstrap
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.splitter = splitter
        self.rho = rho
        self.n_candidates = n_candidates
        self.max_bins = max_bins
        self.code_resolution = code_resolution
        self.key_bits = key_bits
        self.allow_insecure = allow_insecure
        self.frac_bits = frac_bits
        self.voting = voting
        self.random_state = random_state
        self.kgc_factory = kgc_factory
        self.progress = progress

    # ------------------------------------------------------------------ fit

    def _stats(self, y: object, weight: FloatArray) -> FloatArray:
        raise NotImplementedError

    def _prepare_y(self, y: object, n: int) -> None:
        raise NotImplementedError

    @tracked("RevFRF fit")
    def fit(self, X: object, y: object, *, network: InProcessNetwork | None = None) -> Any:
        """Key set-up, then FLE-Expan/FOS-Find layer by layer over the whole forest.

        ``partition[i]`` lists the columns of participant ``u{i+1}``.  ``network``: the
        in-process network to run on (default: a fresh one; benchmarks pass one that times parties)."""
        t_start, c_start = time.perf_counter(), time.thread_time()
        if hasattr(self, "timings_"):
            del self.timings_
        Xa = self._validate_X(X, reset=True)
        n, d = Xa.shape
        parts = [tuple(sorted(cols)) for cols in self._vertical_partition(self.partition, party="participant")]
        self._prepare_y(y, n)
        settings = {k: getattr(self, k) for k in _SETTINGS}
        plan = plan_run(settings, n, d)
        grow, k_node, codec, holt, draws, seed = (plan.grow, plan.max_features, plan.codec, plan.holt,
                                                  plan.draws, plan.ml_seed)

        kgc = self.kgc_factory() if self.kgc_factory is not None else KGC.setup(
            self.key_bits, allow_insecure=self.allow_insecure)
        holt.check(kgc.params.bits)
        if kgc.params.tables.window is not None:
            # One process holds every party's tables: g, each weak h and each h_CS·h_u (prediction).
            kgc.params.tables.configure(kgc.params.tables.window, max_bases=2 * len(parts) + 6)
        net = network if network is not None else InProcessNetwork()
        session = SYSTEM_RANDOM.token_bytes(16)
        names = [f"u{i + 1}" for i in range(len(parts))]
        verify_keys, signing = make_roster(names)
        weak = {name: kgc.issue_weak_key(name) for name in ["cs", "cc", *names]}
        if kgc.params.tables.window is not None:
            for sk in weak.values():  # each party's comb tables, built once at key set-up (offline)
                sk.public.precompute()
        s1, s2 = kgc.strong_shares()
        kgc.forget_strong_key()
        directory = {name: sk.public for name, sk in weak.items()}

        self.kgc_ = KeyCentre("kgc", net, kgc=kgc, verify_keys=verify_keys, session=session)
        self.cs_ = CentralServer(
            "cs", net, share=s1, weak_key=weak["cs"],
            stats=[self._stats(y, dr.sample_weight) for dr in draws],
            criterion=make_criterion("gini" if self._task == "classification" else "squared_error"),
            task=self._task, grow=grow, columns=dict(zip(names, parts, strict=True)),
            participant_keys={u: directory[u] for u in names}, verify_keys=verify_keys, session=session,
            n_features=d, max_features=k_node, voting=self.voting, ml_seed=seed, holt_params=holt,
        )
        self.cc_ = ComputationServer("cc", net, share=s2, weak_key=weak["cc"], directory=directory,
                                     verify_keys=verify_keys, session=session, holt_params=holt)
        stores = _stores(self.checkpoint_dir, ["cs", *names])
        with role_executor(self.executor, self.n_jobs) as ex:
            self.participants_: dict[str, Participant] = {}
            for i, (u, cols) in enumerate(zip(names, parts, strict=True)):
                proposer = make_proposer(settings, Xa[:, list(cols)], cols)
                self.participants_[u] = Participant(
                    u, net, columns=cols, X_own=Xa[:, list(cols)], weak_key=weak[u], signing_key=signing[u],
                    session=session, verify_keys=verify_keys, cs_key=directory["cs"], proposer=proposer,
                    ml_seed=seed + 1 + i, codec=codec, holt_params=holt, executor=ex, checkpoint=stores.get(u),
                )
            self.network_ = net
            self.partition_ = parts
            self._codec = codec
            self._holt = holt
            self._requesters: dict[str, Requester] = {}

            t_grow, c_grow = time.perf_counter(), time.thread_time()
            frontier = self.cs_.plant([dr.sample_weight for dr in draws])
            if "cs" in stores:
                grow_with_checkpoints(self.cs_, stores["cs"], frontier, draws)
            else:
                with phase("RevFRF layers", total=self.max_depth, enabled=self.progress) as bar:
                    self.cs_.grow_forest(frontier, lambda tree: draws[tree.index].node_features(),
                                         on_layer=lambda _splits: bar.update())
        for part in self.participants_.values():  # an owned pool is shut down here
            part.executor = self.executor
        self.timings_ = {"setup": t_grow - t_start, "grow": time.perf_counter() - t_grow,
                         "setup_cpu": c_grow - c_start, "grow_cpu": time.thread_time() - c_grow}
        return self

    # ------------------------------------------------------------------ predict

    def _fitted(self) -> CentralServer:
        self._check_fitted()
        return self.cs_

    def requester(self, name: str = "requester") -> Requester:
        """A requester party with a key from the KGC (created once per name)."""
        self._fitted()
        r = self._requesters.get(name)
        if r is None:
            sk = self.kgc_.kgc.issue_weak_key(name)
            if sk.public.params.tables.window is not None:
                # comb tables, built once before serving requests: the requester's key and the
                # joint keys h_CS·h_u under which HoLT results travel (CC encrypts, CS re-randomises)
                sk.public.precompute()
                if not self._requesters:
                    for p in self.participants_.values():
                        self.cs_.public_key.joint(p.public_key).precompute()
            self.cs_.register_requester(name, sk.public)
            r = self._requesters[name] = Requester(name, self.network_, weak_key=sk, codec=self._codec,
                                                   holt_params=self._holt)
        return r

    @tracked("RevFRF prediction")
    def _output(self, X: object, method: str, requester: str) -> FloatArray:
        cs = self._fitted()
        Xa = self._validate_X(X, reset=False)
        if method not in METHODS:
            raise ParameterError(f"method is one of {METHODS}")
        if method == "encrypted":
            req = self.requester(requester)
            return np.stack([req.request(row) for row in Xa])
        batch = f"b{SYSTEM_RANDOM.token_bytes(8).hex()}"  # a fresh name; predict leaves the estimator as it was
        live = [p for p in self.participants_.values() if not p.revoked]
        for p in live:
            p.load_rows(batch, Xa[:, list(p.columns)])
        try:
            if method == "vertical":
                return cs.predict_vertical(batch, Xa.shape[0])
            return cs.predict_test(batch, Xa.shape[0])
        finally:
            for p in live:
                p.drop_rows(batch)

    # ------------------------------------------------------------------ revocation and views

    @tracked("RevFRF revocation")
    def revoke(self, participant: str, level: int = 2) -> RevocationRecord:
        """FRF-Revoc: ``participant`` asks for its revocation (level 1 or 2)."""
        self._fitted()
        p = self.participants_.get(participant)
        if p is None:
            raise ParameterError(f"unknown participant {participant!r}")
        p.request_revocation(level=level)
        return self.cs_.revocations[-1]

    @property
    def transcript_(self) -> Transcript:
        self._fitted()
        return self.network_.transcript

    def plaintext_forest(self) -> Forest:
        """The forest with every provider's threshold filled in, as a ``securetrees.trees.Forest``.

        For tests and experiments only: it combines every party's secret, which no party of
        the protocol can do."""
        cs = self._fitted()
        providers = {u: i for i, u in enumerate(self.participants_)}
        thr: dict[tuple[int, int], float] = {}
        for p in self.participants_.values():
            thr.update({k: v.threshold for k, v in p.own_nodes().items()})
        trees = tuple(t.to_tree(self.n_features_in_, providers,
                                {n.id: thr[(t.index, n.id)] for n in t.internal()}) for t in cs.trees)
        return Forest(trees, self._task, getattr(self, "classes_", None))


def _stores(folder: str | None, names: Sequence[str]) -> dict[str, CheckpointStore]:
    """Each role's checkpoint store in ``folder`` under a fresh key of this fit (``{}``: none).
    The keys are not kept: the facade's files measure the cost of checkpoints; a resume runs the
    roles themselves (:func:`~securetrees.protocols.revfrf.cs_resume.resume_forest`)."""
    if folder is None:
        return {}
    if any(Path(folder).glob("*.ckpt")):
        raise ParameterError(f"checkpoint_dir {folder!r} holds another fit's checkpoints")
    return {n: CheckpointStore(folder, n, SYSTEM_RANDOM.token_bytes(KEY_BYTES), FORMAT) for n in names}


def _defaults() -> dict[str, Any]:
    """The facade's defaults of the public settings (read from its constructor: one source)."""
    params = inspect.signature(_RevFRF.__init__).parameters
    return {k: params[k].default for k in _SETTINGS}


class RevFRFClassifier(ClassifierMixin, _RevFRF):
    """RevFRF classification (binary and multi-class), weighted Gini (erratum 4)."""

    _task = "classification"

    def _prepare_y(self, y: object, n: int) -> None:
        self.classes_, self._codes = encode_labels(y, n)

    def _stats(self, y: object, weight: FloatArray) -> FloatArray:
        return class_stats(self._codes.astype(np.int64), int(self.classes_.size), weight)

    def predict_proba(self, X: object, *, method: str = "vertical", requester: str = "requester"
                      ) -> FloatArray:
        """Class distribution per row (``voting``), by ``method``: ``"vertical"`` (providers compare
        in the clear), ``"test"`` (FRF-Test), ``"encrypted"`` (FRF-Predict)."""
        return self._output(X, method, requester)

    def predict(self, X: object, *, method: str = "vertical", requester: str = "requester"
                ) -> npt.NDArray[Any]:
        proba = self.predict_proba(X, method=method, requester=requester)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])


class RevFRFRegressor(RegressorMixin, _RevFRF):
    """RevFRF regression, weighted MSE (erratum 4)."""

    _task = "regression"

    def _prepare_y(self, y: object, n: int) -> None:
        self._y = check_targets(y, n)

    def _stats(self, y: object, weight: FloatArray) -> FloatArray:
        return np.asarray(regression_stats(self._y, weight), dtype=np.float64)

    def predict(self, X: object, *, method: str = "vertical", requester: str = "requester") -> FloatArray:
        return np.asarray(self._output(X, method, requester)[:, 0], dtype=np.float64)
