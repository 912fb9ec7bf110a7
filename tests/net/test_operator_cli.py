"""Operating a federation without Python: parties started as ``securetrees party`` processes, then
``securetrees operator`` invocations (fit, status, predict to CSV, each in a process of its own;
revoke, refused for this protocol); the roles keep the trained forest between them.  Every role
logs its steps to a file, and ``federation launch`` prints the end of a failed role's log."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees.cli import main
from securetrees.datasets import load_adult
from securetrees.errors import PartyUnavailable
from securetrees.net.config import load_config
from securetrees.net.service import launch, spawn_role
from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.protocols.federated_forest import deploy as ff_deploy
from securetrees.psi import deploy as psi_deploy
from securetrees.rand import DeterministicRandom
from securetrees.testing.alignment import joined_view

STEP = r"step {}: [0-9.]+ s, sent (\d+) B, received (\d+) B, rounds (\d+)"


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if env.get("PYTHONPATH"):  # absolute, as the roles run from another folder
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    return env


def _operator(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = shutil.which("securetrees")
    assert command is not None, "the securetrees command is not installed (pip install -e '.[test]')"
    return subprocess.run([command, "operator", *args, "--config", str(cfg),  # noqa: S603
                           "--passphrase-file", str(cfg.parent / "pki" / "operator.pass")],
                          capture_output=True, text=True, env=_env(), timeout=120, cwd=cfg.parent)


def _read_csv(path: Path) -> np.ndarray:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["row", "proba_0", "proba_1"]  # the label holder's class names (here its codes)
    assert [int(r[0]) for r in rows[1:]] == list(range(len(rows) - 1))
    return np.asarray([[float(v) for v in r[1:]] for r in rows[1:]])


def test_operator_commands_drive_running_parties(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    adult = load_adult()
    X, y, Xt = adult.X_train[:120], adult.y_train[:120], adult.X_test[:15]
    d = X.shape[1]
    part = [list(range(0, d, 2)), list(range(1, d, 2))]
    params: dict[str, Any] = {"n_estimators": 2, "max_depth": 3, "random_state": 0, "n_classes": 2,
                              "label_protection": "shared"}
    cfg = ff_deploy.prepare(tmp_path, X, y, part, X_test=Xt, params=params, lacking=2,
                            id_key=DeterministicRandom("op ids").token_bytes(32))
    config = load_config(cfg)
    procs = {r: spawn_role(config, r, tmp_path / "pki" / f"{r}.pass") for r in config.roles}
    try:
        fit = _operator(cfg, "fit")  # the alignment phase (PSI), then training
        assert fit.returncode == 0, fit.stderr
        assert re.search(r"fit: trees 2, train_rows 116, test_rows 11", fit.stdout), fit.stdout
        after = _operator(cfg, "status")
        # fit, then save_model (each party's model part)
        assert re.search(r"master: up; trees 2, role master, steps 2, last_step save_model", after.stdout), after.stdout
        out = tmp_path / "predictions.csv"
        pred = _operator(cfg, "predict", "--out", str(out))
        assert pred.returncode == 0, pred.stderr
        # (in this process, to save a start-up; it connects afresh all the same)
        assert main(["operator", "revoke", "--party", "client1", "--config", str(cfg),
                     "--passphrase-file", str(tmp_path / "pki" / "operator.pass")]) == 1
        assert "UnsupportedActionError: the protocol 'federated-forest' has no 'revoke' step" in capsys.readouterr().err
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
    data = joined_view(config, ["client0", "client1"], part, d)
    ff = FederatedForestClassifier(2, max_depth=3, random_state=0, label_protection="shared",
                                   rng=DeterministicRandom("op ids"), categorical_features=data.categorical)
    ff.set_params(partition=part).fit(data.X, data.y)
    np.testing.assert_array_equal(_read_csv(out), ff.predict_proba(data.X_test))
    logs = tmp_path / "logs"
    master, operator = (logs / "master.log").read_text(), (logs / "operator.log").read_text()
    sent, received, rounds = map(int, re.findall("master " + STEP.format("fit"), master)[0])
    assert sent > 0 and received > 0 and rounds > 0
    assert re.search(r"securetrees.progress: federated forest: 2/2, ", master)  # a line per tree in its log
    assert "client1: tree 2 of 2" in (logs / "client1.log").read_text()  # and in every client's
    for step in ("align", "fit", "predict one-round"):
        assert re.search("operator " + STEP.format(step), operator), step
    assert "UnsupportedActionError" in operator  # the error that ended the command is in its log

    # the same parties restarted predict-only, on the model parts the fit left and no training file
    pcfg = tmp_path / "predict.toml"
    pcfg.write_text(cfg.read_text(encoding="utf-8").replace("[run]\n", '[run]\njob = "predict"\n', 1),
                    encoding="utf-8")
    for name in ("client0", "client1"):
        (tmp_path / "data" / f"{name}.csv").unlink()
    pconfig = load_config(pcfg)
    procs = {r: spawn_role(pconfig, r, tmp_path / "pki" / f"{r}.pass") for r in pconfig.roles}
    try:
        refit = _operator(pcfg, "fit")
        assert refit.returncode == 1 and "predict-only" in refit.stderr, refit.stderr
        again = tmp_path / "again.csv"
        pred = _operator(pcfg, "predict", "--out", str(again))  # aligns the test rows first (PSI)
        assert pred.returncode == 0, pred.stderr
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)

    def rows(a: np.ndarray) -> np.ndarray:  # a fresh PSI's agreed order is its own: compare row sets
        return a[np.lexsort(a.T[::-1])]

    np.testing.assert_array_equal(rows(_read_csv(again)), rows(ff.predict_proba(data.X_test)))


def secrets_in_logs(folder: Path, secrets: dict[str, bytes]) -> list[str]:
    """Which of ``secrets`` (name → bytes) appear in any log of ``folder``, raw or as hex."""
    text = b"".join(f.read_bytes() for f in sorted(folder.glob("*.log")))
    return sorted(n for n, v in secrets.items() if v in text or v.hex().encode() in text)


def test_launch_keeps_the_logs_with_step_lines_and_no_secret(tmp_path: Path) -> None:
    cfg = psi_deploy.prepare(tmp_path, {"a": np.arange(30), "b": np.arange(10, 40)})
    assert int(launch(cfg, tmp_path / "pki")["size"]) == 20
    logs = tmp_path / "logs"
    a, b = (logs / "a.log").read_text(), (logs / "b.log").read_text()
    sent, received, rounds = map(int, re.findall("a " + STEP.format("run"), a)[0])
    assert sent > 0 and received > 0 and rounds > 0
    assert re.search("b " + STEP.format("save"), b)
    assert "b stopping after 1 steps" in b
    passphrases = {f.stem: f.read_bytes().strip() for f in (tmp_path / "pki").glob("*.pass")}
    assert set(passphrases) == {"a", "b", "operator"}
    assert secrets_in_logs(logs, passphrases) == []
    # planted: a role that logged its passphrase is caught
    with open(logs / "b.log", "ab") as f:
        f.write(b"12:00:00 DEBUG securetrees.psi.psi_member: opened with " + passphrases["b"] + b"\n")
    assert secrets_in_logs(logs, passphrases) == ["b"]


def test_launch_prints_the_tail_of_a_failed_role(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = psi_deploy.prepare(tmp_path, {"a": np.arange(30), "b": np.arange(10, 40)})
    (tmp_path / "data" / "b.npz").write_bytes(b"not a data file")
    assert main(["federation", "launch", "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    log = tmp_path / "logs" / "b.log"
    assert "role 'b' failed; the last" in err and str(log) in err, err
    assert "cannot read the data file" in err  # a line of b's log, printed
    assert "role 'a'" not in err
    assert "ParameterError: cannot read the data file" in log.read_text()


def test_status_reports_roles_that_are_down(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = psi_deploy.prepare(tmp_path, {"a": np.arange(3), "b": np.arange(3)})
    assert main(["operator", "status", "--timeout", "0.5", "--config", str(cfg),
                 "--passphrase-file", str(tmp_path / "pki" / "operator.pass")]) == 3
    out = capsys.readouterr().out
    assert "a: DOWN; error party 'a' did not come up" in out and "b: DOWN" in out, out


def test_a_step_with_a_role_down_says_how_to_start_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A role that is not up (never started, or stopped at start-up on a bad table) fails ``fit`` with
    the command that starts it and the log that tells why it stopped, not a bare timeout."""
    cfg = psi_deploy.prepare(tmp_path, {"a": np.arange(3), "b": np.arange(3)})
    assert main(["operator", "fit", "--timeout", "0.5", "--config", str(cfg),
                 "--passphrase-file", str(tmp_path / "pki" / "operator.pass")]) == 1
    err = capsys.readouterr().err
    assert "PeerTimeout: party 'a' did not come up within 0.5 s" in err, err
    assert f"securetrees party --config {cfg} --role a" in err and "a.log" in err, err


def test_predict_before_fit_says_to_fit_first() -> None:
    """Data holders still in the alignment phase have no model: ``predict`` (or ``revoke``) says to run
    ``fit`` first; it failed with "'bank' has no control action 'load_test'"."""
    from securetrees.errors import ParameterError
    from securetrees.net.config import RunConfig, TransportOptions
    from securetrees.net.control import Controllable, Operator
    from securetrees.net.operate import check_fitted
    from securetrees.psi.messages import MEMBER_ROLE
    from securetrees.runtime import InProcessNetwork, Party

    class Waiting(Controllable, Party):
        role = MEMBER_ROLE

    class Serving(Controllable, Party):
        role = "client"

    net = InProcessNetwork()
    Waiting("bank", net)
    Serving("shop", net)
    config = RunConfig(Path("run.toml"), "federated-forest", "operator", Path("ca.pem"), {}, TransportOptions())
    operator = Operator("operator", net)
    with pytest.raises(ParameterError, match="securetrees operator fit"):
        check_fitted(operator, config, ["bank", "shop"])
    check_fitted(operator, config, ["shop"])  # serving its protocol role: passes
    check_fitted(operator, replace(config, job="predict"), ["bank", "shop"])  # a predict-only run aligns in predict


class _DownNetwork:
    """A network on which every role is down: each wait lasts its whole timeout on a fake clock."""

    def __init__(self, clock: list[float]) -> None:
        self.clock, self.waits = clock, []  # type: list[float]

    def __enter__(self) -> _DownNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def register(self, party: object) -> None:
        return None

    def wait_for(self, roles: list[str], timeout: float) -> None:
        self.waits.append(timeout)
        self.clock[0] += timeout
        raise PartyUnavailable(f"{roles[0]} is down")


@pytest.mark.parametrize("action", ["status", "stop"])
def test_status_and_stop_share_one_deadline_over_the_roles(monkeypatch: pytest.MonkeyPatch, action: str) -> None:
    """Five roles down cost one timeout (each later role its floor), not five timeouts (the earlier
    per-role wait, which fails this test)."""
    from securetrees.net import operate

    clock = [100.0]
    net = _DownNetwork(clock)
    monkeypatch.setattr(operate.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(operate, "network_for", lambda *a, **k: net)
    monkeypatch.setenv("SECURETREES_PASSPHRASE", "unused")
    config = SimpleNamespace(operator="operator", roles=["a", "b", "c", "d", "e"])
    if action == "status":
        report = operate.status(config, None, timeout=5.0)  # type: ignore[arg-type]
        assert [r["reachable"] for r in report.values()] == ["no"] * 5
    else:
        assert operate.stop(config, None, timeout=5.0) == []  # type: ignore[arg-type]
    assert net.waits == [5.0, 0.25, 0.25, 0.25, 0.25]
