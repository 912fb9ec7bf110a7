"""Warnings under the command line: each one once per process, as a log line without a source path
(``securetrees.log.configure``); a party's log read "InsecureParameterWarning" three times, each with
the path and line of the library's source."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from securetrees import log
from securetrees.errors import InsecureParameterWarning
from securetrees.log import configure, reset

ROOT = Path(__file__).resolve().parent.parent


def _warn_thrice() -> None:
    """The same warning from three places of the code, as a role's key checks raise it."""
    warnings.warn("1024-bit key: about 80-bit security", InsecureParameterWarning, stacklevel=1)
    warnings.warn("1024-bit key: about 80-bit security", InsecureParameterWarning, stacklevel=1)
    warnings.warn("1024-bit key: about 80-bit security", InsecureParameterWarning, stacklevel=1)


def _readable(text: str) -> bool:
    """The warning shown once, as a log line naming its category, and no source path in the text."""
    lines = [line for line in text.splitlines() if "InsecureParameterWarning" in line]
    return (len(lines) == 1 and "WARNING securetrees.warnings: InsecureParameterWarning: 1024-bit key" in lines[0]
            and ".py:" not in text)


def _shown(install: Callable[[io.StringIO], None]) -> str:
    out = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        install(out)
        try:
            _warn_thrice()
        finally:
            reset()
    return out.getvalue()


def test_a_warning_is_one_log_line_without_a_source_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest records every test's warnings: here its recorder stands for Python's display, which the
    # command line replaces (under pytest.warns, the recorder keeps the warnings: tests/net/test_setup_cli.py)
    monkeypatch.setattr(log, "_DISPLAY", getattr(warnings, "_showwarnmsg_impl", None))
    assert _readable(_shown(lambda out: configure("INFO", stream=out)))
    # reset() gives the process its own display back
    assert warnings.showwarning.__module__ == "warnings"


def test_planted_pythons_own_display_fails_the_check() -> None:
    """Python's display (as before): one line per place of the code, each with its path and line."""

    def python_display(out: io.StringIO) -> None:
        configure("INFO", stream=out)
        reset()  # the library's hook removed: Python's own display shows the warnings
        warnings.showwarning = lambda m, c, f, n, file=None, line=None: out.write(  # type: ignore[assignment]
            warnings.formatwarning(m, c, f, n, line))

    shown = _shown(python_display)
    assert shown.count(".py:") == 3 and not _readable(shown)


def test_a_recorder_keeps_the_warnings_the_command_line_would_log() -> None:
    out = io.StringIO()

    def under_the_command_line() -> None:
        configure("INFO", stream=out)
        try:
            _warn_thrice()
        finally:
            reset()

    with pytest.warns(InsecureParameterWarning, match="1024-bit key"):
        under_the_command_line()
    assert "InsecureParameterWarning" not in out.getvalue()


def test_the_command_line_shows_a_demo_s_insecure_key_warning_once() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("PYTHONWARNINGS", None)
    run = subprocess.run([sys.executable, "-m", "securetrees", "demo", "dtpkc", "--bits", "1024"],
                         capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if "InsecureParameterWarning" in line]
    assert len(lines) == 1 and "securetrees.warnings: InsecureParameterWarning: 1024-bit DT-PKC key" in lines[0]
    assert ".py:" not in run.stderr
