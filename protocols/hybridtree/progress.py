"""Showing the host's :class:`~securetrees.protocols.hybridtree.boosting.FitProgress` events.

:class:`ProgressBar` is a callback for :meth:`Host.fit <securetrees.protocols.hybridtree.host.Host.fit>`:
a tqdm bar over the trees whose postfix names the current step (when tqdm, the
``progress`` extra, is installed), else one line per event through ``fallback``
at most every ``every`` seconds, and on every finished tree (silence without a
``fallback``).  The host emits an event after each step of a tree and after each
chunk of encryptions, so a bar or line moves every few seconds even at 2048 bits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from securetrees.protocols.hybridtree.boosting import FitProgress

__all__ = ["ProgressBar"]


class ProgressBar:
    """A progress callback: tqdm if installed (and ``use_tqdm``), else ``fallback`` lines."""

    def __init__(
        self, *, desc: str = "hybridtree", fallback: Callable[[str], None] | None = None,
        every: float = 5.0, use_tqdm: bool = True,
    ) -> None:
        self.desc = desc
        self.fallback = fallback
        self.every = every
        self._tqdm: Any = None
        if use_tqdm:
            try:
                import tqdm
            except ImportError:  # the progress extra is optional
                pass
            else:
                self._tqdm = tqdm.tqdm
        self._bar: Any = None
        self._last = float("-inf")

    def __call__(self, event: FitProgress) -> None:
        done = event.tree + (1 if event.step == "tree done" else 0)
        if self._tqdm is not None:
            if self._bar is None:
                self._bar = self._tqdm(total=event.n_trees, desc=self.desc, unit="tree", leave=False)
            self._bar.n = done
            self._bar.set_postfix_str(event.describe(), refresh=True)
            return
        now = time.monotonic()
        if self.fallback is not None and (event.step == "tree done" or now - self._last >= self.every):
            self._last = now
            self.fallback(f"{self.desc}: {event.describe()}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
