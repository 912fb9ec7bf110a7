"""Logging: one logger per role and module, all under the ``securetrees`` root.

The library follows the standard convention for libraries: it creates loggers and
emits records, and it never configures handlers, levels or formats (the package root
carries a :class:`logging.NullHandler`, so an application that configures nothing sees
nothing).  The command line (``securetrees demo``, ``party``, ``federation``) calls
:func:`configure` once; an application configures ``logging`` as it likes, e.g.
``logging.getLogger("securetrees").setLevel(logging.INFO)`` plus a handler.

Names: every role logs as ``securetrees.<protocol>.<role>`` (``securetrees.revfrf.cs``,
``securetrees.federated_forest.master``, ``securetrees.secagg.server``; see
:func:`role_logger_name`), other modules as ``securetrees.<area>`` (``securetrees.progress``,
``securetrees.net.service``).  Levels: INFO for protocol steps (a tree started, a layer of
splits decided, a revocation), DEBUG for every message a party receives (type, sender, size).
Nothing secret is ever logged: lines carry counts, names, sizes and times, never values.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Final, TextIO

from securetrees.files import open_private

__all__ = ["ROOT", "configure", "get_logger", "reset", "role_logger_name"]

ROOT: Final = "securetrees"
"""The package's root logger; every logger of the library and the protocols is below it."""

logging.getLogger(ROOT).addHandler(logging.NullHandler())

_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_DATEFMT: Final = "%H:%M:%S"
_PROTOCOLS: Final = f"{ROOT}.protocols."
_installed: logging.Handler | None = None  # the handler configure() installed last


def get_logger(name: str) -> logging.Logger:
    """The logger ``securetrees.<name>`` (``name`` may already start with ``securetrees.``;
    a ``securetrees.protocols.<rest>`` module name becomes ``securetrees.<rest>``)."""
    if name.startswith(_PROTOCOLS):
        name = name[len(_PROTOCOLS):]
    if name == ROOT or name.startswith(ROOT + "."):
        return logging.getLogger(name)
    return logging.getLogger(f"{ROOT}.{name}")


def role_logger_name(module: str, role: str) -> str:
    """``securetrees.<protocol>.<role>`` for a role class defined in ``module``: the protocol is
    package below ``securetrees.protocols`` or ``securetrees``
    (``securetrees.protocols.revfrf.server`` → ``revfrf``, ``securetrees.secagg.roles`` → ``secagg``),
    else the module's first component."""
    if module.startswith(_PROTOCOLS):
        module = module[len(_PROTOCOLS):]
    parts = module.split(".")
    protocol = parts[1] if parts[0] == ROOT and len(parts) > 1 else parts[0]
    return f"{ROOT}.{protocol}.{role}"


class _Handler(logging.Handler):
    """Writes each record as a line to ``stream`` (default: whatever ``sys.stderr`` is at the
    time), through tqdm when it is installed so that log lines do not tear progress bars; each
    line counts as output for the progress heartbeat."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__()
        self._stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        from securetrees.progress import note_output, write_line

        try:
            write_line(self.format(record), self._stream if self._stream is not None else sys.stderr)
        except Exception:  # logging must never raise into the caller
            self.handleError(record)
        note_output()


def configure(level: str | int = "INFO", *, file: str | Path | None = None,
              stream: TextIO | None = None) -> logging.Handler:
    """For the command line only: send ``securetrees.*`` records at ``level`` and above to
    ``file`` (appended) or else ``stream`` (default stderr); returns the handler it installed.
    Calling it again replaces the handler installed before."""
    global _installed
    root = logging.getLogger(ROOT)
    if _installed is not None:
        root.removeHandler(_installed)
        _installed.close()
    if file is not None:
        open_private(file, "a").close()  # a role's log is its own: 0600 before the handler appends
    handler = logging.FileHandler(file, encoding="utf-8") if file is not None else _Handler(stream)
    _installed = handler
    handler.setFormatter(logging.Formatter(_FORMAT, _DATEFMT))
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    return handler


def reset() -> None:
    """Undo :func:`configure`: remove its handler and the level it set (the command line calls
    it on exit, so that calling ``securetrees.cli.main`` in a process leaves logging as it was)."""
    global _installed
    root = logging.getLogger(ROOT)
    if _installed is not None:
        root.removeHandler(_installed)
        _installed.close()
        _installed = None
    root.setLevel(logging.NOTSET)
