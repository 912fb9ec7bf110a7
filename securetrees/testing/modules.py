"""Every module of the library imported, for the tests that enumerate what the library registers.

Which message types (:func:`securetrees.runtime.registered_messages`) or role classes exist in a
process depends on which modules happen to be imported, and so on which tests ran before in that
process (a pytest-xdist worker runs a share of the suite).  A test that enumerates them calls
:func:`import_library` first, so it sees the same set alone as in the full run.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import securetrees

__all__ = ["import_library"]


def import_library() -> tuple[ModuleType, ...]:
    """Import every module of :mod:`securetrees`, the protocols (``securetrees.protocols``)
    included, but not the ``__main__`` entry points; return them all."""
    return tuple(importlib.import_module(info.name)
                 for info in pkgutil.walk_packages(securetrees.__path__, "securetrees.")
                 if not info.name.endswith("__main__"))
