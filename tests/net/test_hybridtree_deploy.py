"""HybridTree deployed: the host and every guest in its own process over mutual TLS, the same model
and predictions as the one-process facade on the same data and key (the run is deterministic: the
masks cancel exactly and Paillier's randomness never reaches a decrypted sum).

Keys are 1024-bit and the guest layers' minimum node size is 20 rows, so that a few hundred rows
grow guest splits quickly (the size is not the point here); hence the insecure-key warnings are allowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees import cli
from securetrees.errors import ParameterError, PartyUnavailable, ProtocolError, UnknownKeyError
from securetrees.net.config import load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.keyfile import open_key_file
from securetrees.net.service import launch, load_data, network_for
from securetrees.net.transport import GrpcNetwork
from securetrees.paillier import generate_keypair
from securetrees.protocols.hybridtree import deploy
from securetrees.protocols.hybridtree.demo import MAX_BINS, AdultHybrid, adult_hybrid
from securetrees.protocols.hybridtree.estimators import HybridTreeClassifier, with_guest_column
from securetrees.protocols.hybridtree.testing import fit_layout

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")

SETTINGS: dict[str, Any] = {"n_estimators": 2, "learning_rate": 0.5, "host_depth": 2, "max_bins": MAX_BINS,
                            "min_node_size": 20, "key_bits": 1024, "allow_insecure": True}


@pytest.fixture(scope="module")
def adult() -> AdultHybrid:
    return adult_hybrid(n_guests=3, rows=300)


@pytest.fixture(scope="module")
def keys() -> Any:
    return generate_keypair(1024, allow_insecure=True)


def _prepare(out: Path, data: AdultHybrid, keys: Any, **extra: Any) -> Path:
    s = data.split
    return deploy.prepare(out, data.X_train, data.y_train, s.host_features, s.guest_features, s.train_rows,
                          X_test=data.X_test, test_rows=s.test_rows, y_test=data.y_test, keypair=keys,
                          params={**SETTINGS, "categorical_features": data.categorical, **extra})


def test_host_and_guests_as_processes_match_the_one_process_run(adult: AdultHybrid, keys: Any, tmp_path: Path,
                                                                checkout_deployments: Path) -> None:
    got = launch(_prepare(tmp_path, adult, keys), tmp_path / "pki", log_dir=tmp_path)

    s = adult.split
    clf = HybridTreeClassifier(**{**SETTINGS, "categorical_features": adult.categorical}, keypair=keys)
    fit_layout(clf, adult.X_train, adult.y_train, s.host_features, s.guest_features, s.train_rows)
    splits = sum(r.n_guest_splits for r in clf.host_.records)
    assert splits > 0  # the guests' layers took part, not the host's alone
    assert set(got) == {"guest_splits", "score"}  # the operator gets figures, no prediction
    assert int(got["guest_splits"][0]) == splits
    assert float(got["score"][0]) == clf.score(with_guest_column(adult.X_test, s.test_rows), adult.y_test)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["host.predictions.npy", "host.proba.npy"]
    X_test = with_guest_column(adult.X_test, s.test_rows)
    np.testing.assert_array_equal(np.load(out / "host.proba.npy"), clf.predict_proba(X_test))
    np.testing.assert_array_equal(np.load(out / "host.predictions.npy"), clf.predict(X_test))
    assert "trained 2 trees" in (tmp_path / "host.log").read_text()  # each role logs through logging
    assert "loaded" in (tmp_path / "guest2.log").read_text()


def _serve(cfg_path: Path, roles: list[str]) -> list[GrpcNetwork]:
    """``roles`` on their own gRPC networks with mutual TLS, in this process."""
    cfg = load_config(cfg_path)
    nets = []
    for role in roles:
        pw = read_passphrase(role, cfg_path.parent / "pki" / f"{role}.pass")
        party = cfg.party(role)
        net = network_for(cfg, role, pw)
        secrets = open_key_file(party.secrets, role, pw) if party.secrets is not None else {}
        deploy.make_role(role, cfg, net, secrets, load_data(party.data), pw)
        net.start()
        nets.append(net)
    return nets


def test_a_missing_guest_stops_the_run(adult: AdultHybrid, keys: Any, tmp_path: Path) -> None:
    cfg_path = _prepare(tmp_path, adult, keys)
    nets = _serve(cfg_path, ["host", "guest0", "guest1"])  # guest2 never comes up
    try:
        cfg = load_config(cfg_path)
        pw = read_passphrase("operator", tmp_path / "pki" / "operator.pass")
        with network_for(cfg, "operator", pw) as on, pytest.raises(PartyUnavailable, match="guest2"):
            Operator("operator", on).control("host", "fit")
    finally:
        for net in nets:
            net.close()
    assert not (tmp_path / "out").exists()


def test_parameters_are_checked(adult: AdultHybrid, keys: Any, tmp_path: Path) -> None:
    s = adult.split
    with pytest.raises(ParameterError, match="at least 3 guests"):
        deploy.prepare(tmp_path / "two", adult.X_train, adult.y_train, s.host_features, s.guest_features,
                       s.train_rows[:2], X_test=adult.X_test, test_rows=s.test_rows[:2], params=SETTINGS, keypair=keys)
    with pytest.raises(UnknownKeyError, match="unknown key 'host_dept' in \\[protocol\\] \\(did you mean 'host_depth'"):
        _prepare(tmp_path / "typo", adult, keys, host_dept=3)
    cfg_path = _prepare(tmp_path / "run", adult, keys)
    text = cfg_path.read_text()
    cfg_path.write_text(text.replace("[protocol]\n", "[protocol]\nhost_dept = 3\n"))
    with pytest.raises(UnknownKeyError, match="unknown key 'host_dept' in \\[protocol\\]"):
        load_config(cfg_path)  # refused before any role is built (the deployment's PARAMETERS)
    for bad, match in [("mode = \"fast\"\n", "unknown mode"),
                       ("guests = [\"guest0\", \"guest1\"]\n", "at least 3 guests")]:
        if bad.startswith("guests"):
            guests = 'guests = [\n    "guest0",\n    "guest1",\n    "guest2",\n]\n'  # as tomli-w writes it
            assert guests in text
            cfg_path.write_text(text.replace(guests, bad))
        else:
            cfg_path.write_text(text.replace("[protocol]\n", "[protocol]\n" + bad))
        cfg = load_config(cfg_path)
        for role in ("host", "guest0"):
            with pytest.raises(ParameterError, match=match):
                deploy.make_role(role, cfg, None, {}, load_data(cfg.party(role).data), b"")  # type: ignore[arg-type]
    cfg_path.write_text(text)
    cfg = load_config(cfg_path)
    with pytest.raises(ParameterError, match="not a role"):
        deploy.make_role("guest9", cfg, None, {}, {}, b"")  # type: ignore[arg-type]


def test_cli_init_and_launch(tmp_path: Path, checkout_deployments: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``securetrees federation init hybridtree`` (the demo's split over 5 guests), then ``launch``."""
    out = tmp_path / "run"
    assert cli.main(["federation", "init", "hybridtree", "--out", str(out), "--rows", "200", "--trees", "1",
                     "--insecure-1024"]) == 0
    assert cli.main(["federation", "launch", "--config", str(out / "run.toml")]) == 0
    printed = capsys.readouterr().out
    assert "federation finished" in printed and "score: shape (1,)" in printed
    assert np.load(out / "out" / "host.predictions.npy").shape == (100,)


def test_guests_refuse_a_host_key_other_than_the_pinned_one(adult: AdultHybrid, keys: Any, tmp_path: Path) -> None:
    """The host serves its own key; the run's ``host_public_key`` names another: no guest takes part
    (with the key the run names, the same run trains: the first test)."""
    cfg_path = _prepare(tmp_path, adult, keys)
    other = generate_keypair(1024, allow_insecure=True)[0].to_bytes().hex()
    text = cfg_path.read_text()
    cfg_path.write_text(text.replace(keys[0].to_bytes().hex(), other))
    nets = _serve(cfg_path, load_config(cfg_path).roles)
    try:
        cfg = load_config(cfg_path)
        pw = read_passphrase("operator", tmp_path / "pki" / "operator.pass")
        with network_for(cfg, "operator", pw) as on, pytest.raises(ProtocolError, match="pinned key"):
            Operator("operator", on).control("host", "fit")
    finally:
        for net in nets:
            net.close()
