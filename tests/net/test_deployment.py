"""Every role in its own process over mutual TLS on loopback: the same results as in one process.

Keys are 1024-bit (the size is not the point here), hence the insecure-key warnings are allowed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("grpc")

from securetrees.datasets import load_adult
from securetrees.dtpkc import KGC
from securetrees.errors import PartyUnavailable, PeerTimeout
from securetrees.net.config import load_config
from securetrees.net.control import Operator
from securetrees.net.service import await_roles, launch, network_for, read_passphrase, spawn_role
from securetrees.net.tables import party_tables
from securetrees.paillier import PublicKey, generate_keypair
from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.protocols.federated_forest import deploy as ff_deploy
from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.revfrf import deploy as rev_deploy
from securetrees.rand import DeterministicRandom
from securetrees.testing.alignment import joined_view

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")


@pytest.fixture(scope="module")
def adult() -> Any:
    return load_adult()


def _insecure_loader(b: bytes) -> PublicKey:
    return PublicKey.from_bytes(b, allow_insecure=True)


def test_revfrf_build_predict_revoke_match_the_in_process_run(adult: Any, tmp_path: Path) -> None:
    """Four organisations' CSV files (the CS's labels, three participants' columns with string
    categories and empty cells), each lacking ids the others hold, rows in their own orders."""
    X, y, Xt = adult.X_train[:100], adult.y_train[:100], adult.X_test[:10]
    part = [list(range(i, X.shape[1], 3)) for i in range(3)]
    settings = {"n_estimators": 2, "max_depth": 3, "random_state": 3, "n_classes": 2}
    cfg = rev_deploy.prepare(tmp_path, X, y, part, X_test=Xt, settings=settings,
                             kgc=KGC.setup(1024, allow_insecure=True), names=adult.feature_names,
                             categories=adult.categories, lacking=2)
    got = launch(cfg, tmp_path / "pki", log_dir=tmp_path)

    config = load_config(cfg)
    data = joined_view(config, ["u1", "u2", "u3", "cs"], part, X.shape[1])
    assert len(data.ids) == 100 - 4 * 2 and data.X_test.shape[0] == 10 - 3 * 2
    assert np.isnan(data.X).any() and any(data.categorical)
    requester, _ = party_tables(config.party("requester"))
    clf = RevFRFClassifier(n_estimators=2, max_depth=3, random_state=3, key_bits=1024, allow_insecure=True)
    clf.set_params(partition=part).fit(data.X, data.y)
    Xa = data.X_test
    want = {"vertical": clf.predict_proba(Xa), "test": clf.predict_proba(Xa, method="test"),
            "encrypted": clf.predict_proba(requester.X, method="encrypted")}
    clf.revoke("u3", level=2)
    want["after_revocation"] = clf.predict_proba(Xa)
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def _ff_setup(adult: Any, tmp_path: Path, **extra: Any) -> tuple[Path, dict[str, Any], Any]:
    """The trusted setting (``alignment = "hmac-trusted"``): every client holds the same ids."""
    X, y, Xt = adult.X_train[:300], adult.y_train[:300], adult.X_test[:40]
    part = [list(range(0, X.shape[1], 2)), list(range(1, X.shape[1], 2))]
    keys = generate_keypair(1024, allow_insecure=True)
    params = {"n_estimators": 3, "max_depth": 4, "random_state": 0, "n_classes": 2, "allow_insecure": True,
              "key_bits": 1024, "alignment": "hmac-trusted", "release_predictions": "operator", **extra}
    cfg = ff_deploy.prepare(tmp_path, X, y, part, X_test=Xt, params=params, paillier_keys=keys,
                            id_key=DeterministicRandom("ff ids").token_bytes(32), shuffle=False)
    ff = FederatedForestClassifier(params["n_estimators"], max_depth=4, random_state=0, paillier_keys=keys,
                                   allow_insecure=True, key_bits=1024, rng=DeterministicRandom("ff ids"),
                                   public_key_loader=_insecure_loader)
    ff.set_params(partition=part).fit(X, y)
    return cfg, {"output": ff.predict_proba(Xt)}, (X, y, Xt)


def parquet(cfg: Path, party: str) -> None:
    """Give ``party`` Parquet files instead of its CSV files (pandas' own types: numbers and text)."""
    text = cfg.read_text(encoding="utf-8")
    for name in (f"data/{party}.csv", f"data/{party}-test.csv"):
        pd.read_csv(cfg.parent / name).to_parquet(cfg.parent / name.replace(".csv", ".parquet"))
        (cfg.parent / name).unlink()
        text = text.replace(f'"{name}"', f'"{name.replace(".csv", ".parquet")}"')
    cfg.write_text(text, encoding="utf-8")


def test_federated_forest_psi_aligned_matches_the_in_process_run(adult: Any, tmp_path: Path) -> None:
    """Three clients' files, two CSV and one Parquet (string categories, empty cells, partly
    overlapping ids in their own orders): the deployed predictions equal the one-process estimator's on the
    intersected rows in the agreed order."""
    X, y, Xt = adult.X_train[:150], adult.y_train[:150], adult.X_test[:30]
    d = X.shape[1]
    part = [list(range(i, d, 3)) for i in range(3)]
    keys = generate_keypair(1024, allow_insecure=True)
    params = {"n_estimators": 2, "max_depth": 3, "random_state": 0, "n_classes": 2, "allow_insecure": True,
              "key_bits": 1024, "release_predictions": "operator"}
    cfg = ff_deploy.prepare(tmp_path, X, y, part, X_test=Xt, params=params, paillier_keys=keys, label_holder=1,
                            id_key=DeterministicRandom("ff ids").token_bytes(32), names=adult.feature_names,
                            categories=adult.categories, lacking=3)
    parquet(cfg, "client2")
    got = launch(cfg, tmp_path / "pki", log_dir=tmp_path)
    data = joined_view(load_config(cfg), ["client0", "client1", "client2"], part, d)
    assert len(data.ids) == 150 - 3 * 3 and data.X_test.shape[0] == 30 - 3 * 3
    assert np.isnan(data.X).any() and any(data.categorical)
    ff = FederatedForestClassifier(2, max_depth=3, random_state=0, paillier_keys=keys, allow_insecure=True,
                                   key_bits=1024, rng=DeterministicRandom("ff ids"), public_key_loader=_insecure_loader,
                                   categorical_features=data.categorical)
    ff.set_params(partition=part).fit(data.X, data.y)
    np.testing.assert_array_equal(got["output"], ff.predict_proba(data.X_test))


def test_killed_client_fails_fast_and_training_resumes_when_it_returns(adult: Any, tmp_path: Path) -> None:
    cfg_path, want, _ = _ff_setup(adult, tmp_path, n_estimators=20, checkpoint_dir="ckpt")
    text = cfg_path.read_text().replace("deadline = 600.0", "deadline = 20.0")
    cfg_path.write_text(text)
    config = load_config(cfg_path)
    pki = tmp_path / "pki"
    procs = {r: spawn_role(config, r, pki / f"{r}.pass", tmp_path / f"{r}.log") for r in config.roles}
    try:
        with network_for(config, "operator", read_passphrase("operator", pki / "operator.pass")) as net:
            op = Operator("operator", net)
            await_roles(net, procs, 60)
            outcome: dict[str, BaseException | None] = {}

            def fit() -> None:
                try:
                    op.control("master", "fit")
                    outcome["error"] = None
                except BaseException as exc:
                    outcome["error"] = exc

            worker = threading.Thread(target=fit)
            worker.start()
            ckpt, journal = tmp_path / "ckpt" / "client1.ckpt", tmp_path / "ckpt" / "client1.journal.ckpt"
            end = time.monotonic() + 60
            while not ckpt.exists() and time.monotonic() < end:
                time.sleep(0.02)
            assert ckpt.exists() and journal.exists(), "no checkpoint was written"
            # kill client1 once it has sent a score request after the checkpoint (it journals each
            # one just before it leaves): the label holder has answered it or is answering it, so
            # the resume repeats an answered request (to be answered from the kept reply)
            first = journal.stat().st_ino
            while journal.stat().st_ino == first and time.monotonic() < end:
                time.sleep(0.005)
            assert journal.stat().st_ino != first, "client1 sent no score request after its checkpoint"
            os.kill(procs["client1"].pid, signal.SIGKILL)
            worker.join(timeout=30)
            assert not worker.is_alive()
            # detected as gone (the connection refused after the transport's retries), not waited for
            # until the run's deadline (PeerTimeout, a subclass): a type, not a wall-clock bound
            assert isinstance(outcome["error"], PartyUnavailable), outcome
            assert not isinstance(outcome["error"], PeerTimeout), outcome
            assert "client1" in str(outcome["error"])

            procs["client1"] = spawn_role(config, "client1", pki / "client1.pass", tmp_path / "client1.log")
            await_roles(net, {"client1": procs["client1"]}, 60)
            op.control("master", "resume")
            op.control_many(["client0", "client1"], "load_test")
            op.control("master", "predict")
            got = op.control("client0", "release").arrays["output"]  # the label holder's row order
            op.control_many(config.roles, "shutdown")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
    np.testing.assert_array_equal(got, want["output"])


def test_cli_init_and_launch_a_local_federation(tmp_path: Path) -> None:
    """The installed command, launched from a folder whose ``protocols.py`` and ``grpc.py`` would
    break any process that imported them from its working directory (the roles included)."""
    command = shutil.which("securetrees")
    assert command is not None, "the securetrees command is not installed (pip install -e '.[test]')"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if env.get("PYTHONPATH"):  # `PYTHONPATH=.` (how a worktree runs the suite) would name the folder below
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    here = tmp_path / "work"
    here.mkdir()
    for name in ("protocols.py", "grpc.py"):
        (here / name).write_text("raise SystemExit('imported from the working directory')\n")
    init = subprocess.run([command, "federation", "init", "federated-forest",  # noqa: S603
                           "--out", str(tmp_path / "run"), "--rows", "200", "--trees", "2", "--insecure-1024"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=here)
    assert init.returncode == 0, init.stderr
    assert "run.toml" in init.stdout
    assert "passphrase" not in (tmp_path / "run" / "run.toml").read_text()
    run = subprocess.run([command, "federation", "launch",  # noqa: S603
                          "--config", str(tmp_path / "run" / "run.toml")], capture_output=True, text=True, env=env,
                         timeout=300, cwd=here)
    assert run.returncode == 0, run.stderr
    # 500 test rows, each of the three clients lacking 200 // 50 of them: the PSI keeps the rest
    # the label holder (client0) keeps the predictions of the 488 rows (release_predictions = "none")
    assert "federation finished" in run.stdout and "test_rows: shape (1,), first values [[488]]" in run.stdout
    assert np.load(tmp_path / "run" / "out" / "client0.proba.npy").shape == (488, 2)
    for client in ("client0", "client1", "client2"):
        rows = np.load(tmp_path / "run" / "out" / f"{client}.rows.npz")
        assert rows["train"].size == 200 - 3 * 4 and rows["test"].size == 488
