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


def test_log_level_is_the_commands_and_logging_is_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """``demo NAME --log-level X`` sets the command's level (the demo never sees the option), and
    the command removes its handler on return."""
    import logging

    seen: dict[str, object] = {}

    def fake_demo(argv: list[str]) -> int:
        root = logging.getLogger("securetrees")
        seen["argv"], seen["level"], seen["handlers"] = argv, root.level, len(root.handlers)
        return 0

    monkeypatch.setattr(cli, "_load", lambda target: fake_demo)
    root = logging.getLogger("securetrees")
    before = list(root.handlers)
    assert cli.main(["demo", "revfrf", "--trees", "2", "--log-level", "debug"]) == 0
    assert seen == {"argv": ["--trees", "2"], "level": logging.DEBUG, "handlers": len(before) + 1}
    assert root.handlers == before and root.level == logging.NOTSET
    assert cli.main(["demo", "--log-level=warning", "revfrf"]) == 0 and seen["level"] == logging.WARNING
    with pytest.raises(SystemExit):
        cli.main(["demo", "revfrf", "--log-level", "loud"])
