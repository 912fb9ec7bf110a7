"""The README's estimator example runs as printed (it is the one users copy first)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _example(heading: str) -> str:
    section = README.read_text(encoding="utf-8").split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, f"the {heading} section holds one example"
    return blocks[0]


def _estimator_example() -> str:
    return _example("Estimators")


def test_readme_estimator_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(_estimator_example(), str(README), "exec"), {"__name__": "readme"})  # noqa: S102 - our README
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[") and out[1].endswith("['age' 'income' 'sector' 'visits']")


def test_readme_own_data_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(_example("Your own data"), str(README), "exec"), {"__name__": "readme"})  # noqa: S102
    ids, X = capsys.readouterr().out.splitlines()
    assert ids == "('c7', 'c2', 'c9') ['age', 'sector'] [0, 2]"
    assert X == "[[34.0, 1.0], [nan, 0.0], [51.0, nan]]"
