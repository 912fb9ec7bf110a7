"""The active party shows the boosting's progress (a deployed role's log and status, the demo): trees
done of total and the tree it grows, as lines when a role process logs (``securetrees.progress``)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from securetrees.paillier import PrivateKey, PublicKey
from securetrees.progress import current, log_lines
from securetrees.protocols.secureboost.active import ActiveParty
from tests.secureboost.conftest import PARTITION, make


def test_the_active_party_shows_trees_done_of_total(data: tuple[np.ndarray, np.ndarray],
                                                     keypair: tuple[PublicKey, PrivateKey],
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []
    grow = ActiveParty.grow

    def watched(self: ActiveParty, *args: Any, **kwargs: Any) -> Any:
        seen.append(current())  # what its status would report while it grows this tree
        return grow(self, *args, **kwargs)

    monkeypatch.setattr(ActiveParty, "grow", watched)
    monkeypatch.setattr(ActiveParty, "progress", True)
    X, y = data
    log_lines()
    try:
        with caplog.at_level(logging.INFO, logger="securetrees.progress"):
            make("reg", PARTITION, keypair, n_estimators=3).fit(X, y)
    finally:
        log_lines(False)
    assert seen == [f"SecureBoost trees {t}/3 (growing tree {t + 1})" for t in range(3)]
    lines = [r.getMessage().split(",")[0] for r in caplog.records if r.name == "securetrees.progress"]
    assert [line for line in lines if "/" in line] == ["SecureBoost trees: 1/3", "SecureBoost trees: 2/3",
                                                      "SecureBoost trees: 3/3"], lines


def test_without_progress_the_active_party_shows_nothing(data: tuple[np.ndarray, np.ndarray],
                                                         keypair: tuple[PublicKey, PrivateKey],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    grow = ActiveParty.grow

    def watched(self: ActiveParty, *args: Any, **kwargs: Any) -> Any:
        seen.append(current())
        return grow(self, *args, **kwargs)

    monkeypatch.setattr(ActiveParty, "grow", watched)
    X, y = data
    make("reg", PARTITION, keypair, n_estimators=2).fit(X, y)
    assert seen == ["", ""]  # the library's default: no display
