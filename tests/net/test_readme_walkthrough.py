"""The README's "Your own data" walk-through runs exactly as printed, from set-up to predictions.csv."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import pytest

from securetrees.testing.walkthrough import readme_commands, run_walkthrough

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _ids(path: Path) -> set[str]:
    with open(path, newline="", encoding="utf-8") as f:
        return {row["customer"] for row in csv.DictReader(f)}


def test_readme_walkthrough_runs_as_printed(tmp_path: Path) -> None:
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert commands[-1].startswith("securetrees operator stop"), "the walk-through stops the roles it started"
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    steps, _ = run_walkthrough(commands, tmp_path, env={"PYTHONPATH": pythonpath}, timeout=240)
    assert [s.command for s in steps] == commands
    folder = tmp_path / "my-federation"
    with open(folder / "predictions.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    common = set.intersection(*(_ids(folder / "data" / f"{o}-new.csv") for o in ("bank", "shop", "telco")))
    assert rows[0] == ["row", "output_0", "output_1"]
    assert len(rows) - 1 == len(common) > 0  # one row per new customer all three organisations know
    probabilities = [float(a) + float(b) for _, a, b in rows[1:]]
    assert all(abs(p - 1.0) < 1e-9 for p in probabilities)
    with open(folder / "out" / "bank.predictions.csv", newline="", encoding="utf-8") as f:
        kept = list(csv.DictReader(f))  # the label holder's own file: its ids, class names, probabilities
    assert {r["id"] for r in kept} == common
    assert {r["prediction"] for r in kept} <= {"repaid", "defaulted"}
    assert sorted(kept[0]) == ["id", "prediction", "proba_defaulted", "proba_repaid"]
    config = (folder / "run.toml").read_text(encoding="utf-8")
    assert re.search(r'^assumption = ".*master.*client', config, flags=re.M)
    assert not list(folder.glob("pki/*.pass")), "no passphrase is written to disk"


@pytest.mark.parametrize("block", ["", "<!-- walk-through: begin -->\n```sh\nls \\\n```\n<!-- walk-through: end -->"])
def test_walkthrough_extraction_refuses_a_broken_block(block: str) -> None:
    from securetrees.errors import ParameterError

    with pytest.raises(ParameterError):
        readme_commands(block)
