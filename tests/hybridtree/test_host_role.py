"""The host role runs the whole training on its own data (specs/hybridtree.md, "Roles").

A host built from only what it holds (its columns, the labels, which guest holds which
ID) and guests built from only their rows must give the facade's model exactly; the
host reports progress after every step (callback and logger).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

import securetrees.protocols.hybridtree.host as host_module
from securetrees import progress as progress_module
from securetrees.errors import NotFittedError, ParameterError
from securetrees.protocols.hybridtree import Guest, Host, HybridTreeParams
from securetrees.protocols.hybridtree.boosting import FitProgress
from securetrees.protocols.hybridtree.guest import agree_bins, guest_matrix
from securetrees.protocols.hybridtree.host import owners
from securetrees.protocols.hybridtree.testing import HybridData, fit_layout, with_guest_column
from securetrees.runtime import InProcessNetwork
from securetrees.testing.paillier import small_keypair

CAT = [False, False, True]  # the guest columns 3, 4, 5 of hybrid_data: column 5 is categorical


def _parties(data: HybridData, params: HybridTreeParams) -> tuple[Host, list[Guest]]:
    """Each party from its own data only: no facade."""
    net = InProcessNetwork()
    keys = small_keypair(512)
    names = [f"guest{u}" for u in range(len(data.guest_rows))]
    gX = [guest_matrix(data.X[r], data.guest_features, data.guest_features) for r in data.guest_rows]
    bins = agree_bins(gX, max_bins=params.max_bins, categorical=CAT)
    guests = [Guest(n, net, params=params, ids=r, X=x, mapper=bins, host_key=keys[0])
              for n, r, x in zip(names, data.guest_rows, gX, strict=True)]
    host = Host("host", net, params=params, guests=names, X=data.X[:, data.host_features],
                owner=owners(len(data.y), data.guest_rows), keypair=keys)
    return host, guests


def _load_test(data: HybridData, guests: list[Guest]) -> np.ndarray:
    for g, r in zip(guests, data.guest_rows, strict=True):
        g.load_test(r, guest_matrix(data.X[r], data.guest_features, data.guest_features))
    return owners(len(data.y), data.guest_rows)


@pytest.mark.parametrize(("kind", "target", "loss"), [("clf", "y", "logistic"), ("reg", "y_reg", "squared"),
                                                      ("clf", "y_multi", "logistic")])
def test_host_alone_equals_the_facade(data: HybridData, make: Any, kind: str, target: str, loss: str) -> None:
    y = getattr(data, target)
    params = HybridTreeParams(host_depth=2, guest_depth=2, max_bins=8, min_node_size=0,
                              min_bin_size=0)
    host, guests = _parties(data, params)
    host.fit(y, n_estimators=3, loss=loss)  # type: ignore[arg-type]
    owner = _load_test(data, guests)
    facade = fit_layout(make(kind, "secure", categorical_features=[5]), data.X, y, data.host_features,
                        data.guest_features, data.guest_rows)
    np.testing.assert_array_equal(host.decision_function(data.X[:, data.host_features], owner),
                                  facade.decision_function(with_guest_column(data.X, data.guest_rows)))
    np.testing.assert_array_equal(host.predict(data.X[:, data.host_features], owner),
                                  facade.predict(with_guest_column(data.X, data.guest_rows)))
    assert sum(r.n_guest_splits for r in host.records) > 0  # the guest layers took part
    assert len(host.tree_cpu_seconds) == len(host.records)


def test_host_refuses_misuse(data: HybridData) -> None:
    params = HybridTreeParams(host_depth=2, guest_depth=1, max_bins=8, min_node_size=0,
                              min_bin_size=0)
    host, _ = _parties(data, params)
    with pytest.raises(NotFittedError):
        host.decision_function(data.X[:, data.host_features], owners(len(data.y), data.guest_rows))
    for bad in ({"n_estimators": 0}, {"n_estimators": True}, {"n_estimators": 2, "loss": "hinge"},
                {"n_estimators": 2, "base_score": "mean"}):
        with pytest.raises(ParameterError):
            host.fit(data.y, **bad)  # type: ignore[arg-type]
    host.fit(data.y, n_estimators=1)
    with pytest.raises(ParameterError):  # one model per host: the guests' tree counter moved on
        host.fit(data.y, n_estimators=1)
    reg, _ = _parties(data, params)
    reg.fit(data.y_reg, n_estimators=1, loss="squared")
    with pytest.raises(ParameterError):  # probabilities need the logistic loss
        reg.predict_proba(data.X[:, data.host_features], owners(len(data.y), data.guest_rows))
    with pytest.raises(NotFittedError):  # a regression has no classes
        _ = reg.classes_
    X = data.X[:, data.host_features].copy()
    X[0, 0] = np.inf
    with pytest.raises(ParameterError):
        Host("h2", InProcessNetwork(), params=params, guests=["a", "b", "c"], X=X,
             owner=np.full(len(data.y), -1), keypair=small_keypair(512))


def test_progress_after_every_step_and_every_chunk(data: HybridData, make: Any,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    reference = fit_layout(make("clf", "secure", n_estimators=2), data.X, data.y, data.host_features,
                           data.guest_features, data.guest_rows)
    monkeypatch.setattr(host_module, "ENCRYPT_CHUNK", 16)
    events: list[FitProgress] = []
    with caplog.at_level(logging.DEBUG, logger="securetrees.hybridtree.host"):
        m = fit_layout(make("clf", "secure", n_estimators=2, progress=events.append), data.X, data.y,
                       data.host_features, data.guest_features, data.guest_rows)
    # Chunked encryption computes the same model.
    np.testing.assert_array_equal(m.decision_function(with_guest_column(data.X, data.guest_rows)),
                                  reference.decision_function(with_guest_column(data.X, data.guest_rows)))
    assert {e.n_trees for e in events} == {2}
    for tree in range(2):
        steps = [e for e in events if e.tree == tree]
        assert steps[0].step == "host layers" and steps[-1].step == "tree done"
        enc = [e.done for e in steps if e.step == "encrypting"]
        total = {e.total for e in steps if e.step == "encrypting"}
        assert len(total) == 1 and enc[-1] == total.pop() > 16  # every gradient, several chunks
        assert all(0 < b - a <= 16 for a, b in zip([0, *enc], enc, strict=False))
        assert [e.done for e in steps if e.step == "guest layer"] == [1, 2]
    done = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert done == ["tree 1/2: tree done", "tree 2/2: tree done"]
    assert all(r.name == "securetrees.hybridtree.host" for r in caplog.records)


def test_progress_lines_without_tqdm(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The host's events move the library's one progress display: without tqdm, a line for each
    finished tree (with the current step) and nothing in between until the heartbeat is due."""
    monkeypatch.setattr(progress_module, "_tqdm", lambda: None)
    caplog.set_level(logging.INFO, logger="securetrees.progress")
    with progress_module.phase("x", total=2, interval=3600.0) as bar:
        show = FitProgress.shown_on(bar)
        for e in (FitProgress(0, 2, "host layers"), FitProgress(0, 2, "encrypting", 5, 10),
                  FitProgress(0, 2, "tree done"), FitProgress(1, 2, "host layers"), FitProgress(1, 2, "tree done")):
            show(e)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "x: started (2 steps)" and lines[-1].startswith("x: done, 2 steps in ")
    assert [line.rsplit(",", 1)[0] for line in lines[1:-1]] == ["x: 1/2 (tree 1/2: tree done)",
                                                               "x: 2/2 (tree 2/2: tree done)"]
    assert bar.done == 2 and bar.note == "tree 2/2: tree done"
