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

import socket
from collections.abc import Callable, Iterator

import pytest


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
