"""How long a command stays silent: the longest gap between pieces of its output.

Used by the demo-progress test and the ``demo_progress`` benchmark suite to check that
every demo shows something at least every few seconds.  The command runs with
``PYTHONUNBUFFERED=1`` (what a terminal user sees: no block-buffered stdout); stdout
and stderr are merged and every arrival of bytes counts as output, including a
progress bar's in-place refresh (a carriage return, no newline).
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Silence", "longest_silence"]


@dataclass(frozen=True)
class Silence:
    """One run: when its first output came (seconds from the start: interpreter start-up and
    imports), the longest silence between two outputs and where it ended, the time from the
    last output to the exit (interpreter teardown: scikit-learn's alone takes seconds on a busy
    machine), the run's duration, its exit status and its output."""

    first_output: float
    longest: float
    ended_at: float
    tail: float
    seconds: float
    returncode: int
    output: bytes


def longest_silence(argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                    timeout: float | None = None) -> Silence:
    """Run ``argv`` (e.g. ``[sys.executable, "-m", "securetrees", "demo", "revfrf"]``) to its end
    and measure its longest silence; :class:`subprocess.TimeoutExpired` (after killing it) past
    ``timeout``."""
    full_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    first: float | None = None
    last = start
    longest, ended_at = 0.0, 0.0
    chunks: list[bytes] = []
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,  # noqa: S603
                            env=full_env)
    out = proc.stdout
    fd = out.fileno()  # type: ignore[union-attr]  # PIPE always gives a stream
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    try:
        while True:
            if timeout is not None and time.monotonic() - start > timeout:
                raise subprocess.TimeoutExpired(list(argv), timeout, b"".join(chunks))
            if not sel.select(timeout=0.5):
                continue
            data = os.read(fd, 65536)
            now = time.monotonic()
            if not data:
                break
            if first is None:
                first = now
            elif now - last > longest:
                longest, ended_at = now - last, now - start
            last = now
            chunks.append(data)
        proc.wait()
    finally:
        sel.close()
        out.close()  # type: ignore[union-attr]
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    end = time.monotonic()
    if first is None:
        first = end
    return Silence(first - start, longest, ended_at, end - last, end - start, proc.returncode, b"".join(chunks))


if __name__ == "__main__":  # pragma: no cover - ``python -m securetrees.testing.silence CMD...``
    res = longest_silence(sys.argv[1:])
    sys.stderr.write(f"first output at {res.first_output:.1f} s; longest silence between outputs {res.longest:.1f} s "
                     f"(ending at {res.ended_at:.1f} s); exit {res.tail:.1f} s after the last output, "
                     f"{res.seconds:.1f} s in all, status {res.returncode}\n")
