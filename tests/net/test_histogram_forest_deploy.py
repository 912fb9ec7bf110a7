"""The histogram forest deployed: the server and every client in its own process over mutual TLS, each
client reading its own CSV tables (its own row and column order, string categories, empty cells, string
labels).

Without DP the run is deterministic given ``random_state`` (the pairwise masks cancel exactly), so
the deployed forest and each client's prediction files equal the one-process facade's fitted on the
same rows (``testing.fit_tables``: the clients' tables read with pandas alone and pooled with a
client column).  With ``epsilon`` the noise and the row sampling come from the cryptographic source,
which no test may pin in a deployed role: that run is checked for what is fixed (the privacy ledger,
the outputs' form), not against the facade's figures.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("grpc")

from securetrees import cli
from securetrees.datasets import load_adult
from securetrees.errors import DecodeError, ParameterError, TableError, UnknownKeyError
from securetrees.net.config import dump_toml, load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.service import launch, network_for
from securetrees.net.trial import table_frame
from securetrees.protocols.histogram_forest import deploy
from securetrees.protocols.histogram_forest.classifier import HistogramForestClassifier
from securetrees.protocols.histogram_forest.experiment import ClientSplit, adult_schema, stratified_clients
from securetrees.protocols.histogram_forest.testing import fit_tables, pooled_tables
from securetrees.rand import DeterministicRandom
from securetrees.runtime import InProcessNetwork
from securetrees.testing.runs import predict_only
from securetrees.trees import persistence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SETTINGS: dict[str, Any] = {"n_estimators": 3, "max_depth": 4, "random_state": 5, "secure_aggregation": True,
                            "histogram": "fixed"}
CLIENTS = ["client0", "client1", "client2"]


@pytest.fixture(scope="module")
def adult() -> tuple[list[ClientSplit], dict[str, Any], Any]:
    data = load_adult()
    X, y = data.X_train[:600], np.where(data.y_train[:600] == 1, ">50K", "<=50K")
    schema = adult_schema(X, list(data.categorical), [len(data.categories.get(n, ())) for n in data.feature_names])
    return stratified_clients(X, y, 3, seed=0), schema, data


def _prepare(out: Path, splits: list[ClientSplit], data: Any, **params: Any) -> Path:
    return deploy.prepare(out, [(s.X_train, s.y_train) for s in splits], tests=[(s.X_test, s.y_test) for s in splits],
                          params=params, names=data.feature_names, categories=data.categories,
                          rng=DeterministicRandom(b"hf-tables"))


def _edit_csv(path: Path, edit: Any) -> None:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    edit(frame).to_csv(path, index=False)


def _new_rows(tmp: Path, data: Any) -> dict[str, str]:
    """New rows for each client in its own file: its own column order (client1's reversed), a category
    no one declared (missing at prediction) and the label column absent at client2."""
    out = {}
    for i, name in enumerate(CLIENTS):
        rows = slice(40 * i, 40 * i + 25)
        frame = table_frame([f"{name}-new-{r}" for r in range(25)], data.X_test[rows], data.feature_names,
                            categories=data.categories,
                            label=None if i == 2 else ("label", np.where(data.y_test[rows] == 1, ">50K", "<=50K")))
        frame.loc[3, "workclass"] = "Space-agency"
        if i == 1:
            frame = frame[frame.columns[::-1]]
        path = tmp / f"{name}-new.csv"
        frame.to_csv(path, index=False)
        out[name] = path.name
    return out


def test_clients_tables_fit_save_restart_predict_match_the_facade(
        adult: tuple[list[ClientSplit], dict[str, Any], Any], tmp_path: Path, checkout_deployments: Path) -> None:
    splits, _, data = adult
    cfg = _prepare(tmp_path, splits, data, **SETTINGS)
    # client1's table has its columns in its own order; its ids are its own
    _edit_csv(tmp_path / "data" / "client1.csv", lambda f: f[f.columns[::-1]])
    text = (tmp_path / "data" / "client0.csv").read_text()
    assert ",," in text and ">50K" in text  # empty cells and string labels
    got = launch(cfg, tmp_path / "pki", log_dir=tmp_path)
    clf, pooled = fit_tables(cfg)
    # figures only, each named for whose it is: the predictions stay at the clients
    assert set(got) == {"epsilon_spent", *(f"{c}_score" for c in CLIENTS)}
    np.testing.assert_array_equal([got[f"{c}_score"] for c in CLIENTS],
                                  [clf.score(pooled.tests[c], _test_labels(tmp_path, c)) for c in CLIENTS])
    assert float(got["epsilon_spent"][0]) == 0.0
    out = tmp_path / "out"
    for c in CLIENTS:
        np.testing.assert_array_equal(np.load(out / f"{c}.test_ids.npy"), pooled.test_ids[c])
        np.testing.assert_array_equal(np.load(out / f"{c}.proba.npy"), clf.predict_proba(pooled.tests[c]))
        np.testing.assert_array_equal(np.load(out / f"{c}.predictions.npy"), clf.predict(pooled.tests[c]))
    model = persistence.load(out / "server.model.json")  # the JSON format with string classes
    assert model.classes.tolist() == ["<=50K", ">50K"]  # type: ignore[union-attr]
    assert "grew 3 trees" in (tmp_path / "server.log").read_text()  # each role logs through logging
    assert "predicted its" in (tmp_path / "client1.log").read_text()

    # every role stopped; started again predict-only, the training files deleted, on new rows
    new = _new_rows(tmp_path, data)
    predict_cfg = predict_only(cfg, new)
    again = launch(predict_cfg, tmp_path / "pki", log_dir=tmp_path / "logs-predict")
    assert set(again) == set()  # client2's new rows have no labels: no score
    new_rows = pooled_tables(predict_cfg)  # the new rows as the facade reads them (the undeclared category missing)
    for c in CLIENTS:
        want = clf.predict_proba(new_rows.tests[c])
        written = pd.read_csv(out / f"{c}.predictions.csv", dtype={"id": str})
        assert written["id"].tolist() == new_rows.test_ids[c].tolist() == [f"{c}-new-{r}" for r in range(25)]
        np.testing.assert_array_equal(written[["proba_<=50K", "proba_>50K"]].to_numpy(), want)
        np.testing.assert_array_equal(written["prediction"].to_numpy(), np.asarray(["<=50K", ">50K"])[want.argmax(1)])
        np.testing.assert_array_equal(np.load(out / f"{c}.proba.npy"), want)
    with pytest.raises(ParameterError, match="predict-only"):
        deploy.fit(None, load_config(predict_cfg))  # type: ignore[arg-type]


def _test_labels(tmp: Path, client: str) -> list[str]:
    return pd.read_csv(tmp / "data" / f"{client}-test.csv", dtype=str)["label"].tolist()


def _run_in_process(cfg_path: Path) -> tuple[Operator, Any, list[Any]]:
    """Every role on its own gRPC network with mutual TLS, in this process; the operator's network open."""
    cfg = load_config(cfg_path)
    nets = []
    for role in cfg.roles:
        pw = read_passphrase(role, cfg_path.parent / "pki" / f"{role}.pass")
        net = network_for(cfg, role, pw)
        deploy.make_role(role, cfg, net, {}, {}, pw)  # pw seals its model part
        net.start()
        nets.append(net)
    on = network_for(cfg, "operator", read_passphrase("operator", cfg_path.parent / "pki" / "operator.pass"))
    return Operator("operator", on), on, nets


def test_dp_parameters_reach_every_role(adult: tuple[list[ClientSplit], dict[str, Any], Any], tmp_path: Path) -> None:
    splits, schema, data = adult
    params = {**SETTINGS, "epsilon": 2.0, "sampling": "subsample", "feature_ranges": schema["feature_ranges"],
              "classes": ["<=50K", ">50K"]}
    cfg_path = _prepare(tmp_path, splits, data, **params)
    assert "epsilon = 2.0" in cfg_path.read_text()
    op, on, nets = _run_in_process(cfg_path)
    try:
        with pytest.raises(ParameterError, match="not grown"):
            op.control("server", "model")
        got = deploy.run_job(op, load_config(cfg_path))
        with pytest.raises(ParameterError, match="operator stop"):  # a second fit says what to do
            op.control("server", "fit")
        with pytest.raises(DecodeError):  # a client checks the model it is handed
            op.control("client0", "predict", model='{"format": "securetrees.trees"}')
    finally:
        on.close()
        for net in nets:
            net.close()
    facade, _ = fit_tables(cfg_path)
    assert 0.0 < float(got["epsilon_spent"][0]) == facade.epsilon_spent_ <= 2.0  # the ledger is deterministic
    for i, s in enumerate(splits):
        proba = np.load(tmp_path / "out" / f"client{i}.proba.npy")
        assert proba.shape == (s.X_test.shape[0], 2)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_regression_with_a_parquet_client_matches_the_facade(
        adult: tuple[list[ClientSplit], dict[str, Any], Any], tmp_path: Path) -> None:
    """``task = "regression"`` (the targets: hours per week), client2's tables in Parquet files."""
    splits, _, data = adult
    hours = data.feature_names.index("hours-per-week")
    keep = [j for j in range(len(data.feature_names)) if j != hours]
    names = [data.feature_names[j] for j in keep]
    cats = {n: v for n, v in data.categories.items() if n in names}
    cfg_path = deploy.prepare(tmp_path, [(s.X_train[:, keep], s.X_train[:, hours]) for s in splits],
                              tests=[(s.X_test[:, keep], s.X_test[:, hours]) for s in splits],
                              params={**SETTINGS, "task": "regression"}, names=names, categories=cats)
    text = cfg_path.read_text()
    for key in ("client2", "client2-test"):
        pd.read_csv(tmp_path / "data" / f"{key}.csv", keep_default_na=False, na_values=[""],
                    dtype={n: str for n in ["id", *cats]}).to_parquet(tmp_path / "data" / f"{key}.parquet")
        (tmp_path / "data" / f"{key}.csv").unlink()
        text = text.replace(f'"data/{key}.csv"', f'"data/{key}.parquet"')
    cfg_path.write_text(text)
    op, on, nets = _run_in_process(cfg_path)
    try:
        got = deploy.run_job(op, load_config(cfg_path))
    finally:
        on.close()
        for net in nets:
            net.close()
    reg, pooled = fit_tables(cfg_path)
    assert reg.task == "regression" and set(got) == {"epsilon_spent", *(f"{c}_score" for c in CLIENTS)}
    for c in CLIENTS:
        np.testing.assert_array_equal(np.load(tmp_path / "out" / f"{c}.predictions.npy"), reg.predict(pooled.tests[c]))
    written = pd.read_csv(tmp_path / "out" / "client2.predictions.csv", dtype={"id": str})
    assert list(written.columns) == ["id", "prediction"]
    assert written["id"].tolist() == pooled.test_ids["client2"].tolist()


def _make(cfg_path: Path, role: str = "client0") -> None:
    cfg = load_config(cfg_path)
    deploy.make_role(role, cfg, InProcessNetwork(), {}, {}, b"")


def test_parameters_are_checked(adult: tuple[list[ClientSplit], dict[str, Any], Any], tmp_path: Path) -> None:
    splits, schema, data = adult
    with pytest.raises(ParameterError, match="declare classes"):
        _prepare(tmp_path / "dp", splits, data, epsilon=1.0, feature_ranges=schema["feature_ranges"])
    with pytest.raises(UnknownKeyError, match=r"unknown key 'n_estimator' in \[protocol\] \(did you mean"):
        _prepare(tmp_path / "typo", splits, data, n_estimator=3)
    with pytest.raises(ParameterError, match="at least 3 parties"):
        _prepare(tmp_path / "two", splits[:2], data, secure_aggregation=True)
    with pytest.raises(ParameterError, match="declares \\['categorical_features'\\] itself"):
        _prepare(tmp_path / "cat", splits, data, categorical_features=schema["categorical"])
    cfg_path = _prepare(tmp_path / "run", splits, data, **SETTINGS)
    text = cfg_path.read_text()
    cfg_path.write_text(text.replace("[protocol]\n", "[protocol]\nn_estimator = 3\n"))
    with pytest.raises(UnknownKeyError, match="unknown key 'n_estimator' in \\[protocol\\]"):
        load_config(cfg_path)  # refused before any role is built (the deployment's PARAMETERS)
    def rename_sex(protocol: dict[str, Any]) -> None:
        protocol["categories"]["gender"] = protocol["categories"].pop("sex")

    edits: list[tuple[Callable[[dict[str, Any]], None], str]] = [
        (lambda protocol: protocol.pop("classes"), "lacks \\['classes'\\]"),
        (lambda protocol: protocol.update(max_depth=0), "max_depth must be a positive int"),
        (lambda protocol: protocol["categories"].update(sex=["Female", "Female"]), "not distinct"),
        (rename_sex, "'gender', which is not")]
    for edit, match in edits:
        doc = tomllib.loads(text)
        edit(doc["protocol"])
        cfg_path.write_text(dump_toml(doc))
        for role in ("server", "client0"):
            with pytest.raises(ParameterError, match=match):
                _make(cfg_path, role)
    cfg_path.write_text(text)
    _make(cfg_path)  # the unedited run builds


def _bad_table(tmp_path: Path, adult: tuple[list[ClientSplit], dict[str, Any], Any], edit: Any) -> Path:
    splits, _, data = adult
    cfg_path = _prepare(tmp_path, splits, data, **SETTINGS)
    _edit_csv(tmp_path / "data" / "client0.csv", edit)
    return cfg_path


def test_a_client_lacking_or_adding_a_column_is_refused_naming_it(
        adult: tuple[list[ClientSplit], dict[str, Any], Any], tmp_path: Path) -> None:
    with pytest.raises(TableError, match=r"client0's data .*declared columns not in the table: \['education'\]"):
        _make(_bad_table(tmp_path / "lacks", adult, lambda f: f.drop(columns=["education"])))
    with pytest.raises(TableError, match=r"client0's data .*not in the declared feature columns: \['zip'\]"):
        _make(_bad_table(tmp_path / "adds", adult, lambda f: f.assign(zip="8000")))
    # another column order is read by name
    _make(_bad_table(tmp_path / "order", adult, lambda f: f[f.columns[::-1]]))


def test_an_undeclared_category_at_training_is_refused(
        adult: tuple[list[ClientSplit], dict[str, Any], Any], tmp_path: Path) -> None:
    def moon(f: pd.DataFrame) -> pd.DataFrame:
        f.loc[2, "workclass"] = "Moon-base"
        return f

    with pytest.raises(TableError, match=r"column 'workclass'.*outside the declared ones: \['Moon-base'\]"):
        _make(_bad_table(tmp_path / "cat", adult, moon))


def test_a_label_outside_the_declared_classes_is_refused(
        adult: tuple[list[ClientSplit], dict[str, Any], Any], tmp_path: Path) -> None:
    def maybe(f: pd.DataFrame) -> pd.DataFrame:
        f.loc[0, "label"] = "maybe"
        return f

    with pytest.raises(TableError, match=r"labels outside the declared classes: \['maybe'\]"):
        _make(_bad_table(tmp_path / "label", adult, maybe))
    cfg_path = _bad_table(tmp_path / "nolabel", adult, lambda f: f)
    cfg_path.write_text(cfg_path.read_text().replace('label = "label"\n', "", 1))
    with pytest.raises(ParameterError, match=r"\[parties.client0\] names no label column"):
        _make(cfg_path)


def test_the_json_format_round_trips_string_classes() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    X[::7, 1] = np.nan
    y = np.where(X[:, 0] > 0, "yes", "no")
    clf = HistogramForestClassifier(n_estimators=2, max_depth=3, random_state=0, n_clients=3).fit(X, y)
    back = persistence.loads(persistence.dumps(clf.forest_))
    assert back.classes.tolist() == ["no", "yes"]  # type: ignore[union-attr]
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))


def test_cli_init_and_launch(tmp_path: Path, checkout_deployments: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``securetrees federation init histogram-forest`` (the demo's stratified split, 3 clients, CSV files), then
    ``launch``."""
    out = tmp_path / "run"
    assert cli.main(["federation", "init", "histogram-forest", "--out", str(out), "--rows", "300", "--trees", "1"]) == 0
    assert "[protocol.categories]" in (out / "run.toml").read_text()
    assert cli.main(["federation", "launch", "--config", str(out / "run.toml")]) == 0
    printed = capsys.readouterr().out
    assert "federation finished" in printed and all(f"client{i}_score: 0." in printed for i in range(3)), printed
    assert persistence.load(out / "out" / "server.model.json") is not None
    assert pd.read_csv(out / "out" / "client0.predictions.csv")["prediction"].isin(["<=50K", ">50K"]).all()
