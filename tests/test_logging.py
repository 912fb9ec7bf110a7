"""Every role logs through :mod:`logging` under ``securetrees.<protocol>.<role>``.

- Each Party subclass of the library and the protocols has its own logger, named after the
  package it lives in and its role; the check fails on a role with a foreign logger.
- A small run of each protocol emits INFO records from each of its roles (a role that never
  logs is reported), and DEBUG records for exactly the messages its parties handled
  (type, sender, size from the transcript).
- The library configures nothing: without the command line's handler nothing reaches stderr.
"""

from __future__ import annotations

import importlib
import logging
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from securetrees.log import ROOT, configure, get_logger, role_logger_name
from securetrees.protocols.histogram_forest.testing import fit_parts
from securetrees.runtime import InProcessNetwork, Party
from securetrees.testing.modules import import_library

ROOT_DIR = Path(__file__).resolve().parent.parent


def _all_party_classes() -> list[type[Party]]:
    import_library()
    found: list[type[Party]] = []
    todo = list(Party.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] == "securetrees":
            found.append(cls)
    return found


def misnamed_loggers(classes: Iterable[type[Party]]) -> list[str]:
    """Role classes whose logger is not ``securetrees.<package>.<role>``, the package read from
    the file that defines the class (``protocols/revfrf/...`` → ``revfrf``)."""
    bad = []
    for cls in classes:
        path = Path(importlib.import_module(cls.__module__).__file__ or "").resolve().relative_to(ROOT_DIR)
        expected = f"securetrees.{path.parts[1]}.{cls.role}"
        if not cls.role or cls.logger.name != expected:
            bad.append(f"{cls.__module__}.{cls.__qualname__}: {cls.logger.name!r}, expected {expected!r}")
    return bad


def test_every_role_has_its_own_logger() -> None:
    classes = _all_party_classes()
    names = {c.logger.name for c in classes}
    assert {"securetrees.revfrf.cs", "securetrees.revfrf.cc", "securetrees.revfrf.participant",
            "securetrees.federated_forest.master", "securetrees.federated_forest.client",
            "securetrees.histogram_forest.server", "securetrees.histogram_forest.client",
            "securetrees.hybridtree.host", "securetrees.hybridtree.guest",
            "securetrees.secagg.server", "securetrees.secagg.client"} <= names
    assert misnamed_loggers(classes) == []


def test_logger_check_catches_a_foreign_logger() -> None:
    """Planted: a role that logs on a logger of its own choosing is reported."""
    from securetrees.protocols.revfrf.requester import Requester

    class Rogue(Requester):
        logger = logging.getLogger("rogue")

    Rogue.__module__ = Requester.__module__
    assert misnamed_loggers([Requester]) == []
    assert len(misnamed_loggers([Rogue])) == 1


def test_logger_names() -> None:
    assert role_logger_name("securetrees.protocols.revfrf.server", "cs") == "securetrees.revfrf.cs"
    assert role_logger_name("securetrees.secagg.roles", "server") == "securetrees.secagg.server"
    assert get_logger("securetrees.protocols.revfrf.facade").name == "securetrees.revfrf.facade"
    assert get_logger("securetrees.net.service").name == "securetrees.net.service"
    assert get_logger("progress").name == "securetrees.progress"
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger(ROOT).handlers)


# ---------------------------------------------------------------------- behaviour of small runs


def silent_roles(records: Iterable[logging.LogRecord], parties: Iterable[Party]) -> set[str]:
    """The loggers of ``parties`` that emitted no INFO record."""
    spoke = {r.name for r in records if r.levelno == logging.INFO}
    return {p.logger.name for p in parties} - spoke


def _parties(net: InProcessNetwork) -> list[Party]:
    return [net._party(n) for n in net.parties]


def _revfrf(monkeypatch: pytest.MonkeyPatch) -> InProcessNetwork:
    from securetrees.protocols.revfrf import RevFRFClassifier
    from securetrees.testing.dtpkc import dtpkc_test_kgc

    rng = np.random.default_rng(0)
    X = rng.integers(0, 30, size=(80, 4)).astype(np.float64)
    y = (X[:, 0] + X[:, 2] > 30).astype(np.int64)
    clf = RevFRFClassifier(n_estimators=2, max_depth=2, random_state=1, kgc_factory=lambda: dtpkc_test_kgc(512))
    clf.set_params(partition=[[0, 1], [2], [3]]).fit(X, y)
    clf.predict(X[:1], method="encrypted")
    clf.revoke("u2", level=2)
    return clf.network_


def _federated_forest(monkeypatch: pytest.MonkeyPatch) -> InProcessNetwork:
    from securetrees.protocols.federated_forest import FederatedForestClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = (X[:, 0] > 0).astype(np.int64)
    ff = FederatedForestClassifier(2, max_depth=2, random_state=0).set_params(partition=[[0, 1], [2, 3]]).fit(X, y)
    return ff.network_


def _histogram_forest(monkeypatch: pytest.MonkeyPatch) -> InProcessNetwork:
    import securetrees.protocols.histogram_forest.facade as module
    from securetrees.protocols.histogram_forest import HistogramForestClassifier
    from securetrees.testing import DeterministicRandom

    made: list[InProcessNetwork] = []

    def network() -> InProcessNetwork:
        made.append(InProcessNetwork())
        return made[-1]

    monkeypatch.setattr(module, "InProcessNetwork", network)
    rng = np.random.default_rng(0)
    parts = []
    for _ in range(3):
        X = np.round(rng.uniform(0, 10, size=(50, 2)), 1)
        parts.append((X, (X[:, 0] > 5).astype(np.int64)))
    model = HistogramForestClassifier(n_estimators=2, max_depth=2, n_bins=4, histogram="fixed", random_state=0,
                                      secure_aggregation=True, feature_ranges=[(0.0, 10.0), (0.0, 10.0)])
    fit_parts(model, parts, rng=DeterministicRandom("logging"))
    return made[-1]


def _hybridtree(monkeypatch: pytest.MonkeyPatch) -> InProcessNetwork:
    from securetrees.protocols.hybridtree import HybridTreeClassifier
    from securetrees.protocols.hybridtree.testing import fit_layout, hybrid_data
    from securetrees.testing.paillier import small_keypair

    d = hybrid_data()
    model = HybridTreeClassifier(2, host_depth=2, guest_depth=2, max_bins=8, keypair=small_keypair(512),
                                 min_node_size=0, min_bin_size=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_layout(model, d.X, d.y, d.host_features, d.guest_features, d.guest_rows)
    return model.network_  # type: ignore[no-any-return]


def _secagg(monkeypatch: pytest.MonkeyPatch) -> InProcessNetwork:
    from securetrees.secagg import simulate_secure_sum

    net = InProcessNetwork()
    simulate_secure_sum({f"p{i}": np.arange(5, dtype=np.uint64) for i in range(4)}, network=net)
    return net


RUNS = {"revfrf": _revfrf, "federated_forest": _federated_forest, "histogram_forest": _histogram_forest,
        "hybridtree": _hybridtree, "secagg": _secagg}


@pytest.mark.parametrize("protocol", sorted(RUNS))
def test_each_role_logs_its_steps_and_every_message(protocol: str, caplog: pytest.LogCaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with caplog.at_level(logging.DEBUG, logger=ROOT):
        net = RUNS[protocol](monkeypatch)
    parties = _parties(net)
    assert silent_roles(caplog.records, parties) == set()
    # DEBUG: one record per message a party handled, naming its type, sender and size
    by_logger = {p.logger.name for p in parties}
    got = sorted(r.getMessage() for r in caplog.records
                 if r.levelno == logging.DEBUG and r.name in by_logger and " received " in r.getMessage())
    handled = [rec for rec in net.transcript  # replies are recorded too, in the caller's view: not handled
               if rec.type_name in {t.wire_type for t in type(net._party(rec.receiver))._handlers}]
    want = sorted(f"{rec.receiver} received {rec.type_name} from {rec.sender} ({rec.size} bytes, round {rec.round})"
                  for rec in handled)
    assert got == want


def test_silent_role_is_reported() -> None:
    """Planted: a role that logs nothing at INFO is found by the check."""
    net = InProcessNetwork()

    class Quiet(Party):
        role = "client"

    q = Quiet("q", net)
    record = logging.LogRecord(q.logger.name, logging.DEBUG, __file__, 1, "only debug", None, None)
    assert silent_roles([record], [q]) == {q.logger.name}


def test_library_configures_no_handler(capsys: pytest.CaptureFixture[str]) -> None:
    """Without the command line's configuration, INFO records of the library reach no stream."""
    root = logging.getLogger(ROOT)
    assert all(isinstance(h, logging.NullHandler) for h in root.handlers) or root.handlers == []
    get_logger("revfrf.cs").warning("a warning nobody configured")
    assert capsys.readouterr().err == ""


def test_configure_writes_lines_and_replaces_itself(tmp_path: Path) -> None:
    root = logging.getLogger(ROOT)
    before, level = list(root.handlers), root.level
    try:
        log = tmp_path / "party.log"
        configure("DEBUG", file=log)
        first = set(root.handlers) - set(before)
        get_logger("revfrf.cs").debug("layer %d", 3)
        configure("INFO", file=log)
        assert len(set(root.handlers) - set(before)) == 1 and not first & set(root.handlers)
        get_logger("revfrf.cs").debug("hidden")
        get_logger("revfrf.cs").info("shown")
    finally:
        for h in set(root.handlers) - set(before):
            root.removeHandler(h)
            h.close()
        root.setLevel(level)
    text = log.read_text()
    assert "DEBUG securetrees.revfrf.cs: layer 3" in text and "shown" in text and "hidden" not in text
