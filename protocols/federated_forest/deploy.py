"""Federated Forest as networked services: the master and each client in its own process.

Roles: ``master`` and ``client0 … client{k-1}``; each client reads its own table
(``securetrees.net.tables``: ``data`` and ``test_data`` in its configuration section, the
client naming ``label`` holds the labels; ``[protocol] feature_ids`` lists each client's global
feature ids; ``label_public_key``, optional, is the label holder's Paillier public key in hex, which
every client then pins and the label holder checks against its key file).  Before training, the
clients align their rows by private set intersection led by the label holder
(``securetrees.net.alignment``; ``alignment = "hmac-trusted"`` keeps the shared-key HMAC of the
trusted setting instead, ``specs/deployment.md``).  The operator drives the roles with control
requests (``securetrees.net.control``):

* ``align_use`` / ``align_run`` / ``align_done`` (clients): the alignment phase;
* ``fit`` / ``resume`` (master): train, or finish an interrupted training from the
  parties' checkpoints (each party's checkpoint key is in its own key file);
* ``load_test`` (each client): load its columns of the test rows from its own data;
  the reply carries the canonical order of those rows (sorted HMAC of the sample ids);
* ``predict`` (master): align the test ids, one-round (or classical) prediction; with ``shared``
  labels the master answers the forest output in canonical order; with ``encrypted`` labels it
  hands the leaves to the label holder and answers the number of rows only: the label holder
  computes the output, writes it beside its own test ids (``out/NAME.predictions.csv`` and
  ``.npy`` arrays) and, where ``[protocol] release_predictions = "operator"``, answers it to the
  operator (``release``, in its own row order); by default (``"none"``) it keeps it;
* ``save_model`` / ``model_id`` (every role): after ``fit``, each party seals its part of the
  forest into ``models/NAME.model`` (``securetrees.net.models``: the master its skeleton, each
  client its partial trees and its table's schema, the label holder also the leaf values and
  class names).  A run with ``[run] job = "predict"`` loads those parts instead of training,
  reads only each client's ``test_data`` and aligns those rows by PSI as in training.

:func:`prepare` makes a local trial from one table (the column split, labels and
test rows written to each party's own CSV files), the same run the one-process
:class:`~securetrees.protocols.federated_forest.estimators.FederatedForestClassifier` makes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import CollusionError, KeyMismatchError, ParameterError, TableError
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
    open_paillier,
    published_bytes,
    published_key,
    save_predictions,
    seal_paillier,
)
from securetrees.net.models import SavesModel, SchemaState, check_models, load_model, refuse_training, save_models
from securetrees.net.tables import PartyTable, encode_labels, party_tables, test_table
from securetrees.net.trial import Secret, TrialPlan, deal_rows, vertical_tables, write_trial
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.checkpoint import CheckpointStore
from securetrees.protocols.federated_forest.client import Client, LabelSpec
from securetrees.protocols.federated_forest.ids import canonical_order, hash_ids
from securetrees.protocols.federated_forest.master import Master
from securetrees.protocols.federated_forest.model import ClientModel, MasterModel
from securetrees.protocols.federated_forest.params import LABEL_MODES, ForestParams
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, Party, message
from securetrees.runtime.network import Network

__all__ = ["PARAMETERS", "PREDICTIONS_KEPT", "PREDICT_ONLY", "RELEASES", "ROLES",
           "ClientPart", "DeployedClient", "DeployedMaster", "check_release", "classes", "fit", "make_role",
           "predict", "prepare", "releases_predictions", "resume", "run_job"]

FloatArray = npt.NDArray[np.float64]
_FOREST_KEYS = ("n_estimators", "max_depth", "min_samples_split", "min_samples_leaf", "max_features",
                "feature_sampling", "bootstrap", "random_state", "checkpoint")

PREDICT_ONLY = True
"""A ``[run] job = "predict"`` run loads each party's model part (``securetrees.net.models``)."""

PROGRESS_ROLE = "master"
"""The role ``securetrees operator fit`` polls for progress (it drives the training)."""

ROLES: Mapping[str, str | None] = {"master": "master", "client": None}
"""The roles of a run (the master, and any number of clients):
a single-party role mapped to the name its party carries (``securetrees.net.config.check_roles``)."""

PARAMETERS = frozenset({*_FOREST_KEYS, *alignment.PARAMETERS, "clients", "feature_ids", "n_classes",
                        "label_protection", "criterion", "max_bins", "allow_insecure", "key_bits", "frac_bits",
                        "paillier_mode", "checkpoint_dir", "prediction", "n_jobs", "trusted_workers",
                        "label_public_key", "release_predictions"})
"""The ``[protocol]`` keys of a Federated Forest run."""

RELEASES = ("none", "operator")
"""``[protocol] release_predictions`` (``encrypted`` labels): whether the label holder, which alone
computes the forest output, keeps it (``"none"``, the default) or answers it to the operator."""


def releases_predictions(params: Mapping[str, Any]) -> bool:
    """Whether the operator receives the forest output: always with ``shared`` labels (the master
    computes it), with ``encrypted`` labels only where the label holder releases it."""
    return bool(params.get("label_protection", "encrypted") == "shared"
                or params.get("release_predictions", "none") == "operator")


def check_release(config: RunConfig) -> None:
    """Refuse (:class:`CollusionError`) a run whose label holder answers the forest output to an
    operator hosted by the master's organisation: that organisation would hold the outputs and the
    leaves it routed, from which the leaf values and the training labels follow
    (``specs/federated_forest.md``, "Who receives the predictions")."""
    if config.params.get("label_protection", "encrypted") != "encrypted" or not releases_predictions(config.params):
        return
    operator, master = config.parties.get(config.operator), config.parties.get("master")
    if operator is not None and master is not None and operator.organisation is not None \
            and operator.organisation == master.organisation:
        raise CollusionError(f"release_predictions = \"operator\" with the operator hosted by the master's "
                             f"organisation {master.organisation!r}: the master would learn the forest outputs of "
                             "the rows it routes, and from them the training labels; host the operator elsewhere "
                             "or keep the predictions at the label holder (release_predictions = \"none\")")


def PREDICTIONS_KEPT(config: RunConfig) -> str | None:
    """Where the predictions stay when the operator receives none (``securetrees operator predict``
    prints it), or ``None`` when it receives them."""
    if releases_predictions(config.params):
        return None
    return (f"the label holder {label_holder(config)} keeps the predictions beside its ids "
            f"(out/{label_holder(config)}.predictions.csv on its machine; release_predictions = \"none\")")


def _forest_params(p: dict[str, Any]) -> ForestParams:
    kw = {k: p[k] for k in _FOREST_KEYS if k in p}
    if kw.get("max_depth") == 0:
        kw["max_depth"] = None  # TOML has no null: 0 means unlimited
    return ForestParams(**kw)


def _store(config: RunConfig, role: str, secrets: dict[str, bytes]) -> CheckpointStore | None:
    directory = config.params.get("checkpoint_dir")
    if directory is None:
        return None
    key = secrets.get("checkpoint_key")
    if key is None:
        raise ParameterError(f"{role} checkpoints but its key file has no checkpoint_key")
    return CheckpointStore(config.path.parent / str(directory), role, key)


class DeployedMaster(SavesModel, Controllable, Master):
    def control_state(self) -> dict[str, str]:
        return {"trees": str(len(self.trees))}

    def control_fit(self, args: dict[str, str]) -> ControlReply:
        refuse_training(self.run)
        self.fit()
        return ControlReply(info={"trees": str(len(self.trees))})

    def control_resume(self, args: dict[str, str]) -> ControlReply:
        refuse_training(self.run)
        self.resume()
        return ControlReply(info={"trees": str(len(self.trees))})

    def control_predict(self, args: dict[str, str]) -> ControlReply:
        """The leaves of the test rows; ``shared``: the forest output (canonical order);
        ``encrypted``: the leaves go to the label holder, and the reply holds the number of rows."""
        self.align_test()
        how = args.get("method", "one-round")
        if how not in ("one-round", "classical"):
            raise ParameterError("method is 'one-round' or 'classical'")
        leaves = self.leaf_of_one_round() if how == "one-round" else self.leaf_of_classical()
        if self.label_protection != "encrypted":
            return ControlReply(arrays={"output": self.aggregate(leaves)})
        self.hand_leaves(leaves)
        return ControlReply(info={"rows": str(leaves.shape[1])})

    def model_part(self) -> Message:
        return self.model_state()


@message("federated_forest.model.client_part")
@dataclass(frozen=True)
class ClientPart(Message):
    """A deployed client's model file body: its partial trees (:class:`ClientModel`), the schema of
    its table (so new rows are encoded as the training rows were) and, label holder of a
    classification run, the class names its codes stand for (else empty)."""

    client: ClientModel
    schema: SchemaState
    classes: tuple[str, ...]


class DeployedClient(SavesModel, Controllable, Client):
    _test: tuple[FloatArray, list[str]] | None = None
    _own_test_ids: tuple[str, ...] = ()
    """This client's own ids of its test rows (aligned order), for the label holder's predictions."""
    _order: npt.NDArray[np.int64] | None = None
    """Where each row of the canonical order (the forest output's) is among the loaded test rows."""
    schema: SchemaState | None = None
    classes: tuple[str, ...] = ()

    def on_tree_start(self, sender: str, msg: m.TreeStart) -> m.Ack | None:
        """``Client.on_tree_start``, with the tree in this client's log (its progress: the master's
        status has the forest's)."""
        self.logger.info("%s: tree %d of %d", self.name, msg.tree + 1, _forest_params(self.run.params).n_estimators)
        return super().on_tree_start(sender, msg)

    def control_load_test(self, args: dict[str, str]) -> ControlReply:
        if self._test is None:
            raise ParameterError(f"{self.name} has no test rows (test_data in its configuration section)")
        X, ids = self._test
        check_test_rows(X.shape[0])
        self.load_test(X, ids)
        self._order = canonical_order(hash_ids(self._id_key, ids))
        return ControlReply(arrays={"order": self._order})

    def control_classes(self, args: dict[str, str]) -> ControlReply:
        """The label holder's class names, in the order of the forest output's columns (none in a
        regression or at another client), for the operator's predictions file.  Reveals the label
        column's distinct values, not a row's label."""
        return ControlReply(info={f"class_{k}": c for k, c in enumerate(self.classes)})

    def keep_output(self, output: FloatArray) -> None:
        """``Client.keep_output``; the label holder also writes the forest output it computes to its
        own file beside its own ids of the rows, in the order of its test rows (the ``row`` column:
        the row of the operator's predictions file where it releases them)."""
        ids = self._own_test_ids
        if self._order is None or len(ids) != output.shape[0]:  # rows it cannot name: nothing to keep
            self.logger.warning("%s keeps no predictions: %d output rows for %d own test ids", self.name,
                                output.shape[0], len(ids))
            self.kept_output = None
            return
        out = np.empty_like(output)
        out[self._order] = output
        self.kept_output = out
        rows = np.arange(len(ids))
        if self.classes:
            save_predictions(self.run, self.name, ids, np.asarray(self.classes)[np.argmax(out, axis=1)], out,
                             self.classes, rows=rows)
        else:
            save_predictions(self.run, self.name, ids, out[:, 0], rows=rows)

    def control_release(self, args: dict[str, str]) -> ControlReply:
        """The label holder answers the operator the forest output it kept (its own row order), only
        where ``[protocol] release_predictions = "operator"``.  Reveals to the operator: the
        class probabilities (or values) of every test row, without ids."""
        if not self.is_label_holder or self._require_setup().label_protection != "encrypted":
            raise ParameterError(f"{self.name} computes no forest output")
        if not releases_predictions(self.run.params):
            raise ParameterError(f"{self.name} keeps its predictions (release_predictions = \"none\")")
        if self.kept_output is None:
            raise ParameterError(f"{self.name} holds no predictions: run predict first")
        return ControlReply(arrays={"output": self.kept_output})

    def model_part(self) -> Message:
        if self.schema is None:  # pragma: no cover - set by make_role
            raise ParameterError(f"{self.name} has no table schema")
        return ClientPart(self.model_state(), self.schema, self.classes)


POSITION_KEY = b"securetrees.federated_forest.psi-positions"
"""The HMAC key of the clients' sample ids after a PSI alignment when their key files hold no
``id_key``: the ids are then positions in the agreed order (``row-j``), which tell nobody
anything, so the key need not be secret."""


def alignment_plan(config: RunConfig) -> AlignmentPlan:
    """The label holder leads the PSI of the training ids and of the test ids with every client
    (it learns each pairwise intersection, ``specs/deployment.md``); a predict-only run aligns
    the test ids only."""
    clients = [str(c) for c in config.params["clients"]]
    holder = label_holder(config)
    sets = {} if config.job == "predict" else {"train": tuple(clients)}
    if all(config.party(c).test_data is not None for c in clients):
        sets["test"] = tuple(clients)
    if not sets:
        raise ParameterError("a predict-only run needs every client's test_data")
    return AlignmentPlan(holder, sets)


def label_holder(config: RunConfig) -> str:
    """The client that names its label column (``label = ...``): exactly one does."""
    holders = [str(c) for c in config.params["clients"] if config.party(str(c)).table.get("label")]
    if len(holders) != 1:
        raise ParameterError(f"exactly one client names its label column (label = ...); found {holders}")
    return holders[0]


def _keep(party: SavesModel, config: RunConfig, passphrase: bytes) -> None:
    party.run, party.passphrase = config, passphrase


def check_parameters(params: Mapping[str, Any]) -> None:
    """The checks of ``[protocol]`` every role makes before reading any data or key (also run by
    ``securetrees setup run``): the forest's settings, ``n_classes`` (0 for a regression, else 2 or
    more), ``label_protection`` and the integer settings.  Reveals nothing (public parameters)."""
    try:
        _forest_params(dict(params))
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"[protocol]: a forest setting is malformed: {exc}") from None
    n_classes = params.get("n_classes", 0)
    if type(n_classes) is not int or n_classes < 0 or n_classes == 1:
        raise ParameterError(f"[protocol] n_classes must be 0 (a regression) or a class count of 2 or more, not "
                             f"{n_classes!r}")
    if params.get("release_predictions", "none") not in RELEASES:
        raise ParameterError(f"[protocol] release_predictions must be one of {RELEASES}, "
                             f"not {params['release_predictions']!r}")
    if params.get("label_protection", "encrypted") not in LABEL_MODES:
        raise ParameterError(f"[protocol] label_protection must be one of {LABEL_MODES}, "
                             f"not {params['label_protection']!r}")
    for key in ("max_bins", "key_bits", "frac_bits"):
        value = params.get(key)
        if value is not None and (type(value) is not int or value < 1):
            raise ParameterError(f"[protocol] {key} must be a positive integer, not {value!r}")


def make_role(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
              data: dict[str, npt.NDArray[Any]], passphrase: bytes) -> Party:
    p = config.params
    check_parameters(p)
    check_release(config)
    clients = [str(c) for c in p["clients"]]
    if role == "master":
        master = DeployedMaster(role, network, clients, _forest_params(p),
                                label_protection=str(p.get("label_protection", "encrypted")),
                                criterion=p.get("criterion"), max_bins=int(p.get("max_bins", 255)),
                                checkpoint=None if config.job == "predict" else _store(config, role, secrets),
                                progress=True)  # trees done of total in its log and its status
        _keep(master, config, passphrase)
        if config.job == "predict":
            part = load_model(config, role, Master.role, passphrase, MasterModel)
            master.restore_model(part.body)  # type: ignore[arg-type]
            master.loaded(part)
        return master
    if role not in clients:
        raise ParameterError(f"{role!r} is not a role of this Federated Forest run")
    if config.job == "predict":
        return _predicting_client(role, config, network, secrets, passphrase)
    train, test = party_tables(config.party(role))
    feature_ids = _feature_ids(config, role, train.X.shape[1])  # a layout mismatch stops it before the alignment
    store = _store(config, role, secrets)
    if alignment_mode(config) == "psi":  # restarted with a checkpoint: its recorded rows, no alignment phase
        train, test = align_party(config, role, network, alignment_plan(config), train, test, store)
        ids, test_ids = [f"row-{j}" for j in range(len(train))], [f"test-{j}" for j in range(len(test or ()))]
        id_key = secrets.get("id_key", POSITION_KEY)
    else:  # hmac-trusted: every client holds the same ids and a shared key (specs/deployment.md)
        ids, test_ids = list(train.ids), list(test.ids) if test is not None else []
        id_key = _shared_id_key(secrets, role)
    labels = None
    classes: tuple[str, ...] = ()
    if train.labels is not None:
        keypair = None
        if "paillier_key" in secrets:
            keypair = open_paillier(secrets, "paillier_key", passphrase, role=role,
                                    allow_insecure=bool(p.get("allow_insecure")))
            check_own_key(keypair[0], _pinned(p, bool(p.get("allow_insecure"))), "label_public_key", role)
        elif _pinned(p, True) is not None:
            raise ParameterError(f"[protocol] label_public_key is set but {role}'s key file has no paillier_key")
        n_classes = int(p.get("n_classes", 0))
        labels = LabelSpec(encode_labels(train, n_classes), n_classes or None, key_bits=int(p.get("key_bits", 2048)),
                           allow_insecure=bool(p.get("allow_insecure", False)), keypair=keypair,
                           frac_bits=int(p.get("frac_bits", 32)))
        if n_classes:
            classes = tuple(str(c) for c in np.unique(np.asarray(train.labels).astype(str)))
    client = _client(role, config, network, train.X, ids, feature_ids, id_key, train, labels, store)
    client.classes = classes
    if test is not None:
        client._test, client._own_test_ids = (test.X, test_ids), test.ids
    _keep(client, config, passphrase)
    return client


def _pinned(params: Mapping[str, Any], insecure: bool) -> PublicKey | None:
    """``[protocol] label_public_key``: the label holder's published Paillier public key, or ``None``."""
    return published_key(params, "label_public_key", insecure=insecure)


def public_key_loader(params: Mapping[str, Any], insecure: bool) -> Callable[[bytes], PublicKey]:
    """How a client reads the label holder's public key from its encrypted labels: with ``[protocol]
    label_public_key`` (``securetrees setup keys`` publishes it), only that key is accepted
    (:class:`KeyMismatchError` otherwise, before any ciphertext is used)."""
    pinned = published_bytes(params, "label_public_key")

    def loader(raw: bytes) -> PublicKey:
        if pinned is not None and raw != pinned:
            raise KeyMismatchError("the label holder's public key is not [protocol] label_public_key")
        return PublicKey.from_bytes(raw, allow_insecure=insecure)

    return loader


def _shared_id_key(secrets: dict[str, bytes], role: str) -> bytes:
    if "id_key" not in secrets:
        raise ParameterError(f"alignment 'hmac-trusted' needs the shared id_key in {role}'s key file")
    return secrets["id_key"]


def _feature_ids(config: RunConfig, role: str, n_columns: int) -> list[int]:
    clients = [str(c) for c in config.params["clients"]]
    feature_ids = [int(f) for f in config.params["feature_ids"][clients.index(role)]]
    if len(feature_ids) != n_columns:
        raise TableError(f"{role} has {n_columns} feature columns but [protocol] feature_ids lists "
                         f"{len(feature_ids)} for it")
    return feature_ids


def _client(role: str, config: RunConfig, network: Network, X: FloatArray, ids: Sequence[str],
            feature_ids: list[int], id_key: bytes, table: PartyTable, labels: LabelSpec | None,
            checkpoint: CheckpointStore | None = None) -> DeployedClient:
    p = config.params
    insecure = bool(p.get("allow_insecure", False))

    loader = public_key_loader(p, insecure)
    client = DeployedClient(
        role, network, X, ids, feature_ids, id_key, categorical=table.schema.categorical_mask(),
        labels=labels, paillier_mode=p.get("paillier_mode", "djn"), public_key_loader=loader,
        checkpoint=checkpoint, executor=process_pool(p.get("n_jobs")),
        trusted_workers=check_trusted(p.get("trusted_workers", False)),
    )
    client.schema = SchemaState.of(table.schema)
    return client


def _predicting_client(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
                       passphrase: bytes) -> DeployedClient:
    """A client of a predict-only run: its saved part, its new rows (``test_data`` only, encoded with
    the saved schema) aligned by PSI like training's (or in the trusted setting, by HMAC)."""
    part = load_model(config, role, Client.role, passphrase, ClientPart)
    body: ClientPart = part.body  # type: ignore[assignment]
    schema = body.schema.schema()
    test = test_table(config.party(role), schema)
    if alignment_mode(config) == "psi":
        test = align_test(config, role, network, alignment_plan(config), test)
        test_ids, id_key = [f"test-{j}" for j in range(len(test))], secrets.get("id_key", POSITION_KEY)
    else:
        test_ids, id_key = list(test.ids), _shared_id_key(secrets, role)
    feature_ids = _feature_ids(config, role, schema.n_columns)
    client = _client(role, config, network, np.empty((0, schema.n_columns)), [], feature_ids, id_key, test, None)
    client.restore_model(body.client)
    client.classes = body.classes
    client._test, client._own_test_ids = (test.X, test_ids), test.ids
    client.schema = body.schema
    _keep(client, config, passphrase)
    client.loaded(part)
    return client


def fit(operator: Operator, config: RunConfig) -> dict[str, str]:
    """The alignment phase (with ``psi``: the clients wait in it since they started), then
    training (the master drives every client), then every party saves its model part
    (``models/NAME.model``; the reply's ``model_id`` names the fit)."""
    refuse_training(config)
    sizes: dict[str, int] = {}
    if alignment_mode(config) == "psi":
        plan = alignment_plan(config)
        sizes = align(operator, plan)
    with operator.step("fit"):
        info = dict(operator.control("master", "fit").info)
    model_id = save_models(operator, ["master", *[str(c) for c in config.params["clients"]]])
    return {**info, **{f"{name}_rows": str(n) for name, n in sizes.items()}, "model_id": model_id}


def resume(operator: Operator, config: RunConfig) -> dict[str, str]:
    """Finish an interrupted fit from the parties' checkpoints (``securetrees operator resume``): the
    master's ``resume`` (restarted clients took their aligned rows from their checkpoints, with
    ``psi``), then every party saves its model part as after :func:`fit`."""
    refuse_training(config)
    with operator.step("resume"):
        info = dict(operator.control("master", "resume").info)
    model_id = save_models(operator, ["master", *[str(c) for c in config.params["clients"]]])
    return {**info, "model_id": model_id}


def predict(operator: Operator, config: RunConfig, method: str | None = None) -> dict[str, npt.NDArray[Any]]:
    """The forest's output on the clients' test rows where the operator receives it (``shared``
    labels; ``encrypted`` with ``release_predictions = "operator"``), in their agreed order (with
    ``hmac-trusted``: the label holder's own test row order), the order of the label holder's
    ``out/NAME.predictions.csv`` (whose ``row`` column numbers them so); otherwise the number of
    rows the label holder predicted and kept.  ``method`` is ``one-round`` or ``classical`` (default:
    ``[protocol] prediction``, else one-round).  In a predict-only run the test ids are aligned
    first and every role's model part must come from the same fit."""
    clients = [str(c) for c in config.params["clients"]]
    how = method or str(config.params.get("prediction", "one-round"))
    if config.job == "predict":
        if alignment_mode(config) == "psi":
            align_pending(operator, alignment_plan(config))  # a predict-only run's new rows
        check_models(operator, ["master", *clients])
    with operator.step(f"predict {how}"):
        orders = operator.control_many(clients, "load_test")
        reply = operator.control("master", "predict", method=how)
        holder = label_holder(config)
        if config.params.get("label_protection", "encrypted") == "encrypted":
            if not releases_predictions(config.params):
                return {"test_rows": np.asarray([int(reply.info["rows"])])}
            return {"output": operator.control(holder, "release").arrays["output"]}
    out = reply.arrays["output"]
    order = orders[holder].arrays["order"]  # the label holder's row order: its file's too
    result = np.empty_like(out)
    result[order] = out
    return {"output": result}


def classes(operator: Operator, config: RunConfig) -> tuple[str, ...]:
    """The class names of the forest output's columns (the label holder's ``classes``), for the
    operator's predictions file; none in a regression."""
    info = operator.control(label_holder(config), "classes").info
    return tuple(info[f"class_{k}"] for k in range(len(info)))


def run_job(operator: Operator, config: RunConfig) -> dict[str, npt.NDArray[Any]]:
    """Align the clients' rows (PSI), train, save the model parts, then predict the test rows
    (:func:`fit`, :func:`predict`); a predict-only run predicts only."""
    if config.job != "predict":
        fit(operator, config)
    return predict(operator, config)


def prepare(out_dir: str | Path, X: npt.ArrayLike, y: npt.ArrayLike, partition: Sequence[Sequence[int]], *,
            X_test: npt.ArrayLike, params: dict[str, Any], label_holder: int = 0,
            paillier_keys: tuple[PublicKey, PrivateKey] | None = None, id_key: bytes | None = None,
            base_port: int = 0, names: Sequence[str] | None = None,
            categories: Mapping[str, Sequence[str]] | None = None, lacking: int = 0, shuffle: bool = True,
            rng: RandomSource = SYSTEM_RANDOM) -> Path:
    """A local trial: certificates, key files, each client's own table (CSV), ``run.toml``.

    Client ``i`` gets the columns ``partition[i]`` of ``X`` and ``X_test`` (named ``names``,
    else ``x0, x1 ...``; a column in ``categories`` holds codes, written as category names)
    with an ``id`` column (``row-i``, ``test-i``), each client's rows in its own random order
    (unless not ``shuffle``) and without ``lacking`` rows of its own choosing, so the clients'
    id sets overlap only in part.  The label holder's table adds the column ``label``: ``y``'s
    classes (codes or names, ``params["n_classes"] = k``) or regression targets.  ``id_key`` (the clients'
    shared HMAC key, ``alignment = "hmac-trusted"``) is drawn fresh unless given.
    """
    Xa, Xt, ya = np.asarray(X, dtype=np.float64), np.asarray(X_test, dtype=np.float64), np.asarray(y)
    clients = [f"client{i}" for i in range(len(partition))]
    cols = list(names) if names is not None else [f"x{j}" for j in range(Xa.shape[1])]
    key = id_key if id_key is not None else SYSTEM_RANDOM.token_bytes(32)
    ids = [f"row-{i}" for i in range(Xa.shape[0])]
    test_ids = [f"test-{i}" for i in range(Xt.shape[0])]
    rows = deal_rows(Xa.shape[0], clients, lacking=lacking, rng=rng)
    test_rows = deal_rows(Xt.shape[0], clients, lacking=min(lacking, (Xt.shape[0] - 1) // len(clients)), rng=rng)
    if not shuffle:
        rows, test_rows = ({c: np.sort(r) for c, r in rr.items()} for rr in (rows, test_rows))
    checkpoints = "checkpoint_dir" in params
    plan = TrialPlan(protocol="federated-forest", params={**params, "clients": clients,
                                                          "feature_ids": [[int(c) for c in p] for p in partition]})
    for i, (name, part) in enumerate(zip(clients, partition, strict=True)):
        tables, _ = vertical_tables(ids, test_ids, Xa, Xt, rows[name], test_rows[name], part, cols,
                                    categories=categories, labels=ya if i == label_holder else None)
        items: dict[str, Secret] = {"id_key": key}
        if i == label_holder and paillier_keys is not None:
            items["paillier_key"] = seal_paillier(paillier_keys[1])
        if checkpoints:
            items["checkpoint_key"] = SYSTEM_RANDOM.token_bytes(32)
        plan.add(name, role=Client.role, tables=tables, secrets=items,
                 options={"label": "label"} if i == label_holder else None)
    plan.add("master", role=Master.role,
             secrets={"checkpoint_key": SYSTEM_RANDOM.token_bytes(32)} if checkpoints else None)
    return write_trial(out_dir, plan, base_port=base_port)


def trial(out_dir: str | Path, *, rows: int, trees: int, insecure: bool) -> Path:
    """``securetrees federation init federated-forest``: Adult's first ``rows`` training rows
    dealt column by column to three clients (CSV files with string categories and empty cells for
    missing values, each client lacking a few of the others' ids), encrypted labels, 500 test
    rows; the rows are aligned by PSI when the federation is launched."""
    from securetrees.datasets import load_adult

    data = load_adult()
    d = data.X_train.shape[1]
    params: dict[str, Any] = {"n_estimators": trees, "max_depth": 6, "random_state": 0, "n_classes": 2,
                              "label_protection": "encrypted", "key_bits": 1024 if insecure else 2048,
                              "allow_insecure": insecure}
    labels = np.where(data.y_train[:rows] == 1, ">50K", "<=50K")  # the label column holds text
    return prepare(out_dir, data.X_train[:rows], labels, [list(range(i, d, 3)) for i in range(3)],
                   X_test=data.X_test[:500], params=params, names=data.feature_names, categories=data.categories,
                   lacking=max(1, rows // 50))
