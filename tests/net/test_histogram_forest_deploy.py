"""The histogram forest deployed: the server and every client in its own process over mutual TLS.

Without DP the run is deterministic given ``random_state`` (the pairwise masks cancel exactly), so
the deployed forest and each client's predictions equal the one-process facade's.  With ``epsilon``
the noise and the row sampling come from the cryptographic source, which no test may pin in a
deployed role: that run is checked for what is fixed (the privacy ledger, the outputs' form), not
against the facade's figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees import cli
from securetrees.datasets import load_adult
from securetrees.errors import DecodeError, ParameterError, UnknownKeyError
from securetrees.net.config import load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.service import launch, load_data, network_for
from securetrees.protocols.histogram_forest import deploy
from securetrees.protocols.histogram_forest.classifier import HistogramForestClassifier
from securetrees.protocols.histogram_forest.experiment import ClientSplit, adult_schema, stratified_clients
from securetrees.protocols.histogram_forest.testing import fit_parts
from securetrees.trees import persistence

SETTINGS: dict[str, Any] = {"n_estimators": 3, "max_depth": 4, "random_state": 5, "secure_aggregation": True,
                            "histogram": "fixed"}


@pytest.fixture(scope="module")
def adult() -> tuple[list[ClientSplit], dict[str, Any]]:
    data = load_adult()
    X, y = data.X_train[:600], data.y_train[:600]
    schema = adult_schema(X, list(data.categorical), [len(data.categories.get(n, ())) for n in data.feature_names])
    return stratified_clients(X, y, 3, seed=0), schema


def _prepare(out: Path, splits: list[ClientSplit], **params: Any) -> Path:
    return deploy.prepare(out, [(s.X_train, s.y_train) for s in splits], tests=[(s.X_test, s.y_test) for s in splits],
                          params=params)


def test_server_and_clients_as_processes_match_the_one_process_run(
        adult: tuple[list[ClientSplit], dict[str, Any]], tmp_path: Path, checkout_deployments: Path) -> None:
    splits, schema = adult
    params = {**SETTINGS, "categorical_features": schema["categorical"]}
    got = launch(_prepare(tmp_path, splits, **params), tmp_path / "pki", log_dir=tmp_path)

    clf = fit_parts(HistogramForestClassifier(**params), [(s.X_train, s.y_train) for s in splits])
    assert set(got) == {"epsilon_spent", "score"}  # figures only: the predictions stay at the clients
    np.testing.assert_array_equal(got["score"], [clf.score(s.X_test, s.y_test) for s in splits])
    assert float(got["epsilon_spent"][0]) == 0.0
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"client{i}.{k}.npy" for i in range(3) for k in ("predictions", "proba")] + ["server.model.json"])
    for i, s in enumerate(splits):
        np.testing.assert_array_equal(np.load(out / f"client{i}.proba.npy"), clf.predict_proba(s.X_test))
        np.testing.assert_array_equal(np.load(out / f"client{i}.predictions.npy"), clf.predict(s.X_test))
    model = persistence.load(out / "server.model.json")
    X_all = np.vstack([s.X_test for s in splits])
    np.testing.assert_array_equal(model.predict_proba(X_all), clf.predict_proba(X_all))  # type: ignore[union-attr]
    assert "grew 3 trees" in (tmp_path / "server.log").read_text()  # each role logs through logging
    assert "predicted its" in (tmp_path / "client1.log").read_text()


def _run_in_process(cfg_path: Path) -> tuple[dict[str, Any], Operator, Any, list[Any]]:
    """Every role on its own gRPC network with mutual TLS, in this process; the operator's network open."""
    cfg = load_config(cfg_path)
    nets = []
    for role in cfg.roles:
        pw = read_passphrase(role, cfg_path.parent / "pki" / f"{role}.pass")
        net = network_for(cfg, role, pw)
        deploy.make_role(role, cfg, net, {}, load_data(cfg.party(role).data), pw)  # pw seals its model part
        net.start()
        nets.append(net)
    on = network_for(cfg, "operator", read_passphrase("operator", cfg_path.parent / "pki" / "operator.pass"))
    return cfg.params, Operator("operator", on), on, nets


def test_dp_parameters_reach_every_role(adult: tuple[list[ClientSplit], dict[str, Any]], tmp_path: Path) -> None:
    splits, schema = adult
    params = {**SETTINGS, "epsilon": 2.0, "sampling": "subsample", "categorical_features": schema["categorical"],
              "feature_ranges": schema["feature_ranges"], "categories": schema["categories"],
              "classes": schema["classes"]}
    cfg_path = _prepare(tmp_path, splits, **params)
    assert "epsilon = 2.0" in cfg_path.read_text()
    _, op, on, nets = _run_in_process(cfg_path)
    try:
        with pytest.raises(ParameterError, match="not grown"):
            op.control("server", "model")
        got = deploy.run_job(op, load_config(cfg_path))
        with pytest.raises(DecodeError):  # a client checks the model it is handed
            op.control("client0", "predict", model='{"format": "securetrees.trees"}')
    finally:
        on.close()
        for net in nets:
            net.close()
    facade = fit_parts(HistogramForestClassifier(**params), [(s.X_train, s.y_train) for s in splits])
    assert 0.0 < float(got["epsilon_spent"][0]) == facade.epsilon_spent_ <= 2.0  # the ledger is deterministic
    for i, s in enumerate(splits):
        proba = np.load(tmp_path / "out" / f"client{i}.proba.npy")
        assert proba.shape == (s.X_test.shape[0], 2)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_parameters_are_checked(adult: tuple[list[ClientSplit], dict[str, Any]], tmp_path: Path) -> None:
    splits, schema = adult
    with pytest.raises(ParameterError, match="declare classes"):
        _prepare(tmp_path / "dp", splits, epsilon=1.0, feature_ranges=schema["feature_ranges"],
                 categories=schema["categories"], categorical_features=schema["categorical"])
    with pytest.raises(UnknownKeyError, match=r"unknown key 'n_estimator' in \[protocol\] \(did you mean"):
        _prepare(tmp_path / "typo", splits, n_estimator=3)
    with pytest.raises(ParameterError, match="at least 3 parties"):
        _prepare(tmp_path / "two", splits[:2], secure_aggregation=True)
    cfg_path = _prepare(tmp_path / "run", splits, **SETTINGS)
    text = cfg_path.read_text()
    cfg_path.write_text(text.replace("[protocol]\n", "[protocol]\nn_estimator = 3\n"))
    with pytest.raises(UnknownKeyError, match="unknown key 'n_estimator' in \\[protocol\\]"):
        load_config(cfg_path)  # refused before any role is built (the deployment's PARAMETERS)
    classes = "classes = [\n    0,\n    1,\n]\n"  # as tomli-w writes it
    for edit, match in [((classes, ""), "lacks \\['classes'\\]"),
                        (("max_depth = 4\n", "max_depth = 0\n"), "max_depth must be a positive int"),
                        ((classes, "classes = [0, 2]\n"), None)]:
        assert edit[0] in text
        cfg_path.write_text(text.replace(*edit))
        cfg = load_config(cfg_path)
        for role in ("server", "client0"):
            if match is None and role == "server":
                continue  # the server holds no labels to check
            with pytest.raises(ParameterError, match=match or "outside the declared classes"):
                deploy.make_role(role, cfg, None, {}, load_data(cfg.party(role).data), b"")  # type: ignore[arg-type]


def test_cli_init_and_launch(tmp_path: Path, checkout_deployments: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``securetrees federation init histogram-forest`` (the demo's stratified split, 3 clients), then ``launch``."""
    out = tmp_path / "run"
    assert cli.main(["federation", "init", "histogram-forest", "--out", str(out), "--rows", "300", "--trees", "1"]) == 0
    assert cli.main(["federation", "launch", "--config", str(out / "run.toml")]) == 0
    printed = capsys.readouterr().out
    assert "federation finished" in printed and "score: shape (3,)" in printed
    assert persistence.load(out / "out" / "server.model.json") is not None
