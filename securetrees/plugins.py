"""Protocols plug into the core through entry points, declared in a package's metadata.

The core names no protocol: the ``securetrees demo`` command and the deployment layer find what
exists through two entry-point groups, so a third-party package adds a demo or a deployable
protocol the same way the bundled ones do (in its ``pyproject.toml``)::

    [project.entry-points."securetrees.demos"]
    my-protocol = "my_package.demo:main"          # main(argv) -> exit status; module has ABOUT

    [project.entry-points."securetrees.deployments"]
    my-protocol = "my_package.deploy"             # the module specs/deployment.md documents

Entry points are read from the installed metadata: a checkout must be installed
(``pip install -e .``) before its demos and deployments can be found.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from types import ModuleType
from typing import Final

from securetrees.errors import ParameterError, TypeMismatchError

__all__ = ["DEMOS", "DEPLOYMENTS", "Demo", "demo_about", "load_demo", "load_deployment", "registered"]

DEMOS: Final = "securetrees.demos"
"""Entry-point group of demos: ``name = "module:function"``, the function takes the remaining
command-line arguments and returns an exit status; the module's ``ABOUT`` is its one-line summary."""

DEPLOYMENTS: Final = "securetrees.deployments"
"""Entry-point group of networked deployments: ``name = "module"`` (see :mod:`securetrees.net.service`)."""

Demo = Callable[[Sequence[str]], int]


def registered(group: str) -> dict[str, str]:
    """Every entry point of ``group``, name → target, sorted by name."""
    found = {ep.name: ep.value for ep in entry_points(group=group)}
    return dict(sorted(found.items()))


def _target(group: str, name: str) -> str:
    known = registered(group)
    if name not in known:
        raise ParameterError(f"no {group.rsplit('.', 1)[-1][:-1]} named {name!r}; known: {sorted(known)} "
                             "(entry points come from installed packages: is this checkout installed?)")
    return known[name]


def load_demo(name: str) -> Demo:
    """The demo function registered as ``name``."""
    module_name, _, attr = _target(DEMOS, name).partition(":")
    fn = getattr(importlib.import_module(module_name), attr or "main", None)
    if not callable(fn):
        raise TypeMismatchError(f"demo {name!r} ({module_name}:{attr}) is not callable")
    return fn  # type: ignore[no-any-return]


def demo_about(name: str) -> str:
    """The one-line summary (``ABOUT``) of demo ``name``'s module."""
    module_name = _target(DEMOS, name).partition(":")[0]
    return str(getattr(importlib.import_module(module_name), "ABOUT", ""))


def load_deployment(name: str) -> ModuleType:
    """The deployment module registered as ``name``."""
    return importlib.import_module(_target(DEPLOYMENTS, name).partition(":")[0])
