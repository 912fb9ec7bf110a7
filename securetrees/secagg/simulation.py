"""All parties of one aggregation in one process: for tests, benchmarks and demos.

:func:`simulate_secure_sum` builds a roster, a server and one client per input
on an :class:`~securetrees.runtime.InProcessNetwork` (every message still
crosses as bytes), runs session setup and one round, and returns the result.
Dropouts are simulated with ``drops={party: Stage}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from securetrees.errors import ParameterError
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import InProcessNetwork, Network
from securetrees.secagg.rings import Ring, Z2k
from securetrees.secagg.roles import AggregateResult, SecAggClient, SecAggConfig, SecAggServer, Stage
from securetrees.signing import make_roster

__all__ = ["Simulation", "build_simulation", "simulate_secure_sum"]


@dataclass
class Simulation:
    network: Network
    server: SecAggServer
    clients: dict[str, SecAggClient]


def build_simulation(
    names: list[str] | tuple[str, ...],
    *,
    ring: Ring | None = None,
    threshold: int = 0,
    drops: Mapping[str, Stage] | None = None,
    network: Network | None = None,
    rng: RandomSource = SYSTEM_RANDOM,
) -> Simulation:
    """A server and one client per name on one network (not yet set up)."""
    drops = dict(drops or {})
    if not set(drops) <= set(names):
        raise ParameterError("drops name parties that do not exist")
    net = network if network is not None else InProcessNetwork()
    roster, signing = make_roster(list(names), rng=rng)
    config = SecAggConfig(roster, threshold, ring if ring is not None else Z2k())
    server = SecAggServer(net, config=config, rng=rng)
    clients = {
        name: SecAggClient(
            name, net, config=config, signing_key=signing[name], rng=rng, drop_at=drops.get(name)
        )
        for name in names
    }
    return Simulation(net, server, clients)


def simulate_secure_sum(
    inputs: Mapping[str, Any],
    *,
    ring: Ring | None = None,
    threshold: int = 0,
    drops: Mapping[str, Stage] | None = None,
    network: Network | None = None,
    rng: RandomSource = SYSTEM_RANDOM,
) -> AggregateResult:
    """Set up a session and sum ``inputs`` (one vector per party) in round 1."""
    sim = build_simulation(
        list(inputs), ring=ring, threshold=threshold, drops=drops, network=network, rng=rng
    )
    lengths = set()
    for name, values in inputs.items():
        sim.clients[name].provide(1, values)
        lengths.add(len(values))
    if len(lengths) != 1:
        raise ParameterError("all inputs must have the same length")
    sim.server.setup()
    return sim.server.aggregate(1, lengths.pop())
