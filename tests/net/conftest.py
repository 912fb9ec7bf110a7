"""Loopback ports that no other process can take while a test uses them.

A port from ``securetrees.net.trial.free_ports`` is free when it is chosen and free again at
once; a test that binds it later (a peer that starts, stops, restarts) races every other
process on the machine that asks the OS for a port in between.  ``held_ports`` keeps a
socket bound to each port, with SO_REUSEPORT and without listening, for the whole test:
the OS never hands the port to another ``bind(("...", 0))`` (it only shares a port between
two sockets that both ask for it by number, with SO_REUSEPORT, under the same user), while
the gRPC servers of the test (which set SO_REUSEPORT) bind it whenever they like, and only
they accept connections on it.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from securetrees.plugins import DEPLOYMENTS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def held_ports() -> Iterator[Callable[[int], list[int]]]:
    held: list[socket.socket] = []

    def hold(n: int) -> list[int]:
        ports = []
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            s.bind(("127.0.0.1", 0))
            held.append(s)
            ports.append(s.getsockname()[1])
        return ports

    yield hold
    for s in held:
        s.close()


@pytest.fixture
def checkout_deployments(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This checkout's ``securetrees.deployments`` entry points, visible to this process and to every
    process it starts, whatever the installed metadata holds (an editable install records the entry
    points of the checkout it was made from, and reinstalling would repoint it).

    A metadata folder ``securetrees_checkout-0.dist-info`` holding the group from ``pyproject.toml``
    goes first on ``sys.path`` and on ``PYTHONPATH``; :func:`importlib.metadata.entry_points` reads
    every distribution on the path, so :func:`securetrees.plugins.load_deployment` finds them."""
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    group = doc["project"]["entry-points"][DEPLOYMENTS]
    site = tmp_path_factory.mktemp("entry-points")
    info = site / "securetrees_checkout-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: securetrees-checkout\nVersion: 0\n", encoding="utf-8")
    lines = [f"[{DEPLOYMENTS}]", *(f"{name} = {target}" for name, target in group.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    paths = [str(site), *(str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    return site
