"""Federated Forest deployed with ``encrypted`` labels: the label holder keeps the predictions, the
master gets none, and the operator only where ``[protocol] release_predictions = "operator"``
(``specs/federated_forest.md``, "Who receives the predictions").  Every role in its own process over
mutual TLS; 1024-bit keys (the size is not the point here)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees.datasets import load_adult
from securetrees.errors import CollusionError, ParameterError
from securetrees.net.config import load_config
from securetrees.net.control import Operator
from securetrees.net.service import await_roles, network_for, read_passphrase, spawn_role
from securetrees.paillier import generate_keypair
from securetrees.protocols.federated_forest import deploy as ff_deploy
from securetrees.rand import DeterministicRandom

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")


def _trial(tmp_path: Path, **extra: Any) -> Path:
    adult = load_adult()
    X, y, Xt = adult.X_train[:120], adult.y_train[:120], adult.X_test[:12]
    part = [list(range(0, X.shape[1], 2)), list(range(1, X.shape[1], 2))]
    params = {"n_estimators": 2, "max_depth": 3, "random_state": 0, "n_classes": 2, "allow_insecure": True,
              "key_bits": 1024, "alignment": "hmac-trusted", **extra}
    return ff_deploy.prepare(tmp_path, X, np.where(y == 1, "high", "low"), part, X_test=Xt, params=params,
                             paillier_keys=generate_keypair(1024, allow_insecure=True),
                             id_key=DeterministicRandom("release ids").token_bytes(32), shuffle=False)


def test_by_default_the_label_holder_keeps_the_predictions(tmp_path: Path) -> None:
    config = load_config(_trial(tmp_path))
    assert ff_deploy.PREDICTIONS_KEPT(config) is not None and "client0" in str(ff_deploy.PREDICTIONS_KEPT(config))
    procs = {r: spawn_role(config, r, tmp_path / "pki" / f"{r}.pass", tmp_path / f"{r}.log") for r in config.roles}
    try:
        with network_for(config, config.operator,
                         read_passphrase(config.operator, tmp_path / "pki" / f"{config.operator}.pass")) as net:
            op = Operator(config.operator, net)
            await_roles(net, procs, 60)
            ff_deploy.fit(op, config)
            assert ff_deploy.predict(op, config) == {"test_rows": np.asarray([12])}
            with pytest.raises(ParameterError, match="keeps its predictions"):
                op.control("client0", "release")
            with pytest.raises(ParameterError, match="computes no forest output"):
                op.control("client1", "release")
            master = op.control("master", "predict")  # what the master answers: a row count, no output
            assert master.arrays == {} and master.info == {"rows": "12"}
            op.control_many(config.roles, "shutdown")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
    proba = np.load(tmp_path / "out" / "client0.proba.npy")
    assert proba.shape == (12, 2) and np.allclose(proba.sum(axis=1), 1.0)
    # what the master received in all (its log's closing lines): no reply that carries an output
    received = set(re.findall(r"master received \d+ x (\S+),", (tmp_path / "master.log").read_text(encoding="utf-8")))
    assert "federated_forest.leaf_sets" in received
    assert received <= {"federated_forest.client_info", "federated_forest.ack", "federated_forest.local_best",
                        "federated_forest.partition", "federated_forest.client_test_ids", "federated_forest.leaf_sets",
                        "federated_forest.winners", "securetrees.control.request"}, received


def test_release_to_the_operator_is_a_choice_of_the_run() -> None:
    base = {"n_classes": 2}
    ff_deploy.check_parameters({**base, "release_predictions": "operator"})
    with pytest.raises(ParameterError, match="release_predictions"):
        ff_deploy.check_parameters({**base, "release_predictions": "master"})
    assert not ff_deploy.releases_predictions(base)
    assert ff_deploy.releases_predictions({**base, "release_predictions": "operator"})
    assert ff_deploy.releases_predictions({**base, "label_protection": "shared"})


def test_no_release_to_an_operator_hosted_by_the_masters_organisation(tmp_path: Path) -> None:
    """With the operator and the master in one organisation, releasing the outputs to the operator
    would hand the master what the fix keeps from it: every role refuses the run at start."""
    config = load_config(_trial(tmp_path, release_predictions="operator"))

    def hosted(master_org: str) -> Any:
        parties = {n: replace(q, organisation={"master": master_org, config.operator: "hub"}.get(n, n))
                   for n, q in config.parties.items()}
        return replace(config, parties=parties)

    ff_deploy.check_release(hosted("elsewhere"))
    with pytest.raises(CollusionError, match="hosted by the master's organisation"):
        ff_deploy.check_release(hosted("hub"))
    ff_deploy.check_release(replace(hosted("hub"), params={**config.params, "release_predictions": "none"}))
