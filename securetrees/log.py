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
import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, Final, TextIO

from securetrees.files import open_private

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock
    fcntl = None  # type: ignore[assignment]

__all__ = ["ROOT", "claim_file", "configure", "get_logger", "refused_path", "reset", "role_logger_name"]

ROOT: Final = "securetrees"
"""The package's root logger; every logger of the library and the protocols is below it."""

logging.getLogger(ROOT).addHandler(logging.NullHandler())

_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_DATEFMT: Final = "%H:%M:%S"
_PROTOCOLS: Final = f"{ROOT}.protocols."
_installed: logging.Handler | None = None  # the handler configure() installed last
_showwarning: Any = None  # warnings.showwarning before configure() replaced it
_shown: set[tuple[type[Warning], str]] = set()
_shown_lock = threading.Lock()
_DISPLAY: Final = getattr(warnings, "_showwarnmsg_impl", None)
"""Python's own display of a warning; ``warnings.catch_warnings(record=True)`` (``pytest.warns``)
swaps it for its recorder, which then gets the warnings the command line would have logged."""


def _log_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
    """``warnings.showwarning`` while the command line's logging is configured: each warning (its
    category and text) once per process, as a WARNING line on ``securetrees.warnings``, without the
    source path and line that Python's own display adds (``filename`` and ``lineno`` are dropped)."""
    if _DISPLAY is not None and getattr(warnings, "_showwarnmsg_impl", _DISPLAY) is not _DISPLAY:
        if _showwarning is not None:  # a recorder is active: it keeps the warning
            _showwarning(message, category, filename, lineno, file, line)
        return
    key = (category, str(message))
    with _shown_lock:
        if key in _shown:
            return
        _shown.add(key)
    get_logger("warnings").warning("%s: %s", category.__name__, message)


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


def refused_path(file: str | Path, pid: int | None = None) -> Path:
    """Where a process logs when another holds ``file`` (:func:`claim_file`): ``NAME.refused-PID.log``
    beside ``NAME.log``."""
    path = Path(file)
    return path.with_name(f"{path.stem}.refused-{os.getpid() if pid is None else pid}{path.suffix or '.log'}")


def claim_file(file: str | Path) -> tuple[logging.FileHandler, Path | None]:
    """A handler appending to ``file`` that this process alone writes: it holds an exclusive
    ``flock`` on the file for as long as the handler is open.  When another process holds it (the
    running copy of a party started twice), the handler writes to :func:`refused_path` instead, so
    the running copy's log never shows the refused copy's errors; the second item is then ``file``
    (the log it was refused), else ``None``.  Where ``flock`` does not exist (Windows), no claim."""
    open_private(file, "a").close()  # a role's log is its own: 0600 before the handler appends
    handler = logging.FileHandler(file, encoding="utf-8")
    if fcntl is None or handler.stream is None:  # pragma: no cover - not POSIX (the stream is open: no delay)
        return handler, None
    try:
        fcntl.flock(handler.stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held by another process
        handler.close()
        refused = refused_path(file)
        open_private(refused, "a").close()
        return logging.FileHandler(refused, encoding="utf-8"), Path(file)
    return handler, None


def configure(level: str | int = "INFO", *, file: str | Path | None = None,
              stream: TextIO | None = None, exclusive: bool = False) -> logging.Handler:
    """For the command line only: send ``securetrees.*`` records at ``level`` and above to
    ``file`` (appended) or else ``stream`` (default stderr); returns the handler it installed.
    With ``exclusive`` (a party's log) the file is claimed (:func:`claim_file`): a second process
    given the same file logs to its own ``NAME.refused-PID.log``, and says so there first.
    Warnings (``warnings.warn``, e.g. :class:`~securetrees.errors.InsecureParameterWarning`) become
    log lines too, each once per process and without source paths, until :func:`reset`.
    Calling it again replaces the handler installed before."""
    global _installed, _showwarning
    root = logging.getLogger(ROOT)
    if _installed is not None:
        root.removeHandler(_installed)
        _installed.close()
    refused: Path | None = None
    handler: logging.Handler
    if file is not None and exclusive:
        handler, refused = claim_file(file)
    else:
        if file is not None:
            open_private(file, "a").close()  # a role's log is its own: 0600 before the handler appends
        handler = logging.FileHandler(file, encoding="utf-8") if file is not None else _Handler(stream)
    _installed = handler
    handler.setFormatter(logging.Formatter(_FORMAT, _DATEFMT))
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    if _showwarning is None:
        _showwarning, warnings.showwarning = warnings.showwarning, _log_warning
    if refused is not None:
        get_logger("log").warning("%s is held by another running process (a copy of this party started "
                                  "earlier?); this process (pid %d) logs here instead", refused, os.getpid())
    return handler


def reset() -> None:
    """Undo :func:`configure`: remove its handler and the level it set (the command line calls
    it on exit, so that calling ``securetrees.cli.main`` in a process leaves logging as it was)."""
    global _installed, _showwarning
    root = logging.getLogger(ROOT)
    if _installed is not None:
        root.removeHandler(_installed)
        _installed.close()
        _installed = None
    root.setLevel(logging.NOTSET)
    if _showwarning is not None:
        warnings.showwarning, _showwarning = _showwarning, None
