"""The histogram forest as networked services: the server and each client in its own process.

Roles: ``server`` and ``client0 … client{k-1}`` (rows of the same features at every client; 3 or
more clients with ``secure_aggregation``).  Each client reads its own table
(``securetrees.net.tables``: ``data`` and ``test_data`` in its configuration section, a CSV or
Parquet file with an id column, ``id_column``, and its label column, ``label``).  The rows are
horizontal: no ids are matched between clients (no PSI); a client's ids name its rows in its own
prediction files.  The operator drives the roles with control requests (``securetrees.net.control``):

* ``fit`` (server): set up and grow the forest (every protocol step of ``specs/histogram_forest.md``);
  the server writes the forest to ``out/server.model.json`` (the library's JSON persistence); the
  reply carries the number of trees and the ε the server's ledger charged;
* ``model`` (server): the forest's JSON document, which the operator hands to each client;
* ``predict`` (each client, ``model`` = that document): predict the client's own test rows and write,
  beside their ids, ``out/CLIENT.predictions.csv`` (``id``, ``prediction`` as the declared class name
  or the value, and for classification one ``proba_CLASS`` column per class) and the same as arrays,
  ``out/CLIENT.test_ids.npy``, ``out/CLIENT.predictions.npy`` and ``out/CLIENT.proba.npy``; the reply
  carries the row count and, when the client's test table has its label column, the score
  (accuracy, or R² for regression);
* ``save_model`` / ``model_id`` (every role, ``securetrees.net.models``): after ``fit`` the server
  seals the forest into ``models/server.model``; a client's part holds the run's task and its table's
  schema (it receives the forest for each prediction).  A run with ``[run] job = "predict"``
  loads them instead of training; each client reads its rows to predict from its ``test_data``
  and never opens its ``data``.

The schema is declared in ``[protocol]``, public to every party (the server holds no rows, the clients
must encode alike, and differential privacy needs data-independent domains): ``columns`` (the feature
column names, in the model's order; every client's table holds exactly these besides its id and label,
in any order), ``categories`` (a table: each categorical column's category names; a client's cell
outside them is refused at training and is missing at prediction), ``classes`` (the labels; a client's
label outside them is refused) or ``y_range`` (regression), and ``feature_ranges`` (one ``[low, high]``
per column, ``[]`` for a categorical one) when the bins need them.  Empty cells are missing values.
The other keys are the facade's (:class:`HistogramForestClassifier` or, with ``task = "regression"``,
:class:`HistogramForestRegressor`) plus ``task`` and ``clients``; a key left out takes the facade's
default.  :func:`prepare` declares the schema from the parts as the facade would infer it (refused with
``epsilon``, where classes and ranges must be given).

The clients are the parties entitled to predictions on their rows, and the model is theirs (they
see it grow, spec "Message flow"); the operator relays it, so it sees what the model shows: splits,
thresholds and leaf counts (noisy under DP).  No row leaves its client; no client learns another's
row count or ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError, TableError
from securetrees.net.config import PartyConfig, RunConfig
from securetrees.net.control import FIT_ONCE, Controllable, ControlReply, Operator
from securetrees.net.deployment import (
    check_protocol_keys,
    checkpoint_store,
    output_path,
    prediction_score,
    save_predictions,
)
from securetrees.net.models import SavesModel, SchemaState, check_models, load_model, refuse_training, save_models
from securetrees.net.tables import PartyTable, TableOptions, read_table
from securetrees.net.trial import Secret, TrialPlan, table_frame, write_trial
from securetrees.protocols.histogram_forest.checkpoint import FORMAT
from securetrees.protocols.histogram_forest.classifier import HistogramForestClassifier
from securetrees.protocols.histogram_forest.client import Client
from securetrees.protocols.histogram_forest.facade import HistogramForestBase, Part
from securetrees.protocols.histogram_forest.messages import LayerRequest
from securetrees.protocols.histogram_forest.regressor import HistogramForestRegressor
from securetrees.protocols.histogram_forest.server import Server
from securetrees.psi.roles import random_permutation
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, Party, message
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.runtime.network import Network
from securetrees.schema import TabularSchema
from securetrees.trees import persistence
from securetrees.trees.forest import Forest
from securetrees.trees.tree import Tree

__all__ = ["PARAMETERS", "PREDICTIONS_KEPT", "PREDICT_ONLY", "ROLES",
           "ClientPart", "DeployedClient", "DeployedServer", "ServerPart",
           "declared_schema", "estimator_from", "fit", "label_values", "make_role", "predict", "prepare", "resume",
           "run_job", "trial"]

FloatArray = npt.NDArray[np.float64]
_ESTIMATORS: dict[str, type[HistogramForestBase]] = {
    "classification": HistogramForestClassifier, "regression": HistogramForestRegressor}
_RUN_KEYS = ("task", "clients", "columns", "checkpoint_dir")
_NOT_SETTINGS = ("progress", "client_column", "n_clients", "categorical_features", "categories")
"""Facade parameters that are no ``[protocol]`` setting: how one table is dealt to simulated clients,
progress bars, and the categorical columns and their code counts (declared by ``categories``' names)."""

PREDICT_ONLY = True
"""A ``[run] job = "predict"`` run loads each party's model part (``securetrees.net.models``)."""

PROGRESS_ROLE = "server"
"""The role ``securetrees operator fit`` polls for progress (it grows the forest)."""

PREDICTIONS_KEPT = "each client keeps its own predictions beside its ids (out/CLIENT.predictions.csv on its machine)"
"""Where the predictions stay: the operator's ``predict`` receives a summary, not the predictions
(``securetrees operator predict`` says so and writes no ``--out`` file)."""

ROLES: Mapping[str, str | None] = {"server": "server", "client": None}
"""The roles of a run (the server, and any number of clients):
a single-party role mapped to the name its party carries (``securetrees.net.config.check_roles``)."""

PARAMETERS = frozenset({*_RUN_KEYS, "categories", *(n for cls in _ESTIMATORS.values() for n in cls._get_param_names()
                                                   if n not in _NOT_SETTINGS)})
"""The ``[protocol]`` keys a histogram forest run may hold (either task's settings; :func:`estimator_from`
checks those of the run's task and the required ones)."""


def _task(params: Mapping[str, Any]) -> str:
    task = params.get("task", "classification")
    if task not in _ESTIMATORS:
        raise ParameterError(f"task must be one of {sorted(_ESTIMATORS)}, got {task!r}")
    return str(task)


def declared_schema(params: Mapping[str, Any]) -> TabularSchema:
    """The feature columns ``[protocol]`` declares: ``columns`` (names, in order) and ``categories``
    (a table: each categorical column's category names; codes are their sorted order)."""
    columns = params.get("columns")
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) and c for c in columns):
        raise ParameterError("[protocol] columns must be a non-empty list of the feature column names")
    cats = params.get("categories", {})
    if not isinstance(cats, dict) or not all(isinstance(v, list) and v and all(isinstance(x, str) for x in v)
                                             for v in cats.values()):
        raise ParameterError("[protocol] categories maps a categorical column to its list of category names")
    for name, values in cats.items():
        if name not in columns:
            raise ParameterError(f"[protocol] categories names {name!r}, which is not in columns")
        if len(set(values)) != len(values):
            raise ParameterError(f"[protocol] categories of {name!r} are not distinct")
    return TabularSchema.declare(list(columns), {str(k): list(v) for k, v in cats.items()})


def _settings_of(params: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The estimator's keyword arguments from TOML values (``[]`` in ``feature_ranges`` is None)."""
    kw = {k: params[k] for k in names if k in params}
    if "feature_ranges" in kw:
        ranges = kw["feature_ranges"]
        if not isinstance(ranges, list):
            raise ParameterError("feature_ranges must be a list with one entry per feature")
        kw["feature_ranges"] = [tuple(r) if r else None for r in ranges]
    if "y_range" in kw:
        kw["y_range"] = tuple(kw["y_range"])
    return kw


def estimator_from(params: Mapping[str, Any], protocol: str = "histogram-forest") -> HistogramForestBase:
    """The facade whose settings ``params`` (a ``[protocol]`` table) gives, its keys checked, the run's
    keys and declared schema (``classes`` or ``y_range``) required; its categorical features and their
    code counts are those of :func:`declared_schema`."""
    cls = _ESTIMATORS[_task(params)]
    names = [n for n in cls._get_param_names() if n not in _NOT_SETTINGS]
    target = "classes" if cls is HistogramForestClassifier else "y_range"
    check_protocol_keys(params, (*names, *_RUN_KEYS, "categories"), protocol, required=("clients", "columns", target))
    schema = declared_schema(params)
    kw = _settings_of(params, names)
    kw.update(categorical_features=schema.categorical_mask(),
              categories=[max(2, k) if k else 0 for k in schema.n_categories()])
    return cls(**kw)


def _clients(params: Mapping[str, Any]) -> list[str]:
    clients = params["clients"]
    if not isinstance(clients, list) or not clients or not all(isinstance(c, str) for c in clients):
        raise ParameterError("clients must be a non-empty list of party names")
    return list(clients)


def label_values(raw: npt.ArrayLike, params: Mapping[str, Any], where: str) -> npt.NDArray[Any]:
    """A label column's cells as the run's labels: each the declared class whose text it is
    (classification; a cell naming no declared class raises :class:`TableError`), else a float."""
    cells = np.asarray(raw, dtype=object)
    if _task(params) == "regression":
        try:
            return cells.astype(np.float64)
        except (TypeError, ValueError):
            raise TableError(f"{where}: a regression label holds a value that is not a number") from None
    classes = np.unique(np.asarray(list(params["classes"])))
    code = {str(c): k for k, c in enumerate(classes.tolist())}
    outside = sorted({str(v) for v in cells} - set(code))
    if outside:
        raise TableError(f"{where}: labels outside the declared classes: {outside[:5]}")
    return np.asarray(classes[[code[str(v)] for v in cells]])


@message("histogram_forest.model.server")
@dataclass(frozen=True)
class ServerPart(Message):
    """The server's model file body: the forest's JSON document (``securetrees.trees.persistence``)."""

    forest: str


@message("histogram_forest.model.client")
@dataclass(frozen=True)
class ClientPart(Message):
    """A client's model file body: the run's task and its table's schema, so that new rows are encoded
    as the training rows were (the forest is the server's to hand out; a client keeps no state of its
    own between predictions)."""

    task: str
    schema: SchemaState


def _forest(document: str, task: str, n_features: int) -> Forest:
    """A forest document checked (persistence loader), of ``task`` over ``n_features`` features."""
    forest = persistence.loads(document)
    if not isinstance(forest, Forest) or forest.task != task or forest.n_features != n_features:
        raise ParameterError(f"the model is not a {task} forest over {n_features} features")
    return forest


class DeployedServer(SavesModel, Controllable, Server):
    estimator: HistogramForestBase
    forest: Forest | None = None

    def control_fit(self, args: dict[str, str]) -> ControlReply:
        refuse_training(self.run)
        if self.forest is not None:  # the clients' setup is done once: a second fit fails inside the protocol
            raise ParameterError(f"this run has trained already: {FIT_ONCE}")
        return self._grown(self.train(progress=True))  # trees done of total in its log and its status

    def control_resume(self, args: dict[str, str]) -> ControlReply:
        """Finish an interrupted fit from the parties' checkpoints (``Server.resume``)."""
        refuse_training(self.run)
        if self.forest is not None:
            raise ParameterError(f"this run has trained already: {FIT_ONCE}")
        return self._grown(self.resume(progress=True))

    def _grown(self, trees: list[Tree]) -> ControlReply:
        """Keep and save the forest grown; its size and the ε spent."""
        self.forest = self.estimator._forest(tuple(trees))
        path = output_path(self.run, self.name, "model.json")
        persistence.save(self.forest, path)
        spent = 0.0 if self.accountant is None else self.accountant.spent
        if self.config.input_epsilon is not None:
            spent = float(self.config.input_epsilon)
        self.logger.info("%s grew %d trees (ε spent %g); model in %s", self.name, len(trees), spent, path)
        return ControlReply(info={"trees": str(len(trees)), "epsilon_spent": repr(spent)})

    def control_model(self, args: dict[str, str]) -> ControlReply:
        if self.forest is None:
            raise ParameterError("the server has not grown a forest yet (control 'fit' first)")
        return ControlReply(info={"model": persistence.dumps(self.forest)})

    def model_part(self) -> Message:
        if self.forest is None:
            raise ParameterError("the server has not grown a forest yet (control 'fit' first)")
        return ServerPart(persistence.dumps(self.forest))


class DeployedClient(SavesModel, Controllable, Client):
    test: PartyTable | None = None
    schema: SchemaState | None = None

    def on_layer(self, sender: str, msg: LayerRequest) -> Message | None:
        """``Client.on_layer``, with each tree's start in this client's log (its progress: the server's
        status has the forest's)."""
        if msg.layer == 0:
            self.logger.info("%s: tree %d", self.name, msg.tree + 1)
        return super().on_layer(sender, msg)

    def control_predict(self, args: dict[str, str]) -> ControlReply:
        """Predict this client's test rows with the forest it is handed; the outputs stay here, beside
        the rows' ids (reveals nothing: local; the reply carries the row count and the score)."""
        if self.test is None:
            raise ParameterError(f"{self.name} has no test rows (test_data in its configuration section)")
        X = self.test.X
        forest = _forest(args["model"], self._task, X.shape[1])
        pred = forest.predict(X)
        proba = forest.predict_proba(X) if self._task == "classification" else None
        save_predictions(self.run, self.name, self.test.ids, pred, proba,
                         np.asarray(forest.classes).tolist() if proba is not None else ())
        info = {"rows": str(X.shape[0])}
        if self.test.labels is not None:  # compared as text: a test label outside the classes is a miss
            y, got = ((self.test.labels.astype(str), pred.astype(str)) if self._task == "classification" else
                      (label_values(self.test.labels, self.run.params, f"{self.name}'s test labels"), pred))
            info["score"] = repr(prediction_score(self._task, y, got))
        self.logger.info("%s predicted its %d test rows", self.name, X.shape[0])
        return ControlReply(info=info)

    def model_part(self) -> Message:
        if self.schema is None:  # pragma: no cover - set by make_role
            raise ParameterError(f"{self.name} has no table schema")
        return ClientPart(self._task, self.schema)


def _table_options(party: PartyConfig, schema: TabularSchema) -> TableOptions:
    """How ``party`` reads its tables: its id and label columns, the columns it ``drop``s (ignored),
    and the run's declared columns and categories (its own section may repeat them, in its own
    column order, as ``columns`` or ``features``, but not change them)."""
    where = f"[parties.{party.name}]"
    own = TableOptions.of_party(party)
    for key, listed in (("columns", own.columns), ("features", own.features)):
        if listed is not None and sorted(listed) != sorted(schema.names):
            raise TableError(f"{where}: {key} {sorted(set(listed) ^ set(schema.names))} differ from "
                             "[protocol] columns")
    declared = {c.name: c.categories for c in schema.columns if c.kind == "categorical"}
    for name, values in (own.categories or {}).items():
        if tuple(sorted(values)) != declared.get(name):
            raise TableError(f"{where}: the categories of {name!r} differ from [protocol] categories")
    return TableOptions(own.id_column, own.label, tuple(schema.names), declared, features=own.features,
                        drop=own.drop)


def _test_rows(party: PartyConfig, options: TableOptions, schema: TabularSchema) -> PartyTable | None:
    """The client's rows to predict (``test_data``) encoded with ``schema``; a category outside it is
    missing; its label column, when present, is read for the score."""
    if party.test_data is None:
        return None
    return read_table(party.test_data, options, schema=schema, name=f"{party.name}'s test data", strict=True,
                      test_labels=True)


def make_role(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
              data: dict[str, npt.NDArray[Any]], passphrase: bytes) -> Party:
    """Build ``role``: a client from its own tables (in a predict-only run from its model part and its
    ``test_data`` alone: no training row is read); ``data`` (arrays) is unused."""
    est = estimator_from(config.params, f"{config.protocol} ({config.path})")
    p = config.params
    clients = _clients(p)
    est._check_params(len(clients))
    server_seed, client_seeds = est.party_seeds(len(clients))
    declared = declared_schema(p)
    d = declared.n_columns
    party: DeployedServer | DeployedClient
    if role == "server":
        est._numeric_table(d)
        forest_config = est.forest_config(d, est._schema(d, None), est._task_config([], [0] * len(clients)))
        party = DeployedServer(role, network, clients, forest_config, random_state=server_seed,
                               checkpoint=None if config.job == "predict" else
                               checkpoint_store(config, role, secrets, FORMAT))
        party.estimator = est
        if config.job == "predict":
            part = load_model(config, role, Server.role, passphrase, ServerPart)
            party.forest = _forest(part.body.forest, est.task, d)  # type: ignore[attr-defined]
            party.loaded(part)
    elif role in clients and config.job == "predict":
        part = load_model(config, role, Client.role, passphrase, ClientPart)
        body: ClientPart = part.body  # type: ignore[assignment]
        schema = body.schema.schema()
        if body.task != est.task or schema.n_columns != d:
            raise ParameterError(f"{role}'s model part is a {body.task} run over {schema.n_columns} features")
        test = _test_rows(config.party(role), _table_options(config.party(role), schema), schema)
        if test is None:
            raise TableError(f"{role} names no test_data (the rows to predict) in its configuration section")
        # the Client needs rows to exist: it holds its test rows, never trains (fit is refused)
        placeholder = np.zeros(1, dtype=np.int64 if est.task == "classification" else np.float64)
        party = DeployedClient(role, network, test.X[:1], placeholder, task=est.task)
        party.test, party.schema = test, body.schema
        party.loaded(part)
    elif role in clients:
        party = _training_client(role, config, network, est, declared, client_seeds[clients.index(role)],
                                 checkpoint_store(config, role, secrets, FORMAT))
    else:
        raise ParameterError(f"{role!r} is not a role of this histogram forest run")
    party.run, party.passphrase = config, passphrase
    return party


def _training_client(role: str, config: RunConfig, network: Network, est: HistogramForestBase,
                     declared: TabularSchema, seed: int, store: CheckpointStore | None) -> DeployedClient:
    """A client of a fit run: its table read by the declared columns (its own order, no column
    missing or added, no undeclared category) and its labels checked against the declared ones."""
    party = config.party(role)
    if party.data is None:
        raise TableError(f"{role} names no data file in its configuration section")
    options = _table_options(party, declared)
    if options.label is None:
        raise ParameterError(f"[parties.{role}] names no label column (label = ...)")
    train = read_table(party.data, options, name=f"{role}'s data", strict=True)
    y = label_values(train.labels if train.labels is not None else [], config.params, f"{role}'s data")
    est._check_parts([(train.X, y)])
    est._task_config([y], [train.X.shape[0]])  # the client's labels or targets against the declared ones
    client = DeployedClient(role, network, train.X, est._client_targets(y), seed=seed,
                            max_epsilon=est.client_max_epsilon, task=est.task, checkpoint=store)
    client.test, client.schema = _test_rows(party, options, train.schema), SchemaState.of(train.schema)
    return client


def fit(operator: Operator, config: RunConfig) -> dict[str, str]:
    """Train at the server from the clients' (noisy) histograms; reports the ε spent.  Then every
    role saves its model part (``models/NAME.model``)."""
    refuse_training(config)
    with operator.step("fit"):
        info = dict(operator.control("server", "fit").info)
    return {**info, "model_id": save_models(operator, config.roles)}


def resume(operator: Operator, config: RunConfig) -> dict[str, str]:
    """Finish an interrupted fit (``securetrees operator resume``) from the parties' checkpoints, then
    every role saves its model part as after :func:`fit`."""
    refuse_training(config)
    with operator.step("resume"):
        info = dict(operator.control("server", "resume").info)
    return {**info, "model_id": save_models(operator, config.roles)}


def predict(operator: Operator, config: RunConfig, method: str | None = None) -> dict[str, npt.NDArray[Any]]:
    """Hand the model to every client; each predicts its own test rows into its own files (``out/``).
    The operator receives each client's score (accuracy, or R² for regression) when all report one,
    named for whose it is (``CLIENT_score``: that client's score on its own test rows).
    In a predict-only run every role's model part must come from the same fit."""
    if method is not None:
        raise ParameterError("the histogram forest has one prediction method")
    clients = _clients(config.params)
    if config.job == "predict":
        check_models(operator, config.roles)
    with operator.step("predict"):
        model = operator.control("server", "model").info["model"]
        replies = operator.control_many(clients, "predict", {c: {"model": model} for c in clients})
    if all("score" in replies[c].info for c in clients):
        return {f"{c}_score": np.asarray(float(replies[c].info["score"])) for c in clients}
    return {}


def run_job(operator: Operator, config: RunConfig) -> dict[str, npt.NDArray[Any]]:
    """Train; hand the model to every client; each predicts its own test rows into its own files.
    Returns the ε spent and each client's score (accuracy, or R² for regression).  A predict-only
    run predicts only (no ε is spent)."""
    if config.job == "predict":
        return predict(operator, config)
    fitted = fit(operator, config)
    return {"epsilon_spent": np.asarray([float(fitted["epsilon_spent"])]), **predict(operator, config)}


def _toml_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with the values TOML cannot hold rewritten (None ranges as ``[]``, arrays as lists)."""
    out = {k: v for k, v in params.items() if v is not None}
    if "feature_ranges" in out:
        out["feature_ranges"] = [[float(r[0]), float(r[1])] if r is not None else [] for r in out["feature_ranges"]]
    for key in ("y_range", "classes"):
        if key in out:
            out[key] = np.asarray(out[key]).tolist()
    return out


def prepare(out_dir: str | Path, parts: Sequence[Part], *, tests: Sequence[Part] | None = None,
            params: dict[str, Any], names: Sequence[str] | None = None,
            categories: Mapping[str, Sequence[str]] | None = None, shuffle: bool = True,
            rng: RandomSource = SYSTEM_RANDOM, base_port: int = 0) -> Path:
    """A local trial: certificates, each client's own tables (CSV: ``data`` and, with ``tests``,
    ``test_data`` with its labels), ``run.toml``.

    Client ``i``'s table holds the rows of ``parts[i]`` (unless not ``shuffle``, in its own random
    order) with an ``id`` column and a ``label`` column; the features are named ``names`` (else
    ``x0, x1 …``), a column in ``categories`` holds codes, written as those category names, and NaN
    is an empty cell.  ``params`` are the facade's settings (plus ``task``); what the facade would read
    from the pooled parts (``classes`` or ``y_range``) is declared from them the same way (refused
    with ``epsilon``), with ``columns`` and ``categories``.  There are no key files: the clients'
    pairwise mask keys are agreed during the run."""
    if tests is not None and len(tests) != len(parts):
        raise ParameterError("one test part per client (or none)")
    run_keys = {k: params[k] for k in ("checkpoint_dir",) if k in params}
    params = {k: v for k, v in params.items() if k not in run_keys}
    refused = sorted(set(params) & {"categorical_features", "categories", "columns", "clients", "n_features"})
    if refused:
        raise ParameterError(f"prepare declares {refused} itself (a categorical column is named in categories)")
    cls = _ESTIMATORS[_task(params)]
    check_protocol_keys(params, [n for n in cls._get_param_names() if n not in _NOT_SETTINGS] + ["task"],
                        "histogram-forest")
    est = cls(**_settings_of(params, [k for k in params if k != "task"]))
    Xs, ys = est._check_parts(parts)
    est._check_params(len(Xs))
    d = Xs[0].shape[1]
    cols = list(names) if names is not None else [f"x{j}" for j in range(d)]
    cats = {k: [str(v) for v in vs] for k, vs in (categories or {}).items()}
    est._task_config(ys, [X.shape[0] for X in Xs])
    declared: dict[str, Any] = {"classes": est.classes_} if isinstance(est, HistogramForestClassifier) else \
        {"y_range": est.y_range_} if isinstance(est, HistogramForestRegressor) else {}
    clients = [f"client{i}" for i in range(len(Xs))]
    settings = _toml_settings({**params, **declared, "clients": clients, "columns": cols,
                               **({"categories": cats} if cats else {})}) | run_keys
    estimator_from(settings)  # what the roles will read back
    plan = TrialPlan(protocol="histogram-forest", params=settings)
    def keys() -> dict[str, Secret] | None:  # with checkpoints: a key file holding the party's checkpoint key
        return {"checkpoint_key": SYSTEM_RANDOM.token_bytes(32)} if run_keys else None

    plan.add("server", role=Server.role, secrets=keys())
    for i, name in enumerate(clients):
        tables = {"data": _client_frame(name, "", parts[i], cols, cats, shuffle, rng)}
        if tests is not None:
            tables["test_data"] = _client_frame(name, "test-", tests[i], cols, cats, shuffle, rng)
        plan.add(name, role=Client.role, tables=tables, options={"label": "label"}, secrets=keys())
    return write_trial(out_dir, plan, base_port=base_port)


def _client_frame(name: str, prefix: str, part: Part, columns: Sequence[str], categories: Mapping[str, Sequence[str]],
                  shuffle: bool, rng: RandomSource) -> Any:
    """One client's table (a DataFrame): ids ``NAME-PREFIXr`` for row ``r`` of ``part``, in a random
    order unless not ``shuffle``."""
    X, y = np.asarray(part[0], dtype=np.float64), np.asarray(part[1])
    order = random_permutation(X.shape[0], rng) if shuffle else np.arange(X.shape[0])
    return table_frame([f"{name}-{prefix}{r}" for r in order], X[order], columns, categories=categories,
                       label=("label", y[order].tolist()))


def trial(out_dir: str | Path, *, rows: int, trees: int, insecure: bool) -> Path:
    """``securetrees federation init histogram-forest``: the demo's stratified split of Adult's first
    ``rows`` rows over three clients, each in its own CSV files (its own row order, string categories,
    empty cells for missing values, the labels as text), fixed bins over the demo's declared ranges
    and secure aggregation (``insecure`` does not apply: no key here is a Paillier or DT-PKC key)."""
    from securetrees.datasets import load_adult
    from securetrees.protocols.histogram_forest.experiment import adult_schema, stratified_clients

    data = load_adult()
    X = np.vstack([data.X_train, data.X_test])[:rows]
    y = np.where(np.concatenate([data.y_train, data.y_test])[:rows] == 1, ">50K", "<=50K")
    schema = adult_schema(X, list(data.categorical), [len(data.categories.get(n, ())) for n in data.feature_names])
    splits = stratified_clients(X, y, 3, seed=0)
    params: dict[str, Any] = {"n_estimators": trees, "max_depth": 6, "random_state": 0,
                              "secure_aggregation": True, "histogram": "fixed",
                              "feature_ranges": schema["feature_ranges"]}
    return prepare(out_dir, [(s.X_train, s.y_train) for s in splits],
                   tests=[(s.X_test, s.y_test) for s in splits], params=params, names=data.feature_names,
                   categories=data.categories)
