from __future__ import annotations

import pytest

from securetrees import cli


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    assert "demo" in capsys.readouterr().out


def test_demo_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--list"]) == 0
    out = capsys.readouterr().out
    for name in cli.DEMOS:
        assert name in out


def test_unknown_demo() -> None:
    assert cli.main(["demo", "no-such-demo"]) == 2


@pytest.mark.parametrize("name", sorted(cli.DEMOS))
def test_demo_entries_resolve(name: str) -> None:
    """Every registered demo names an importable callable."""
    assert callable(cli._load(cli.DEMOS[name][0]))
