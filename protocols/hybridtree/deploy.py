"""HybridTree as networked services: the host and each guest in its own process, on their own tables.

Roles: ``host`` (the label holder: its columns of every one of its rows, the labels and the Paillier
key pair) and ``guest0 … guest{k-1}`` (each its own rows of the guest columns; ``k >= min_guests``,
3 at least, or the masked sums would expose a guest).  Every party reads its own table
(``securetrees.net.tables``: ``data`` and ``test_data`` in its configuration section, an id column,
the host's ``label`` column).  Before training the host leads one private set intersection per
guest (``securetrees.net.alignment``; id sets ``train:guestU``, and ``test:guestU`` for the rows to
predict): the host keeps all its rows and learns, for each, which guest holds it (HybridTree's
``owner``); each guest learns which of its ids the host holds and drops the others.  An id held by
two guests is refused (:class:`DuplicateIdError`: HybridTree's guests are disjoint).  The operator
drives the roles with control requests (``securetrees.net.control``):

* ``align_use`` / ``align_run`` / ``align_done``: the alignment phase;
* ``fit`` (host): set up the guests and run every boosting round (``specs/hybridtree.md``);
* ``resume`` (host): finish an interrupted fit from the parties' checkpoints (``Host.resume``);
* ``load_test`` (each guest): load its aligned test rows;
* ``predict`` (host): the inference protocol on every test row of the host; the host writes
  ``out/host.predictions.npy`` (class names, or values for regression), for classification
  ``out/host.proba.npy``, and ``out/host.test_ids.npy``, row ``i`` for row ``i`` of its own test file.
  The operator gets the number of rows, never a prediction;
* ``save_model`` / ``model_id`` (every role, ``securetrees.net.models``): after ``fit`` the host
  seals its trees (guest splits withheld), leaf values, base score, classes and its table's schema
  into ``models/host.model``, each guest the guest splits and the agreed bins.  A run with
  ``[run] job = "predict"`` loads them instead of training, reads only each party's ``test_data``
  and aligns those rows by PSI as in training.

With ``checkpoint_dir`` every party of a fit seals its state at each boosting round
(``specs/hybridtree.md``, "Checkpoints") and, once aligned, its row indices of each id set with its
data files' digests (``securetrees.net.alignment.aligned_rows``).  A party restarted after a kill
takes its rows from there (no alignment phase; a data file changed since is refused with
:class:`~securetrees.errors.DataChangedError`), a guest its splits and its journal of answered
requests too; :func:`resume` then has the host set every guest up again and grow the remaining rounds.

Instance numbering: guest ``u``'s instance IDs are the positions of its rows in its PSI's agreed
order (``0, 1, ...``); the host orders its rows so that each guest's rows follow that order
(:func:`arrange`) and sends each guest these numbers (``Host(local_ids=True)``), never its own row
positions.

Parameters come from ``[protocol]``: the facade's settings (:class:`HybridTreeClassifier`, or with
``task = "regression"`` :class:`HybridTreeRegressor`) plus ``task``, ``guests``, the guest feature
space (``guest_features``: column names; ``guest_categories``: the categories of each categorical
guest column, code = position; ``guest_bins``: each numeric guest column's bin edges, or
``guest_ranges``: ``[low, high]`` for ``max_bins`` uniform bins), the alignment keys, in secure
mode ``host_public_key`` (hex; every guest pins it) and, for a run that keeps checkpoints,
``checkpoint_dir`` (relative to ``run.toml``; every party's key file then holds a ``checkpoint_key``).
These are public: every guest encodes and bins alike from them, without a dealer.  :func:`prepare`
declares the edges the one-process facade agrees on the same joined rows (pooled quantiles), so that
the deployed model equals the facade's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import DuplicateIdError, ParameterError, TableError
from securetrees.executors import check_trusted, process_pool
from securetrees.net import alignment
from securetrees.net.alignment import AlignmentPlan, align, align_pending, aligned_rows, alignment_mode
from securetrees.net.config import PartyConfig, RunConfig
from securetrees.net.control import Controllable, ControlReply, Operator
from securetrees.net.deployment import (
    check_own_key,
    check_protocol_keys,
    checkpoint_store,
    open_paillier,
    pinned_key,
    published_key,
    save_predictions,
    seal_paillier,
)
from securetrees.net.models import SavesModel, SchemaState, check_models, load_model, refuse_training, save_models
from securetrees.net.tables import (
    PartyTable,
    TableOptions,
    feature_columns,
    party_tables,
    read_table,
    table_columns,
    test_table,
)
from securetrees.net.trial import Secret, TrialPlan, table_frame, write_trial
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.progress import phase
from securetrees.protocols.hybridtree.boosting import FitProgress, Loss, probabilities
from securetrees.protocols.hybridtree.checkpoint import FORMAT
from securetrees.protocols.hybridtree.estimators import (
    HybridTreeClassifier,
    HybridTreeRegressor,
    _HybridTree,
    check_layout,
)
from securetrees.protocols.hybridtree.guest import Guest, agree_bins, guest_matrix
from securetrees.protocols.hybridtree.host import Host, owners
from securetrees.protocols.hybridtree.messages import Ack, Gradients, PlainGradients, Values
from securetrees.protocols.hybridtree.model import GuestModel, HostModel
from securetrees.protocols.hybridtree.params import HybridTreeParams
from securetrees.psi.roles import random_permutation
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, Party, message
from securetrees.runtime.network import Network
from securetrees.trees import BinMapper
from securetrees.trees.binning import uniform_edges

__all__ = ["HOST", "PARAMETERS", "PREDICTIONS_KEPT", "PREDICT_ONLY", "ROLES",
           "DeployedGuest", "DeployedHost", "GuestSpace", "HostPart",
           "alignment_plan", "arrange", "check_parameters", "estimator_from", "fit", "guest_space", "guest_tables",
           "make_role", "predict", "prepare", "resume", "run_job", "trial"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
HOST = "host"
"""The host's name (and role) in a deployed run."""

_ESTIMATORS: dict[str, type[_HybridTree]] = {"classification": HybridTreeClassifier, "regression": HybridTreeRegressor}
_RUN_KEYS = ("task", "guests", "guest_features", "guest_categories", "guest_bins", "guest_ranges",
             "host_public_key", "checkpoint_dir")
_NOT_SETTINGS = ("keypair", "record_payloads", "progress", "rng", "random_state", "guest_column", "n_guests",
                 "executor", "host_features", "guest_features", "categorical_features")
"""Facade parameters that are no run parameter (objects, in-process bookkeeping, or the one-process
table's layout: each party's columns and categories are its own table's)."""

PREDICT_ONLY = True
"""A ``[run] job = "predict"`` run loads each party's model part (``securetrees.net.models``)."""

PROGRESS_ROLE = HOST
"""The role ``securetrees operator fit`` polls for progress (it drives the boosting)."""

PREDICTIONS_KEPT = "the host keeps the predictions beside its ids (out/host.predictions.csv on its machine)"
"""Where the predictions stay: the operator's ``predict`` receives a summary, not the predictions
(``securetrees operator predict`` says so and writes no ``--out`` file)."""

ROLES: Mapping[str, str | None] = {"host": HOST, "guest": None}
"""The roles of a run, the host (labels and key pair) and any number of guests:
a single-party role mapped to the name its party carries (``securetrees.net.config.check_roles``)."""

PARAMETERS = frozenset({*_RUN_KEYS, *alignment.PARAMETERS,
                        *(n for cls in _ESTIMATORS.values() for n in cls._get_param_names() if n not in _NOT_SETTINGS)})
"""The ``[protocol]`` keys a HybridTree run may hold (either task's settings; :func:`estimator_from`
checks those of the run's task and the required ones)."""


def estimator_from(params: Mapping[str, Any], protocol: str = "hybridtree") -> _HybridTree:
    """The facade whose settings ``params`` (a ``[protocol]`` table) gives, its keys checked."""
    task = params.get("task", "classification")
    if task not in _ESTIMATORS:
        raise ParameterError(f"task must be one of {sorted(_ESTIMATORS)}, got {task!r}")
    cls = _ESTIMATORS[str(task)]
    names = [n for n in cls._get_param_names() if n not in _NOT_SETTINGS]
    check_protocol_keys(params, (*names, *_RUN_KEYS, *alignment.PARAMETERS), protocol,
                        required=("guests", "guest_features"))
    est = cls(**{k: params[k] for k in names if k in params})
    if isinstance(est.n_estimators, bool) or not isinstance(est.n_estimators, int) or est.n_estimators < 1:
        raise ParameterError("n_estimators must be a positive integer")
    if est.base_score not in ("prior", "zero"):
        raise ParameterError("base_score must be 'prior' or 'zero'")
    return est


def _host_key(params: Mapping[str, Any], est: _HybridTree) -> PublicKey | None:
    """``[protocol] host_public_key``, which every guest pins: required in secure mode (``securetrees
    setup keys hybridtree`` makes it), ``None`` in the insecure modes, which encrypt nothing."""
    if est._params().mode != "secure":
        return None
    return pinned_key(params, "host_public_key", insecure=bool(est.allow_insecure),
                      why="in secure mode, for the guests to pin")


def check_parameters(params: Mapping[str, Any]) -> None:
    """The checks of ``[protocol]`` a role makes before it reads any data or key
    (``securetrees setup run`` makes them before writing ``run.toml``): the settings and the
    required keys (:func:`estimator_from`) and, in secure mode, the host's published key."""
    _host_key(params, estimator_from(params))


def _guests(params: Mapping[str, Any], hp: HybridTreeParams) -> list[str]:
    guests = params["guests"]
    if (not isinstance(guests, list) or not all(isinstance(g, str) and g for g in guests)
            or len(set(guests)) != len(guests) or HOST in guests):
        raise ParameterError("guests must list distinct party names (not 'host')")
    if hp.mode != "paper" and len(guests) < hp.min_guests:
        raise ParameterError(f"HybridTree needs at least {hp.min_guests} guests (got {len(guests)}): "
                             "the masked sums would expose a guest")
    return list(guests)


# -- the guest feature space, declared in [protocol] --------------------------------------------
@dataclass(frozen=True)
class GuestSpace:
    """The guest feature space every guest encodes and bins alike (``[protocol]``, public): column
    names, the categories of each categorical column and the agreed bins."""

    names: tuple[str, ...]
    categories: Mapping[str, tuple[str, ...]]
    mapper: BinMapper


def _name_table(params: Mapping[str, Any], key: str, names: Sequence[str]) -> dict[str, Any]:
    table = params.get(key, {})
    if not isinstance(table, dict):
        raise ParameterError(f"[protocol] {key} maps a guest column's name to its declaration")
    unknown = sorted(set(table) - set(names))
    if unknown:
        raise ParameterError(f"[protocol] {key} names columns not in guest_features: {unknown}")
    return table


def guest_space(params: Mapping[str, Any], max_bins: int) -> GuestSpace:
    """The guest space from ``[protocol]``: ``guest_features`` (names), ``guest_categories``
    (categorical columns: their categories; such a column has one bin per category),
    ``guest_bins`` (a numeric column's sorted finite edges) or ``guest_ranges`` (``[low, high]``:
    ``max_bins`` uniform bins, the default an organisation can write without data).  Every
    numeric column needs one of the two.  Checked; reveals nothing (public parameters)."""
    names = params.get("guest_features")
    if (not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names)
            or len(set(names)) != len(names)):
        raise ParameterError("[protocol] guest_features lists the guest columns' distinct names")
    cats = _name_table(params, "guest_categories", names)
    edges_of = _name_table(params, "guest_bins", names)
    ranges = _name_table(params, "guest_ranges", names)
    categorical, edges, n_bins = [], [], []
    categories: dict[str, tuple[str, ...]] = {}
    for name in names:
        if name in cats:
            values = cats[name]
            if (not isinstance(values, list) or not values or len(values) > max_bins
                    or len({str(v) for v in values}) != len(values) or name in edges_of or name in ranges):
                raise ParameterError(f"[protocol] guest_categories.{name}: 1 to max_bins ({max_bins}) distinct "
                                     "categories, and no edges or range for it")
            categories[name] = tuple(str(v) for v in values)
            categorical.append(True)
            edges.append(np.empty(0, dtype=np.float64))
            n_bins.append(len(values))
            continue
        if (name in edges_of) == (name in ranges):
            raise ParameterError(f"[protocol] the numeric guest column {name!r} needs its edges (guest_bins) "
                                 "or its range (guest_ranges), one of the two")
        if name in edges_of:
            e = np.asarray(edges_of[name], dtype=np.float64)
            if e.ndim != 1 or e.size >= max_bins or not np.all(np.isfinite(e)) or np.any(np.diff(e) <= 0):
                raise ParameterError(f"[protocol] guest_bins.{name}: fewer than max_bins ({max_bins}) sorted, "
                                     "distinct, finite edges")
        else:
            lo_hi = ranges[name]
            if (not isinstance(lo_hi, list) or len(lo_hi) != 2 or not all(isinstance(v, (int, float)) for v in lo_hi)
                    or not np.isfinite(lo_hi).all() or not lo_hi[0] < lo_hi[1]):
                raise ParameterError(f"[protocol] guest_ranges.{name} is [low, high], finite, low < high")
            e = uniform_edges(float(lo_hi[0]), float(lo_hi[1]), max_bins)
        categorical.append(False)
        edges.append(e)
        n_bins.append(int(e.size) + 1)
    mapper = BinMapper(max_bins, tuple(categorical), tuple(edges), tuple(n_bins))
    return GuestSpace(tuple(names), categories, mapper)


def _mapper_arrays(mapper: BinMapper) -> dict[str, npt.NDArray[Any]]:
    return {"bins_categorical": np.asarray(mapper.categorical, dtype=bool),
            "bins_n": np.asarray(mapper.n_bins, dtype=np.int64),
            "bins_sizes": np.asarray([e.size for e in mapper.edges], dtype=np.int64),
            "bins_edges": np.concatenate([np.asarray(e, dtype=np.float64) for e in mapper.edges])}


def _mapper_from(data: Mapping[str, npt.NDArray[Any]], max_bins: int) -> BinMapper:
    """The agreed bins a guest saved with its model part, checked (sorted finite edges, counts that fit)."""
    cat, n_bins = np.asarray(data["bins_categorical"], dtype=bool), np.asarray(data["bins_n"], dtype=np.int64)
    sizes, flat = np.asarray(data["bins_sizes"], dtype=np.int64), np.asarray(data["bins_edges"], dtype=np.float64)
    if not (cat.ndim == n_bins.ndim == sizes.ndim == 1 and cat.size == n_bins.size == sizes.size) or (
            sizes.min(initial=0) < 0 or int(sizes.sum()) != flat.size):
        raise ParameterError("the agreed bins in the model part are malformed")
    edges = tuple(np.split(flat, np.cumsum(sizes)[:-1])) if sizes.size else ()
    for e, c, k in zip(edges, cat.tolist(), n_bins.tolist(), strict=True):
        if not (1 <= k <= max_bins) or (not c and (e.size + 1 != k or not np.all(np.isfinite(e))
                                                    or np.any(np.diff(e) <= 0))):
            raise ParameterError("the agreed bins in the model part do not fit max_bins or are not sorted")
    return BinMapper(max_bins, tuple(bool(c) for c in cat), edges, tuple(int(k) for k in n_bins))


# -- each party's own table ---------------------------------------------------------------------
def _guest_options(party: PartyConfig, space: GuestSpace, source: object) -> TableOptions:
    """How guest ``party`` reads its tables: its columns (``columns`` or ``features``, else every
    column of ``source`` but the id and the dropped ones), each in the guest space, categories from
    ``[protocol]`` (never its own)."""
    where = f"[parties.{party.name}]"
    opt = TableOptions.of_party(party)
    if opt.label is not None or opt.categories is not None:
        raise ParameterError(f"{where}: a guest names no label column and no categories of its own "
                             "(its categories are [protocol] guest_categories)")
    header = table_columns(source, f"{party.name}'s data")
    if source == party.test_data:  # a predict-only run reads no training table: its dropped columns may be absent
        opt = replace(opt, drop=tuple(c for c in opt.drop if c in header))
    cols = feature_columns(header, opt, f"{party.name}'s data ({source})")
    outside = [c for c in cols if c not in space.names]
    if outside:
        raise TableError(f"{party.name}'s data ({source}): columns not in [protocol] guest_features: {outside}")
    return TableOptions(opt.id_column, None, tuple(cols), {c: space.categories[c] for c in cols
                                                             if c in space.categories})


def _in_space(table: PartyTable, space: GuestSpace) -> FloatArray:
    """A guest's rows in the guest space: its columns where the space has them, NaN for the others."""
    out = np.full((len(table), len(space.names)), np.nan)
    out[:, [space.names.index(c) for c in table.schema.names]] = table.X
    return out


def guest_tables(party: PartyConfig, space: GuestSpace, *, train: bool = True
                 ) -> tuple[PartyTable | None, PartyTable | None]:
    """Guest ``party``'s training table (unless not ``train``: a predict-only run) and test table
    (or None), encoded under the declared guest schema: a category outside ``guest_categories`` is
    missing, an empty cell is missing, a numeric column must hold numbers (:class:`TableError`)."""
    source = party.data if train else party.test_data
    if source is None:
        raise TableError(f"party {party.name!r} names no {'data' if train else 'test_data'} file")
    opt = _guest_options(party, space, source)
    data = read_table(party.data, opt, name=f"{party.name}'s data") if train else None
    test = (read_table(party.test_data, opt, name=f"{party.name}'s test data")
            if party.test_data is not None else None)
    return data, test


def arrange(n: int, guest_rows: Sequence[npt.ArrayLike]) -> tuple[IntArray, IntArray]:
    """The host's order of its ``n`` rows and each arranged row's guest: guest 0's rows in the
    order given (its PSI's agreed order), then guest 1's ..., then the rows no guest holds in the
    host's own order.  A row in two guests' lists raises :class:`DuplicateIdError`.  Local."""
    lists = [np.asarray(r, dtype=np.int64) for r in guest_rows]
    owner = np.full(n, -1, dtype=np.int64)
    for u, rows in enumerate(lists):
        if np.any(owner[rows] >= 0) or np.unique(rows).size != rows.size:
            raise DuplicateIdError(f"a row of the host is held by guest {u} and by another guest")
        owner[rows] = u
    order = np.concatenate([*lists, np.flatnonzero(owner < 0)]).astype(np.int64)
    return order, owner[order]


def alignment_plan(config: RunConfig) -> AlignmentPlan:
    """The host leads one PSI per guest: ``train:NAME`` (the host and guest NAME), and
    ``test:NAME`` when every party names ``test_data``; a predict-only run aligns the test sets
    only.  The guests' sets must be disjoint over the host's rows; a guest may hold none of the
    test rows (its test set may be empty), but must share training ids with the host."""
    if alignment_mode(config) != "psi":
        raise ParameterError("HybridTree aligns its rows by PSI only (alignment = \"psi\")")
    guests = [str(g) for g in config.params["guests"]]
    kinds = [] if config.job == "predict" else ["train"]
    if all(config.party(p).test_data is not None for p in (HOST, *guests)):
        kinds.append("test")
    if not kinds:
        raise ParameterError("a predict-only run needs every party's test_data")
    sets = {f"{kind}:{g}": (HOST, g) for kind in kinds for g in guests}
    return AlignmentPlan(HOST, sets, disjoint=tuple(tuple(f"{kind}:{g}" for g in guests) for kind in kinds),
                         may_be_empty=tuple(n for n in sets if n.startswith("test:")))


# -- the roles ----------------------------------------------------------------------------------
@message("hybridtree.deploy.host_part")
@dataclass(frozen=True)
class HostPart(Message):
    """The host's model file body: its model (:class:`HostModel`) and its table's schema (so new
    rows are encoded as the training rows were)."""

    model: HostModel
    schema: SchemaState


@dataclass(frozen=True)
class _HostTest:
    X: FloatArray
    owner: IntArray
    order: IntArray
    ids: tuple[str, ...]


class DeployedHost(SavesModel, Controllable, Host):
    task: str = "classification"
    y: npt.NDArray[Any]
    test: _HostTest | None = None
    n_estimators: int = 1
    base_score: str = "prior"
    schema: SchemaState | None = None

    def control_fit(self, args: dict[str, str]) -> ControlReply:
        return self._train(self.fit)

    def control_resume(self, args: dict[str, str]) -> ControlReply:
        """Finish an interrupted fit from the parties' checkpoints (``Host.resume``: set up again, then
        the rounds after the host's latest checkpoint)."""
        return self._train(self.resume)

    def _train(self, run: Callable[..., Host]) -> ControlReply:
        """``run`` (:meth:`Host.fit` or :meth:`Host.resume`) on this run's labels and settings."""
        refuse_training(self.run)
        loss: Loss = "logistic" if self.task == "classification" else "squared"
        with phase("HybridTree trees", total=self.n_estimators) as shown:  # in its log and its status
            run(self.y, n_estimators=self.n_estimators, loss=loss, base_score=self.base_score,
                progress=FitProgress.shown_on(shown))
        splits = sum(r.n_guest_splits for r in self.records)
        self.logger.info("%s trained %d trees (%d guest splits)", self.name, len(self.records), splits)
        return ControlReply(info={"trees": str(len(self.records)), "guest_splits": str(splits),
                                  "dropped": ",".join(self.dropped) or "none"})  # guests that dropped out

    def control_predict(self, args: dict[str, str]) -> ControlReply:
        """Inference on every test row of the host; the outputs follow the host's own test file."""
        t = self.test
        if t is None:
            raise ParameterError(f"{self.name} has no test rows (test_data in its configuration section)")
        arranged = self.decision_function(t.X, t.owner)
        raw = np.empty_like(arranged)
        raw[t.order] = arranged
        if self.task == "classification":
            proba = probabilities(raw)
            path = save_predictions(self.run, self.name, t.ids, np.asarray(self.classes_[np.argmax(proba, axis=1)]),
                                    proba, np.asarray(self.classes_).tolist())
        else:
            path = save_predictions(self.run, self.name, t.ids, np.asarray(raw, dtype=np.float64))
        self.logger.info("%s predicted %d test rows into %s", self.name, t.X.shape[0], path)
        return ControlReply(info={"rows": str(t.X.shape[0])})

    def model_part(self) -> Message:
        if self.schema is None:  # pragma: no cover - set by make_role
            raise ParameterError(f"{self.name} has no table schema")
        return HostPart(self.model_state(), self.schema)


class DeployedGuest(SavesModel, Controllable, Guest):
    test: tuple[IntArray, FloatArray] | None = None
    bins: dict[str, npt.NDArray[Any]]

    _tree_logged = -1

    def _log_tree(self, tree: int) -> None:
        """Each tree once in this guest's log (its progress: the host's status has the boosting's)."""
        if tree != self._tree_logged:
            self._tree_logged = tree
            self.logger.info("%s: tree %d", self.name, tree + 1)

    def on_gradients(self, sender: str, msg: Gradients) -> Ack | None:
        """``Guest.on_gradients``, with the tree in this guest's log."""
        self._log_tree(msg.tree)
        return super().on_gradients(sender, msg)

    def on_plain_gradients(self, sender: str, msg: PlainGradients) -> Values | None:
        """``Guest.on_plain_gradients``, with the tree in this guest's log."""
        self._log_tree(msg.tree)
        return super().on_plain_gradients(sender, msg)

    def model_part(self) -> Message:
        return self.model_state(self.bins)

    def control_load_test(self, args: dict[str, str]) -> ControlReply:
        if self.test is None:
            raise ParameterError(f"{self.name} has no test rows (test_data in its configuration section)")
        self.load_test(*self.test)
        self.logger.info("%s loaded %d test rows", self.name, self.test[0].size)
        return ControlReply(info={"rows": str(self.test[0].size)})


def _host_labels(table: PartyTable, task: str) -> npt.NDArray[Any]:
    if table.labels is None:
        raise TableError("the host names its label column (label = ...) in its section")
    if task == "regression":
        try:
            return np.asarray(table.labels, dtype=np.float64)
        except ValueError:
            raise TableError("a regression label column holds a value that is not a number") from None
    return np.asarray(table.labels).astype(str)


def _host_test(test: PartyTable, rows: Mapping[str, IntArray], guests: Sequence[str]) -> _HostTest:
    order, owner = arrange(len(test), [rows[f"test:{g}"] for g in guests])
    return _HostTest(test.X[order], owner, order, test.ids)


def _make_host(config: RunConfig, network: Network, secrets: dict[str, bytes], passphrase: bytes,
               est: _HybridTree, guests: list[str]) -> DeployedHost:
    """The host: reads its table (labels checked) before the alignment phase, serves it (learning
    each guest's rows among its own), then builds its role on its rows arranged per guest."""
    hp = est._params()
    task = "classification" if isinstance(est, HybridTreeClassifier) else "regression"
    plan = alignment_plan(config)
    party = config.party(HOST)
    train: PartyTable | None = None
    test: PartyTable | None
    part = load_model(config, HOST, Host.role, passphrase, HostPart) if config.job == "predict" else None
    if part is not None:
        body: HostPart = part.body  # type: ignore[assignment]
        schema = body.schema.schema()
        test = test_table(party, schema)
    else:
        train, test = party_tables(party)
        schema = train.schema
        labels = _host_labels(train, task)
    keypair = None
    if hp.mode == "secure":
        keypair = open_paillier(secrets, "paillier_key", passphrase, role=HOST, allow_insecure=bool(est.allow_insecure))
        check_own_key(keypair[0], published_key(config.params, "host_public_key", insecure=bool(est.allow_insecure)),
                      "host_public_key", HOST)
    sets = {name: (train.ids if name.startswith("train:") and train is not None else (test.ids if test else ()))
            for name in plan.sets}
    store = checkpoint_store(config, HOST, secrets, FORMAT) if part is None else None
    rows = aligned_rows(config, HOST, network, plan, sets, store)  # restarted with a record: no phase
    categorical = schema.categorical_mask()
    common = dict(params=hp, guests=guests, categorical=categorical, keypair=keypair, local_ids=True,
                  executor=process_pool(est.n_jobs), trusted_workers=check_trusted(est.trusted_workers),
                  checkpoint=store)
    if part is not None:
        host = DeployedHost(HOST, network, X=np.empty((0, schema.n_columns)), owner=np.empty(0, dtype=np.int64),
                            **common)  # type: ignore[arg-type]
        host.restore_model(body.model)
        host.loaded(part)
    elif train is not None:
        order, owner = arrange(len(train), [rows[f"train:{g}"] for g in guests])
        host = DeployedHost(HOST, network, X=train.X[order], owner=owner, **common)  # type: ignore[arg-type]
        host.y = labels[order]
        held = int((owner >= 0).sum())
        host.logger.info("%s: %d of its %d rows are held by a guest", HOST, held, len(train))
    host.task, host.n_estimators, host.base_score = task, int(est.n_estimators), str(est.base_score)
    host.schema = SchemaState.of(schema)
    if test is not None:
        host.test = _host_test(test, rows, guests)
    host.run, host.passphrase = config, passphrase
    return host


def _make_guest(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes], passphrase: bytes,
                est: _HybridTree) -> DeployedGuest:
    """A guest: reads its table under the declared guest schema before the alignment phase, serves
    it (learning which of its ids the host holds; the others are dropped, their number logged),
    then numbers its rows by their place in the agreed order."""
    hp = est._params()
    p = config.params
    insecure = bool(est.allow_insecure)
    pinned = _host_key(p, est)
    space = guest_space(p, hp.max_bins)
    predicting = config.job == "predict"
    plan = alignment_plan(config)
    train, test = guest_tables(config.party(role), space, train=not predicting)
    model = load_model(config, role, Guest.role, passphrase, GuestModel) if predicting else None
    mapper, bins = space.mapper, _mapper_arrays(space.mapper)
    if model is not None:
        saved = {k: np.asarray(v) for k, v in model.body.bins.items()}  # type: ignore[attr-defined]
        _mapper_from(saved, hp.max_bins)
        if set(saved) != set(bins) or not all(np.array_equal(saved[k], bins[k]) for k in bins):
            raise ParameterError(f"{role}: the guest space in [protocol] differs from the one its model was fitted "
                                 "with (the new rows would be encoded otherwise)")
    sets = {name: (train.ids if name.startswith("train:") and train is not None else (test.ids if test else ()))
            for name in plan.sets if role in plan.sets[name]}
    store = checkpoint_store(config, role, secrets, FORMAT) if model is None else None
    rows = aligned_rows(config, role, network, plan, sets, store)  # restarted with a record: no phase
    if model is not None:
        X = np.empty((0, mapper.n_features))
    else:
        if train is None:  # pragma: no cover - read above
            raise TableError(f"{role} has no training rows")
        kept = rows[f"train:{role}"]
        X = _in_space(train.take(kept), space)
    guest = DeployedGuest(role, network, params=hp, ids=np.arange(X.shape[0], dtype=np.int64), X=X, mapper=mapper,
                          host_key=pinned, allow_insecure=insecure, executor=process_pool(est.n_jobs),
                          checkpoint=store)  # restored from its latest checkpoint, its journal too
    if train is not None:
        dropped = len(train) - X.shape[0]
        guest.logger.info("%s: %d of its %d ids are held by the host; %d dropped", role, X.shape[0], len(train),
                          dropped)
    guest.bins = bins
    if model is not None:
        guest.restore_model(model.body)  # type: ignore[arg-type]
        guest.loaded(model)
    if test is not None and f"test:{role}" in rows:
        mine = test.take(rows[f"test:{role}"])
        guest.test = (np.arange(len(mine), dtype=np.int64), _in_space(mine, space))
    guest.run, guest.passphrase = config, passphrase
    return guest


def make_role(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
              data: dict[str, npt.NDArray[Any]], passphrase: bytes) -> Party:
    """Build ``role``: parameters, keys and its own tables are checked first, then it serves the
    alignment phase (blocking until the operator ends it), then its protocol role on the aligned
    rows (in a predict-only run from its model part and its ``test_data`` only).  ``data`` is
    unused: each party reads its own table."""
    p = config.params
    est = estimator_from(p, f"{config.protocol} ({config.path})")
    guests = _guests(p, est._params())
    guest_space(p, est._params().max_bins)  # public: every party checks the declaration
    alignment_plan(config)
    if role == HOST:
        return _make_host(config, network, secrets, passphrase, est, guests)
    if role in guests:
        return _make_guest(role, config, network, secrets, passphrase, est)
    raise ParameterError(f"{role!r} is not a role of this HybridTree run")


# -- the operator -------------------------------------------------------------------------------
def fit(operator: Operator, config: RunConfig) -> dict[str, str]:
    """The alignment phase (one PSI per guest and id set), then training (the host drives every
    guest), then every role saves its model part.  Reports the number of guest splits and each
    intersection's size (all the operator learns of the data)."""
    refuse_training(config)
    sizes = align(operator, alignment_plan(config))
    with operator.step("fit"):
        info = dict(operator.control(HOST, "fit").info)
    model_id = save_models(operator, config.roles)
    return {**info, **{f"{name}_rows": str(n) for name, n in sizes.items()}, "model_id": model_id}


def resume(operator: Operator, config: RunConfig) -> dict[str, str]:
    """Finish an interrupted fit (``securetrees operator resume``): the host resumes from the parties'
    checkpoints (a restarted party took its aligned rows from its own; the host sets up every guest
    again), then every role saves its model part as after :func:`fit`."""
    refuse_training(config)
    with operator.step("resume"):
        info = dict(operator.control(HOST, "resume").info)
    model_id = save_models(operator, config.roles)
    return {**info, "model_id": model_id}


def predict(operator: Operator, config: RunConfig, method: str | None = None) -> dict[str, npt.NDArray[Any]]:
    """Each guest loads its aligned test rows, the host predicts and keeps the predictions
    (``out/``); the operator receives the number of rows.  In a predict-only run the test ids are
    aligned first and every role's model part must come from the same fit."""
    if method is not None:
        raise ParameterError("HybridTree has one prediction method")
    guests = [str(g) for g in config.params["guests"]]
    if config.job == "predict":
        align_pending(operator, alignment_plan(config))
        check_models(operator, config.roles)
    with operator.step("predict"):
        operator.control_many(guests, "load_test")
        reply = operator.control(HOST, "predict").info
    return {"rows": np.asarray([int(reply["rows"])])}


def run_job(operator: Operator, config: RunConfig) -> dict[str, npt.NDArray[Any]]:
    """Align, train, save the model parts, predict at the host (who keeps the predictions); returns
    the number of guest splits and of predicted rows.  A predict-only run predicts only."""
    if config.job == "predict":
        return predict(operator, config)
    fitted = fit(operator, config)
    return {"guest_splits": np.asarray([int(fitted["guest_splits"])]), **predict(operator, config)}


# -- a local trial ------------------------------------------------------------------------------
def _deal(rows: Sequence[IntArray], lacking: int, rng: RandomSource) -> tuple[list[IntArray], list[IntArray]]:
    """Each guest's rows without ``lacking`` of them (rows the host holds alone), and the
    ``lacking`` rows of each guest the host lacks (ids the guest holds alone)."""
    mine, host_lacks = [], []
    for r in rows:
        if lacking and 2 * lacking >= r.size:
            raise ParameterError("lacking must leave every guest rows the host holds too")
        perm = r[random_permutation(r.size, rng)]
        host_lacks.append(np.sort(perm[:lacking]))
        mine.append(np.sort(np.concatenate([perm[:lacking], perm[2 * lacking:]])))
    return mine, host_lacks


def _shuffled(frame: Any, rng: RandomSource) -> Any:
    return frame.iloc[random_permutation(frame.shape[0], rng)].reset_index(drop=True)


def _with_checkpoint_key(params: Mapping[str, Any], items: dict[str, Secret]) -> dict[str, Secret] | None:
    """A trial party's key-file items, with a fresh ``checkpoint_key`` when the run keeps checkpoints
    (``checkpoint_dir``); ``None`` when there are none."""
    if "checkpoint_dir" in params:
        items = {**items, "checkpoint_key": SYSTEM_RANDOM.token_bytes(32)}
    return items or None


def prepare(out_dir: str | Path, X: npt.ArrayLike, y: npt.ArrayLike, host_features: Sequence[int],
            guest_features: Sequence[int] | Sequence[Sequence[int]], guest_rows: Sequence[npt.ArrayLike], *,
            X_test: npt.ArrayLike, test_rows: Sequence[npt.ArrayLike], params: dict[str, Any],
            keypair: tuple[PublicKey, PrivateKey] | None = None, base_port: int = 0,
            names: Sequence[str] | None = None, categories: Mapping[str, Sequence[str]] | None = None,
            lacking: int = 0, rng: RandomSource = SYSTEM_RANDOM) -> Path:
    """A local trial from a row layout (as ``testing.fit_layout``: each guest's row indexes of ``X``;
    a row several guests list goes to the lowest-numbered one): certificates, the host's sealed key
    pair (``keypair``, else a fresh ``key_bits`` key), each party's own CSV tables, ``run.toml``.

    Columns are named ``names`` (else ``x0, x1 ...``); a column in ``categories`` holds codes,
    written as their category names; NaN is an empty cell; ``y`` is written as the host's label
    column (class names or codes, or regression targets).  Ids are ``row-i`` / ``test-i``; every
    table is in its own random order; with ``lacking``, each guest holds ``lacking`` ids the host
    lacks and the host ``lacking`` rows of each guest's that the guest lacks (in training and, as
    far as the test rows allow, in test).  ``[protocol]`` declares the guest space: the guest
    columns' categories (up to the largest code the guests' aligned training rows hold) and the
    quantile edges the facade agrees on those rows, so the deployed model is the facade's on the
    joined rows (``testing.joined_view``).  ``categorical_features`` in ``params`` is ignored: the
    tables say which columns hold categories."""
    settings = {k: v for k, v in params.items() if k != "categorical_features"}
    est = estimator_from({**settings, "guests": [], "guest_features": []})
    hp = est._params()
    Xa, Xt = np.asarray(X, dtype=np.float64), np.asarray(X_test, dtype=np.float64)
    host_cols, space, per_guest, layout = check_layout(Xa.shape[0], Xa.shape[1], host_features, guest_features,
                                                       guest_rows)
    _, _, _, test_layout = check_layout(Xt.shape[0], Xt.shape[1], host_cols, per_guest, test_rows)
    cols = list(names) if names is not None else [f"x{j}" for j in range(Xa.shape[1])]
    cats = {k: list(v) for k, v in (categories or {}).items()}
    guests = [f"guest{u}" for u in range(len(layout))]
    owner, owner_t = owners(Xa.shape[0], layout), owners(Xt.shape[0], test_layout)
    rows = [np.flatnonzero(owner == u) for u in range(len(guests))]
    trows = [np.flatnonzero(owner_t == u) for u in range(len(guests))]
    rows, lacks = _deal(rows, lacking, rng)
    t_lacking = max(0, min(lacking, *((r.size - 1) // 2 for r in trows)))
    trows, tlacks = _deal(trows, t_lacking, rng)
    kept = [np.setdiff1d(r, lk) for r, lk in zip(rows, lacks, strict=True)]
    pooled = [guest_matrix(Xa[r], space, c) for r, c in zip(kept, per_guest, strict=True)]
    mapper = agree_bins(pooled, max_bins=hp.max_bins, categorical=[cols[c] in cats for c in space])
    declared: dict[str, dict[str, list[Any]]] = {"guest_categories": {}, "guest_bins": {}}
    for j, c in enumerate(space):
        if mapper.categorical[j]:
            declared["guest_categories"][cols[c]] = cats[cols[c]][: mapper.n_bins[j]]
        else:
            declared["guest_bins"][cols[c]] = [float(e) for e in mapper.edges[j]]
    run = {**settings, "guests": guests, "guest_features": [cols[c] for c in space],
           **{k: v for k, v in declared.items() if v}}
    host_secrets: dict[str, Secret] = {}
    if hp.mode == "secure":
        keys = keypair if keypair is not None else est._keys(hp)
        if keys is None:  # pragma: no cover - secure mode always has keys
            raise ParameterError("secure mode needs the host's key pair")
        run["host_public_key"] = keys[0].to_bytes().hex()
        host_secrets["paillier_key"] = seal_paillier(keys[1])
    _guests(run, hp)
    guest_space(run, hp.max_bins)  # the declaration is checked as every guest will
    ids, test_ids = [f"row-{i}" for i in range(Xa.shape[0])], [f"test-{i}" for i in range(Xt.shape[0])]

    def frame(ids_of: Sequence[str], M: FloatArray, r: IntArray, c: Sequence[int], label: Any = None) -> Any:
        names_c = [cols[k] for k in c]
        return _shuffled(table_frame([ids_of[k] for k in r], M[r][:, list(c)], names_c,
                                     categories={n: v for n, v in cats.items() if n in names_c},
                                     label=None if label is None else ("label", np.asarray(label)[r].tolist())), rng)

    plan = TrialPlan(protocol="hybridtree", params=run)
    host_rows = np.setdiff1d(np.arange(Xa.shape[0]), np.concatenate(lacks))
    host_trows = np.setdiff1d(np.arange(Xt.shape[0]), np.concatenate(tlacks))
    plan.add(HOST, role=Host.role, secrets=_with_checkpoint_key(run, host_secrets), options={"label": "label"},
             tables={"data": frame(ids, Xa, host_rows, host_cols, y), "test_data": frame(test_ids, Xt, host_trows,
                                                                                         host_cols)})
    for name, r, tr, held in zip(guests, rows, trows, per_guest, strict=True):
        plan.add(name, role=Guest.role, secrets=_with_checkpoint_key(run, {}),
                 tables={"data": frame(ids, Xa, r, held), "test_data": frame(test_ids, Xt, tr, held)})
    return write_trial(out_dir, plan, base_port=base_port)


def trial(out_dir: str | Path, *, rows: int, trees: int, insecure: bool) -> Path:
    """``securetrees federation init hybridtree``: the demo's hybrid split of Adult's first ``rows``
    training rows (``rows // 2`` test rows) over 5 guests, as CSV files (string categories, empty
    cells for missing values, text labels, each party in its own row order, a few ids the other
    side lacks); secure mode at the demo's learning rate."""
    from securetrees.datasets import load_adult
    from securetrees.protocols.hybridtree.demo import MAX_BINS, adult_hybrid

    data = adult_hybrid(n_guests=5, rows=rows)
    params: dict[str, Any] = {"n_estimators": trees, "learning_rate": 0.5, "max_bins": MAX_BINS,
                              "key_bits": 1024 if insecure else 2048, "allow_insecure": insecure}
    labels = np.where(data.y_train == 1, ">50K", "<=50K")
    return prepare(out_dir, data.X_train, labels, data.split.host_features, data.split.guest_features,
                   data.split.train_rows, X_test=data.X_test, test_rows=data.split.test_rows, params=params,
                   names=data.names, categories=load_adult().categories, lacking=max(1, rows // 100))
