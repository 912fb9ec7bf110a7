"""Progress reporting for long runs: tqdm when installed and wanted, silence otherwise."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["progress"]

T = TypeVar("T")


def progress(items: Iterable[T], *, desc: str = "", total: int | None = None, enabled: bool = True) -> Iterator[T]:
    """Iterate over ``items`` with a progress bar on stderr when ``enabled`` and tqdm is installed."""
    if enabled:
        try:
            from tqdm import tqdm
        except ImportError:  # the progress extra is optional
            pass
        else:
            yield from tqdm(items, desc=desc, total=total, leave=False)
            return
    yield from items
