"""HybridTree deployed on each organisation's own CSV table: a host and three guests, each in its own
process over mutual TLS, guest membership by PSI led by the host.  Fit, save the model parts, stop
every role, start them again as a predict-only run (the training files deleted) on new rows (own
orders, partial overlap): the host's predictions equal the one-process facade's on the same joined
rows (the runs are deterministic: the masks cancel exactly and Paillier's randomness never reaches
a decrypted sum).  Negative: a guest id held by two guests, a missing id column, a guest with no id
in common with the host, a missing guest, a host key other than the pinned one.

Keys are 1024-bit and the guest layers' minimum node size is 20 rows, so that a few hundred rows
grow guest splits quickly (the size is not the point here); hence the insecure-key warnings are allowed.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("grpc")

from securetrees import cli
from securetrees.errors import (
    DuplicateIdError,
    KeyMismatchError,
    ParameterError,
    PartyUnavailable,
    ProtocolError,
    SecureTreesError,
    TableError,
    UnknownKeyError,
)
from securetrees.net.config import dump_toml, load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.keyfile import open_key_file
from securetrees.net.service import launch, network_for
from securetrees.net.transport import GrpcNetwork
from securetrees.paillier import generate_keypair
from securetrees.protocols.hybridtree import deploy
from securetrees.protocols.hybridtree.demo import MAX_BINS, AdultHybrid, adult_hybrid
from securetrees.protocols.hybridtree.estimators import HybridTreeClassifier
from securetrees.protocols.hybridtree.testing import JoinedRows, joined_view
from securetrees.rand import DeterministicRandom

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")

SETTINGS: dict[str, Any] = {"n_estimators": 2, "learning_rate": 0.5, "host_depth": 2, "max_bins": MAX_BINS,
                            "min_node_size": 20, "key_bits": 1024, "allow_insecure": True}
GUESTS = ["guest0", "guest1", "guest2"]


@pytest.fixture(scope="module")
def adult() -> AdultHybrid:
    return adult_hybrid(n_guests=3, rows=300)


@pytest.fixture(scope="module")
def keys() -> Any:
    return generate_keypair(1024, allow_insecure=True)


def _prepare(out: Path, data: AdultHybrid, keys: Any, **extra: Any) -> Path:
    from securetrees.datasets import load_adult

    s = data.split
    labels = np.where(data.y_train == 1, ">50K", "<=50K")  # text labels
    return deploy.prepare(out, data.X_train, labels, s.host_features, s.guest_features, s.train_rows,
                          X_test=data.X_test, test_rows=s.test_rows, keypair=keys, params={**SETTINGS, **extra},
                          names=data.names, categories=load_adult().categories, lacking=4,
                          rng=DeterministicRandom("hybridtree trial"))


def _facade(view: JoinedRows, keys: Any) -> HybridTreeClassifier:
    clf = HybridTreeClassifier(**SETTINGS, **view.settings(), keypair=keys)  # type: ignore[arg-type]
    return clf.fit(view.X, view.y)


def _new_rows(folder: Path, name: str, rng: np.random.Generator, without: Path | None = None) -> str:
    """A new batch for party ``name``: about two thirds of its test rows, in a new order, none of
    the ids in the table ``without``."""
    frame = pd.read_csv(folder / "data" / f"{name}-test.csv", dtype=str, keep_default_na=False)
    if without is not None:
        frame = frame[~frame["id"].isin(pd.read_csv(without, dtype=str)["id"])]
    keep = rng.permutation(frame.shape[0])[: 2 * frame.shape[0] // 3]
    path = f"data/{name}-new.csv"
    frame.iloc[keep].to_csv(folder / path, index=False)
    return path


def test_fit_save_stop_and_predict_new_rows_match_the_facade(adult: AdultHybrid, keys: Any, tmp_path: Path,
                                                            checkout_deployments: Path) -> None:
    cfg = _prepare(tmp_path, adult, keys)
    host_csv = pd.read_csv(tmp_path / "data" / "host.csv", dtype=str, keep_default_na=False)
    assert "" in set(host_csv.to_numpy().ravel().tolist())  # empty cells: missing values
    assert set(host_csv["label"]) == {">50K", "<=50K"}
    got = launch(cfg, tmp_path / "pki", log_dir=tmp_path / "logs")
    config = load_config(cfg)
    view = joined_view(config)
    clf = _facade(view, keys)
    splits = sum(r.n_guest_splits for r in clf.host_.records)
    assert splits > 0  # the guests' layers took part, not the host's alone
    assert set(got) == {"guest_splits", "rows"}  # the operator gets figures, no prediction
    assert int(got["guest_splits"][0]) == splits
    out = tmp_path / "out"
    test_view = joined_view(config, test=True, host_schema=view.host_schema)
    np.testing.assert_array_equal(np.load(out / "host.proba.npy"), clf.predict_proba(test_view.X))
    np.testing.assert_array_equal(np.load(out / "host.predictions.npy"), clf.predict(test_view.X))
    host_test = pd.read_csv(tmp_path / "data" / "host-test.csv", dtype=str)
    assert np.load(out / "host.test_ids.npy").tolist() == host_test["id"].tolist()  # its own file's order
    log = (tmp_path / "logs" / "guest1.log").read_text()
    assert "4 dropped" in log  # the ids the host lacks
    assert "trained 2 trees" in (tmp_path / "logs" / "host.log").read_text()

    # stop every role (launch did), start again predict-only on new rows, training files deleted;
    # the host's new batch holds none of guest2's ids (an empty test intersection is allowed)
    rng = np.random.default_rng(7)
    text = cfg.read_text(encoding="utf-8").replace("[run]\n", '[run]\njob = "predict"\n', 1)
    for name in ["host", *GUESTS]:
        without = tmp_path / "data" / "guest2-test.csv" if name == "host" else None
        text = text.replace(f'"data/{name}-test.csv"', f'"{_new_rows(tmp_path, name, rng, without)}"')
    for data in re.findall(r'^data = "(.+)"$', text, flags=re.M):
        (tmp_path / data).unlink()
    predict_cfg = tmp_path / "predict.toml"
    predict_cfg.write_text(text, encoding="utf-8")
    again = launch(predict_cfg, tmp_path / "pki", log_dir=tmp_path / "logs-predict")
    new_view = joined_view(load_config(predict_cfg), test=True, host_schema=view.host_schema)
    assert int(again["rows"][0]) == new_view.X.shape[0]
    assert np.isnan(new_view.X[:, -1]).any() and set(np.unique(new_view.X[:, -1])[:2]) == {0, 1}  # partial
    assert 2 not in new_view.X[:, -1]
    np.testing.assert_array_equal(np.load(out / "host.proba.npy"), clf.predict_proba(new_view.X))
    with pytest.raises(ParameterError, match="predict-only"):
        deploy.fit(None, load_config(predict_cfg))  # type: ignore[arg-type]
    doc = tomllib.loads(text)
    doc["protocol"]["guest_bins"]["education-num"] = doc["protocol"]["guest_bins"]["education-num"][1:]
    predict_cfg.write_text(dump_toml(doc), encoding="utf-8")
    with pytest.raises(ParameterError, match="differs from the one its model was fitted with"):
        deploy.make_role("guest0", load_config(predict_cfg), None, {}, {},  # type: ignore[arg-type]
                         read_passphrase("guest0", tmp_path / "pki" / "guest0.pass"))


def _edit_csv(path: Path, edit: Any) -> None:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    edit(frame).to_csv(path, index=False)


@contextmanager
def _roles_in_threads(cfg_path: Path, roles: list[str]) -> Iterator[Operator]:
    """``roles`` served in threads of this process over mutual TLS (faster than a process per role),
    and the operator.  Each builds its role (serving the alignment phase first), then serves it.
    At the end every phase still up is shut down; a role whose alignment failed stays blocked in
    its (closed) phase, in a daemon thread."""
    cfg = load_config(cfg_path)
    nets: list[GrpcNetwork] = []

    def serve(role: str, net: GrpcNetwork, pw: bytes, secrets: dict[str, bytes]) -> None:
        try:
            deploy.make_role(role, cfg, net, secrets, {}, pw)
        except Exception:  # the operator sees the run's error; this role just stops
            return
        net.start()

    for role in roles:
        pw = read_passphrase(role, cfg_path.parent / "pki" / f"{role}.pass")
        party = cfg.party(role)
        net = network_for(cfg, role, pw)
        secrets = open_key_file(party.secrets, role, pw) if party.secrets is not None else {}
        threading.Thread(target=serve, args=(role, net, pw, secrets), daemon=True).start()
        nets.append(net)
    pw = read_passphrase("operator", cfg_path.parent / "pki" / "operator.pass")
    with network_for(cfg, "operator", pw) as on:
        on.wait_for(roles, 60.0)
        operator = Operator("operator", on)
        try:
            yield operator
        finally:
            for role in roles:
                with suppress(SecureTreesError):
                    operator.control(role, "shutdown")
            for net in nets:
                net.close()


def test_an_id_held_by_two_guests_is_refused(adult: AdultHybrid, keys: Any, tmp_path: Path) -> None:
    cfg = _prepare(tmp_path, adult, keys)
    theirs = pd.read_csv(tmp_path / "data" / "guest0.csv", dtype=str, keep_default_na=False).iloc[:3]
    _edit_csv(tmp_path / "data" / "guest1.csv", lambda f: pd.concat([f, theirs], ignore_index=True))
    with _roles_in_threads(cfg, ["host", *GUESTS]) as operator, pytest.raises(
            DuplicateIdError, match="'train:guest0' and 'train:guest1'"):
        deploy.fit(operator, load_config(cfg))


def test_a_guest_with_no_id_in_common_is_refused(adult: AdultHybrid, keys: Any, tmp_path: Path) -> None:
    cfg = _prepare(tmp_path, adult, keys)

    def renamed(f: pd.DataFrame) -> pd.DataFrame:
        f["id"] = "other-" + f["id"]
        return f

    _edit_csv(tmp_path / "data" / "guest2.csv", renamed)
    with _roles_in_threads(cfg, ["host", *GUESTS]) as operator, pytest.raises(
            ParameterError, match="no train:guest2 id in common"):
        deploy.fit(operator, load_config(cfg))


def test_tables_and_parameters_are_checked_before_any_alignment(adult: AdultHybrid, keys: Any,
                                                                tmp_path: Path) -> None:
    """Refused when the role is built, before it serves anything (so no network is needed)."""
    cfg_path = _prepare(tmp_path, adult, keys)
    text = cfg_path.read_text()
    _edit_csv(tmp_path / "data" / "guest1.csv", lambda f: f.rename(columns={"id": "key"}))
    cfg = load_config(cfg_path)
    with pytest.raises(TableError, match="no id column 'id'"):
        deploy.make_role("guest1", cfg, None, {}, {}, b"")  # type: ignore[arg-type]
    _edit_csv(tmp_path / "data" / "host.csv", lambda f: f.drop(columns=["label"]))
    with pytest.raises(TableError, match="no label column 'label'"):
        deploy.make_role("host", cfg, None, {"paillier_key": b""}, {}, b"")  # type: ignore[arg-type]
    s = adult.split
    with pytest.raises(ParameterError, match="at least 3 guests"):
        deploy.prepare(tmp_path / "two", adult.X_train, adult.y_train, s.host_features, s.guest_features,
                       s.train_rows[:2], X_test=adult.X_test, test_rows=s.test_rows[:2], params=SETTINGS, keypair=keys)
    with pytest.raises(UnknownKeyError, match="unknown key 'host_dept' in \\[protocol\\] \\(did you mean 'host_depth'"):
        _prepare(tmp_path / "typo", adult, keys, host_dept=3)
    cfg_path.write_text(text.replace("[protocol]\n", "[protocol]\nhost_dept = 3\n"))
    with pytest.raises(UnknownKeyError, match="unknown key 'host_dept' in \\[protocol\\]"):
        load_config(cfg_path)  # refused before any role is built (the deployment's PARAMETERS)
    bads: list[tuple[Callable[[dict[str, Any]], object], str]] = [
        (lambda p: p.update(mode="fast"), "unknown mode"),
        (lambda p: p.update(guests=["guest0", "guest1"]), "at least 3 guests"),
        (lambda p: p["guest_bins"].pop("education-num"), "'education-num' needs its edges"),
        (lambda p: p.update(alignment="hmac-trusted"), "PSI only")]
    for edit, match in bads:
        doc = tomllib.loads(text)
        edit(doc["protocol"])
        cfg_path.write_text(dump_toml(doc))
        cfg = load_config(cfg_path)
        for role in ("host", "guest0"):
            with pytest.raises(ParameterError, match=match):
                deploy.make_role(role, cfg, None, {}, {}, b"")  # type: ignore[arg-type]
    cfg_path.write_text(text)
    with pytest.raises(ParameterError, match="not a role"):
        deploy.make_role("guest9", load_config(cfg_path), None, {}, {}, b"")  # type: ignore[arg-type]


def test_a_guest_reads_parquet_as_csv_under_the_declared_guest_space(adult: AdultHybrid, keys: Any,
                                                                     tmp_path: Path) -> None:
    """The same rows as a Parquet file (numbers typed, categories as text) encode alike; a guest column
    outside the guest space, or categories of the guest's own, are refused."""
    from dataclasses import replace

    cfg = load_config(_prepare(tmp_path, adult, keys))
    space = deploy.guest_space(cfg.params, MAX_BINS)
    party = cfg.party("guest0")
    csv_train, _ = deploy.guest_tables(party, space)
    frame = pd.read_csv(tmp_path / "data" / "guest0.csv")
    frame.to_parquet(tmp_path / "guest0.parquet")
    pq_train, _ = deploy.guest_tables(replace(party, data=tmp_path / "guest0.parquet"), space)
    assert csv_train is not None and pq_train is not None
    assert pq_train.ids == csv_train.ids
    np.testing.assert_array_equal(pq_train.X, csv_train.X)
    assert np.isnan(csv_train.X).any()  # empty cells are missing
    frame.assign(extra=1.0).to_parquet(tmp_path / "extra.parquet")
    with pytest.raises(TableError, match="not in \\[protocol\\] guest_features: \\['extra'\\]"):
        deploy.guest_tables(replace(party, data=tmp_path / "extra.parquet"), space)
    with pytest.raises(ParameterError, match="no categories of its own"):
        deploy.guest_tables(replace(party, table={"categories": {"education": ["a"]}}), space)


def test_a_missing_guest_stops_the_run(adult: AdultHybrid, keys: Any, tmp_path: Path) -> None:
    cfg = _prepare(tmp_path, adult, keys)
    with _roles_in_threads(cfg, ["host", "guest0", "guest1"]) as operator, pytest.raises(
            PartyUnavailable, match="guest2"):  # guest2 never comes up
        deploy.fit(operator, load_config(cfg))
    assert not (tmp_path / "out" / "host.proba.npy").exists()


def test_guests_refuse_a_host_key_other_than_the_pinned_one(adult: AdultHybrid, keys: Any, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's ``host_public_key`` names another key than the host's: an honest host refuses to
    start (its own check); a host that skips that check serves its own key, the alignment completes,
    then no guest takes part (with the key the run names, the same run trains: the first test)."""
    cfg = _prepare(tmp_path, adult, keys)
    other = generate_keypair(1024, allow_insecure=True)[0].to_bytes().hex()
    cfg.write_text(cfg.read_text().replace(keys[0].to_bytes().hex(), other))
    config = load_config(cfg)
    pw = read_passphrase("host", tmp_path / "pki" / "host.pass")
    secrets = open_key_file(config.party("host").secrets, "host", pw)  # type: ignore[arg-type]
    with pytest.raises(KeyMismatchError, match="host_public_key"):
        deploy.make_role("host", config, None, secrets, {}, pw)  # type: ignore[arg-type]
    monkeypatch.setattr(deploy, "check_own_key", lambda *a: None)  # the host that does not check its key
    with _roles_in_threads(cfg, ["host", *GUESTS]) as operator, pytest.raises(ProtocolError, match="pinned key"):
        deploy.fit(operator, load_config(cfg))


def test_cli_init_and_launch(tmp_path: Path, checkout_deployments: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``securetrees federation init hybridtree`` (the demo's split over 5 guests, CSV files), then ``launch``."""
    out = tmp_path / "run"
    assert cli.main(["federation", "init", "hybridtree", "--out", str(out), "--rows", "200", "--trees", "1",
                     "--insecure-1024"]) == 0
    assert (out / "data" / "guest4.csv").exists() and not list((out / "data").glob("*.npz"))
    assert cli.main(["federation", "launch", "--config", str(out / "run.toml")]) == 0
    printed = capsys.readouterr().out
    assert "federation finished" in printed and "rows: shape (1,)" in printed
    rows = pd.read_csv(out / "data" / "host-test.csv").shape[0]
    assert 90 <= rows < 100  # the host lacks a few of each guest's test ids
    assert np.load(out / "out" / "host.predictions.npy").shape == (rows,)
