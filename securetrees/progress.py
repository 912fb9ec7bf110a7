"""Progress for long runs: one mechanism, one switch (every estimator's ``progress`` argument).

:func:`progress` wraps an iterable (trees, layers, rows); :func:`phase` wraps a step
that has no natural items (key set-up, a prediction); :func:`tracked` makes a whole
estimator method (``fit``, ``predict``) a phase when the estimator's ``progress`` is on.
When enabled, each shows a tqdm bar on stderr if tqdm is installed (``pip install
'securetrees[progress]'``), and else logs a line on the ``securetrees.progress`` logger.
Either way a heartbeat thread keeps the output alive: whenever nothing has been shown for
:data:`HEARTBEAT_SECONDS` (a bar refreshed, a progress line, any record through the command
line's handler), it refreshes the innermost bar (its elapsed time moves) or logs ``desc:
done/total, elapsed``. So a step of any length, even one indivisible layer, never leaves the
terminal silent for much more than :data:`HEARTBEAT_SECONDS`.

A role process (``securetrees party``) shows progress as log lines only (:func:`log_lines`): one line
per finished step (a tree) in the role's log, never a bar; and whatever display runs is readable by
the operator: :func:`current` (the role's ``status`` control action, which ``securetrees operator fit``
polls, shows it as ``progress``).

Disabled (the library's default), both are a plain loop / a no-op: no thread, no output.
The lines go through :mod:`logging`, so a library user sees them only after configuring
logging; the command line configures it (:func:`securetrees.log.configure`).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from contextlib import contextmanager
from typing import Any, Concatenate, ParamSpec, TextIO, TypeVar

from securetrees.log import get_logger

__all__ = ["HEARTBEAT_SECONDS", "Progress", "current", "log_lines", "note", "note_output", "phase", "progress",
           "tracked", "write_line"]

T = TypeVar("T")
S = TypeVar("S")
R = TypeVar("R")
P = ParamSpec("P")

HEARTBEAT_SECONDS = 5.0
"""The longest silence an enabled progress display allows itself before it shows something."""

_log = get_logger("progress")
_lock = threading.Lock()
_last_output = time.monotonic()
_active: list[Progress] = []  # innermost last
_as_lines = False  # log_lines(): lines only, one per finished step


def log_lines(on: bool = True) -> None:
    """Show every enabled display as log lines, never as a tqdm bar, with a line per finished step
    (a role process, whose log is a file: ``securetrees party`` turns it on)."""
    global _as_lines
    _as_lines = on


def note(text: str) -> None:
    """Describe the step the innermost running display is on (``tree 4, layer 2``), for a loop
    that cannot reach its display (a :func:`progress` generator's); nothing when none runs.
    Shown by :func:`current` (a role's ``status``) and the display's next line or refresh."""
    with _lock:
        innermost = _active[-1] if _active else None
    if innermost is not None:
        innermost.note = text


def current() -> str:
    """The running displays of this process as one line, outermost first (``federated forest 3/10;
    tree 4 layer 2``: each one's description, steps done of total, and what it is on), or ``""``
    when none runs.  Counts and names only."""
    with _lock:
        running = list(_active)
    return "; ".join(p.describe() for p in running)


def note_output() -> None:
    """Record that something was just shown (the heartbeat waits a full interval from now)."""
    global _last_output
    _last_output = time.monotonic()


def _tqdm() -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # the progress extra is optional
        return None
    return tqdm


def write_line(line: str, stream: TextIO) -> None:
    """Write one line to ``stream``, through tqdm when installed so that bars stay intact."""
    tqdm = _tqdm()
    if tqdm is not None:
        tqdm.write(line, file=stream)
    else:
        stream.write(line + "\n")
        stream.flush()


class Progress:
    """One step's display: a tqdm bar or log lines, plus the shared heartbeat.

    Use through :func:`progress` or :func:`phase`; :meth:`update` advances it."""

    def __init__(self, desc: str, total: int | None = None, *, enabled: bool = True,
                 interval: float | None = None) -> None:
        self.desc = desc or "working"
        self.total = total
        self.enabled = enabled
        self.interval = HEARTBEAT_SECONDS if interval is None else interval  # read now: tests may lower it
        self.done = 0
        self.note = ""
        self._start = time.monotonic()
        self._bar: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if not self.enabled:
            return self
        self._start = time.monotonic()
        tqdm = None if _as_lines else _tqdm()
        if tqdm is not None:
            fmt = None if self.total else "{desc}: {elapsed}"  # a phase without steps: its time only
            self._bar = tqdm(desc=self.desc, total=self.total, leave=False, bar_format=fmt)
        else:
            _log.info("%s: started%s", self.desc, f" ({self.total} steps)" if self.total else "")
        note_output()
        with _lock:
            _active.append(self)
        self._thread = threading.Thread(target=self._beat, name=f"progress:{self.desc}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.enabled:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with _lock:
            if self in _active:
                _active.remove(self)
        elapsed = time.monotonic() - self._start
        if self._bar is not None:
            self._bar.close()
        elif exc[0] is None:
            _log.info("%s: done%s in %.1f s", self.desc, f", {self.done} steps" if self.done else "", elapsed)
        note_output()

    def describe(self) -> str:
        """``DESC DONE/TOTAL (NOTE)``: where this display is (counts and names only)."""
        of = f" {self.done}/{self.total}" if self.total else (f" {self.done}" if self.done else "")
        return f"{self.desc}{of}" + (f" ({self.note})" if self.note else "")

    def update(self, n: int = 1) -> None:
        self.done, self.note = self.done + n, ""  # the step described is finished
        if self._bar is not None:
            self._bar.update(n)
            note_output()
        elif _as_lines and self.enabled:
            self._show()

    def advance_to(self, done: int, note: str = "") -> None:
        """Set the count of finished steps to ``done`` and describe the current one (``note``), for
        roles that report events rather than iterate; a finished step is always shown."""
        if not self.enabled:
            return
        finished, self.done, self.note = done > self.done, done, note
        if self._bar is not None:
            self._bar.n = done
            self._bar.set_postfix_str(note, refresh=True)
            note_output()
        elif finished:
            self._show()

    def _show(self) -> None:
        if self._bar is not None:
            self._bar.refresh()
        else:
            of = f"/{self.total}" if self.total else ""
            note = f" ({self.note})" if self.note else ""
            _log.info("%s: %d%s%s, %.0f s", self.desc, self.done, of, note, time.monotonic() - self._start)
        note_output()

    def _beat(self) -> None:
        tick = min(0.5, self.interval / 4)
        while not self._stop.wait(tick):
            with _lock:
                innermost = bool(_active) and _active[-1] is self
                due = time.monotonic() - _last_output >= self.interval
            if innermost and due:
                self._show()


def progress(items: Iterable[T], *, desc: str = "", total: int | None = None, enabled: bool = True,
             interval: float | None = None) -> Iterator[T]:
    """Iterate over ``items``, showing progress when ``enabled`` (see the module docstring)."""
    if not enabled:
        yield from items
        return
    if total is None and isinstance(items, Sized):
        total = len(items)
    with Progress(desc, total, interval=interval) as bar:
        for item in items:
            yield item
            bar.update()


@contextmanager
def phase(desc: str, *, total: int | None = None, enabled: bool = True,
          interval: float | None = None) -> Iterator[Progress]:
    """A step without natural items: ``with phase("key set-up", enabled=...) as p: ...``
    (``p.update()`` advances it when the step has ``total`` parts)."""
    with Progress(desc, total, enabled=enabled, interval=interval) as bar:
        yield bar


def tracked(desc: str) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """Decorate an estimator's method so that each call is a :func:`phase` named ``desc`` when the
    estimator's ``progress`` attribute is true (bars of inner loops nest inside it)."""

    def wrap(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(fn)
        def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            with phase(desc, enabled=bool(getattr(self, "progress", False))):
                return fn(self, *args, **kwargs)

        return run

    return wrap
