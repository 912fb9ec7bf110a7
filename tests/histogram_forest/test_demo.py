"""The demo runs end to end on a small sample of Adult (``--quick``)."""

from __future__ import annotations

import pytest

from securetrees.protocols.histogram_forest.demo import main


def test_demo_quick_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quick", "--clients", "3", "--epsilon", "5"]) == 0
    out = capsys.readouterr().out
    assert "3 clients" in out and "federated F1 above local" in out
    assert "secure aggregation" in out and "ε spent 5" in out
