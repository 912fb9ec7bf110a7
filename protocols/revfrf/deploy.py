"""RevFRF as networked services: CS, CC, KGC, each participant and a requester, one process each.

Key set-up is offline (paper §5.2, :func:`issue_keys`; across organisations ``securetrees setup kgc``,
:func:`write_key_files`): :func:`prepare` plays the KGC once, seals each
party's keys into its own key file (DT-PKC weak key, the CS's or CC's strong-key
share, a participant's Ed25519 seed, the session id) and writes the public
directory and the Ed25519 verification keys into ``run.toml``.  The KGC service
then holds only the directory and the revocation list (:meth:`KGC.restore`).

``[protocol] n_jobs`` (2 or more) gives each participant a process pool for its HoEnc batches
(FOS-Find's thresholds, FT-Test's values) for the life of its process; no other role has a loop
on an executor, and none a secret-key step on one (so there is no ``trusted_workers``).

Each data holder reads its own table (``securetrees.net.tables``): the CS its ids and label
column, each participant its ids and columns (``[protocol] columns`` lists their global
indexes), with ``test_data`` the rows to predict; the requester its own whole rows.  Before
the roles start, the CS and the participants align their rows by private set intersection led
by the first participant (``securetrees.net.alignment``, ``specs/deployment.md``).

Control actions (``securetrees.net.control``), sent by the operator:

* ``align_use`` / ``align_run`` / ``align_done`` (the CS and participants): the alignment phase;
* ``fit`` (cs): plant and grow the forest (FLE-Expan / FOS-Find layer by layer), with
  ``checkpoint_dir`` sealing every role's state (``specs/revfrf.md``, "Checkpoints"); refused
  when the CS's checkpoint already holds a layer;
* ``resume`` (cs): restore its latest checkpoint and grow the rest;
* ``load`` / ``drop`` (each participant): its columns of the test rows as batch ``batch``;
* ``predict`` (cs): ``method`` = ``vertical`` or ``test`` (FRF-Test) on batch ``batch``;
* ``predict`` (requester): FRF-Predict on each of its own rows;
* ``revoke`` (participant): FRF-Revoc at ``level`` 1 or 2;
* ``save_model`` / ``model_id`` (CS, CC, KGC, participants): each party seals its part of the
  model into ``models/NAME.model`` (``securetrees.net.models``, :mod:`.model`: the CS its
  forest, each participant its nodes and schema, the KGC and the CC the revoked participants;
  the requester keeps no model state and writes no part).

The operator's steps (``securetrees operator``): :func:`fit` (the alignment phase, training,
then every part saved), :func:`predict`, :func:`revoke` (the parts saved again: the forest of a
new epoch).  The job a launcher runs (:func:`run_job`) is made of them: it trains, predicts the
three ways, revokes the last participant at level 2 and predicts again.

A run with ``[run] job = "predict"`` loads the parts instead of training: the participants read
only their ``test_data`` (encoded with the saved schema) and align those ids by PSI; the CS
reads no table.  It predicts ``vertical``, ``test`` and ``encrypted``; it cannot revoke
(FRF-Revoc rebuilds the destroyed subtrees by FLE-Expan over the training rows, which such a
run does not hold: :class:`UnsupportedActionError`).  The CS writes the output of ``vertical``
and ``test`` (``out/cs.METHOD.proba.npy``, its class names in ``out/cs.METHOD.predictions.npy``,
rows in the participants' agreed order), the requester the output of its own requests
(``out/requester.encrypted.proba.npy``): each is the party that learns that output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.dtpkc import KGC
from securetrees.dtpkc.keys import PublicKey, StrongKeyShare, WeakSecretKey
from securetrees.dtpkc.wire import decode_public_key, encode_public_key, secret_key_bytes, secret_key_from_bytes
from securetrees.errors import ParameterError, ProtocolError, TableError, UnsupportedActionError
from securetrees.executors import check_n_jobs, process_pool
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
    check_protocol_keys,
    checkpoint_store,
    save_output,
    save_predictions,
    save_test_rows,
)
from securetrees.net.keyfile import write_key_file
from securetrees.net.models import (
    ModelFile,
    SavesModel,
    SchemaState,
    check_models,
    load_model,
    model_path,
    refuse_training,
    save_models,
)
from securetrees.net.tables import encode_labels, party_tables, test_table
from securetrees.net.tls import check_name
from securetrees.net.trial import TrialPlan, deal_rows, table_frame, vertical_tables, write_trial
from securetrees.progress import phase
from securetrees.protocols.revfrf.candidates import CandidateSet, Proposer
from securetrees.protocols.revfrf.cc import ComputationServer
from securetrees.protocols.revfrf.checkpoint import FORMAT, ServerState
from securetrees.protocols.revfrf.cs import CentralServer
from securetrees.protocols.revfrf.cs_resume import grow_with_checkpoints, resume_forest
from securetrees.protocols.revfrf.facade import _SETTINGS, make_proposer, plan_run
from securetrees.protocols.revfrf.kgc import KeyCentre
from securetrees.protocols.revfrf.messages import ExpandReply, ExpandRequest, RevokeReply, RevokeRequest
from securetrees.protocols.revfrf.model import (
    CSPart,
    ParticipantPart,
    RevokedPart,
    forest_state,
    node_state,
    restore_forest,
    restore_nodes,
)
from securetrees.protocols.revfrf.participant import Participant
from securetrees.protocols.revfrf.requester import Requester
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Message, Party, handles
from securetrees.runtime.checkpoint import KEY_BYTES, CheckpointStore
from securetrees.runtime.network import Network
from securetrees.schema import TabularSchema
from securetrees.signing import SigningKey, make_roster
from securetrees.trees import class_stats, make_criterion
from securetrees.trees.train import regression_stats

__all__ = ["PARAMETERS", "PREDICT_ONLY", "ROLES",
           "check_parameters", "classes", "fit", "issue_keys", "make_role", "model_roles", "predict",
           "prepare", "resume", "revoke", "run_job", "trial", "write_key_files"]

FloatArray = npt.NDArray[np.float64]

_REQUIRED = ("participants", "columns", "n_features", "directory", "verify_keys")
ROLES: Mapping[str, str | None] = {"cs": "cs", "cc": "cc", "kgc": "kgc", "participant": None, "requester": None}
"""The roles of a run (the two servers and the KGC, and any number of participants and requesters):
a single-party role mapped to the name its party carries (``securetrees.net.config.check_roles``)."""

PARAMETERS = frozenset({*_SETTINGS, *alignment.PARAMETERS, "task", "n_classes", "participants", "columns",
                        "requesters", "n_features", "allow_insecure", "directory", "verify_keys", "n_jobs",
                        "checkpoint_dir"})
"""The ``[protocol]`` keys of a RevFRF run: the facade's public settings, the alignment's and the run's layout,
and ``n_jobs`` (each participant's HoEnc batches on a process pool of that many workers; no role has a
secret-key step on an executor, so there is no ``trusted_workers``)."""

PREDICT_ONLY = True
"""A ``[run] job = "predict"`` run loads each party's model part (``securetrees.net.models``)."""

PROGRESS_ROLE = "cs"
"""The role ``securetrees operator fit`` polls for progress (it grows the forest, layer by layer)."""

NO_REVOCATION = ("a predict-only RevFRF run cannot revoke: FRF-Revoc rebuilds the destroyed subtrees by FLE-Expan "
                 "over the training rows, which it does not hold (revoke in a fit run, whose parts are then saved "
                 "again)")


def _predict_only(run: RunConfig) -> None:
    if run.job == "predict":
        raise UnsupportedActionError(NO_REVOCATION)


def _keep(party: SavesModel, config: RunConfig, passphrase: bytes) -> None:
    party.run, party.passphrase = config, passphrase


class DeployedCS(SavesModel, Controllable, CentralServer):
    _draws: list[Any]
    _store: CheckpointStore | None = None
    classes: tuple[str, ...] = ()
    """The class names the label codes stand for (classification), for the predictions file."""

    def control_state(self) -> dict[str, str]:
        return {"trees": str(len(self.trees))}

    def control_fit(self, args: dict[str, str]) -> ControlReply:
        """Plant and grow the forest; refused when the CS's store holds a layer already (a restarted
        CS resumes: starting over would ask the participants for rounds they answered)."""
        refuse_training(self.run)
        if self._store is not None and self._store.latest(ServerState) is not None:
            raise ParameterError("the CS's checkpoint_dir holds a fit already: finish it with resume "
                                 "(securetrees operator resume); a new fit needs an empty checkpoint_dir")
        frontier = self.plant([dr.sample_weight for dr in self._draws])
        if self._store is not None:
            grow_with_checkpoints(self, self._store, frontier, self._draws)
            return ControlReply(info={"trees": str(len(self.trees))})
        depth = self.grow.max_depth  # layers, at most (in its log and its status)
        with phase(f"RevFRF forest of {len(self.trees)} trees, layers", total=depth) as shown:
            self.grow_forest(frontier, lambda tree: self._draws[tree.index].node_features(),
                             on_layer=lambda splits: shown.advance_to(shown.done + 1, f"{splits} splits in the last"))
        return ControlReply(info={"trees": str(len(self.trees))})

    def control_resume(self, args: dict[str, str]) -> ControlReply:
        """Finish an interrupted fit from the CS's latest checkpoint (:func:`resume_forest`); refused
        after a revocation (:meth:`_refuse_after_revocation`)."""
        refuse_training(self.run)
        if self._store is None:
            raise UnsupportedActionError("resume needs checkpoint_dir in [protocol]")
        self._refuse_after_revocation()
        resume_forest(self, self._store, self._draws, [dr.sample_weight for dr in self._draws])
        return ControlReply(info={"trees": str(len(self.trees))})

    def _refuse_after_revocation(self) -> None:
        """Checkpoints cover construction, not FRF-Revoc: when this CS's saved model part is of a later
        epoch than its latest checkpoint, a revocation came after that checkpoint, and resuming from
        it would bring back the forest of before the revocation, the revoked participant's nodes
        with it.  Such a fit is finished: its parts serve a predict-only run."""
        if self._store is None or not model_path(self.run, self.name).exists():
            return
        state = self._store.latest(ServerState)
        part = load_model(self.run, self.name, CentralServer.role, self.passphrase, CSPart).body
        if isinstance(part, CSPart) and part.epoch > (state.epoch if state is not None else 0):
            raise ProtocolError(
                f"{self.name}'s model part is of epoch {part.epoch}, after a revocation its checkpoint "
                f"(epoch {state.epoch if state is not None else 0}) predates: resuming would bring back the "
                "forest of before the revocation; the fit is finished, its parts serve a predict-only run "
                "(job = \"predict\")")

    def control_classes(self, args: dict[str, str]) -> ControlReply:
        """The class names the output's columns stand for (in order; none in a regression), for the
        operator's predictions file.  Reveals the label column's distinct values, not a row's label."""
        return ControlReply(info={f"class_{k}": c for k, c in enumerate(self.classes)})

    def control_predict(self, args: dict[str, str]) -> ControlReply:
        """The forest's output on a batch; the CS, which learns it, also writes it to its own
        files (``out/cs.METHOD.proba.npy`` and the class names, or ``out/cs.METHOD.values.npy``; and
        ``out/cs.predictions.csv``, each row numbered by its place in the participants' agreed order,
        which each participant keeps beside its own ids in ``out/NAME.test_rows.csv``)."""
        method, batch, n = args.get("method", "vertical"), args["batch"], int(args["n"])
        if method == "vertical":
            out = self.predict_vertical(batch, n)
        elif method == "test":
            out = self.predict_test(batch, n)
        else:
            raise ParameterError("the CS predicts by method 'vertical' or 'test'")
        if self.task == "regression":
            save_output(self.run, self.name, f"{method}.values", out[:, 0])
            path = save_predictions(self.run, self.name, None, out[:, 0])
        else:
            save_output(self.run, self.name, f"{method}.proba", out)
            names = self.classes or tuple(str(k) for k in range(out.shape[1]))
            predicted = np.asarray(names)[np.argmax(out, axis=1)]
            if self.classes:
                save_output(self.run, self.name, f"{method}.predictions", predicted)
            path = save_predictions(self.run, self.name, None, predicted, out, names)
        self.logger.info("%s: its %s predictions of %d rows are in %s", self.name, method, out.shape[0], path)
        return ControlReply(arrays={"output": out})

    @handles(RevokeRequest)
    def on_revoke(self, sender: str, msg: RevokeRequest) -> RevokeReply | None:
        """FRF-Revoc, refused in a predict-only run (:data:`NO_REVOCATION`) before any check."""
        _predict_only(self.run)
        return super().on_revoke(sender, msg)

    def model_part(self) -> Message:
        return CSPart(forest_state(self.trees), self.epoch, tuple(sorted(self.revoked)), self.task, self.voting,
                      self.n_features, self.classes)

    def restore_model(self, part: ModelFile) -> None:
        """Adopt the forest, epoch and revoked set of a saved part (a predict-only run)."""
        body = part.body
        if not isinstance(body, CSPart):  # pragma: no cover - load_model checked the type
            raise ParameterError("not a CS part")
        if (body.task, body.voting, body.n_features) != (self.task, self.voting, self.n_features):
            raise ParameterError("the CS's model part is of a run with another task, voting or width")
        unknown = set(body.revoked) - set(self._keys)
        if unknown:
            raise ParameterError(f"the CS's model part revokes unknown participants {sorted(unknown)}")
        self.trees = restore_forest(body.trees, self._keys, self.n_features)
        self.epoch, self.revoked, self.classes = body.epoch, set(body.revoked), body.classes
        self.loaded(part)


class DeployedParticipant(SavesModel, Controllable, Participant):
    _X_test: FloatArray | None = None
    schema: SchemaState | None = None
    _layers = 0

    def on_expand(self, sender: str, msg: ExpandRequest) -> ExpandReply | None:
        """``Participant.on_expand``, with each FLE-Expan layer in this participant's log (its progress:
        the CS's status has the forest's)."""
        self._layers += 1
        self.logger.info("%s: FLE-Expan layer %d", self.name, self._layers)
        return super().on_expand(sender, msg)

    def control_load(self, args: dict[str, str]) -> ControlReply:
        if self._X_test is None:
            raise ParameterError(f"{self.name} has no test rows in its data file")
        check_test_rows(self._X_test.shape[0])
        if self.revoked:
            return ControlReply(info={"rows": "0", "revoked": "1"})
        self.load_rows(args["batch"], self._X_test)
        return ControlReply(info={"rows": str(self._X_test.shape[0])})

    def control_drop(self, args: dict[str, str]) -> ControlReply:
        if not self.revoked:
            self.drop_rows(args["batch"])
        return ControlReply()

    def control_revoke(self, args: dict[str, str]) -> ControlReply:
        _predict_only(self.run)
        self.request_revocation(level=int(args.get("level", "2")))
        return ControlReply(info={"revoked": self.name})

    def model_part(self) -> Message:
        if self.schema is None:  # pragma: no cover - set by make_role
            raise ParameterError(f"{self.name} has no table schema")
        return ParticipantPart(np.asarray(self.columns, dtype=np.int64), *node_state(self.own_nodes()), self.epoch,
                               self.revoked, tuple(sorted(self.refused_requesters)), self.schema)

    def restore_model(self, part: ModelFile) -> None:
        """Adopt the nodes, epoch and revoked flag of a saved part (a predict-only run)."""
        body = part.body
        if not isinstance(body, ParticipantPart):  # pragma: no cover - load_model checked the type
            raise ParameterError("not a participant's part")
        self._nodes = restore_nodes(body, self.columns)
        self.epoch, self.revoked, self.schema = body.epoch, body.revoked, body.schema
        self.refused_requesters = set(body.refused)
        self.loaded(part)


class DeployedRequester(Controllable, Requester):
    _X: FloatArray | None = None
    _ids: tuple[str, ...] = ()
    run: RunConfig

    def control_predict(self, args: dict[str, str]) -> ControlReply:
        """FRF-Predict on each of its own rows; the output is the requester's: it also writes it to
        its own file (``out/requester.encrypted.proba.npy``, in the order of its rows)."""
        if self._X is None:
            raise ParameterError(f"{self.name} has no rows in its data file")
        out = np.stack([self.request(row) for row in self._X])
        save_output(self.run, self.name, "encrypted.proba", out)
        names = tuple(str(k) for k in range(out.shape[1]))  # the requester holds no class names: their codes
        path = save_predictions(self.run, self.name, self._ids, np.argmax(out, axis=1), out, names)
        self.logger.info("%s: its predictions of its %d rows are in %s", self.name, out.shape[0], path)
        return ControlReply(arrays={"output": out})


class DeployedKGC(SavesModel, Controllable, KeyCentre):
    def model_part(self) -> Message:
        return RevokedPart(tuple(sorted(p for p in self._verify_keys if self.kgc.is_revoked(p))))


class DeployedCC(SavesModel, Controllable, ComputationServer):
    def model_part(self) -> Message:
        return RevokedPart(tuple(sorted(self.revoked)))

    def restore_model(self, part: ModelFile) -> None:
        """Adopt the revoked participants of a saved part: their keys leave the directory."""
        body = part.body
        if not isinstance(body, RevokedPart):  # pragma: no cover - load_model checked the type
            raise ParameterError("not a revocation list")
        for name in body.revoked:
            self.revoked.add(name)
            self.remove_key(name)
        self.loaded(part)


def _directory(config: RunConfig) -> dict[str, PublicKey]:
    insecure = bool(config.params.get("allow_insecure", False))
    keys: dict[str, PublicKey] = {}
    params = None
    for name, hexkey in dict(config.params["directory"]).items():
        pk = decode_public_key(bytes.fromhex(hexkey), params=params, allow_insecure=insecure)
        params = pk.params
        keys[name] = pk
    return keys


def _weak(secrets: dict[str, bytes], directory: dict[str, PublicKey], role: str) -> WeakSecretKey:
    key = secret_key_from_bytes(secrets["weak"], params=directory[role].params)
    if not isinstance(key, WeakSecretKey) or key.public != directory[role]:
        raise ParameterError(f"the weak key in {role}'s key file is not the directory's")
    return key


def _share(secrets: dict[str, bytes], directory: dict[str, PublicKey]) -> StrongKeyShare:
    key = secret_key_from_bytes(secrets["share"], params=directory["cs"].params)
    if not isinstance(key, StrongKeyShare):
        raise ParameterError("the key file holds no strong-key share")
    return key


def alignment_plan(config: RunConfig) -> AlignmentPlan:
    """The first participant leads the PSI of the training ids with the CS (the label holder)
    and every participant, and of the test ids with every participant (the CS holds no test
    rows); it learns each pairwise intersection (``specs/deployment.md``).  A predict-only run
    aligns the test ids only, of the participants that name ``test_data`` (a revoked one may
    name none), led by the first of them."""
    if alignment_mode(config) != "psi":
        raise ParameterError("RevFRF aligns its rows by private set intersection only (alignment = 'psi')")
    participants = tuple(str(u) for u in config.params["participants"])
    if config.job == "predict":
        holders = tuple(u for u in participants if config.party(u).test_data is not None)
        if not holders:
            raise ParameterError("a predict-only run needs the participants' test_data (the rows to predict)")
        return AlignmentPlan(holders[0], {"test": holders})
    sets = {"train": (*participants, "cs")}
    if all(config.party(u).test_data is not None for u in participants):
        sets["test"] = participants
    return AlignmentPlan(participants[0], sets)


def model_roles(config: RunConfig) -> list[str]:
    """The roles that keep a model part: the CS, the CC, the KGC and every participant."""
    return ["cs", "cc", "kgc", *[str(u) for u in config.params["participants"]]]


def check_parameters(params: Mapping[str, Any]) -> None:
    """The checks of ``[protocol]`` every role makes at start-up, before any alignment
    (``securetrees setup run`` makes them before writing ``run.toml``): known keys, the required
    ones (the KGC's public ``directory`` and ``verify_keys`` among them; ``n_classes`` for a
    classification) and ``n_jobs``."""
    required = [*_REQUIRED, *(["n_classes"] if params.get("task", "classification") == "classification" else [])]
    check_protocol_keys(params, PARAMETERS, "revfrf", required=required)
    check_n_jobs(params.get("n_jobs"))


def make_role(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
              data: dict[str, npt.NDArray[Any]], passphrase: bytes) -> Party:
    p = config.params
    check_parameters(p)
    participants = [str(u) for u in p["participants"]]
    columns = {u: tuple(int(c) for c in cols) for u, cols in zip(participants, p["columns"], strict=True)}
    d = int(p["n_features"])
    directory = _directory(config)
    verify_keys = {u: bytes.fromhex(h) for u, h in dict(p["verify_keys"]).items()}
    session = secrets.get("session", b"")
    predicting = config.job == "predict"
    if role == "kgc":
        revoked: tuple[str, ...] = ()
        if predicting:
            kgc_part = load_model(config, role, KeyCentre.role, passphrase, RevokedPart)
            revoked = kgc_part.body.revoked  # type: ignore[attr-defined]
        kgc = KGC.restore(directory["cs"].params, {k: v for k, v in directory.items() if k not in revoked},
                          revoked=revoked)
        centre = DeployedKGC(role, network, kgc=kgc, verify_keys=verify_keys, session=session)
        _keep(centre, config, passphrase)
        if predicting:
            centre.loaded(kgc_part)
        return centre
    if role == "cc":  # the run's sizes matter to the data holders' draws only
        shared = {k: v for k, v in directory.items() if k in ("cs", "cc", *participants)}
        cc = DeployedCC(role, network, share=_share(secrets, directory),
                        weak_key=_weak(secrets, directory, role), directory=shared,
                        verify_keys=verify_keys, session=session, holt_params=plan_run(p, 1, d).holt)
        _keep(cc, config, passphrase)
        if predicting:
            cc.restore_model(load_model(config, role, ComputationServer.role, passphrase, RevokedPart))
        return cc
    if role in p.get("requesters", []):
        req_party = config.party(role)
        if predicting and req_party.test_data is not None:  # its new requests; its data file is not training data
            req_party = replace(req_party, data=req_party.test_data, test_data=None)
        table, _ = party_tables(req_party)  # its own whole rows: nothing to align
        _check_request_table(role, table.schema, req_party.table, d)
        fixed = plan_run(p, 1, d)
        req = DeployedRequester(role, network, weak_key=_weak(secrets, directory, role),
                                codec=fixed.codec, holt_params=fixed.holt)
        req._X, req._ids = table.X, tuple(table.ids)
        req.run = config
        return req
    if role != "cs" and role not in participants:
        raise ParameterError(f"{role!r} is not a role of this RevFRF run")
    if role == "cs":
        return _cs(config, network, secrets, directory, participants, columns, verify_keys, passphrase)
    return _participant(role, config, network, secrets, directory, participants, columns, verify_keys, passphrase)


def _check_request_table(role: str, schema: TabularSchema, options: Mapping[str, Any], d: int) -> None:
    """A requester's rows are encrypted as codes the participants' splits compare against: every text
    column needs its declared category list (the code of a category is its position there, as at the
    participant holding the column), and there are ``n_features`` columns in the global order.  An
    inferred list (the sorted values of the requester's few rows) numbers them otherwise and FRF-Predict
    would score other rows without a word.  Local check; reveals nothing."""
    declared = options.get("categories") or {}
    text = [n for n, c in zip(schema.names, schema.categorical_mask(), strict=True) if c and n not in declared]
    if text:
        raise TableError(f"{role}'s rows: the text columns {text} have no declared categories; a requester's "
                         f"codes must be the participants' (a category's code is its position in the list): "
                         f"declare in [parties.{role}] categories = {{ column = [...] }} each column's list as "
                         "its participant reads it (its declared categories, else the sorted distinct values of "
                         "its training column)")
    if len(schema.names) != d:
        raise TableError(f"{role}'s rows have {len(schema.names)} feature columns, [protocol] n_features is {d}: "
                         "a requester holds every feature column, in the global order of [protocol] columns")


def _cs(config: RunConfig, network: Network, secrets: dict[str, bytes], directory: dict[str, PublicKey],
        participants: list[str], columns: dict[str, tuple[int, ...]], verify_keys: dict[str, bytes],
        passphrase: bytes) -> DeployedCS:
    """The CS: its labels (aligned by PSI) and the draws of a fit, or its saved part (predict-only:
    it reads no table)."""
    p = config.params
    d = int(p["n_features"])
    task = str(p.get("task", "classification"))
    k = int(p["n_classes"]) if task == "classification" else 1
    classes: tuple[str, ...] = ()
    if config.job == "predict":
        plan = plan_run(p, 1, d)
        stats = [np.zeros((0, k)) for _ in plan.draws]
    else:
        store = checkpoint_store(config, "cs", secrets, FORMAT)  # restarted with one: its recorded rows, no phase
        train, _ = align_party(config, "cs", network, alignment_plan(config), *party_tables(config.party("cs")), store)
        plan = plan_run(p, len(train), d)
        if task == "classification":
            y = encode_labels(train, k)
            stats = [class_stats(y, k, dr.sample_weight) for dr in plan.draws]
            classes = tuple(str(c) for c in np.unique(np.asarray(train.labels).astype(str)))
        else:
            y = encode_labels(train, 0)
            stats = [np.asarray(regression_stats(y, dr.sample_weight)) for dr in plan.draws]
    cs = DeployedCS(
        "cs", network, share=_share(secrets, directory),
        weak_key=_weak(secrets, directory, "cs"),
        stats=stats, criterion=make_criterion("gini" if task == "classification" else "squared_error"),
        task=task, grow=plan.grow, columns=columns, participant_keys={u: directory[u] for u in participants},
        verify_keys=verify_keys, session=secrets.get("session", b""), n_features=d, max_features=plan.max_features,
        voting=str(p.get("voting", "soft")), ml_seed=plan.ml_seed, holt_params=plan.holt)
    cs._draws, cs.classes = plan.draws, classes
    if config.job != "predict":
        cs._store = store
    _keep(cs, config, passphrase)
    if config.job == "predict":
        cs.restore_model(load_model(config, "cs", CentralServer.role, passphrase, CSPart))
    for name in p.get("requesters", []):
        cs.register_requester(str(name), directory[str(name)])
    return cs


class _NoGrowth:
    """A predict-only participant's proposer: it proposes no candidates (nothing is grown)."""

    def propose(self, column: int, x: FloatArray, rng: np.random.Generator) -> CandidateSet:
        raise UnsupportedActionError("a predict-only RevFRF participant grows no tree")


def _participant(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
                 directory: dict[str, PublicKey], participants: list[str], columns: dict[str, tuple[int, ...]],
                 verify_keys: dict[str, bytes], passphrase: bytes) -> DeployedParticipant:
    """A participant: its columns of the training and test rows (aligned by PSI), or in a
    predict-only run its saved part and its ``test_data`` alone, encoded with the saved schema.
    With ``n_jobs`` of 2 or more its HoEnc batches (FOS-Find's thresholds, FT-Test's values) run on
    a process pool of its own for the life of the process; a task carries public values and
    exponents only (``specs/batch_executors.md``)."""
    p = config.params
    part, store = None, None
    if config.job == "predict":
        part = load_model(config, role, Participant.role, passphrase, ParticipantPart)
        schema = part.body.schema.schema()  # type: ignore[attr-defined]
        plan = alignment_plan(config)
        test = None
        if role in plan.sets["test"]:
            test = align_test(config, role, network, plan, test_table(config.party(role), schema))
        X = np.empty((0, len(columns[role])))
        proposer: Proposer = _NoGrowth()
        run = plan_run(p, 1, int(p["n_features"]))
    else:
        store = checkpoint_store(config, role, secrets, FORMAT)  # restarted with one: its rows, no phase
        train, test = align_party(config, role, network, alignment_plan(config), *party_tables(config.party(role)),
                                  store)
        X, schema, proposer = train.X, train.schema, make_proposer(p, train.X, columns[role])
        run = plan_run(p, len(train), int(p["n_features"]))
    if X.shape[1] != len(columns[role]) or schema.n_columns != len(columns[role]):
        raise TableError(f"{role} has {schema.n_columns} feature columns but [protocol] columns lists "
                         f"{len(columns[role])} for it")
    i = participants.index(role)
    dp = DeployedParticipant(
        role, network, columns=columns[role], X_own=X, weak_key=_weak(secrets, directory, role),
        signing_key=SigningKey.from_seed(secrets["signing_seed"]), session=secrets.get("session", b""),
        verify_keys=verify_keys, cs_key=directory["cs"], proposer=proposer, ml_seed=run.ml_seed + 1 + i,
        codec=run.codec, holt_params=run.holt, executor=process_pool(p.get("n_jobs")), checkpoint=store)
    if dp.executor is not None:
        dp.logger.info("%s: HoEnc batches on a pool of %d worker processes (n_jobs)", role, p["n_jobs"])
    dp.schema = SchemaState.of(schema)
    _keep(dp, config, passphrase)
    if part is not None:
        dp.restore_model(part)
    if test is not None:
        dp._X_test = test.X
        save_test_rows(config, role, test.ids)  # its own ids beside the rows of the CS's predictions file
    return dp


def _predict_all(operator: Operator, participants: list[str], method: str, batch: str) -> FloatArray:
    loaded = operator.control_many(participants, "load", {u: {"batch": batch} for u in participants})
    try:
        counts = {u: int(r.info["rows"]) for u, r in loaded.items() if "revoked" not in r.info}
        if len(set(counts.values())) != 1:
            raise ParameterError(f"the participants hold different numbers of test rows: {counts}")
        n = next(iter(counts.values()))
        out: FloatArray = operator.control("cs", "predict", method=method, batch=batch, n=n).arrays["output"]
    finally:
        operator.control_many(participants, "drop", {u: {"batch": batch} for u in participants})
    return out


def fit(operator: Operator, config: RunConfig) -> dict[str, str]:
    """The alignment phase (the CS and the participants wait in it since they started), then
    planting and growing the forest (the CS drives FLE-Expan / FOS-Find with every participant),
    then every party saves its model part (the reply's ``model_id`` names the fit)."""
    refuse_training(config)
    plan = alignment_plan(config)
    sizes = align(operator, plan)
    with operator.step("fit"):
        info = dict(operator.control("cs", "fit").info)
    model_id = save_models(operator, model_roles(config))
    return {**info, **{f"{name}_rows": str(n) for name, n in sizes.items()}, "model_id": model_id}


def resume(operator: Operator, config: RunConfig) -> dict[str, str]:
    """Finish an interrupted fit (``securetrees operator resume``): the CS resumes from its latest
    checkpoint (a restarted party took its aligned rows from its own), then every party saves its
    model part as after :func:`fit`."""
    refuse_training(config)
    with operator.step("resume"):
        info = dict(operator.control("cs", "resume").info)
    model_id = save_models(operator, model_roles(config))
    return {**info, "model_id": model_id}


def _align_new_rows(operator: Operator, config: RunConfig) -> None:
    """A predict-only run: the PSI of the participants' new ids, unless done already (the leader
    then serves its protocol role), then the check that every part comes from the same fit."""
    align_pending(operator, alignment_plan(config))
    check_models(operator, model_roles(config))


def predict(operator: Operator, config: RunConfig, method: str | None = None) -> dict[str, npt.NDArray[Any]]:
    """Class probabilities: ``vertical`` (default) or ``test`` (FRF-Test) on the participants'
    aligned test rows (a fresh batch, dropped afterwards), or ``encrypted`` (FRF-Predict) on the
    first requester's own rows; the result is named after the method.  In a predict-only run the
    new rows are aligned first and every role's model part must come from the same fit."""
    p = config.params
    how = method or "vertical"
    if config.job == "predict":
        _align_new_rows(operator, config)
    with operator.step(f"predict {how}"):
        if how == "encrypted":
            requesters = [str(r) for r in p.get("requesters", [])]
            if not requesters:
                raise UnsupportedActionError("this RevFRF run has no requester for encrypted prediction")
            return {"encrypted": operator.control(requesters[0], "predict").arrays["output"]}
        if how not in ("vertical", "test"):
            raise ParameterError(f"RevFRF predicts by 'vertical', 'test' or 'encrypted', not {how!r}")
        participants = [str(u) for u in p["participants"]]
        batch = f"op-{SYSTEM_RANDOM.token_bytes(4).hex()}"  # a label, unique per request
        return {how: _predict_all(operator, participants, how, batch)}


def classes(operator: Operator, config: RunConfig) -> tuple[str, ...]:
    """The class names of the output's columns (the CS's ``classes``), for the operator's predictions
    file; none in a regression."""
    info = operator.control("cs", "classes").info
    return tuple(info[f"class_{k}"] for k in range(len(info)))


def revoke(operator: Operator, config: RunConfig, party: str, level: int = 2) -> dict[str, str]:
    """FRF-Revoc: participant ``party`` asks to leave at ``level`` 1 (its data out of future
    trees) or 2 (a new forest epoch without it); every party then saves its part again (the
    reply's ``model_id``: the forest of the new epoch).  Refused in a predict-only run."""
    _predict_only(config)
    participants = [str(u) for u in config.params["participants"]]
    if party not in participants:
        raise ParameterError(f"{party!r} is not a participant of this run ({participants})")
    if level not in (1, 2):
        raise ParameterError("the revocation level is 1 or 2")
    with operator.step(f"revoke {party}"):
        info = dict(operator.control(party, "revoke", level=level).info)
    return {**info, "model_id": save_models(operator, model_roles(config))}


def run_job(operator: Operator, config: RunConfig) -> dict[str, npt.NDArray[Any]]:
    """Align and train; predict by ``vertical``, ``test`` and (the requester) ``encrypted``; revoke
    the last participant at level 2 (a new forest epoch); predict ``vertical`` again.  A
    predict-only run predicts the three ways only."""
    participants = [str(u) for u in config.params["participants"]]
    if config.job != "predict":
        fit(operator, config)
    results = {**predict(operator, config, "vertical"), **predict(operator, config, "test")}
    if config.params.get("requesters"):
        results.update(predict(operator, config, "encrypted"))
    if config.job != "predict":
        revoke(operator, config, participants[-1], 2)
        results["after_revocation"] = predict(operator, config, "vertical")["vertical"]
    return results


def issue_keys(kgc: KGC, participants: Sequence[str], requesters: Sequence[str]
               ) -> tuple[dict[str, Any], dict[str, dict[str, bytes]]]:
    """The KGC's offline key set-up (paper §5.2): each party's key-file items and the public
    ``[protocol]`` parameters.

    Every party (CS, CC, participants, requesters) gets a DT-PKC weak key; the CS and the CC each one
    strong-key share (the KGC then forgets the strong key); each participant an Ed25519 signing seed;
    the CS, CC, KGC and participants the run's session id.  Public: ``directory`` (every weak public
    key) and ``verify_keys`` (the participants' Ed25519 verification keys).  Reveals nothing secret:
    each party's items go only into its own key file."""
    verify_keys, signing = make_roster(list(participants))
    weak = {name: kgc.issue_weak_key(name) for name in ["cs", "cc", *participants, *requesters]}
    s1, s2 = kgc.strong_shares()
    kgc.forget_strong_key()
    session = SYSTEM_RANDOM.token_bytes(16)
    secrets: dict[str, dict[str, bytes]] = {
        "cs": {"share": secret_key_bytes(s1), "weak": secret_key_bytes(weak["cs"]), "session": session},
        "cc": {"share": secret_key_bytes(s2), "weak": secret_key_bytes(weak["cc"]), "session": session},
        "kgc": {"session": session},
        **{u: {"weak": secret_key_bytes(weak[u]), "signing_seed": signing[u].seed(), "session": session}
           for u in participants},
        **{r: {"weak": secret_key_bytes(weak[r])} for r in requesters}}
    public = {"directory": {k: encode_public_key(sk.public).hex() for k, sk in weak.items()},
              "verify_keys": {u: v.hex() for u, v in verify_keys.items()}}
    return public, secrets


def _add_checkpoint_keys(secrets: dict[str, dict[str, bytes]], participants: Sequence[str]) -> None:
    """A fresh 32-byte ``checkpoint_key`` for the CS and each participant (the roles that checkpoint)."""
    for name in ["cs", *participants]:
        secrets[name]["checkpoint_key"] = SYSTEM_RANDOM.token_bytes(KEY_BYTES)


def write_key_files(out_dir: str | Path, participants: Sequence[str], requesters: Sequence[str],
                    passphrases: Mapping[str, bytes], *, key_bits: int = 2048, allow_insecure: bool = False,
                    checkpoint_key: bool = False) -> dict[str, Any]:
    """``securetrees setup kgc``: a fresh KGC's set-up (:func:`issue_keys`), each party's items sealed
    under its own passphrase into ``out_dir/NAME.keys`` (with ``checkpoint_key``, the CS's and each
    participant's a ``checkpoint_key`` too: ``--checkpoint-key``); returns the public ``[protocol]`` parameters
    (with ``participants``, ``requesters`` and, for keys under 2048 bits, ``allow_insecure``)."""
    names = [*participants, *requesters]
    for name in names:
        check_name(name)
    if len(set(names)) != len(names) or {"cs", "cc", "kgc"} & set(names):
        raise ParameterError("participants and requesters need distinct names other than cs, cc and kgc")
    if not participants:
        raise ParameterError("RevFRF needs at least one participant")
    kgc = KGC.setup(key_bits, allow_insecure=allow_insecure)
    public, secrets = issue_keys(kgc, participants, requesters)
    if checkpoint_key:
        _add_checkpoint_keys(secrets, participants)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, items in secrets.items():
        write_key_file(out / f"{name}.keys", name, items, passphrases[name])
    params = {"participants": list(participants), "requesters": list(requesters), **public}
    if key_bits < 2048:
        params["allow_insecure"] = True
    return params


def prepare(out_dir: str | Path, X: npt.ArrayLike, y: npt.ArrayLike, partition: Sequence[Sequence[int]], *,
            X_test: npt.ArrayLike, settings: dict[str, Any], kgc: KGC | None = None, key_bits: int = 2048,
            allow_insecure: bool = False, base_port: int = 0, names: Sequence[str] | None = None,
            categories: Mapping[str, Sequence[str]] | None = None, lacking: int = 0,
            test_lacking: int | None = None,
            rng: RandomSource = SYSTEM_RANDOM) -> Path:
    """A local trial: the KGC's offline key set-up, every party's key file and table, ``run.toml``.

    ``settings`` are the facade's public settings (``n_estimators``, ``max_depth``, ``random_state``, ...);
    ``y`` holds the classes, codes or names (``settings["n_classes"] = k``) or, with ``task =
    "regression"``, targets: the CS's table holds the ids and the column ``label``.  Each
    participant's table holds the ids and its columns of ``X`` (``X_test`` in its test table),
    its rows shuffled and ``lacking`` of them left out (:func:`securetrees.net.trial.deal_rows`;
    of its test rows ``test_lacking``, default ``lacking``, at most what leaves rows all share);
    the requester's table holds every column of ``X_test``.  Columns are named ``names`` (else
    ``x0, x1 ...``); those in ``categories`` hold codes, written as category names and declared
    in each party's section (so every party codes them alike).  Pass ``kgc`` to reuse a key
    centre (tests); else a fresh one is made.
    """
    Xa, Xt, ya = np.asarray(X, dtype=np.float64), np.asarray(X_test, dtype=np.float64), np.asarray(y)
    parts = [tuple(sorted(int(c) for c in cols)) for cols in partition]
    names_ = [f"u{i + 1}" for i in range(len(parts))]
    cols = list(names) if names is not None else [f"x{j}" for j in range(Xa.shape[1])]
    cats = {k: [str(v) for v in vs] for k, vs in (categories or {}).items()}
    kgc = kgc if kgc is not None else KGC.setup(key_bits, allow_insecure=allow_insecure)
    public, secrets = issue_keys(kgc, names_, ["requester"])
    if "checkpoint_dir" in settings:
        _add_checkpoint_keys(secrets, names_)
    ids, test_ids = [f"row-{i}" for i in range(Xa.shape[0])], [f"test-{i}" for i in range(Xt.shape[0])]
    rows = deal_rows(Xa.shape[0], [*names_, "cs"], lacking=lacking, rng=rng)
    spare = (Xt.shape[0] - 1) // len(names_)
    test_rows = deal_rows(Xt.shape[0], names_, lacking=min(lacking if test_lacking is None else test_lacking, spare),
                          rng=rng)

    params = {**settings, "participants": names_, "columns": [list(c) for c in parts], "requesters": ["requester"],
              "n_features": Xa.shape[1], **public, "allow_insecure": allow_insecure or kgc.params.bits < 2048}
    plan = TrialPlan(protocol="revfrf", params=params)
    r = rows["cs"]
    plan.add("cs", role=CentralServer.role,
             tables={"data": table_frame([ids[k] for k in r], Xa[r][:, :0], [], label=("label", ya[r].tolist()))},
             options={"label": "label"},
             secrets=secrets["cs"])
    plan.add("cc", role=ComputationServer.role, secrets=secrets["cc"])
    plan.add("kgc", role=KeyCentre.role, secrets=secrets["kgc"])
    for u, part in zip(names_, parts, strict=True):
        tables, own = vertical_tables(ids, test_ids, Xa, Xt, rows[u], test_rows[u], part, cols, categories=cats)
        plan.add(u, role=Participant.role, options={"categories": own} if own else None, tables=tables,
                 secrets=secrets[u])
    plan.add("requester", role=Requester.role, options={"categories": cats} if cats else None,
             tables={"data": table_frame(test_ids, Xt, cols, categories=cats)},
             secrets=secrets["requester"])
    return write_trial(out_dir, plan, base_port=base_port)


def trial(out_dir: str | Path, *, rows: int, trees: int, insecure: bool) -> Path:
    """``securetrees federation init revfrf``: Adult's first ``rows`` training rows, three
    participants (columns dealt in turn) and the CS with the labels, each lacking a few of the
    others' ids (CSV files, string categories, empty cells for missing values), 20 test rows of
    which each participant lacks one (17 are predicted by all three)."""
    from securetrees.datasets import load_adult

    data = load_adult()
    d = data.X_train.shape[1]
    settings: dict[str, Any] = {"n_estimators": trees, "max_depth": 4, "random_state": 0, "n_classes": 2}
    labels = np.where(data.y_train[:rows] == 1, ">50K", "<=50K")  # the label column holds text
    return prepare(out_dir, data.X_train[:rows], labels, [list(range(i, d, 3)) for i in range(3)],
                   X_test=data.X_test[:20], settings=settings, key_bits=1024 if insecure else 2048,
                   allow_insecure=insecure, names=data.feature_names, categories=data.categories,
                   lacking=max(1, rows // 50), test_lacking=1)
