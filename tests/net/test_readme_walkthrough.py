"""The README's "Your own data" walk-through runs exactly as printed, from set-up to predictions.csv."""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from securetrees.testing.walkthrough import readme_commands, readme_ports, run_walkthrough, with_ports

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _ids(path: Path) -> set[str]:
    with open(path, newline="", encoding="utf-8") as f:
        return {row["customer"] for row in csv.DictReader(f)}


def test_readme_walkthrough_runs_as_printed(tmp_path: Path, held_ports: Callable[[int], list[int]]) -> None:
    """The README's commands, on ports this test holds free (the README's fixed ones could be taken
    by another test session on the machine)."""
    printed = readme_commands(README.read_text(encoding="utf-8"))
    assert printed[-1].startswith("securetrees operator stop"), "the walk-through stops the roles it started"
    fixed = readme_ports(printed)
    commands = with_ports(printed, held_ports(len(fixed)))
    assert len(fixed) == 5 and not set(fixed) & set(readme_ports(commands))
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    steps, _ = run_walkthrough(commands, tmp_path, env={"PYTHONPATH": pythonpath}, timeout=240)
    assert [s.command for s in steps] == commands
    folder = tmp_path / "my-federation"
    with open(folder / "predictions.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    common = set.intersection(*(_ids(folder / "data" / f"{o}-new.csv") for o in ("bank", "shop", "telco")))
    assert rows[0] == ["row", "proba_defaulted", "proba_repaid"]  # the label holder's class names
    assert len(rows) - 1 == len(common) > 0  # one row per new customer all three organisations know
    probabilities = [float(a) + float(b) for _, a, b in rows[1:]]
    assert all(abs(p - 1.0) < 1e-9 for p in probabilities)
    with open(folder / "out" / "bank.predictions.csv", newline="", encoding="utf-8") as f:
        kept = list(csv.DictReader(f))  # the label holder's own file: its ids, class names, probabilities
    assert {r["id"] for r in kept} == common
    assert {r["prediction"] for r in kept} <= {"repaid", "defaulted"}
    assert list(kept[0]) == ["id", "row", "prediction", "proba_defaulted", "proba_repaid"]
    # the operator's file and the bank's agree row by row: the bank's row r is predictions.csv's row r
    assert [(r["row"], r["proba_defaulted"], r["proba_repaid"]) for r in kept] == [tuple(r) for r in rows[1:]]
    config = (folder / "run.toml").read_text(encoding="utf-8")
    assert re.search(r'^assumption = ".*master.*client', config, flags=re.M)
    assert not list(folder.glob("pki/*.pass")), "no passphrase is written to disk"


def test_with_ports_replaces_every_fixed_port_and_nothing_else() -> None:
    commands = ["a --address=127.0.0.1:47811,x=1", "b 127.0.0.1:47812 127.0.0.1:47811", "c 10.127.0.0.1:47811 47811"]
    assert readme_ports(commands) == [47811, 47812]
    assert with_ports(commands, [5001, 5002]) == ["a --address=127.0.0.1:5001,x=1", "b 127.0.0.1:5002 127.0.0.1:5001",
                                                  "c 10.127.0.0.1:47811 47811"]
    from securetrees.errors import ParameterError

    with pytest.raises(ParameterError):
        with_ports(commands, [5001])
    with pytest.raises(ParameterError):
        with_ports(commands, [5001, 5001])


@pytest.mark.parametrize("block", ["", "<!-- walk-through: begin -->\n```sh\nls \\\n```\n<!-- walk-through: end -->"])
def test_walkthrough_extraction_refuses_a_broken_block(block: str) -> None:
    from securetrees.errors import ParameterError

    with pytest.raises(ParameterError):
        readme_commands(block)
