"""Files only their owner may read: a party's data, logs, keys, model parts, predictions, passphrases.

Three helpers, one rule: a file the library writes for a party is mode 0600 from the moment it
exists, and a folder it makes for one is 0700.  :func:`write_private` writes a whole file at
once (atomically), :func:`open_private` opens one to stream into (a log, a table written by
pandas or numpy), :func:`private_dir` makes a folder.  Public material (certificates, a CA, a
run's ``run.toml``, public parameters) is written with the process's default mode instead.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO, Any, Final

from securetrees.errors import ParameterError

__all__ = ["PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE", "open_private", "private_dir", "write_private"]

PRIVATE_FILE_MODE: Final = 0o600
PRIVATE_DIR_MODE: Final = 0o700
_MODES: Final = frozenset({"w", "a", "wb", "ab"})


def private_dir(path: str | Path) -> Path:
    """The folder ``path`` for a party's private files, mode 0700: made if missing (with any
    missing parent, each 0700), and narrowed to 0700 if it exists.  Returns the path."""
    target = Path(path)
    _make_missing(target)
    target.chmod(PRIVATE_DIR_MODE)
    return target


def _make_missing(folder: Path) -> None:
    """Make ``folder`` and its missing parents, each 0700 (set explicitly, whatever the umask);
    folders that exist keep their mode (a file written into the working folder leaves it as it is)."""
    missing = []
    for f in (folder, *folder.parents):
        if f.exists():
            break
        missing.append(f)
    for f in reversed(missing):
        f.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        f.chmod(PRIVATE_DIR_MODE)


def open_private(path: str | Path, mode: str = "w", **kwargs: Any) -> IO[Any]:
    """Open ``path`` for writing (``mode``: ``w``, ``a``, ``wb`` or ``ab``; ``kwargs`` as for
    :func:`open`) with mode 0600: a new file is created so, and an existing one is narrowed to
    0600 before anything is written.  Missing folders are made 0700."""
    if mode not in _MODES:
        raise ParameterError(f"open_private writes: mode is one of {sorted(_MODES)}, not {mode!r}")
    target = Path(path)
    _make_missing(target.parent)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    fd = os.open(target, flags, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def write_private(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` with mode 0600 from the moment the file exists (a temporary file in
    the same folder, made private by ``mkstemp``, then renamed over ``path``: a reader sees the old
    file or the whole new one, never a part).  Missing folders are made 0700.  Returns the path."""
    target = Path(path)
    _make_missing(target.parent)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
