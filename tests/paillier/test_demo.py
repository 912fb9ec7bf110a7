"""The default demo runs end to end (it is also what `securetrees demo` runs in CI)."""

from __future__ import annotations

import pytest

from securetrees.demos.paillier import main


@pytest.mark.slow
def test_demo_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    for needle in ("2048-bit", "DJN", "pooled", "EncodingOverflowError", "KeyMismatchError",
                   "reopened: True", "2 processes"):
        assert needle in out
