"""SecureBoost deployed: the active party and every passive party in its own process over mutual TLS,
each reading its own CSV table, rows aligned by PSI led by the active party; the predictions the
active party writes equal the one-process facade's on the aligned rows with the same key (the run is
deterministic: Paillier's randomness never reaches a decrypted sum).

Keys are 1024-bit (the size is not the point here), hence the insecure-key warnings are allowed.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees import cli
from securetrees.datasets import load_adult
from securetrees.errors import KeyMismatchError, ParameterError, PartyUnavailable, ProtocolError, UnknownKeyError
from securetrees.net.config import RunConfig, load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.keyfile import open_key_file
from securetrees.net.service import await_roles, launch, network_for, spawn_role
from securetrees.net.transport import GrpcNetwork
from securetrees.paillier import PrivateKey, PublicKey, generate_keypair
from securetrees.protocols.secureboost import SecureBoostClassifier, SecureBoostRegressor, deploy
from securetrees.protocols.secureboost.demo import MAX_BINS, adult_partition
from securetrees.rand import DeterministicRandom
from securetrees.testing.alignment import joined_view
from securetrees.testing.paillier import small_keypair

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")

SETTINGS: dict[str, Any] = {"n_estimators": 2, "max_depth": 3, "learning_rate": 0.3, "max_bins": MAX_BINS,
                            "key_bits": 1024, "allow_insecure": True}


@pytest.fixture(scope="module")
def adult() -> Any:
    return load_adult()


@pytest.fixture(scope="module")
def other() -> tuple[PublicKey, PrivateKey]:
    """Another 1024-bit key pair than the run's."""
    return generate_keypair(1024, allow_insecure=True)


@pytest.fixture(scope="module")
def keys() -> tuple[PublicKey, PrivateKey]:
    return small_keypair(1024)


def _prepare(out: Path, adult: Any, keys: tuple[PublicKey, PrivateKey], n_passive: int = 2, rows: int = 150,
             **extra: Any) -> Path:
    return deploy.prepare(out, adult.X_train[:rows], adult.y_train[:rows], adult_partition(n_passive),
                          X_test=adult.X_test[:30], params={**SETTINGS, **extra}, keypair=keys,
                          names=adult.feature_names, categories=adult.categories, lacking=3,
                          rng=DeterministicRandom("secureboost trial"))  # the rows each party lacks: fixed


def test_active_and_passives_as_processes_match_the_one_process_run(adult: Any, keys: Any, tmp_path: Path,
                                                                    checkout_deployments: Path) -> None:
    """Three parties' CSV files (string categories, empty cells, partly overlapping ids in their own
    orders): the active party's predictions equal the facade's on the intersected rows in the agreed
    order; the operator receives counts only."""
    cfg = _prepare(tmp_path, adult, keys)
    got = launch(cfg, tmp_path / "pki", log_dir=tmp_path)

    part = adult_partition(2)
    data = joined_view(load_config(cfg), ["active", "passive0", "passive1"], part, adult.X_train.shape[1])
    assert len(data.ids) == 150 - 3 * 3 and data.X_test.shape[0] == 30 - 3 * 3
    assert np.isnan(data.X).any() and any(data.categorical)
    clf = SecureBoostClassifier(part, **SETTINGS, keypair=keys,
                                categorical_features=[int(c) for c in np.flatnonzero(data.categorical)])
    clf.fit(data.X, data.y)
    model = clf.active_.model
    assert model is not None
    splits = sum(len(r.records) for r in model.trees)
    assert splits > 0  # the passive parties' columns took part
    assert set(got) == {"passive_splits", "test_rows"}  # figures, no prediction
    assert int(got["passive_splits"][0]) == splits and int(got["test_rows"][0]) == data.X_test.shape[0]
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["active.predictions.csv", "active.predictions.npy",
                                                      "active.proba.npy", "active.rows.npz",
                                                      "active.test_ids.npy", "passive0.rows.npz", "passive1.rows.npz"]
    ids = tuple(np.load(out / "active.test_ids.npy").tolist())  # the active party's own ids, in the agreed order
    assert len(ids) == data.X_test.shape[0] and len(set(ids)) == len(ids) and all(i.startswith("test-") for i in ids)
    np.testing.assert_array_equal(np.load(out / "active.proba.npy"), clf.predict_proba(data.X_test))
    np.testing.assert_array_equal(np.load(out / "active.predictions.npy"), clf.predict(data.X_test))
    assert "trained 2 trees" in (tmp_path / "active.log").read_text()
    assert "loaded 21 test rows" in (tmp_path / "passive1.log").read_text()


def test_one_passive_party_regression(adult: Any, keys: Any, tmp_path: Path, checkout_deployments: Path) -> None:
    """``task = "regression"`` with a single passive party: the same values as the facade's."""
    X, y = adult.X_train[:100], adult.X_train[:100, 0]  # regress age (an active column) ...
    part = [[2, 4], [c for c in range(X.shape[1]) if c not in (0, 2, 4)]]  # ... without it
    cfg = deploy.prepare(tmp_path, X[:, 1:], y, [[c - 1 for c in p] for p in part], X_test=adult.X_test[:20, 1:],
                         params={**SETTINGS, "task": "regression"}, keypair=keys, lacking=2,
                         rng=DeterministicRandom("secureboost trial/regression"))
    got = launch(cfg, tmp_path / "pki", log_dir=tmp_path)
    p1 = [[c - 1 for c in p] for p in part]
    data = joined_view(load_config(cfg), ["active", "passive0"], p1, X.shape[1] - 1)
    reg = SecureBoostRegressor(p1, **SETTINGS, keypair=keys).fit(data.X, data.y.astype(np.float64))
    assert int(got["test_rows"][0]) == 20 - 2 * 2
    assert sorted(p.name for p in (tmp_path / "out").glob("active.*.npy")) == ["active.predictions.npy",
                                                                                    "active.test_ids.npy"]
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "active.predictions.npy"), reg.predict(data.X_test))


def _build_in_threads(configs: dict[str, RunConfig], pki: Path) -> tuple[list[GrpcNetwork], list[threading.Thread]]:
    """Each role built in this process (its alignment phase blocks ``make_role``, so each in a thread),
    from its own copy of the configuration; its protocol network starts once it is built."""
    nets: list[GrpcNetwork] = []
    threads = []
    for role, cfg in configs.items():
        pw = read_passphrase(role, pki / f"{role}.pass")
        party = cfg.party(role)
        net = network_for(cfg, role, pw)
        secrets = open_key_file(party.secrets, role, pw) if party.secrets is not None else {}
        nets.append(net)

        def build(role: str = role, cfg: RunConfig = cfg, net: GrpcNetwork = net,
                  secrets: dict[str, bytes] = secrets, pw: bytes = pw) -> None:
            deploy.make_role(role, cfg, net, secrets, {}, pw)
            net.start()

        threads.append(threading.Thread(target=build, daemon=True))
        threads[-1].start()
    return nets, threads


def test_passives_refuse_an_active_key_other_than_the_pinned_one(adult: Any, keys: Any, other: Any, tmp_path: Path,
                                                                  checkout_deployments: Path) -> None:
    """passive0's copy of the run pins another key than the one the active party serves: the PSI
    alignment completes, then the set-up is refused (with the run's key the same run trains: the
    first test)."""
    cfg_path = _prepare(tmp_path, adult, keys, rows=60)
    other = other[0].to_bytes().hex()
    text = cfg_path.read_text()
    assert keys[0].to_bytes().hex() in text
    (tmp_path / "other.toml").write_text(text.replace(keys[0].to_bytes().hex(), other))
    cfg, alt = load_config(cfg_path), load_config(tmp_path / "other.toml")
    nets, threads = _build_in_threads({"active": cfg, "passive0": alt, "passive1": cfg}, tmp_path / "pki")
    try:
        pw = read_passphrase("operator", tmp_path / "pki" / "operator.pass")
        with network_for(cfg, "operator", pw) as on:
            on.wait_for(["active", "passive0", "passive1"], 30)
            op = Operator("operator", on)
            with pytest.raises(ProtocolError, match="pinned"):
                deploy.fit(op, cfg)
    finally:
        for net in nets:
            net.close()
        for t in threads:
            t.join(timeout=10)
    assert not (tmp_path / "out" / "active.predictions.npy").exists()


def test_a_missing_passive_party_stops_the_run(adult: Any, keys: Any, tmp_path: Path,
                                               checkout_deployments: Path) -> None:
    cfg_path = _prepare(tmp_path, adult, keys, rows=60)
    config = load_config(cfg_path)
    pki = tmp_path / "pki"
    procs = {r: spawn_role(config, r, pki / f"{r}.pass", tmp_path / f"{r}.log") for r in ("active", "passive0")}
    try:
        with network_for(config, "operator", read_passphrase("operator", pki / "operator.pass")) as net:
            await_roles(net, procs, 60)
            with pytest.raises(PartyUnavailable, match="passive1"):
                deploy.fit(Operator("operator", net), config)
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
    assert not (tmp_path / "out" / "active.predictions.npy").exists()


def test_parameters_and_keys_are_checked(adult: Any, keys: Any, other: Any, tmp_path: Path,
                                         checkout_deployments: Path) -> None:
    """Unknown keys, bad values, a role outside the run, trusted HMAC alignment, a key file that
    does not hold the run's key: refused at start-up, before any alignment (no network is needed)."""
    with pytest.raises(UnknownKeyError, match="unknown key 'max_dept' in \\[protocol\\] \\(did you mean 'max_depth'"):
        _prepare(tmp_path / "typo", adult, keys, max_dept=3)
    with pytest.raises(ParameterError, match="at least one passive"):
        deploy.prepare(tmp_path / "alone", adult.X_train[:50], adult.y_train[:50], [list(range(14))],
                       X_test=adult.X_test[:5], params=SETTINGS, keypair=keys)
    cfg_path = _prepare(tmp_path / "run", adult, keys, rows=60)
    text = cfg_path.read_text()
    cfg_path.write_text(text.replace("[protocol]\n", "[protocol]\nmax_dept = 3\n"))
    with pytest.raises(UnknownKeyError, match="unknown key 'max_dept' in \\[protocol\\]"):
        load_config(cfg_path)  # refused before any role is built (the deployment's PARAMETERS)

    def build(role: str, config: RunConfig, secrets: dict[str, bytes] | None = None) -> None:
        pw = read_passphrase(role, cfg_path.parent / "pki" / f"{role}.pass")
        if secrets is None:
            party = config.party(role)
            secrets = open_key_file(party.secrets, role, pw) if party.secrets is not None else {}
        deploy.make_role(role, config, None, secrets, {}, pw)  # type: ignore[arg-type]

    for key, value, match in [("max_depth", "0", "max_depth"), ("task", '"ranking"', "task must be"),
                              ("encryption", '"rsa"', "unknown encryption"),
                              ("alignment", '"hmac-trusted"', "PSI only")]:
        kept = re.sub(rf"^{key} = .*\n", "", text, flags=re.MULTILINE)
        cfg_path.write_text(kept.replace("[protocol]\n", f"[protocol]\n{key} = {value}\n"))
        cfg = load_config(cfg_path)
        for role in ("active", "passive0"):
            with pytest.raises(ParameterError, match=match):
                build(role, cfg)
    passives = 'passives = [\n    "passive0",\n    "passive1",\n]'  # as tomli-w writes it
    assert passives in text
    cfg_path.write_text(text.replace(passives, "passives = []"))
    with pytest.raises(ParameterError, match="one or more distinct"):
        build("passive0", load_config(cfg_path))
    cfg_path.write_text(text)
    cfg = load_config(cfg_path)
    with pytest.raises(ParameterError, match="not a role"):
        deploy.make_role("passive7", cfg, None, {}, {}, b"")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="no 'paillier_key'"):
        build("active", cfg, secrets={})
    from securetrees.net.deployment import seal_paillier

    pw = read_passphrase("active", cfg_path.parent / "pki" / "active.pass")
    wrong = other[1]
    with pytest.raises(KeyMismatchError, match="another key than \\[protocol\\] active_public_key"):
        build("active", cfg, secrets={"paillier_key": seal_paillier(wrong)(pw)})


def test_cli_init_and_launch(tmp_path: Path, checkout_deployments: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``securetrees federation init secureboost`` (the demo's split of Adult over two passive
    parties, CSV files, PSI alignment), then ``launch``."""
    out = tmp_path / "run"
    assert cli.main(["federation", "init", "secureboost", "--out", str(out), "--rows", "200", "--trees", "1",
                     "--insecure-1024"]) == 0
    assert cli.main(["federation", "launch", "--config", str(out / "run.toml")]) == 0
    printed = capsys.readouterr().out
    assert "federation finished" in printed and "test_rows: shape (1,)" in printed
    # 500 test rows, each of the three parties lacking 200 // 50 of them: the PSI keeps the rest
    proba = np.load(out / "out" / "active.proba.npy")
    assert proba.shape == (500 - 3 * 4, 2)
    assert set(np.load(out / "out" / "active.predictions.npy").tolist()) <= {"<=50K", ">50K"}
