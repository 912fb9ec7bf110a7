from __future__ import annotations

import pytest

from securetrees import cli, plugins
from securetrees.errors import ParameterError


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    assert "demo" in capsys.readouterr().out


def test_demo_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--list"]) == 0
    out = capsys.readouterr().out
    for name in plugins.registered(plugins.DEMOS):
        assert name in out
    assert "revfrf" in out and "hybridtree" in out


def test_unknown_demo() -> None:
    assert cli.main(["demo", "no-such-demo"]) == 2


DECLARED_DEMOS = ("paillier", "dtpkc", "revfrf", "federated-forest", "hybridtree", "histogram-forest")


@pytest.mark.parametrize("name", DECLARED_DEMOS)
def test_demo_entries_resolve(name: str) -> None:
    """Every demo the package declares is an installed entry point naming an importable callable
    with a summary."""
    assert name in plugins.registered(plugins.DEMOS)
    assert callable(plugins.load_demo(name))
    assert plugins.demo_about(name)


@pytest.mark.parametrize("name", ["revfrf", "federated-forest"])
def test_deployment_entries_resolve(name: str) -> None:
    assert hasattr(plugins.load_deployment(name), "make_role")


def test_unknown_entry_point_is_a_typed_error() -> None:
    with pytest.raises(ParameterError, match="no deployment named 'nope'"):
        plugins.load_deployment("nope")


def test_log_level_is_the_commands_and_logging_is_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """``demo NAME --log-level X`` sets the command's level (the demo never sees the option), and
    the command removes its handler on return."""
    import logging

    seen: dict[str, object] = {}

    def fake_demo(argv: list[str]) -> int:
        root = logging.getLogger("securetrees")
        seen["argv"], seen["level"], seen["handlers"] = argv, root.level, len(root.handlers)
        return 0

    monkeypatch.setattr(plugins, "load_demo", lambda name: fake_demo)
    root = logging.getLogger("securetrees")
    before = list(root.handlers)
    assert cli.main(["demo", "revfrf", "--trees", "2", "--log-level", "debug"]) == 0
    assert seen == {"argv": ["--trees", "2"], "level": logging.DEBUG, "handlers": len(before) + 1}
    assert root.handlers == before and root.level == logging.NOTSET
    assert cli.main(["demo", "--log-level=warning", "revfrf"]) == 0 and seen["level"] == logging.WARNING
    with pytest.raises(SystemExit):
        cli.main(["demo", "revfrf", "--log-level", "loud"])
