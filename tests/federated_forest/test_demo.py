"""The demo runs end to end on a slice of Adult and reports accuracy, bytes and rounds."""

from __future__ import annotations

import pytest

from securetrees.protocols.federated_forest.demo import main


def test_demo_small(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--trees", "2", "--depth", "3", "--rows", "1500", "--clients", "3", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "client2:" in out and "accuracy" in out and "rounds" in out and "scikit-learn" in out
