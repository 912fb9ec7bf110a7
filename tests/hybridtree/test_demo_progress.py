"""The HybridTree demo shows progress and says why guest layers stayed empty (issue 15, Section 6)."""

from __future__ import annotations

import pytest

from securetrees import cli
from securetrees.protocols.hybridtree.demo import main


def test_demo_shows_progress_and_explains_empty_guest_layers(capsys: pytest.CaptureFixture[str]) -> None:
    """Run as the command runs it (which configures logging), so the lines show with or without tqdm."""
    assert cli.main(["demo", "hybridtree", "--rows", "150", "--trees", "2", "--mode", "plaintext",
                     "--no-baselines"]) == 0
    cap = capsys.readouterr()
    assert "tree 2/2" in cap.err  # the host's progress events reach the terminal
    assert "0 guest splits" in cap.out and "no node reaches min_node_size" in cap.out
    assert "majority: accuracy" in cap.out


def test_demo_help_states_the_full_runs_time(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--full" in out and "15 min of CPU" in out
