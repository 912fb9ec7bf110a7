"""Files only their owner may read: key files, keys, model parts, predictions, passphrases."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_private"]


def write_private(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` with mode 0600 from the moment the file exists (a temporary file in
    the same folder, made private by ``mkstemp``, then renamed over ``path``: a reader sees the old
    file or the whole new one, never a part).  Returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
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
