"""Federated Forest as networked services: the master and each client in its own process.

Roles: ``master`` and ``client0 … client{k-1}`` (``client{label_holder}`` holds the
labels); the operator drives them with control requests (``securetrees.net.control``):

* ``fit`` / ``resume`` (master): train, or finish an interrupted training from the
  parties' checkpoints (each party's checkpoint key is in its own key file);
* ``load_test`` (each client): load its columns of the test rows (``X_test``, ``test_ids``) from
  its own data file, read afresh (new rows: each client writes its columns of them there);
  the reply carries the canonical order of those rows (the client knows its HMAC ids);
* ``predict`` (master): align the test ids, one-round (or classical) prediction,
  forest output in canonical order.

:func:`prepare` makes a local trial from one table (the column split, labels and
test rows written to each party's own data file), the same run the one-process
:class:`~securetrees.protocols.federated_forest.estimators.FederatedForestClassifier` makes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.net.config import RunConfig
from securetrees.net.control import Controllable, ControlReply, Operator
from securetrees.net.service import load_data
from securetrees.net.trial import Secret, TrialPlan, write_trial
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.federated_forest.checkpoint import CheckpointStore
from securetrees.protocols.federated_forest.client import Client, LabelSpec
from securetrees.protocols.federated_forest.ids import canonical_order, hash_ids
from securetrees.protocols.federated_forest.master import Master
from securetrees.protocols.federated_forest.params import ForestParams
from securetrees.rand import SYSTEM_RANDOM
from securetrees.runtime import Party
from securetrees.runtime.network import Network

__all__ = ["PARAMETERS", "DeployedClient", "DeployedMaster", "fit", "make_role", "predict", "prepare", "run_job"]

FloatArray = npt.NDArray[np.float64]
_FOREST_KEYS = ("n_estimators", "max_depth", "min_samples_split", "min_samples_leaf", "max_features",
                "feature_sampling", "bootstrap", "random_state", "checkpoint")

PARAMETERS = frozenset({*_FOREST_KEYS, "clients", "n_classes", "label_protection", "criterion", "max_bins",
                        "allow_insecure", "key_bits", "frac_bits", "paillier_mode", "checkpoint_dir", "prediction"})
"""The ``[protocol]`` keys of a Federated Forest run."""


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


class DeployedMaster(Controllable, Master):
    def control_state(self) -> dict[str, str]:
        return {"trees": str(len(self.trees))}

    def control_fit(self, args: dict[str, str]) -> ControlReply:
        self.fit()
        return ControlReply(info={"trees": str(len(self.trees))})

    def control_resume(self, args: dict[str, str]) -> ControlReply:
        self.resume()
        return ControlReply(info={"trees": str(len(self.trees))})

    def control_predict(self, args: dict[str, str]) -> ControlReply:
        self.align_test()
        how = args.get("method", "one-round")
        if how not in ("one-round", "classical"):
            raise ParameterError("method is 'one-round' or 'classical'")
        leaves = self.leaf_of_one_round() if how == "one-round" else self.leaf_of_classical()
        return ControlReply(arrays={"output": self.aggregate(leaves)})


class DeployedClient(Controllable, Client):
    _data: Callable[[], dict[str, npt.NDArray[Any]]]
    """Reads this client's data file afresh: the test rows are those it holds at prediction time."""

    def control_load_test(self, args: dict[str, str]) -> ControlReply:
        data = self._data()
        if "X_test" not in data or "test_ids" not in data:
            raise ParameterError(f"{self.name} has no test rows (X_test, test_ids) in its data file")
        X, ids = np.asarray(data["X_test"], dtype=np.float64), [str(i) for i in data["test_ids"]]
        self.load_test(X, ids)
        return ControlReply(arrays={"order": canonical_order(hash_ids(self._id_key, ids))})


def make_role(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
              data: dict[str, npt.NDArray[Any]], passphrase: bytes) -> Party:
    p = config.params
    clients = [str(c) for c in p["clients"]]
    if role == "master":
        return DeployedMaster(role, network, clients, _forest_params(p),
                              label_protection=str(p.get("label_protection", "encrypted")),
                              criterion=p.get("criterion"), max_bins=int(p.get("max_bins", 255)),
                              checkpoint=_store(config, role, secrets))
    if role not in clients:
        raise ParameterError(f"{role!r} is not a role of this Federated Forest run")
    labels = None
    if "y" in data:
        sealed = secrets.get("paillier_key")
        keypair = None
        if sealed is not None:
            sk = PrivateKey.from_encrypted_bytes(sealed, passphrase, allow_insecure=bool(p.get("allow_insecure")))
            keypair = (sk.public_key, sk)
        n_classes = int(data["n_classes"]) if "n_classes" in data else None
        labels = LabelSpec(data["y"], n_classes if n_classes else None, key_bits=int(p.get("key_bits", 2048)),
                           allow_insecure=bool(p.get("allow_insecure", False)), keypair=keypair,
                           frac_bits=int(p.get("frac_bits", 32)))
    insecure = bool(p.get("allow_insecure", False))

    def loader(b: bytes) -> PublicKey:
        return PublicKey.from_bytes(b, allow_insecure=insecure)

    client = DeployedClient(
        role, network, data["X"], [str(i) for i in data["ids"]], [int(c) for c in data["columns"]],
        secrets["id_key"], categorical=[bool(c) for c in data["categorical"]] if "categorical" in data else None,
        labels=labels, paillier_mode=p.get("paillier_mode", "djn"), public_key_loader=loader,
        checkpoint=_store(config, role, secrets),
    )
    client._data = partial(load_data, config.party(role).data)
    return client


def fit(operator: Operator, config: RunConfig) -> dict[str, str]:
    """Train the forest (the master drives every client)."""
    with operator.step("fit"):
        return dict(operator.control("master", "fit").info)


def predict(operator: Operator, config: RunConfig, method: str | None = None) -> dict[str, npt.NDArray[Any]]:
    """The forest's output on the test rows the clients hold now (``X_test``, ``test_ids`` in each
    client's data file, read at each prediction), in the
    rows' original order; ``method`` is ``one-round`` or ``classical`` (default: ``[protocol]
    prediction``, else one-round)."""
    clients = [str(c) for c in config.params["clients"]]
    how = method or str(config.params.get("prediction", "one-round"))
    with operator.step(f"predict {how}"):
        orders = operator.control_many(clients, "load_test")
        out = operator.control("master", "predict", method=how).arrays["output"]
    order = orders[clients[0]].arrays["order"]
    result = np.empty_like(out)
    result[order] = out
    return {"output": result}


def run_job(operator: Operator, config: RunConfig) -> dict[str, npt.NDArray[Any]]:
    """Train, then predict the clients' test rows; ``output`` is in the rows' original order."""
    fit(operator, config)
    return predict(operator, config)


def _seal_paillier(sk: PrivateKey, passphrase: bytes) -> bytes:
    return sk.to_encrypted_bytes(passphrase, scrypt_log2_n=14)  # inside the party's key file


def prepare(out_dir: str | Path, X: npt.ArrayLike, y: npt.ArrayLike, partition: Sequence[Sequence[int]], *,
            X_test: npt.ArrayLike, params: dict[str, Any], label_holder: int = 0,
            paillier_keys: tuple[PublicKey, PrivateKey] | None = None, id_key: bytes | None = None,
            base_port: int = 0) -> Path:
    """A local trial: certificates, key files, each client's own columns, ``run.toml``.

    ``y`` holds class codes ``0..k-1`` (classification, ``params["n_classes"] = k``) or
    regression targets.  ``id_key`` (the clients' shared HMAC key) is drawn fresh unless given.
    """
    Xa, Xt = np.asarray(X, dtype=np.float64), np.asarray(X_test, dtype=np.float64)
    clients = [f"client{i}" for i in range(len(partition))]
    key = id_key if id_key is not None else SYSTEM_RANDOM.token_bytes(32)
    ids = np.asarray([f"row-{i}" for i in range(Xa.shape[0])])
    test_ids = np.asarray([f"test-{i}" for i in range(Xt.shape[0])])
    checkpoints = "checkpoint_dir" in params
    plan = TrialPlan(protocol="federated-forest", params={**params, "clients": clients})
    for i, (name, cols) in enumerate(zip(clients, partition, strict=True)):
        c = list(cols)
        data: dict[str, npt.NDArray[Any]] = {"X": Xa[:, c], "ids": ids, "columns": np.asarray(c, dtype=np.int64),
                                             "X_test": Xt[:, c], "test_ids": test_ids}
        items: dict[str, Secret] = {"id_key": key}
        if i == label_holder:
            data["y"] = np.asarray(y)
            data["n_classes"] = np.asarray(int(params.get("n_classes", 0)))
            if paillier_keys is not None:
                sk = paillier_keys[1]
                items["paillier_key"] = partial(_seal_paillier, sk)
        if checkpoints:
            items["checkpoint_key"] = SYSTEM_RANDOM.token_bytes(32)
        plan.add(name, role=Client.role, data=data, secrets=items)
    plan.add("master", role=Master.role,
             secrets={"checkpoint_key": SYSTEM_RANDOM.token_bytes(32)} if checkpoints else None)
    return write_trial(out_dir, plan, base_port=base_port)


def trial(out_dir: str | Path, *, rows: int, trees: int, insecure: bool) -> Path:
    """``securetrees federation init federated-forest``: Adult's first ``rows`` training rows
    dealt column by column to two clients, encrypted labels, 500 test rows."""
    from securetrees.datasets import load_adult

    data = load_adult()
    d = data.X_train.shape[1]
    params: dict[str, Any] = {"n_estimators": trees, "max_depth": 6, "random_state": 0, "n_classes": 2,
                              "label_protection": "encrypted", "key_bits": 1024 if insecure else 2048,
                              "allow_insecure": insecure}
    return prepare(out_dir, data.X_train[:rows], data.y_train[:rows], [list(range(0, d, 2)), list(range(1, d, 2))],
                   X_test=data.X_test[:500], params=params)
