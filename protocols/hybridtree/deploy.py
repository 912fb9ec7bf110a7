"""HybridTree as networked services: the host and each guest in its own process.

Roles: ``host`` (the label holder: its columns of every row, the labels and the Paillier key pair) and
``guest0 … guest{k-1}`` (each its own rows of the guest columns; ``k >= min_guests``, 3 at least, or
the masked sums would expose a guest).  The operator drives them with control requests
(``securetrees.net.control``):

* ``fit`` (host): set up the guests and run every boosting round (``specs/hybridtree.md``);
* ``load_test`` (each guest): load its rows of the test set from its own data file;
* ``predict`` (host): the inference protocol on the test rows; the host writes
  ``out/host.predictions.npy`` (labels, or values for regression) and, for classification,
  ``out/host.proba.npy``; the reply carries the row count and, as the host holds the test labels,
  the score (accuracy, or R² for regression).  The operator gets the score, never a prediction;
* ``save_model`` / ``model_id`` (every role, ``securetrees.net.models``): after ``fit`` the host
  seals its trees (guest splits withheld), leaf values, base score and classes into
  ``models/host.model``, each guest the guest splits and the agreed bins.  A run with
  ``[run] job = "predict"`` loads them instead of training; each party reads its rows to predict
  from its ``test_data`` (``.npz``: the host's ``X_test``, ``owner_test``, optionally ``y_test``; a
  guest's ``test_ids``, ``X_test``) and never opens its ``data``.

Parameters come from ``[protocol]``: the facade's settings (:class:`HybridTreeClassifier`, or with
``task = "regression"`` :class:`HybridTreeRegressor`) plus ``task``, ``guests``, ``host_features``,
``guest_features`` (the guest feature space, original column numbers) and, in secure mode,
``host_public_key`` (hex; every guest pins it).  Unknown keys are refused.  The host's private key is
in its key file; each guest's data file holds its instance IDs, its rows of the guest space (NaN for a
column it lacks) and the guests' agreed bins.  :func:`prepare` plays the dealer of a local trial: it
agrees the bins on the pooled guest columns exactly as the one-process facade does (so each guest
sees the pooled quantile edges, never the host); across organisations the guests agree on edges
themselves (e.g. uniform over declared ranges) and place them in their data files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.executors import check_trusted, process_pool
from securetrees.net.config import RunConfig
from securetrees.net.control import Controllable, ControlReply, Operator
from securetrees.net.deployment import (
    check_protocol_keys,
    open_paillier,
    prediction_score,
    save_output,
    seal_paillier,
)
from securetrees.net.models import SavesModel, check_models, load_model, refuse_training, save_models
from securetrees.net.trial import TrialPlan, write_trial
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.hybridtree.boosting import Loss, probabilities
from securetrees.protocols.hybridtree.estimators import (
    HybridTreeClassifier,
    HybridTreeRegressor,
    _columns,
    _HybridTree,
    check_layout,
)
from securetrees.protocols.hybridtree.guest import Guest, agree_bins, guest_matrix
from securetrees.protocols.hybridtree.host import Host, check_matrix, owners
from securetrees.protocols.hybridtree.model import GuestModel, HostModel
from securetrees.protocols.hybridtree.params import HybridTreeParams
from securetrees.runtime import Message, Party
from securetrees.runtime.network import Network
from securetrees.trees import BinMapper

__all__ = ["PARAMETERS", "PREDICT_ONLY", "DeployedGuest", "DeployedHost", "estimator_from", "fit", "make_role",
           "predict", "prepare", "run_job", "trial"]

FloatArray = npt.NDArray[np.float64]
_ESTIMATORS: dict[str, type[_HybridTree]] = {"classification": HybridTreeClassifier, "regression": HybridTreeRegressor}
_RUN_KEYS = ("task", "guests", "host_features", "guest_features", "host_public_key")
_NOT_SETTINGS = ("keypair", "record_payloads", "progress", "rng", "random_state", "guest_column", "n_guests",
                 "executor")
"""Facade parameters that are no run parameter (objects, in-process bookkeeping, or the one-process
table's guest column: each deployed guest holds its own rows)."""

PREDICT_ONLY = True
"""A ``[run] job = "predict"`` run loads each party's model part (``securetrees.net.models``)."""

PARAMETERS = frozenset({*_RUN_KEYS, *(n for cls in _ESTIMATORS.values() for n in cls._get_param_names()
                                     if n not in _NOT_SETTINGS)})
"""The ``[protocol]`` keys a HybridTree run may hold (either task's settings; :func:`estimator_from`
checks those of the run's task and the required ones)."""


def estimator_from(params: dict[str, Any], protocol: str = "hybridtree") -> _HybridTree:
    """The facade whose settings ``params`` (a ``[protocol]`` table) gives, its keys checked."""
    task = params.get("task", "classification")
    if task not in _ESTIMATORS:
        raise ParameterError(f"task must be one of {sorted(_ESTIMATORS)}, got {task!r}")
    cls = _ESTIMATORS[str(task)]
    names = [n for n in cls._get_param_names() if n not in _NOT_SETTINGS]
    check_protocol_keys(params, (*names, *_RUN_KEYS), protocol,
                        required=("guests", "host_features", "guest_features"))
    est = cls(**{k: params[k] for k in names if k in params})
    if isinstance(est.n_estimators, bool) or not isinstance(est.n_estimators, int) or est.n_estimators < 1:
        raise ParameterError("n_estimators must be a positive integer")
    if est.base_score not in ("prior", "zero"):
        raise ParameterError("base_score must be 'prior' or 'zero'")
    return est


def _guests(params: dict[str, Any], hp: HybridTreeParams) -> list[str]:
    guests = params["guests"]
    if not isinstance(guests, list) or not all(isinstance(g, str) for g in guests):
        raise ParameterError("guests must be a list of party names")
    if hp.mode != "paper" and len(guests) < hp.min_guests:
        raise ParameterError(f"HybridTree needs at least {hp.min_guests} guests (got {len(guests)}): "
                             "the masked sums would expose a guest")
    return list(guests)


def _mapper_arrays(mapper: BinMapper) -> dict[str, npt.NDArray[Any]]:
    return {"bins_categorical": np.asarray(mapper.categorical, dtype=bool),
            "bins_n": np.asarray(mapper.n_bins, dtype=np.int64),
            "bins_sizes": np.asarray([e.size for e in mapper.edges], dtype=np.int64),
            "bins_edges": np.concatenate([np.asarray(e, dtype=np.float64) for e in mapper.edges])}


def _mapper_from(data: dict[str, npt.NDArray[Any]], max_bins: int) -> BinMapper:
    """The agreed bins from a guest's data file, checked (sorted finite edges, bin counts that fit)."""
    cat, n_bins = np.asarray(data["bins_categorical"], dtype=bool), np.asarray(data["bins_n"], dtype=np.int64)
    sizes, flat = np.asarray(data["bins_sizes"], dtype=np.int64), np.asarray(data["bins_edges"], dtype=np.float64)
    if not (cat.ndim == n_bins.ndim == sizes.ndim == 1 and cat.size == n_bins.size == sizes.size) or (
            sizes.min(initial=0) < 0 or int(sizes.sum()) != flat.size):
        raise ParameterError("the agreed bins in the data file are malformed")
    edges = tuple(np.split(flat, np.cumsum(sizes)[:-1])) if sizes.size else ()
    for e, c, k in zip(edges, cat.tolist(), n_bins.tolist(), strict=True):
        if not (1 <= k <= max_bins) or (not c and (e.size + 1 != k or not np.all(np.isfinite(e))
                                                    or np.any(np.diff(e) <= 0))):
            raise ParameterError("the agreed bins in the data file do not fit max_bins or are not sorted")
    return BinMapper(max_bins, tuple(bool(c) for c in cat), edges, tuple(int(k) for k in n_bins))


class DeployedHost(SavesModel, Controllable, Host):
    task: str = "classification"
    y: npt.NDArray[Any]
    test: tuple[FloatArray, npt.NDArray[np.int64], npt.NDArray[Any] | None] | None = None
    n_estimators: int = 1
    base_score: str = "prior"

    def control_fit(self, args: dict[str, str]) -> ControlReply:
        refuse_training(self.run)
        loss: Loss = "logistic" if self.task == "classification" else "squared"
        self.fit(self.y, n_estimators=self.n_estimators, loss=loss, base_score=self.base_score)
        splits = sum(r.n_guest_splits for r in self.records)
        self.logger.info("%s trained %d trees (%d guest splits)", self.name, len(self.records), splits)
        return ControlReply(info={"trees": str(len(self.records)), "guest_splits": str(splits),
                                  "dropped": ",".join(self.dropped)})

    def control_predict(self, args: dict[str, str]) -> ControlReply:
        if self.test is None:
            raise ParameterError(f"{self.name} has no test rows in its data file")
        X, owner, y = self.test
        raw = self.decision_function(X, owner)
        if self.task == "classification":
            proba = probabilities(raw)
            save_output(self.run, self.name, "proba", proba)
            pred = np.asarray(self.classes_[np.argmax(proba, axis=1)])
        else:
            pred = np.asarray(raw, dtype=np.float64)
        path = save_output(self.run, self.name, "predictions", pred)
        self.logger.info("%s predicted %d test rows into %s", self.name, X.shape[0], path)
        info = {"rows": str(X.shape[0])}
        if y is not None:
            info["score"] = repr(prediction_score(self.task, y, pred))
        return ControlReply(info=info)

    def model_part(self) -> Message:
        return self.model_state()


class DeployedGuest(SavesModel, Controllable, Guest):
    test: tuple[npt.NDArray[np.int64], FloatArray] | None = None
    bins: dict[str, npt.NDArray[Any]]

    def model_part(self) -> Message:
        return self.model_state(self.bins)

    def control_load_test(self, args: dict[str, str]) -> ControlReply:
        if self.test is None:
            raise ParameterError(f"{self.name} has no test rows in its data file")
        self.load_test(*self.test)
        self.logger.info("%s loaded %d test rows", self.name, self.test[0].size)
        return ControlReply(info={"rows": str(self.test[0].size)})


def make_role(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
              data: dict[str, npt.NDArray[Any]], passphrase: bytes) -> Party:
    """Build ``role``; in a predict-only run from its model part (``data`` is then its
    ``test_data``'s arrays, its only rows: they stand in for the training rows, which are never read)."""
    p = config.params
    est = estimator_from(dict(p), f"{config.protocol} ({config.path})")
    hp = est._params()
    guests = _guests(p, hp)
    insecure = bool(est.allow_insecure)
    predicting = config.job == "predict"
    party: DeployedHost | DeployedGuest
    if role == "host":
        keypair = None
        if hp.mode == "secure":
            keypair = open_paillier(secrets, "paillier_key", passphrase, role=role, allow_insecure=insecure)
        X = check_matrix(data["X_test" if predicting else "X"])
        host_cols = _columns("host_features", p["host_features"], 1 << 30)
        cat = set(_columns("categorical_features", est.categorical_features or [], 1 << 30))
        if X.shape[1] != len(host_cols):
            raise ParameterError(f"the host's data has {X.shape[1]} columns, host_features {len(host_cols)}")
        party = DeployedHost(role, network, params=hp, guests=guests, X=X,
                             owner=data["owner_test" if predicting else "owner"],
                             categorical=[c in cat for c in host_cols], keypair=keypair,
                             executor=process_pool(est.n_jobs), trusted_workers=check_trusted(est.trusted_workers))
        party.task = "classification" if isinstance(est, HybridTreeClassifier) else "regression"
        party.n_estimators, party.base_score = int(est.n_estimators), str(est.base_score)
        if predicting:
            part = load_model(config, role, Host.role, passphrase, HostModel)
            party.restore_model(part.body)  # type: ignore[arg-type]
            party.loaded(part)
        else:
            party.y = np.asarray(data["y"])
        if "X_test" in data:
            party.test = (check_matrix(data["X_test"]), np.asarray(data["owner_test"], dtype=np.int64),
                          np.asarray(data["y_test"]) if "y_test" in data else None)
    elif role in guests:
        pinned = None
        if hp.mode == "secure":
            if "host_public_key" not in p:
                raise ParameterError("secure mode: [protocol] must give host_public_key (hex) for the guests to pin")
            pinned = PublicKey.from_bytes(bytes.fromhex(str(p["host_public_key"])), allow_insecure=insecure)
        model = load_model(config, role, Guest.role, passphrase, GuestModel) if predicting else None
        bins = dict(model.body.bins) if model is not None else data  # type: ignore[attr-defined]
        ids, X = (data["test_ids"], data["X_test"]) if predicting else (data["ids"], data["X"])
        party = DeployedGuest(role, network, params=hp, ids=ids, X=X, mapper=_mapper_from(bins, hp.max_bins),
                              host_key=pinned, allow_insecure=insecure, executor=process_pool(est.n_jobs))
        party.bins = {k: np.asarray(v) for k, v in bins.items() if k.startswith("bins_")}
        if model is not None:
            party.restore_model(model.body)  # type: ignore[arg-type]
            party.loaded(model)
        if "X_test" in data:
            party.test = (np.asarray(data["test_ids"], dtype=np.int64), np.asarray(data["X_test"], dtype=np.float64))
    else:
        raise ParameterError(f"{role!r} is not a role of this HybridTree run")
    party.run, party.passphrase = config, passphrase
    return party


def fit(operator: Operator, config: RunConfig) -> dict[str, str]:
    """Train (the host drives every guest); reports the number of guest splits.  Then every role
    saves its model part (``models/NAME.model``)."""
    refuse_training(config)
    with operator.step("fit"):
        info = dict(operator.control("host", "fit").info)
    return {**info, "model_id": save_models(operator, config.roles)}


def predict(operator: Operator, config: RunConfig, method: str | None = None) -> dict[str, npt.NDArray[Any]]:
    """Each guest loads its test rows, the host predicts and keeps the predictions (``out/``); the
    operator receives the host's score on the test rows when the host holds their labels.  In a
    predict-only run every role's model part must come from the same fit."""
    if method is not None:
        raise ParameterError("HybridTree has one prediction method")
    guests = [str(g) for g in config.params["guests"]]
    if config.job == "predict":
        check_models(operator, config.roles)
    with operator.step("predict"):
        operator.control_many(guests, "load_test")
        reply = operator.control("host", "predict").info
    return {"score": np.asarray([float(reply["score"])])} if "score" in reply else {}


def run_job(operator: Operator, config: RunConfig) -> dict[str, npt.NDArray[Any]]:
    """Train, let each guest load its test rows, predict at the host (who keeps the predictions);
    returns the number of guest splits and the host's score on the test rows.  A predict-only run
    predicts only."""
    if config.job == "predict":
        return predict(operator, config)
    fitted = fit(operator, config)
    return {"guest_splits": np.asarray([int(fitted["guest_splits"])]), **predict(operator, config)}


def prepare(out_dir: str | Path, X: npt.ArrayLike, y: npt.ArrayLike, host_features: Sequence[int],
            guest_features: Sequence[int] | Sequence[Sequence[int]], guest_rows: Sequence[npt.ArrayLike], *,
            X_test: npt.ArrayLike, test_rows: Sequence[npt.ArrayLike], y_test: npt.ArrayLike | None = None,
            params: dict[str, Any], keypair: tuple[PublicKey, PrivateKey] | None = None, base_port: int = 0) -> Path:
    """A local trial from a row layout (as ``testing.fit_layout``: each guest's row indexes of ``X``):
    the host's columns, labels and sealed key pair (``keypair``, else a fresh ``key_bits`` key), each
    guest's rows of the guest columns and the agreed bins, ``run.toml``.  ``X_test`` and ``test_rows``
    give the test rows the same way; ``y_test`` (optional) goes to the host."""
    est = estimator_from({**params, "guests": [], "host_features": [], "guest_features": []})
    hp = est._params()
    Xa, Xt = check_matrix(X), check_matrix(X_test)
    host_cols, space, per_guest, rows = check_layout(Xa.shape[0], Xa.shape[1], host_features, guest_features,
                                                     guest_rows)
    _, _, _, trows = check_layout(Xt.shape[0], Xt.shape[1], host_cols, per_guest, test_rows)
    guests = [f"guest{u}" for u in range(len(rows))]
    cat = set(_columns("categorical_features", est.categorical_features or [], Xa.shape[1]))
    guest_X = [guest_matrix(Xa[r], space, cols) for r, cols in zip(rows, per_guest, strict=True)]
    bins = _mapper_arrays(agree_bins(guest_X, max_bins=hp.max_bins, categorical=[c in cat for c in space]))
    settings = {**params, "guests": guests, "host_features": host_cols, "guest_features": space}
    host_secrets = None
    if hp.mode == "secure":
        keys = keypair if keypair is not None else est._keys(hp)
        if keys is None:  # pragma: no cover - secure mode always has keys
            raise ParameterError("secure mode needs the host's key pair")
        settings["host_public_key"] = keys[0].to_bytes().hex()
        host_secrets = {"paillier_key": seal_paillier(keys[1])}
    _guests(settings, hp)
    plan = TrialPlan(protocol="hybridtree", params=settings)
    host_data: dict[str, npt.NDArray[Any]] = {
        "X": Xa[:, host_cols], "y": np.asarray(y), "owner": owners(Xa.shape[0], rows),
        "X_test": Xt[:, host_cols], "owner_test": owners(Xt.shape[0], trows)}
    if y_test is not None:
        host_data["y_test"] = np.asarray(y_test)
    plan.add("host", role=Host.role, data=host_data, secrets=host_secrets)
    for name, r, gx, tr, cols in zip(guests, rows, guest_X, trows, per_guest, strict=True):
        plan.add(name, role=Guest.role, data={"ids": r, "X": gx, "test_ids": tr,
                                              "X_test": guest_matrix(Xt[tr], space, cols), **bins})
    return write_trial(out_dir, plan, base_port=base_port)


def trial(out_dir: str | Path, *, rows: int, trees: int, insecure: bool) -> Path:
    """``securetrees federation init hybridtree``: the demo's hybrid split of Adult's first ``rows``
    training rows (``rows // 2`` test rows) over 5 guests, secure mode at the demo's learning rate."""
    from securetrees.protocols.hybridtree.demo import MAX_BINS, adult_hybrid

    data = adult_hybrid(n_guests=5, rows=rows)
    params: dict[str, Any] = {"n_estimators": trees, "learning_rate": 0.5, "max_bins": MAX_BINS,
                              "categorical_features": data.categorical, "key_bits": 1024 if insecure else 2048,
                              "allow_insecure": insecure}
    return prepare(out_dir, data.X_train, data.y_train, data.split.host_features, data.split.guest_features,
                   data.split.train_rows, X_test=data.X_test, test_rows=data.split.test_rows, y_test=data.y_test,
                   params=params)
