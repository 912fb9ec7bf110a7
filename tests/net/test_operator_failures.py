"""Start-up failures reach the operator: a role that cannot start answers every message with its typed
error and a reason that quotes nothing of its data (``securetrees.net.failed``), so the operator's
command fails within one round, not after its timeout; a second copy of a running party logs to a
file of its own, never into the running copy's log (``securetrees.log.claim_file``)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees.cli import main
from securetrees.datasets import load_adult
from securetrees.errors import MissingParameterError, ParameterError, PeerTimeout, SecureTreesError, TableError
from securetrees.log import claim_file, refused_path
from securetrees.net.alignment import AlignLeader, AlignMember, AlignmentPlan, check_test_rows, run_alignment
from securetrees.net.config import load_config
from securetrees.net.control import Operator
from securetrees.net.failed import FailedRole, check_started, public_reason
from securetrees.net.service import launch, spawn_role
from securetrees.protocols.federated_forest import deploy as ff_deploy
from securetrees.psi import deploy as psi_deploy
from securetrees.psi.messages import MEMBER_ROLE
from securetrees.runtime import InProcessNetwork

CELL = "SECRET-CELL-4711"
"""A value of a party's own table that its start-up error quotes (as a table error may)."""


def _data_leaks(reason: Callable[[str, SecureTreesError], str]) -> bool:
    """Whether ``reason`` gives the operator anything of the failing party's data (the quoted cell)."""
    return CELL in reason("bank", TableError(f"column 'age' holds {CELL!r}, which does not parse as a number"))


def test_the_public_reason_names_the_error_type_not_the_data() -> None:
    reason = public_reason("bank", TableError(f"column 'age' holds {CELL!r}"))
    assert "'bank' could not start its role: A party's own data table cannot be used" in reason, reason
    assert "logs/bank.log" in reason
    assert not _data_leaks(public_reason)
    # planted: a stand-in that forwards the error's own message hands the operator a cell of the data
    assert _data_leaks(lambda role, exc: f"{role!r} could not start its role: {exc}")


def test_a_failed_role_answers_every_message_with_its_typed_error() -> None:
    net = InProcessNetwork()
    stand_in = FailedRole.serving(MEMBER_ROLE, "bank", net, TableError(f"column 'age' holds {CELL!r}"))
    operator = Operator("operator", net)
    for action in ("status", "role", "fit"):
        with pytest.raises(TableError, match="could not start its role") as caught:
            operator.control("bank", action)
        assert CELL not in str(caught.value)
    with pytest.raises(TableError):
        check_started(operator, ["bank"])
    assert not stand_in.stopped.is_set()
    assert operator.control("bank", "shutdown").info == {"status": "stopping"}
    assert stand_in.stopped.is_set()
    # an error type whose constructor needs more than a message comes back as its nearest base that does not
    other = FailedRole.serving(MEMBER_ROLE, "shop", net, MissingParameterError("lacks ['k']", ("k",)))
    with pytest.raises(ParameterError, match="configuration section lacks keys"):
        operator.control("shop", "status")
    assert not isinstance(other.error, MissingParameterError)


def test_claimed_log_sends_a_second_writer_to_its_own_file(tmp_path: Path) -> None:
    log = tmp_path / "bank.log"
    first, refused = claim_file(log)
    assert refused is None
    try:
        second, refused = claim_file(log)  # another open of the same file: flock refuses it as another process
        assert refused == log and second.baseFilename == str(refused_path(log))
        second.emit(logging.LogRecord("x", logging.ERROR, __file__, 1, "address in use", None, None))
        second.close()
        assert "address in use" not in log.read_text() and "address in use" in refused_path(log).read_text()
        # planted: a plain file handler (no claim) writes the second copy's error into the first copy's log
        plain = logging.FileHandler(log, encoding="utf-8")
        plain.emit(logging.LogRecord("x", logging.ERROR, __file__, 1, "address in use", None, None))
        plain.close()
        assert "address in use" in log.read_text()
    finally:
        first.close()
    again, refused = claim_file(log)  # released with the first handler
    again.close()
    assert refused is None


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if env.get("PYTHONPATH"):  # absolute, as the roles run from another folder
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    return env


def test_operator_gets_a_start_up_failure_typed_and_a_second_copy_keeps_out_of_the_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = psi_deploy.prepare(tmp_path, {"a": np.arange(30), "b": np.arange(10, 40)})
    (tmp_path / "data" / "b.npz").write_bytes(b"not a data file")
    config = load_config(cfg)
    pki = tmp_path / "pki"
    procs = {r: spawn_role(config, r, pki / f"{r}.pass") for r in config.roles}
    try:
        op = ["--config", str(cfg), "--passphrase-file", str(pki / "operator.pass")]
        assert main(["operator", "fit", *op]) == 1
        err = capsys.readouterr().err
        # the type and the reason, raised by b; not a PeerTimeout once the whole timeout has passed
        assert "ParameterError: 'b' could not start its role" in err and "raised by 'b'" in err, err
        assert PeerTimeout.__name__ not in err
        assert main(["operator", "status", *op]) == 3
        out = capsys.readouterr().out
        assert "a: up;" in out and "b: FAILED; failed ParameterError: 'b' could not start" in out, out

        # a second copy of the running party a: refused (its address is taken), logging to a file of its own
        command = shutil.which("securetrees")
        assert command is not None, "the securetrees command is not installed (pip install -e '.[test]')"
        log = tmp_path / "logs" / "a.log"
        second = subprocess.run([command, "party", "--config", str(cfg), "--role", "a",  # noqa: S603
                                 "--passphrase-file", str(pki / "a.pass"), "--log-file", str(log)],
                                capture_output=True, text=True, env=_env(), timeout=120)
        assert second.returncode == 1 and "already in use" in second.stderr, second.stderr
        refused = list(log.parent.glob("a.refused-*.log"))
        assert len(refused) == 1
        own = refused[0].read_text()
        assert "already in use" in own and "is held by another running process" in own, own
        assert "already in use" not in log.read_text()
        # started as `federation launch` starts a role (its output appended to a.log): still out of a.log
        assert spawn_role(config, "a", pki / "a.pass").wait(timeout=120) == 1
        assert len(list(log.parent.glob("a.refused-*.log"))) == 2
        assert "already in use" not in log.read_text()

        assert main(["operator", "stop", *op]) == 0
        assert procs["b"].wait(timeout=60) == 1  # the stop ends the stand-in; the start-up error ends the process
        assert procs["a"].wait(timeout=60) == 0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
    b_log = (tmp_path / "logs" / "b.log").read_text()
    assert "b could not start: ParameterError: cannot read the data file" in b_log  # the details stay in its log


def test_test_ids_without_overlap_leave_training_alone_and_predict_says_so() -> None:
    plan = AlignmentPlan("a", {"train": ("a", "b"), "test": ("a", "b")})
    net = InProcessNetwork()
    AlignLeader("a", net, {"train": ["1", "2"], "test": ["t1", "t2"]}, plan)
    AlignMember("b", net, {"train": ["2", "3"], "test": ["t8", "t9"]})
    assert run_alignment(Operator("operator", net), plan) == {"train": 1, "test": 0}
    with pytest.raises(ParameterError, match="no test id in common: training goes on"):
        check_test_rows(0)
    check_test_rows(1)
    # a predict-only run aligns the test ids alone: there, no common id stops it at once
    alone = AlignmentPlan("a", {"test": ("a", "b")})
    net = InProcessNetwork()
    AlignLeader("a", net, {"test": ["t1"]}, alone)
    AlignMember("b", net, {"test": ["t9"]})
    with pytest.raises(ParameterError, match="no test id in common: nothing to align"):
        run_alignment(Operator("operator", net), alone)


def test_a_federated_forest_trains_when_only_the_test_ids_fail_to_overlap(tmp_path: Path) -> None:
    adult = load_adult()
    X, y, Xt = adult.X_train[:60], adult.y_train[:60], adult.X_test[:6]
    d = X.shape[1]
    part = [list(range(0, d, 2)), list(range(1, d, 2))]
    params: dict[str, Any] = {"n_estimators": 1, "max_depth": 2, "random_state": 0, "n_classes": 2,
                              "label_protection": "shared"}
    cfg = ff_deploy.prepare(tmp_path, X, y, part, X_test=Xt, params=params)
    test_file = tmp_path / load_config(cfg).party("client1").test_data  # type: ignore[operator]
    test_file.write_text(test_file.read_text(encoding="utf-8").replace("test-", "other-"), encoding="utf-8")
    with pytest.raises(ParameterError, match="no test id in common: training goes on") as caught:
        launch(cfg, tmp_path / "pki")
    assert "raised by 'client" in str(caught.value)
    assert re.search(r"master step fit: ", (tmp_path / "logs" / "master.log").read_text())  # it trained
    assert "no test id in common" in (tmp_path / "logs" / "client0.log").read_text()  # the leader said so at once
