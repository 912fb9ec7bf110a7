"""SecureBoost as networked services: the active party and each passive party in its own process.

Roles: ``active`` (the label holder: its own columns, the labels and the Paillier key pair, sealed in
its key file) and ``passive0 … passive{k-1}`` (``k >= 1``: each its own columns).  Every party reads
its own table (``securetrees.net.tables``: ``data`` and ``test_data`` in its configuration section,
an id column, the active party's ``label`` column).  Before training, the parties align their rows by
private set intersection led by the active party (``securetrees.net.alignment``); each party's columns
and categories stay on its machine.  The operator drives the roles with control requests
(``securetrees.net.control``):

* ``align_use`` / ``align_run`` / ``align_done``: the alignment phase (training ids, then test ids);
* ``fit`` (active): set up the passive parties and run every boosting round (``specs/secureboost.md``);
* ``load_test`` (each passive party): load its columns of the aligned test rows;
* ``predict`` (active): the inference protocol on the aligned test rows; the active party writes
  ``out/active.predictions.npy`` (class names, or values for regression) and, for classification,
  ``out/active.proba.npy``, in the agreed order of the test rows, beside its own ids of those rows
  (``out/active.test_ids.npy``; its row indices of that order are in ``out/active.rows.npz``).  The
  operator receives the number of rows, never a prediction;
* ``save_model`` / ``model_id`` (every role): after ``fit``, each party seals its part into
  ``models/NAME.model`` (``securetrees.net.models``; the active party its trees, base score, loss
  and class names, each passive party its lookup table; each also its table's schema).  A run with
  ``[run] job = "predict"`` loads those parts instead of training, reads only each party's
  ``test_data`` and aligns those rows by PSI (the test set only); the Paillier key pair stays in
  the active party's key file.

Parameters come from ``[protocol]``: the facade's settings (:class:`SecureBoostClassifier`, or with
``task = "regression"`` :class:`SecureBoostRegressor`), ``task``, ``passives`` (the passive parties'
names, in provider order) and ``active_public_key`` (hex: every passive party pins it, and the
active party checks that its key file holds that key).  Unknown keys are refused.

:func:`prepare` makes a local trial from one table (each party's columns, labels and test rows
written to its own CSV files), the run the one-process facade makes on the aligned rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import KeyMismatchError, ParameterError
from securetrees.executors import check_trusted, process_pool
from securetrees.net import alignment
from securetrees.net.alignment import (
    AlignmentPlan,
    align,
    align_party,
    align_pending,
    align_test,
    alignment_mode,
    check_test_rows,
)
from securetrees.net.config import RunConfig
from securetrees.net.control import Controllable, ControlReply, Operator
from securetrees.net.deployment import (
    check_own_key,
    check_protocol_keys,
    checkpoint_store,
    open_paillier,
    pinned_key,
    save_predictions,
    seal_paillier,
)
from securetrees.net.models import SavesModel, SchemaState, check_models, load_model, refuse_training, save_models
from securetrees.net.tables import PartyTable, party_tables, test_table
from securetrees.net.trial import Secret, TrialPlan, deal_rows, vertical_tables, write_trial
from securetrees.paillier import PrivateKey, PublicKey, generate_keypair
from securetrees.protocols.secureboost.active import ActiveParty
from securetrees.protocols.secureboost.checkpoint import FORMAT
from securetrees.protocols.secureboost.estimators import (
    _PARAM_NAMES,
    SecureBoostClassifier,
    SecureBoostRegressor,
    _SecureBoost,
    probabilities,
)
from securetrees.protocols.secureboost.messages import Ack, Gradients
from securetrees.protocols.secureboost.model import ActiveModel, PassiveModel
from securetrees.protocols.secureboost.params import SecureBoostParams
from securetrees.protocols.secureboost.passive import PassiveParty
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, Party, message
from securetrees.runtime.network import Network

__all__ = ["ACTIVE", "PARAMETERS", "PREDICTIONS_KEPT", "PREDICT_ONLY", "ROLES",
           "ActivePart", "DeployedActive", "DeployedPassive", "PassivePart",
           "alignment_plan", "estimator_from", "fit", "make_role", "predict", "prepare", "resume", "run_job",
           "trial"]

FloatArray = npt.NDArray[np.float64]
ACTIVE = "active"
"""The active party's name (and role) in a deployed run."""

_ESTIMATORS: dict[str, type[_SecureBoost]] = {"classification": SecureBoostClassifier,
                                              "regression": SecureBoostRegressor}
_RUN_KEYS = ("task", "passives", "active_public_key", "checkpoint_dir")
_NOT_SETTINGS = ("partition", "keypair", "record_payloads", "categorical_features", "rng", "executor")
"""Facade parameters that are no run parameter (the layout is each party's table; objects)."""
_SETTINGS = tuple(n for n in _PARAM_NAMES if n not in _NOT_SETTINGS)

PREDICT_ONLY = True
"""A ``[run] job = "predict"`` run loads each party's model part (``securetrees.net.models``)."""

PROGRESS_ROLE = ACTIVE
"""The role ``securetrees operator fit`` polls for progress (it drives the boosting)."""

PREDICTIONS_KEPT = "the active party keeps the predictions beside its ids (out/active.predictions.csv on its machine)"
"""Where the predictions stay: the operator's ``predict`` receives a summary, not the predictions
(``securetrees operator predict`` says so and writes no ``--out`` file)."""

ROLES: Mapping[str, str | None] = {"active": ACTIVE, "passive": None}
"""The roles of a run, the active party (labels and key pair) and any number of passive parties:
a single-party role mapped to the name its party carries (``securetrees.net.config.check_roles``)."""

PARAMETERS = frozenset({*_RUN_KEYS, *_SETTINGS, *alignment.PARAMETERS})
"""The ``[protocol]`` keys of a SecureBoost run."""


def estimator_from(params: Mapping[str, Any], protocol: str = "secureboost") -> tuple[_SecureBoost, SecureBoostParams]:
    """The facade whose settings ``params`` (a ``[protocol]`` table) gives, its keys and values checked,
    and the protocol parameters (checked with two classes for a classification: the active party
    counts its own)."""
    check_protocol_keys(params, PARAMETERS, protocol, required=("passives", "active_public_key"))
    task = params.get("task", "classification")
    if task not in _ESTIMATORS:
        raise ParameterError(f"task must be one of {sorted(_ESTIMATORS)}, got {task!r}")
    est = _ESTIMATORS[str(task)]((), **{k: params[k] for k in _SETTINGS if k in params})
    return est, est._params(2 if task == "classification" else 0)


def _passives(params: Mapping[str, Any]) -> list[str]:
    names = params["passives"]
    if (not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names)
            or len(set(names)) != len(names) or ACTIVE in names):
        raise ParameterError("passives must list one or more distinct party names (not 'active')")
    return list(names)


def _pinned_key(params: Mapping[str, Any], insecure: bool) -> PublicKey:
    """``[protocol] active_public_key``, which every passive party pins (required)."""
    return pinned_key(params, "active_public_key", insecure=insecure, why="for the passive parties to pin")


def alignment_plan(config: RunConfig) -> AlignmentPlan:
    """The active party leads the PSI of the training ids and of the test ids with every passive
    party (it learns each pairwise intersection, ``specs/deployment.md``); a predict-only run
    aligns the test ids only."""
    if alignment_mode(config) != "psi":
        raise ParameterError("SecureBoost aligns its rows by PSI only (alignment = \"psi\")")
    parties = (ACTIVE, *_passives(config.params))
    sets = {} if config.job == "predict" else {"train": parties}
    if all(config.party(p).test_data is not None for p in parties):
        sets["test"] = parties
    if not sets:
        raise ParameterError("a predict-only run needs every party's test_data (the rows to predict)")
    return AlignmentPlan(ACTIVE, sets)


@message("secureboost.model.active_part")
@dataclass(frozen=True)
class ActivePart(Message):
    """The active party's model file body: its trees (:class:`ActiveModel`), the passive parties
    their withheld splits refer to (in provider order), the class names its class codes stand for
    (empty for a regression) and the schema of its table (new rows are encoded as the training
    rows were)."""

    model: ActiveModel
    passives: tuple[str, ...]
    classes: tuple[str, ...]
    schema: SchemaState


@message("secureboost.model.passive_part")
@dataclass(frozen=True)
class PassivePart(Message):
    """A passive party's model file body: its lookup table (:class:`PassiveModel`) and the schema
    of its table."""

    model: PassiveModel
    schema: SchemaState


class DeployedActive(SavesModel, Controllable, ActiveParty):
    run: RunConfig
    classes: npt.NDArray[np.str_] | None = None
    test: FloatArray | None = None
    test_ids: tuple[str, ...] = ()
    """This party's own ids of its test rows, in the agreed order (the order of the predictions)."""
    schema: SchemaState | None = None

    def control_state(self) -> dict[str, str]:
        return {"trees": str(len(self.model.trees) if self.model is not None else 0)}

    def control_fit(self, args: dict[str, str]) -> ControlReply:
        refuse_training(self.run)
        self.progress = True  # trees done of total in its log and its status
        model = self.fit()
        splits = sum(len(r.records) for r in model.trees)
        self.logger.info("%s trained %d trees (%d passive splits)", self.name, len(model.trees), splits)
        return ControlReply(info={"trees": str(len(model.trees)), "passive_splits": str(splits)})

    def control_resume(self, args: dict[str, str]) -> ControlReply:
        """Finish an interrupted fit from the parties' checkpoints (``ActiveParty.resume``)."""
        refuse_training(self.run)
        model = self.resume()
        return ControlReply(info={"trees": str(len(model.trees)),
                                  "passive_splits": str(sum(len(r.records) for r in model.trees))})

    def control_predict(self, args: dict[str, str]) -> ControlReply:
        """The inference protocol on the aligned test rows; the predictions stay in this party's
        own files, beside its own ids of the rows (it is the party entitled to them)."""
        if self.test is None:
            raise ParameterError(f"{self.name} has no test rows (test_data in its configuration section)")
        check_test_rows(self.test.shape[0])
        raw = self.decision_function(self.test)
        if self.classes is not None:
            proba = probabilities(raw)
            path = save_predictions(self.run, self.name, self.test_ids, self.classes[np.argmax(proba, axis=1)], proba,
                                    self.classes.tolist())
        else:
            path = save_predictions(self.run, self.name, self.test_ids, raw[:, 0])
        self.logger.info("%s predicted %d test rows into %s", self.name, self.test.shape[0], path)
        return ControlReply(info={"rows": str(self.test.shape[0])})

    def model_part(self) -> Message:
        if self.schema is None:  # pragma: no cover - set by make_role
            raise ParameterError(f"{self.name} has no table schema")
        classes = tuple(str(c) for c in self.classes.tolist()) if self.classes is not None else ()
        return ActivePart(self.model_state(), self.passives, classes, self.schema)


class DeployedPassive(SavesModel, Controllable, PassiveParty):
    test: FloatArray | None = None
    schema: SchemaState | None = None

    def on_gradients(self, sender: str, msg: Gradients) -> Ack | None:
        """``PassiveParty.on_gradients``, with the tree in this party's log (its progress: the active
        party's status has the boosting's)."""
        self.logger.info("%s: tree %d", self.name, msg.tree + 1)
        return super().on_gradients(sender, msg)

    def control_load_test(self, args: dict[str, str]) -> ControlReply:
        if self.test is None:
            raise ParameterError(f"{self.name} has no test rows (test_data in its configuration section)")
        check_test_rows(self.test.shape[0])
        self.load_queries(self.test)
        self.logger.info("%s loaded %d test rows", self.name, self.test.shape[0])
        return ControlReply(info={"rows": str(self.test.shape[0])})

    def model_part(self) -> Message:
        if self.schema is None:  # pragma: no cover - set by make_role
            raise ParameterError(f"{self.name} has no table schema")
        return PassivePart(self.model_state(), self.schema)


def _labels(table: PartyTable, task: str) -> tuple[FloatArray, npt.NDArray[np.str_] | None]:
    """The active party's labels as the facade encodes them: codes over the sorted class names, or
    regression targets."""
    if table.labels is None:
        raise ParameterError("the active party names its label column (label = ...) in its section")
    if task == "regression":
        try:
            return np.asarray(table.labels, dtype=np.float64), None
        except ValueError:
            raise ParameterError("a regression label column holds a value that is not a number") from None
    classes, codes = np.unique(np.asarray(table.labels).astype(str), return_inverse=True)
    if classes.size < 2:
        raise ParameterError("a classification needs at least two classes in the label column")
    return codes.astype(np.float64), classes


def make_role(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
              data: dict[str, npt.NDArray[Any]], passphrase: bytes) -> Party:
    """Build ``role``: its parameters and keys are checked first, then it serves the alignment phase
    (blocking until the operator ends it), then its protocol role on the aligned rows (in a
    predict-only run: from its model part, :func:`_predicting_role`)."""
    p = config.params
    est, _ = estimator_from(p, f"{config.protocol} ({config.path})")
    passives = _passives(p)
    insecure = bool(est.allow_insecure)
    pinned = _pinned_key(p, insecure)
    if role != ACTIVE and role not in passives:
        raise ParameterError(f"{role!r} is not a role of this SecureBoost run")
    keypair = None
    if role == ACTIVE:
        keypair = open_paillier(secrets, "paillier_key", passphrase, role=role, allow_insecure=insecure)
        check_own_key(keypair[0], pinned, "active_public_key", role)
    plan = alignment_plan(config)
    party: DeployedActive | DeployedPassive
    if config.job == "predict":
        party = _predicting_role(role, config, network, plan, est, keypair, passphrase)
        party.run, party.passphrase = config, passphrase
        return party
    train, test = party_tables(config.party(role))
    task = "classification" if isinstance(est, SecureBoostClassifier) else "regression"
    if role == ACTIVE:
        _labels(train, task)  # a bad label column is refused before the alignment phase
    elif train.labels is not None:
        raise ParameterError(f"{role} is a passive party: it names no label column")
    store = checkpoint_store(config, role, secrets, FORMAT)  # restarted with one: its recorded rows, no phase
    train, test = align_party(config, role, network, plan, train, test, store)
    categorical = tuple(train.schema.categorical_mask())
    X_test = test.X if test is not None else None
    if keypair is not None:
        y, classes = _labels(train, task)
        params = est._params(int(classes.size) if classes is not None else 0)
        party = DeployedActive(role, network, X=train.X, y=y, passives=passives, params=params, keypair=keypair,
                               categorical=categorical, executor=process_pool(est.n_jobs),
                               trusted_workers=check_trusted(est.trusted_workers), checkpoint=store)
        party.classes, party.test = classes, X_test
        party.test_ids = test.ids if test is not None else ()
    else:
        party = DeployedPassive(role, network, X=train.X, categorical=categorical, active_key=pinned,
                                allow_insecure=insecure, executor=process_pool(est.n_jobs), checkpoint=store)
        party.test = X_test
    party.schema = SchemaState.of(train.schema)
    party.run, party.passphrase = config, passphrase
    return party


def _predicting_role(role: str, config: RunConfig, network: Network, plan: AlignmentPlan, est: _SecureBoost,
                     keypair: tuple[PublicKey, PrivateKey] | None, passphrase: bytes
                     ) -> DeployedActive | DeployedPassive:
    """A party of a predict-only run: its saved part (refused if it is not this party's, see
    :func:`~securetrees.net.models.load_model`), then its new rows (``test_data`` only, encoded with
    the saved schema) aligned by PSI.  No training row is read: the protocol role is built on two
    rows of zeros, which are neither binned for a split nor sent anywhere, and its part is restored
    (and checked) before the alignment phase."""
    if keypair is not None:
        part = load_model(config, role, ActiveParty.role, passphrase, ActivePart)
        body: ActivePart = part.body  # type: ignore[assignment]
        if list(body.passives) != _passives(config.params):
            raise KeyMismatchError(f"the active party's model refers to the passive parties {list(body.passives)}, "
                                   f"this run lists {_passives(config.params)}")
        schema = body.schema.schema()
        active = DeployedActive(role, network, X=np.zeros((2, schema.n_columns)), y=np.zeros(2),
                                passives=body.passives, params=est._params(len(body.classes)), keypair=keypair)
        active.restore_model(body.model)
        test = align_test(config, role, network, plan, test_table(config.party(role), schema))
        active.classes = np.asarray(body.classes, dtype=str) if body.classes else None
        active.test, active.test_ids, active.schema = test.X, test.ids, body.schema
        active.loaded(part)
        return active
    part = load_model(config, role, PassiveParty.role, passphrase, PassivePart)
    mine: PassivePart = part.body  # type: ignore[assignment]
    schema = mine.schema.schema()
    insecure = bool(est.allow_insecure)
    passive = DeployedPassive(role, network, X=np.zeros((2, schema.n_columns)),
                              active_key=_pinned_key(config.params, insecure), allow_insecure=insecure)
    passive.restore_model(mine.model)
    test = align_test(config, role, network, plan, test_table(config.party(role), schema))
    passive.test, passive.schema = test.X, mine.schema
    passive.loaded(part)
    return passive


def fit(operator: Operator, config: RunConfig) -> dict[str, str]:
    """The alignment phase (the parties wait in it since they started), then training (the active
    party drives every passive party), then every party saves its model part (``models/NAME.model``);
    reports the aligned sizes, the number of passive splits and the model id."""
    refuse_training(config)
    plan = alignment_plan(config)
    sizes = align(operator, plan)
    with operator.step("fit"):
        info = dict(operator.control(ACTIVE, "fit").info)
    model_id = save_models(operator, [ACTIVE, *_passives(config.params)])
    return {**info, **{f"{name}_rows": str(n) for name, n in sizes.items()}, "model_id": model_id}


def resume(operator: Operator, config: RunConfig) -> dict[str, str]:
    """Finish an interrupted fit (``securetrees operator resume``): the active party resumes from the
    parties' checkpoints (a restarted party took its aligned rows from its own), then every party
    saves its model part as after :func:`fit`."""
    refuse_training(config)
    with operator.step("resume"):
        info = dict(operator.control(ACTIVE, "resume").info)
    model_id = save_models(operator, [ACTIVE, *_passives(config.params)])
    return {**info, "model_id": model_id}


def predict(operator: Operator, config: RunConfig, method: str | None = None) -> dict[str, npt.NDArray[Any]]:
    """Each passive party loads its aligned test rows, the active party predicts them and keeps the
    predictions (``out/``); the operator receives their number.  In a predict-only run the test
    ids are aligned first (unless done already) and every party's model part must come from the
    same fit."""
    if method is not None:
        raise ParameterError("SecureBoost has one prediction method")
    passives = _passives(config.params)
    if config.job == "predict":
        align_pending(operator, alignment_plan(config))
        check_models(operator, [ACTIVE, *passives])
    with operator.step("predict"):
        operator.control_many(passives, "load_test")
        reply = operator.control(ACTIVE, "predict").info
    return {"test_rows": np.asarray([int(reply["rows"])])}


def run_job(operator: Operator, config: RunConfig) -> dict[str, npt.NDArray[Any]]:
    """Align (PSI), train, save the model parts, predict the test rows at the active party
    (:func:`fit`, :func:`predict`); returns the number of passive splits and of predicted rows.  A
    predict-only run predicts only."""
    if config.job == "predict":
        return predict(operator, config)
    fitted = fit(operator, config)
    return {"passive_splits": np.asarray([int(fitted["passive_splits"])]), **predict(operator, config)}


def prepare(out_dir: str | Path, X: npt.ArrayLike, y: npt.ArrayLike, partition: Sequence[Sequence[int]], *,
            X_test: npt.ArrayLike, params: dict[str, Any], keypair: tuple[PublicKey, PrivateKey] | None = None,
            names: Sequence[str] | None = None, categories: Mapping[str, Sequence[str]] | None = None,
            lacking: int = 0, shuffle: bool = True, base_port: int = 0, rng: RandomSource = SYSTEM_RANDOM) -> Path:
    """A local trial, the layout of the facade's ``partition``: ``partition[0]`` are the active party's
    columns, ``partition[u]`` passive party ``u - 1``'s (``passive{u-1}``).

    Each party's table (CSV: an ``id`` column, its columns of ``X`` named ``names``, else ``x0, x1 ...``;
    a column in ``categories`` holds codes, written as category names) holds all but ``lacking`` rows
    of its own choosing, in its own random order (unless not ``shuffle``); so do its test rows (ids
    ``test-i``).  The active party's table adds the column ``label`` (``y``) and its key file the sealed
    key pair (``keypair``, else a fresh ``key_bits`` key), whose public key goes to ``run.toml``."""
    Xa, Xt, ya = np.asarray(X, dtype=np.float64), np.asarray(X_test, dtype=np.float64), np.asarray(y)
    if len(partition) < 2:
        raise ParameterError("SecureBoost needs the active party and at least one passive party")
    passives = [f"passive{u}" for u in range(len(partition) - 1)]
    est, _ = estimator_from({**params, "passives": passives, "active_public_key": ""})
    keys = keypair or generate_keypair(est.key_bits, allow_insecure=est.allow_insecure)
    parties = [ACTIVE, *passives]
    cols = list(names) if names is not None else [f"x{j}" for j in range(Xa.shape[1])]
    ids, test_ids = [f"row-{i}" for i in range(Xa.shape[0])], [f"test-{i}" for i in range(Xt.shape[0])]
    rows = deal_rows(Xa.shape[0], parties, lacking=lacking, rng=rng)
    test_rows = deal_rows(Xt.shape[0], parties, lacking=min(lacking, (Xt.shape[0] - 1) // len(parties)), rng=rng)
    if not shuffle:
        rows, test_rows = ({c: np.sort(r) for c, r in rr.items()} for rr in (rows, test_rows))
    plan = TrialPlan(protocol="secureboost", params={**params, "passives": passives,
                                                     "active_public_key": keys[0].to_bytes().hex()})
    for name, part in zip(parties, partition, strict=True):
        tables, _ = vertical_tables(ids, test_ids, Xa, Xt, rows[name], test_rows[name], part, cols,
                                    categories=categories, labels=ya if name == ACTIVE else None)
        items: dict[str, Secret] = {"paillier_key": seal_paillier(keys[1])} if name == ACTIVE else {}
        if "checkpoint_dir" in params:
            items["checkpoint_key"] = SYSTEM_RANDOM.token_bytes(32)
        plan.add(name, role=ActiveParty.role if name == ACTIVE else PassiveParty.role, tables=tables,
                 secrets=items or None, options={"label": "label"} if name == ACTIVE else None)
    return write_trial(out_dir, plan, base_port=base_port)


def trial(out_dir: str | Path, *, rows: int, trees: int, insecure: bool) -> Path:
    """``securetrees federation init secureboost``: the demo's vertical split of Adult's first ``rows``
    training rows (the active party: the labels, as text, and 5 columns; two passive parties sharing
    the other 9), CSV files with string categories and empty cells for missing values, each party
    lacking a few of the others' ids, 500 test rows; aligned by PSI when the federation is launched."""
    from securetrees.datasets import load_adult
    from securetrees.protocols.secureboost.demo import MAX_BINS, adult_partition

    data = load_adult()
    params: dict[str, Any] = {"n_estimators": trees, "max_depth": 3, "learning_rate": 0.3, "max_bins": MAX_BINS,
                              "key_bits": 1024 if insecure else 2048, "allow_insecure": insecure}
    labels = np.where(data.y_train[:rows] == 1, ">50K", "<=50K")
    return prepare(out_dir, data.X_train[:rows], labels, adult_partition(2, data.X_train.shape[1]),
                   X_test=data.X_test[:500], params=params, names=data.feature_names, categories=data.categories,
                   lacking=max(1, rows // 50))
