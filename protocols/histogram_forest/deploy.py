"""The histogram forest as networked services: the server and each client in its own process.

Roles: ``server`` and ``client0 … client{k-1}`` (rows of the same features at every client; 3 or
more clients with ``secure_aggregation``).  The operator drives them with control requests
(``securetrees.net.control``):

* ``fit`` (server): set up and grow the forest (every protocol step of ``specs/histogram_forest.md``);
  the server writes the forest to ``out/server.model.json`` (the library's JSON persistence); the
  reply carries the number of trees and the ε the server's ledger charged;
* ``model`` (server): the forest's JSON document, which the operator hands to each client;
* ``predict`` (each client, ``model`` = that document): predict the client's own test rows, write
  ``out/CLIENT.predictions.npy`` (labels or values) and, for classification, ``out/CLIENT.proba.npy``;
  the reply carries the row count and, when the client's data file holds test labels, the score
  (accuracy, or R² for regression);
* ``save_model`` / ``model_id`` (every role, ``securetrees.net.models``): after ``fit`` the server
  seals the forest into ``models/server.model``; a client's part holds the run's task and feature
  count only (it receives the forest for each prediction).  A run with ``[run] job = "predict"``
  loads them instead of training; each client reads its rows to predict from its ``test_data``
  (an ``.npz`` with ``X_test`` and optionally ``y_test``) and never opens its ``data``.

The clients are the parties entitled to predictions on their rows, and the model is theirs (they
see it grow, spec "Message flow"); the operator relays it, so it sees what the model shows: splits,
thresholds and leaf counts (noisy under DP).  No test row leaves its client.

Parameters come from ``[protocol]``: the facade's (:class:`HistogramForestClassifier` or, with
``task = "regression"``, :class:`HistogramForestRegressor`) plus ``task``, ``clients`` and
``n_features``.  The server holds no rows, so what the facade would read from the pooled parts is
declared: ``classes`` (classification), ``y_range`` (regression) and ``categories`` when a feature is
categorical; :func:`prepare` declares them from the table as the facade would infer them (refused with
``epsilon``, where they must be given).  TOML has no null: a categorical feature's entry of
``feature_ranges`` is ``[]``, and a key left out takes the facade's default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.net.config import RunConfig
from securetrees.net.control import Controllable, ControlReply, Operator
from securetrees.net.deployment import check_protocol_keys, output_path, prediction_score, save_output
from securetrees.net.models import SavesModel, check_models, load_model, refuse_training, save_models
from securetrees.net.trial import TrialPlan, write_trial
from securetrees.protocols.histogram_forest.classifier import HistogramForestClassifier
from securetrees.protocols.histogram_forest.client import Client
from securetrees.protocols.histogram_forest.facade import HistogramForestBase, Part
from securetrees.protocols.histogram_forest.regressor import HistogramForestRegressor
from securetrees.protocols.histogram_forest.server import Server
from securetrees.runtime import Message, Party, message
from securetrees.runtime.network import Network
from securetrees.trees import persistence
from securetrees.trees.forest import Forest

__all__ = ["PARAMETERS", "PREDICT_ONLY", "ClientPart", "DeployedClient", "DeployedServer", "ServerPart",
           "estimator_from", "fit", "make_role", "predict", "prepare", "run_job", "trial"]

FloatArray = npt.NDArray[np.float64]
_ESTIMATORS: dict[str, type[HistogramForestBase]] = {
    "classification": HistogramForestClassifier, "regression": HistogramForestRegressor}
_RUN_KEYS = ("task", "clients", "n_features")
_NOT_SETTINGS = ("progress", "client_column", "n_clients")
"""Facade parameters that are no run parameter (how one table is dealt to simulated clients, progress bars)."""

PREDICT_ONLY = True
"""A ``[run] job = "predict"`` run loads each party's model part (``securetrees.net.models``)."""

PARAMETERS = frozenset({*_RUN_KEYS, *(n for cls in _ESTIMATORS.values() for n in cls._get_param_names()
                                     if n not in _NOT_SETTINGS)})
"""The ``[protocol]`` keys a histogram forest run may hold (either task's settings; :func:`estimator_from`
checks those of the run's task and the required ones)."""


def _task(params: dict[str, Any]) -> str:
    task = params.get("task", "classification")
    if task not in _ESTIMATORS:
        raise ParameterError(f"task must be one of {sorted(_ESTIMATORS)}, got {task!r}")
    return str(task)


def _settings_of(params: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
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


def estimator_from(params: dict[str, Any], protocol: str = "histogram-forest", *, run: bool = True
                   ) -> HistogramForestBase:
    """The facade whose settings ``params`` (a ``[protocol]`` table) gives, its keys checked; with ``run``
    the run's keys and the server's declared schema (``classes`` or ``y_range``) are required."""
    cls = _ESTIMATORS[_task(params)]
    names = [n for n in cls._get_param_names() if n not in _NOT_SETTINGS]
    schema = "classes" if cls is HistogramForestClassifier else "y_range"
    check_protocol_keys(params, (*names, *_RUN_KEYS), protocol,
                        required=("clients", "n_features", schema) if run else ())
    return cls(**_settings_of(params, names))


def _clients(params: dict[str, Any]) -> list[str]:
    clients = params["clients"]
    if not isinstance(clients, list) or not clients or not all(isinstance(c, str) for c in clients):
        raise ParameterError("clients must be a non-empty list of party names")
    return list(clients)


@message("histogram_forest.model.server")
@dataclass(frozen=True)
class ServerPart(Message):
    """The server's model file body: the forest's JSON document (``securetrees.trees.persistence``)."""

    forest: str


@message("histogram_forest.model.client")
@dataclass(frozen=True)
class ClientPart(Message):
    """A client's model file body: the run's task and feature count (the forest is the server's
    to hand out; a client keeps no state of its own between predictions)."""

    task: str
    n_features: int


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
        trees = self.train()
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
    test: tuple[FloatArray, npt.NDArray[Any] | None] | None = None
    n_features = 0

    def control_predict(self, args: dict[str, str]) -> ControlReply:
        if self.test is None:
            raise ParameterError(f"{self.name} has no test rows in its data file")
        X, y = self.test
        forest = _forest(args["model"], self._task, X.shape[1])
        pred = forest.predict(X)
        save_output(self.run, self.name, "predictions", pred)
        info = {"rows": str(X.shape[0])}
        if self._task == "classification":
            save_output(self.run, self.name, "proba", forest.predict_proba(X))
        if y is not None:
            info["score"] = repr(prediction_score(self._task, y, pred))
        self.logger.info("%s predicted its %d test rows", self.name, X.shape[0])
        return ControlReply(info=info)

    def model_part(self) -> Message:
        return ClientPart(self._task, self.n_features)


def _test_rows(data: dict[str, npt.NDArray[Any]]) -> tuple[FloatArray, npt.NDArray[Any] | None] | None:
    if "X_test" not in data:
        return None
    return np.asarray(data["X_test"], dtype=np.float64), np.asarray(data["y_test"]) if "y_test" in data else None


def make_role(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
              data: dict[str, npt.NDArray[Any]], passphrase: bytes) -> Party:
    """Build ``role``; in a predict-only run from its model part (``data`` is then its ``test_data``'s
    arrays: no training row is read)."""
    est = estimator_from(dict(config.params), f"{config.protocol} ({config.path})")
    p = config.params
    clients = _clients(p)
    est._check_params(len(clients))
    server_seed, client_seeds = est.party_seeds(len(clients))
    d = int(p["n_features"])
    party: DeployedServer | DeployedClient
    if role == "server":
        est._numeric_table(d)
        forest_config = est.forest_config(d, est._schema(d, None), est._task_config([], [0] * len(clients)))
        party = DeployedServer(role, network, clients, forest_config, random_state=server_seed)
        party.estimator = est
        if config.job == "predict":
            part = load_model(config, role, Server.role, passphrase, ServerPart)
            party.forest = _forest(part.body.forest, est.task, d)  # type: ignore[attr-defined]
            party.loaded(part)
    elif role in clients and config.job == "predict":
        part = load_model(config, role, Client.role, passphrase, ClientPart)
        body: ClientPart = part.body  # type: ignore[assignment]
        if (body.task, body.n_features) != (est.task, d):
            raise ParameterError(f"{role}'s model part is a {body.task} run over {body.n_features} features")
        # the Client needs rows to exist: it holds its test rows, never trains (fit is refused)
        test = _test_rows(data)
        if test is None:
            raise ParameterError(f"{role} has no X_test in its test_data (the rows to predict)")
        placeholder = np.zeros(1, dtype=np.int64 if est.task == "classification" else np.float64)
        party = DeployedClient(role, network, test[0][:1], placeholder, task=est.task)
        party.test = test
        party.loaded(part)
    elif role in clients:
        X, y = np.asarray(data["X"], dtype=np.float64), np.asarray(data["y"])
        est._check_parts([(X, y)])
        est._task_config([y], [X.shape[0]])  # the client's labels or targets against the declared ones
        party = DeployedClient(role, network, X, est._client_targets(y), seed=client_seeds[clients.index(role)],
                               max_epsilon=est.client_max_epsilon, task=est.task)
        party.test = _test_rows(data)
    else:
        raise ParameterError(f"{role!r} is not a role of this histogram forest run")
    if isinstance(party, DeployedClient):
        party.n_features = d
    party.run, party.passphrase = config, passphrase
    return party


def fit(operator: Operator, config: RunConfig) -> dict[str, str]:
    """Train at the server from the clients' (noisy) histograms; reports the ε spent.  Then every
    role saves its model part (``models/NAME.model``)."""
    refuse_training(config)
    with operator.step("fit"):
        info = dict(operator.control("server", "fit").info)
    return {**info, "model_id": save_models(operator, config.roles)}


def predict(operator: Operator, config: RunConfig, method: str | None = None) -> dict[str, npt.NDArray[Any]]:
    """Hand the model to every client; each predicts its own test rows into its own file (``out/``).
    The operator receives each client's score (accuracy, or R² for regression) when all report one.
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
        return {"score": np.asarray([float(replies[c].info["score"]) for c in clients])}
    return {}


def run_job(operator: Operator, config: RunConfig) -> dict[str, npt.NDArray[Any]]:
    """Train; hand the model to every client; each predicts its own test rows into its own file.
    Returns the ε spent and each client's score (accuracy, or R² for regression).  A predict-only
    run predicts only (no ε is spent)."""
    if config.job == "predict":
        return predict(operator, config)
    fitted = fit(operator, config)
    return {"epsilon_spent": np.asarray([float(fitted["epsilon_spent"])]), **predict(operator, config)}


def _toml_settings(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the values TOML cannot hold rewritten (None ranges as ``[]``, tuples as lists)."""
    out = {k: v for k, v in params.items() if v is not None}
    if "feature_ranges" in out:
        out["feature_ranges"] = [[float(r[0]), float(r[1])] if r is not None else [] for r in out["feature_ranges"]]
    for key in ("categorical_features", "categories", "y_range", "classes"):
        if key in out:
            out[key] = np.asarray(out[key]).tolist()
    return out


def prepare(out_dir: str | Path, parts: Sequence[Part], *, tests: Sequence[Part] | None = None,
            params: dict[str, Any], base_port: int = 0) -> Path:
    """A local trial: certificates, each client's rows (and test rows) in its own data file, ``run.toml``.

    ``params`` are the facade's settings (plus ``task``); what the facade would read from the pooled parts
    (``classes``, ``categories``, ``y_range``) is declared here the same way, so the run grows the
    facade's forest on the same parts and ``random_state``.  There are no key files: the clients'
    pairwise mask keys are agreed during the run."""
    if tests is not None and len(tests) != len(parts):
        raise ParameterError("one test part per client (or none)")
    est = estimator_from(params, run=False)
    Xs, ys = est._check_parts(parts)
    est._check_params(len(Xs))
    d = Xs[0].shape[1]
    est._numeric_table(d)
    categories, _, _ = est._schema(d, Xs)
    est._task_config(ys, [X.shape[0] for X in Xs])
    declared: dict[str, Any] = {"categories": list(categories)} if any(categories) else {}
    if isinstance(est, HistogramForestClassifier):
        declared["classes"] = est.classes_
    elif isinstance(est, HistogramForestRegressor):
        declared["y_range"] = est.y_range_
    clients = [f"client{i}" for i in range(len(Xs))]
    settings = _toml_settings({**params, **declared, "clients": clients, "n_features": d})
    estimator_from(settings)  # what the roles will read back
    plan = TrialPlan(protocol="histogram-forest", params=settings)
    plan.add("server", role=Server.role)
    for i, (name, X, y) in enumerate(zip(clients, Xs, ys, strict=True)):
        data: dict[str, npt.NDArray[Any]] = {"X": X, "y": y}
        if tests is not None:
            data["X_test"] = np.asarray(tests[i][0], dtype=np.float64)
            data["y_test"] = np.asarray(tests[i][1])
        plan.add(name, role=Client.role, data=data)
    return write_trial(out_dir, plan, base_port=base_port)


def trial(out_dir: str | Path, *, rows: int, trees: int, insecure: bool) -> Path:
    """``securetrees federation init histogram-forest``: the demo's stratified split of Adult's first
    ``rows`` rows over three clients, fixed bins over the demo's declared ranges and secure aggregation
    (``insecure`` does not apply: no key here is a Paillier or DT-PKC key)."""
    from securetrees.datasets import load_adult
    from securetrees.protocols.histogram_forest.experiment import adult_schema, stratified_clients

    data = load_adult()
    X = np.vstack([data.X_train, data.X_test])[:rows]
    y = np.concatenate([data.y_train, data.y_test])[:rows]
    schema = adult_schema(X, list(data.categorical), [len(data.categories.get(n, ())) for n in data.feature_names])
    splits = stratified_clients(X, y, 3, seed=0)
    params: dict[str, Any] = {"n_estimators": trees, "max_depth": 6, "random_state": 0,
                              "secure_aggregation": True, "histogram": "fixed",
                              "categorical_features": schema["categorical"],
                              "feature_ranges": schema["feature_ranges"]}
    return prepare(out_dir, [(s.X_train, s.y_train) for s in splits],
                   tests=[(s.X_test, s.y_test) for s in splits], params=params)
