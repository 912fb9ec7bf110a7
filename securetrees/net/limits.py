"""A serving role's limits against hostile peers: open calls per peer, time to send a request, and
refusals logged once.

:class:`CallSlots` bounds the calls one authenticated peer may have open at a server at once
(a call holds a slot from the moment its stream opens until its handler returns, so a peer that
opens streams and never finishes its request holds only its own slots).  :class:`RequestTimer`
cancels a call whose request has not arrived within a time limit, which gives its slot back (one
thread for the whole server, not one per call).  :class:`RefusalLog`
counts every refused request by peer and kind (the error's class name) and logs the first of each
at WARNING, later ones only as a count: at most one line per ``interval`` seconds per peer and kind,
and one summary line per peer and kind when the server closes.  A flood of refused frames
therefore costs a handful of log lines, never one per frame (``specs/deployment.md``, "Hostile peers").
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CallSlots", "RefusalLog", "RequestTimer"]

_REASON_CHARS = 160
"""Characters of a refusal's reason kept in the log line (the reason may quote the peer's bytes)."""


class CallSlots:
    """At most ``per_peer`` open calls for each peer; :meth:`enter` says whether one more is admitted."""

    def __init__(self, per_peer: int) -> None:
        self.per_peer = per_peer
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def enter(self, peer: str) -> bool:
        """Take a slot for ``peer``; False (nothing taken) when it already holds ``per_peer``."""
        with self._lock:
            held = self._open.get(peer, 0)
            if held >= self.per_peer:
                return False
            self._open[peer] = held + 1
            return True

    def leave(self, peer: str) -> None:
        """Give back a slot :meth:`enter` granted."""
        with self._lock:
            held = self._open.get(peer, 0) - 1
            if held > 0:
                self._open[peer] = held
            else:
                self._open.pop(peer, None)

    def held(self, peer: str) -> int:
        with self._lock:
            return self._open.get(peer, 0)


class RequestTimer:
    """Runs a call's ``cancel`` once ``seconds`` have passed since :meth:`start`, unless :meth:`stop`
    came first; one daemon thread (started with the first call after creation or :meth:`close`)
    watches every pending call."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._due: list[tuple[float, int]] = []
        self._pending: dict[int, tuple[float, Callable[[], None]]] = {}
        self._ids = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def start(self, cancel: Callable[[], None]) -> int:
        """Watch one call; the ticket for :meth:`stop`."""
        with self._wake:
            ticket, due = next(self._ids), time.monotonic() + self.seconds
            self._pending[ticket] = (due, cancel)
            heapq.heappush(self._due, (due, ticket))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="st-request-timer", daemon=True)
                self._thread.start()
            elif self._due[0][1] == ticket:  # due before the one the thread waits for
                self._wake.notify()
        return ticket

    def stop(self, ticket: int) -> bool:
        """Stop watching; False when the time had run out (``cancel`` has run, or is running).  The
        queue drops stopped calls once they outnumber the pending ones, so it holds O(pending) entries
        however fast calls come and go."""
        with self._wake:
            stopped = self._pending.pop(ticket, None) is not None
            if len(self._due) > 2 * len(self._pending) + 64:
                self._due = [(due, t) for t, (due, _) in self._pending.items()]
                heapq.heapify(self._due)
            return stopped

    def close(self) -> None:
        """Stop the thread (the next :meth:`start` starts another); calls still pending are not
        cancelled meanwhile (:meth:`stop` finds them in time)."""
        with self._wake:
            thread, self._closed = self._thread, True
            self._wake.notify()
        if thread is not None:
            thread.join()
        with self._wake:
            self._thread, self._closed = None, False

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closed and (not self._due or self._due[0][0] > time.monotonic()):
                    self._wake.wait(None if not self._due else self._due[0][0] - time.monotonic())
                if self._closed:
                    return
                _, ticket = heapq.heappop(self._due)
                entry = self._pending.pop(ticket, None)
            if entry is not None:
                entry[1]()


@dataclass
class _Tally:
    total: int = 0
    reported: int = 0
    """Refusals already in a log line."""
    last_line: float = 0.0


class RefusalLog:
    """Refusals by ``(peer, kind)``: counted each, logged once, then summarised.

    ``interval`` is the least number of seconds between two lines for the same peer and kind
    (None: only the first line and the closing summary); ``clock`` is for tests."""

    def __init__(self, logger: logging.Logger, *, interval: float | None = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.interval = interval
        self._clock = clock
        self._tallies: dict[tuple[str, str], _Tally] = {}
        self._lock = threading.Lock()

    def note(self, peer: str, kind: str, reason: str) -> None:
        """Count one refusal of ``kind`` from ``peer``; log it if it is the first of its kind from
        that peer, or a count of those since the last line if ``interval`` has passed."""
        now = self._clock()
        with self._lock:
            tally = self._tallies.setdefault((peer, kind), _Tally())
            tally.total += 1
            first = tally.total == 1
            due = not first and self.interval is not None and now - tally.last_line >= self.interval
            if not (first or due):
                return
            since, tally.reported, tally.last_line = tally.total - tally.reported, tally.total, now
        if first:
            self.logger.warning("refused a request from %s (%s): %s; further %s refusals from %s are counted, "
                                "not logged one by one", peer, kind, reason[:_REASON_CHARS], kind, peer)
        else:
            self.logger.warning("refused %d more requests from %s (%s), %d in all", since, peer, kind, tally.total)

    def counts(self) -> dict[tuple[str, str], int]:
        """Refusals so far by ``(peer, kind)``."""
        with self._lock:
            return {key: tally.total for key, tally in self._tallies.items()}

    def summarise(self) -> None:
        """One line per peer and kind with refusals not yet in a line (when the server stops)."""
        with self._lock:
            pending = [(peer, kind, t.total - t.reported, t.total) for (peer, kind), t in self._tallies.items()
                       if t.total > t.reported]
            for t in self._tallies.values():
                t.reported = t.total
        for peer, kind, since, total in pending:
            self.logger.warning("refused %d more requests from %s (%s), %d in all", since, peer, kind, total)
