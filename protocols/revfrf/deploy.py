"""RevFRF as networked services: CS, CC, KGC, each participant and a requester, one process each.

Key set-up is offline (paper §5.2): :func:`prepare` plays the KGC once, seals each
party's keys into its own key file (DT-PKC weak key, the CS's or CC's strong-key
share, a participant's Ed25519 seed, the session id) and writes the public
directory and the Ed25519 verification keys into ``run.toml``.  The KGC service
then holds only the directory and the revocation list (:meth:`KGC.restore`).

Control actions (``securetrees.net.control``), sent by the operator:

* ``fit`` (cs): plant and grow the forest (FLE-Expan / FOS-Find layer by layer);
* ``load`` / ``drop`` (each participant): its columns of the test rows as batch ``batch``;
* ``predict`` (cs): ``method`` = ``vertical`` or ``test`` (FRF-Test) on batch ``batch``;
* ``predict`` (requester): FRF-Predict on each of its own rows;
* ``revoke`` (participant): FRF-Revoc at ``level`` 1 or 2.

The operator's steps (``securetrees operator``): :func:`fit`, :func:`predict`, :func:`revoke`.
The job a launcher runs (:func:`run_job`) is made of them: it trains, predicts the three
ways, revokes the last participant at level 2 and predicts again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.dtpkc import KGC
from securetrees.dtpkc.keys import PublicKey, StrongKeyShare, WeakSecretKey
from securetrees.dtpkc.wire import decode_public_key, encode_public_key, secret_key_bytes, secret_key_from_bytes
from securetrees.errors import ParameterError, UnsupportedActionError
from securetrees.net.config import RunConfig
from securetrees.net.control import Controllable, ControlReply, Operator
from securetrees.net.service import load_data
from securetrees.net.trial import TrialPlan, write_trial
from securetrees.protocols.revfrf.cc import ComputationServer
from securetrees.protocols.revfrf.cs import CentralServer
from securetrees.protocols.revfrf.facade import _SETTINGS, make_proposer, plan_run
from securetrees.protocols.revfrf.kgc import KeyCentre
from securetrees.protocols.revfrf.participant import Participant
from securetrees.protocols.revfrf.requester import Requester
from securetrees.rand import SYSTEM_RANDOM
from securetrees.runtime import Party
from securetrees.runtime.network import Network
from securetrees.signing import SigningKey, make_roster
from securetrees.trees import class_stats, make_criterion
from securetrees.trees.train import regression_stats

__all__ = ["PARAMETERS", "fit", "make_role", "predict", "prepare", "revoke", "run_job", "trial"]

FloatArray = npt.NDArray[np.float64]

PARAMETERS = frozenset({*_SETTINGS, "task", "n_classes", "participants", "columns", "requesters", "n_rows",
                        "n_features", "n_test", "allow_insecure", "directory", "verify_keys"})
"""The ``[protocol]`` keys of a RevFRF run: the facade's public settings and the run's layout."""


class DeployedCS(Controllable, CentralServer):
    _draws: list[Any]

    def control_state(self) -> dict[str, str]:
        return {"trees": str(len(self.trees))}

    def control_fit(self, args: dict[str, str]) -> ControlReply:
        frontier = self.plant([dr.sample_weight for dr in self._draws])
        self.grow_forest(frontier, lambda tree: self._draws[tree.index].node_features())
        return ControlReply(info={"trees": str(len(self.trees))})

    def control_predict(self, args: dict[str, str]) -> ControlReply:
        method, batch, n = args.get("method", "vertical"), args["batch"], int(args["n"])
        if method == "vertical":
            return ControlReply(arrays={"output": self.predict_vertical(batch, n)})
        if method == "test":
            return ControlReply(arrays={"output": self.predict_test(batch, n)})
        raise ParameterError("the CS predicts by method 'vertical' or 'test'")


def _rows(read: Callable[[], dict[str, npt.NDArray[Any]]], key: str, name: str) -> FloatArray:
    """Array ``key`` of ``name``'s data file, read afresh (the rows it holds at prediction time)."""
    data = read()
    if key not in data:
        raise ParameterError(f"{name} has no {key!r} rows in its data file")
    return np.asarray(data[key], dtype=np.float64)


class DeployedParticipant(Controllable, Participant):
    _data: Callable[[], dict[str, npt.NDArray[Any]]]

    def control_load(self, args: dict[str, str]) -> ControlReply:
        if self.revoked:
            return ControlReply(info={"rows": "0", "revoked": "1"})
        X_test = _rows(self._data, "X_test", self.name)
        self.load_rows(args["batch"], X_test)
        return ControlReply(info={"rows": str(X_test.shape[0])})

    def control_drop(self, args: dict[str, str]) -> ControlReply:
        if not self.revoked:
            self.drop_rows(args["batch"])
        return ControlReply()

    def control_revoke(self, args: dict[str, str]) -> ControlReply:
        self.request_revocation(level=int(args.get("level", "2")))
        return ControlReply(info={"revoked": self.name})


class DeployedRequester(Controllable, Requester):
    _data: Callable[[], dict[str, npt.NDArray[Any]]]

    def control_predict(self, args: dict[str, str]) -> ControlReply:
        X = _rows(self._data, "X", self.name)
        return ControlReply(arrays={"output": np.stack([self.request(row) for row in X])})


class DeployedKGC(Controllable, KeyCentre):
    pass


class DeployedCC(Controllable, ComputationServer):
    pass


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


def make_role(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
              data: dict[str, npt.NDArray[Any]], passphrase: bytes) -> Party:
    p = config.params
    participants = [str(u) for u in p["participants"]]
    columns = {u: tuple(int(c) for c in cols) for u, cols in zip(participants, p["columns"], strict=True)}
    n, d = int(p["n_rows"]), int(p["n_features"])
    plan = plan_run(p, n, d)
    directory = _directory(config)
    verify_keys = {u: bytes.fromhex(h) for u, h in dict(p["verify_keys"]).items()}
    session = secrets.get("session", b"")
    if role == "kgc":
        kgc = KGC.restore(directory["cs"].params, directory)
        return DeployedKGC(role, network, kgc=kgc, verify_keys=verify_keys, session=session)
    if role == "cs":
        task = str(p.get("task", "classification"))
        y = data["y"]
        if task == "classification":
            k = int(p["n_classes"])
            stats = [class_stats(y.astype(np.int64), k, dr.sample_weight) for dr in plan.draws]
        else:
            stats = [np.asarray(regression_stats(y.astype(np.float64), dr.sample_weight)) for dr in plan.draws]
        cs = DeployedCS(
            role, network, share=_share(secrets, directory),
            weak_key=_weak(secrets, directory, role),
            stats=stats, criterion=make_criterion("gini" if task == "classification" else "squared_error"),
            task=task, grow=plan.grow, columns=columns, participant_keys={u: directory[u] for u in participants},
            verify_keys=verify_keys, session=session, n_features=d, max_features=plan.max_features,
            voting=str(p.get("voting", "soft")), ml_seed=plan.ml_seed, holt_params=plan.holt)
        cs._draws = plan.draws
        for name in p.get("requesters", []):
            cs.register_requester(str(name), directory[str(name)])
        return cs
    if role == "cc":
        shared = {k: v for k, v in directory.items() if k in ("cs", "cc", *participants)}
        return DeployedCC(role, network, share=_share(secrets, directory),
                          weak_key=_weak(secrets, directory, role), directory=shared,
                          verify_keys=verify_keys, session=session, holt_params=plan.holt)
    if role in participants:
        i = participants.index(role)
        X = np.asarray(data["X"], dtype=np.float64)
        part = DeployedParticipant(
            role, network, columns=columns[role], X_own=X, weak_key=_weak(secrets, directory, role),
            signing_key=SigningKey.from_seed(secrets["signing_seed"]), session=session, verify_keys=verify_keys,
            cs_key=directory["cs"], proposer=make_proposer(p, X, columns[role]), ml_seed=plan.ml_seed + 1 + i,
            codec=plan.codec, holt_params=plan.holt)
        part._data = partial(load_data, config.party(role).data)
        return part
    if role in p.get("requesters", []):
        req = DeployedRequester(role, network, weak_key=_weak(secrets, directory, role),
                                codec=plan.codec, holt_params=plan.holt)
        req._data = partial(load_data, config.party(role).data)
        return req
    raise ParameterError(f"{role!r} is not a role of this RevFRF run")


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
    """Plant and grow the forest (the CS drives FLE-Expan / FOS-Find with every participant)."""
    with operator.step("fit"):
        return dict(operator.control("cs", "fit").info)


def predict(operator: Operator, config: RunConfig, method: str | None = None) -> dict[str, npt.NDArray[Any]]:
    """Class probabilities of the test rows: ``vertical`` (default) or ``test`` (FRF-Test) on the
    rows the participants hold now as ``X_test`` (read afresh from each one's data file: new rows
    are written there; a fresh batch, dropped afterwards), or ``encrypted`` (FRF-Predict) on the
    first requester's own rows (its ``X``); the result is named after the method."""
    p = config.params
    how = method or "vertical"
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


def revoke(operator: Operator, config: RunConfig, party: str, level: int = 2) -> dict[str, str]:
    """FRF-Revoc: participant ``party`` asks to leave at ``level`` 1 (its data out of future
    trees) or 2 (a new forest epoch without it)."""
    participants = [str(u) for u in config.params["participants"]]
    if party not in participants:
        raise ParameterError(f"{party!r} is not a participant of this run ({participants})")
    if level not in (1, 2):
        raise ParameterError("the revocation level is 1 or 2")
    with operator.step(f"revoke {party}"):
        return dict(operator.control(party, "revoke", level=level).info)


def run_job(operator: Operator, config: RunConfig) -> dict[str, npt.NDArray[Any]]:
    """Train; predict by ``vertical``, ``test`` and (the requester) ``encrypted``; revoke the last
    participant at level 2 (a new forest epoch); predict ``vertical`` again."""
    participants = [str(u) for u in config.params["participants"]]
    fit(operator, config)
    results = {**predict(operator, config, "vertical"), **predict(operator, config, "test")}
    if config.params.get("requesters"):
        results.update(predict(operator, config, "encrypted"))
    revoke(operator, config, participants[-1], 2)
    results["after_revocation"] = predict(operator, config, "vertical")["vertical"]
    return results


def prepare(out_dir: str | Path, X: npt.ArrayLike, y: npt.ArrayLike, partition: Sequence[Sequence[int]], *,
            X_test: npt.ArrayLike, settings: dict[str, Any], kgc: KGC | None = None, key_bits: int = 2048,
            allow_insecure: bool = False, base_port: int = 0) -> Path:
    """A local trial: the KGC's offline key set-up, every party's key file and data, ``run.toml``.

    ``settings`` are the facade's public settings (``n_estimators``, ``max_depth``, ``random_state``, ...);
    ``y`` holds class codes ``0..k-1`` (``settings["n_classes"] = k``) or, with ``task =
    "regression"``, targets.  Pass ``kgc`` to reuse a key centre (tests); else a fresh one is made.
    """
    Xa, Xt = np.asarray(X, dtype=np.float64), np.asarray(X_test, dtype=np.float64)
    parts = [tuple(sorted(int(c) for c in cols)) for cols in partition]
    names = [f"u{i + 1}" for i in range(len(parts))]
    kgc = kgc if kgc is not None else KGC.setup(key_bits, allow_insecure=allow_insecure)
    verify_keys, signing = make_roster(names)
    weak = {name: kgc.issue_weak_key(name) for name in ["cs", "cc", *names, "requester"]}
    s1, s2 = kgc.strong_shares()
    kgc.forget_strong_key()
    session = SYSTEM_RANDOM.token_bytes(16)

    params = {**settings, "participants": names, "columns": [list(c) for c in parts], "requesters": ["requester"],
              "n_rows": Xa.shape[0], "n_features": Xa.shape[1], "n_test": Xt.shape[0],
              "allow_insecure": allow_insecure or kgc.params.bits < 2048,
              "directory": {k: encode_public_key(sk.public).hex() for k, sk in weak.items()},
              "verify_keys": {u: v.hex() for u, v in verify_keys.items()}}
    plan = TrialPlan(protocol="revfrf", params=params)
    plan.add("cs", role=CentralServer.role, data={"y": np.asarray(y)},
             secrets={"share": secret_key_bytes(s1), "weak": secret_key_bytes(weak["cs"]), "session": session})
    plan.add("cc", role=ComputationServer.role,
             secrets={"share": secret_key_bytes(s2), "weak": secret_key_bytes(weak["cc"]), "session": session})
    plan.add("kgc", role=KeyCentre.role, secrets={"session": session})
    for u, cols in zip(names, parts, strict=True):
        plan.add(u, role=Participant.role, data={"X": Xa[:, list(cols)], "X_test": Xt[:, list(cols)]},
                 secrets={"weak": secret_key_bytes(weak[u]), "signing_seed": signing[u].seed(), "session": session})
    plan.add("requester", role=Requester.role, data={"X": Xt},
             secrets={"weak": secret_key_bytes(weak["requester"])})
    return write_trial(out_dir, plan, base_port=base_port)


def trial(out_dir: str | Path, *, rows: int, trees: int, insecure: bool) -> Path:
    """``securetrees federation init revfrf``: Adult's first ``rows`` training rows, three
    participants (columns dealt in turn), 20 test rows; missing values coded -1 as in the demo."""
    from securetrees.datasets import load_adult

    data = load_adult()
    d = data.X_train.shape[1]
    settings: dict[str, Any] = {"n_estimators": trees, "max_depth": 4, "random_state": 0, "n_classes": 2}
    X, Xt = np.nan_to_num(data.X_train[:rows], nan=-1.0), np.nan_to_num(data.X_test[:20], nan=-1.0)
    return prepare(out_dir, X, data.y_train[:rows], [list(range(i, d, 3)) for i in range(3)],
                   X_test=Xt, settings=settings, key_bits=1024 if insecure else 2048,
                   allow_insecure=insecure)
