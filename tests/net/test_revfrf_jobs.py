"""RevFRF's ``[protocol] n_jobs``: each participant's HoEnc batches on a process pool of its own.

A small trial (60 Adult rows, three participants, 1024-bit keys) launched with ``n_jobs = 2``,
every role in its own process over mutual TLS: its outputs (``vertical``, ``test``, ``encrypted``
and after the revocation) are those of the same roles with no executor (the in-process facade on
the run's agreed rows, which ``tests/net/test_deployment.py`` shows a launch without ``n_jobs``
reproduces), and each participant, and no other role, reports its pool in its log (a run that
ignored the key fails here; so does one whose workers are forked from the gRPC role process:
they die on their first task).  A bad value is refused by every role when it is built, before any
alignment, with the same typed error as the other deployments; ``trusted_workers`` is unknown to
RevFRF (no role has a secret-key step on an executor).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees.datasets import load_adult
from securetrees.dtpkc import KGC
from securetrees.errors import MissingParameterError, ParameterError, UnknownKeyError
from securetrees.net.config import load_config
from securetrees.net.service import launch
from securetrees.net.tables import party_tables
from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.revfrf import deploy as rev_deploy
from securetrees.rand import DeterministicRandom
from securetrees.testing.alignment import joined_view

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")

PARTICIPANTS = ("u1", "u2", "u3")
ROWS, D = 60, 14
PARTITION = [list(range(i, D, 3)) for i in range(3)]
SETTINGS = {"n_estimators": 2, "max_depth": 2, "random_state": 5, "n_classes": 2}
POOL_LINE = "HoEnc batches on a pool of 2 worker processes"


@pytest.fixture(scope="module")
def trial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The trial's ``run.toml`` and its text (each test puts the text back)."""
    adult = load_adult()
    tmp = tmp_path_factory.mktemp("revfrf-jobs")
    cfg = rev_deploy.prepare(tmp, adult.X_train[:ROWS], adult.y_train[:ROWS], PARTITION, X_test=adult.X_test[:6],
                             settings=SETTINGS, kgc=KGC.setup(1024, allow_insecure=True), lacking=1,
                             rng=DeterministicRandom("revfrf n_jobs"))
    return cfg, cfg.read_text()


@pytest.fixture
def run_file(trial: tuple[Path, str]) -> Iterator[tuple[Path, str]]:
    cfg, text = trial
    try:
        yield trial
    finally:
        cfg.write_text(text)


def _with_protocol_line(cfg: Path, text: str, line: str) -> None:
    cfg.write_text(text.replace("[protocol]\n", f"[protocol]\n{line}\n"))


def _pool_logged(logs: Path, role: str) -> bool:
    return POOL_LINE in (logs / f"{role}.log").read_text(encoding="utf-8")


def test_participants_on_two_workers_give_the_serial_outputs(run_file: tuple[Path, str]) -> None:
    cfg, text = run_file
    _with_protocol_line(cfg, text, "n_jobs = 2")
    config = load_config(cfg)
    assert config.params["n_jobs"] == 2
    logs = cfg.parent / "logs-pooled"
    got = launch(cfg, cfg.parent / "pki", log_dir=logs)
    assert all(_pool_logged(logs, u) for u in PARTICIPANTS)
    assert not any(_pool_logged(logs, r) for r in ("cs", "cc", "kgc", "requester"))
    # progress in the logs: the CS's layers done, each participant's FLE-Expan layers
    assert "securetrees.progress: RevFRF forest of" in (logs / "cs.log").read_text(encoding="utf-8")
    assert all(f"{u}: FLE-Expan layer 1" in (logs / f"{u}.log").read_text(encoding="utf-8") for u in PARTICIPANTS)
    # the serial reference: the same roles with no executor, on this run's agreed rows (a new
    # launch would agree on a new order by PSI, hence draw other bootstrap samples)
    data = joined_view(config, [*PARTICIPANTS, "cs"], PARTITION, D)
    requester, _ = party_tables(config.party("requester"))
    clf = RevFRFClassifier(key_bits=1024, allow_insecure=True, partition=PARTITION,
                           **{k: v for k, v in SETTINGS.items() if k != "n_classes"}).fit(data.X, data.y)
    want = {"vertical": clf.predict_proba(data.X_test), "test": clf.predict_proba(data.X_test, method="test"),
            "encrypted": clf.predict_proba(requester.X, method="encrypted")}
    clf.revoke(PARTICIPANTS[-1], level=2)
    want["after_revocation"] = clf.predict_proba(data.X_test)
    assert set(got) == set(want)
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)


def test_a_bad_n_jobs_is_refused_by_every_role_before_any_alignment(run_file: tuple[Path, str]) -> None:
    """No network is needed: each role refuses the value when it is built."""
    cfg, text = run_file
    for value in ("0", "-2", '"2"', "true", "1.5"):
        _with_protocol_line(cfg, text, f"n_jobs = {value}")
        config = load_config(cfg)
        for role in config.roles:
            with pytest.raises(ParameterError, match="n_jobs must be a positive integer"):
                rev_deploy.make_role(role, config, None, {}, {}, b"")  # type: ignore[arg-type]


def test_trusted_workers_is_not_a_revfrf_key(run_file: tuple[Path, str]) -> None:
    cfg, text = run_file
    _with_protocol_line(cfg, text, "trusted_workers = true")
    with pytest.raises(UnknownKeyError, match=re.escape("unknown key 'trusted_workers' in [protocol]")):
        load_config(cfg)


@pytest.mark.parametrize("key", ["participants", "columns", "n_features", "directory", "verify_keys", "n_classes"])
def test_every_role_names_a_missing_required_key(run_file: tuple[Path, str], key: str) -> None:
    """A missing key is a typed error naming it, at start-up (before, a bare KeyError at first use)."""
    cfg, _ = run_file
    config = load_config(cfg)
    params = {k: v for k, v in config.params.items() if k != key}
    with pytest.raises(MissingParameterError, match=key) as caught:
        rev_deploy.check_parameters(params)
    assert caught.value.keys == (key,)
    rev_deploy.check_parameters(config.params)
