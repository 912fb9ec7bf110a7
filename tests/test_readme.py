"""The README's estimator example runs as printed (it is the one users copy first)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _estimator_example() -> str:
    section = README.read_text(encoding="utf-8").split("## Estimators", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the Estimators section holds one example"
    return blocks[0]


def test_readme_estimator_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(_estimator_example(), str(README), "exec"), {"__name__": "readme"})  # noqa: S102 - our README
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[") and out[1].endswith("['age' 'income' 'sector' 'visits']")
