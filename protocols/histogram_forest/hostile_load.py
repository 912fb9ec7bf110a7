"""Hostile load against a running role while the federation fits (the load test and benchmark).

A small histogram forest (a server and two clients, each on its own
:class:`~securetrees.net.GrpcNetwork` over mutual TLS on loopback, in this process) fits while two
peers holding valid certificates of the federation attack ``client0``:

- ``sloth`` (role ``client``) first opens ``slow_connections`` × ``slow_streams`` stalled HTTP/2
  streams and never reads (:class:`~securetrees.testing.hostile.SlowPeer`), and holds them until the
  fit ends;
- ``mallory`` (role ``server``: the role whose messages ``client0`` admits, so its valid requests
  reach the phase checks) then sends, with ``in_flight`` calls open at once, the frames of
  :class:`LoadPlan`: random bytes, frames at the size limit (and a few one byte over), deeply
  nested bodies, and valid layer requests out of order (steps never due, an undecodable round
  number, and replies sent as requests).

:func:`run` returns the trees of the attacked fit, the refusals ``client0`` counted, what each load
sent and how long it took, and the process's peak memory growth over the attack (``VmHWM``,
reset before it: it counts the roles, the attackers and the fit, all in this process).
:func:`reference_trees` is the same fit without attack, in one process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Final

import grpc
import numpy as np

from securetrees.errors import ParameterError, PeerTimeout
from securetrees.net.control import peak_rss_bytes
from securetrees.net.tls import TlsIdentity, load_identity, make_test_pki
from securetrees.net.transport import GrpcNetwork, Peer, TransportOptions
from securetrees.protocols.histogram_forest.client import Client
from securetrees.protocols.histogram_forest.messages import CountsReply, LayerRequest
from securetrees.protocols.histogram_forest.server import ForestConfig, Server
from securetrees.runtime import InProcessNetwork, Network, codec
from securetrees.testing.hostile import (
    FrameSender,
    SlowPeer,
    in_round,
    limit_frames,
    nested_frames,
    random_frames,
)
from securetrees.testing.synthetic import make_table
from securetrees.trees.tree import Tree

__all__ = ["ATTACKED", "HOSTILE", "ROLES", "SLOW", "LoadPlan", "LoadRun", "flood", "flood_from_child", "identities",
           "identity", "memory_bound", "parts", "reference_trees", "reset_peak", "run", "same_trees", "wait_until"]

ATTACKED: Final = "client0"
HOSTILE: Final = "mallory"
SLOW: Final = "sloth"
ROLES: Final = {"server": "server", "client0": "client", "client1": "client", HOSTILE: "server", SLOW: "client"}
_CLIENTS: Final = ("client0", "client1")
_SEED: Final = 20261205
_N_FEATURES: Final = 4
_ROWS_PER_CLIENT: Final = 200
LOADS: Final = ("random", "at_limit", "over_limit", "nested", "out_of_order", "slow_streams")
"""What :func:`run` sends, in this order (``slow_streams`` first in time: held through the rest)."""


@dataclass(frozen=True)
class LoadPlan:
    """How much of each load :func:`run` sends (the issue's figures by default)."""

    random: int = 10_000
    random_bytes: int = 256
    at_limit: int = 1_000
    over_limit: int = 10
    nested: int = 1_000
    nested_depth: int = 10_000
    out_of_order: int = 1_000
    slow_connections: int = 4
    slow_streams: int = 16
    limit_bytes: int = 1 << 20
    """``client0``'s ``max_message_bytes`` (the honest fit's frames are far smaller)."""
    in_flight: int = 4
    """Calls ``mallory`` keeps open at once (below the per-peer limit, so every frame is decoded)."""
    calls_per_peer: int = 8

    def __post_init__(self) -> None:
        if min(self.random, self.at_limit, self.over_limit, self.nested, self.out_of_order) < 0:
            raise ParameterError("frame counts must not be negative")
        if not 1 <= self.in_flight < self.calls_per_peer:
            raise ParameterError("in_flight must be in [1, calls_per_peer)")

    def sent(self) -> dict[str, int]:
        """Calls of each load (``slow_streams``: streams opened)."""
        return {"random": self.random, "at_limit": self.at_limit, "over_limit": self.over_limit,
                "nested": self.nested, "out_of_order": self.out_of_order,
                "slow_streams": self.slow_connections * self.slow_streams}


@dataclass
class LoadRun:
    trees: list[Tree]
    refusals: dict[tuple[str, str], int]
    """``client0``'s refusal counts by (peer, kind)."""
    codes: dict[str, Counter[grpc.StatusCode]] = field(default_factory=dict)
    """The status of every call of each frame load, as the attacker saw it."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time of each frame load."""
    peak_growth: int = 0
    """Bytes the process's peak RSS rose over its RSS before the attack."""
    slots_held: int = 0
    """Calls ``sloth`` held open at ``client0`` once its streams were all handled."""


_SLACK: Final = 64 << 20
"""Bytes the bound allows beyond requests in flight: threads, gRPC's buffers, the fit, the attackers."""


def memory_bound(plan: LoadPlan) -> int:
    """The stated bound on the peak memory growth over :func:`run` (``specs/deployment.md``, "Hostile
    peers"): three copies (gRPC's buffer, the request's bytes, the decoded message) of a request at the
    size limit for every call slot of every roster party, plus a fixed allowance."""
    return 3 * plan.calls_per_peer * len(ROLES) * plan.limit_bytes + _SLACK


def _config() -> ForestConfig:
    return ForestConfig(n_features=_N_FEATURES, categories=(0,) * _N_FEATURES, n_classes=2, n_trees=3,
                        max_depth=3, n_bins=8, histogram="fixed", features_per_node=2,
                        low=np.full(_N_FEATURES, -4.0), high=np.full(_N_FEATURES, 4.0))


def parts() -> list[tuple[np.ndarray, np.ndarray]]:
    table = make_table(_ROWS_PER_CLIENT * len(_CLIENTS), _N_FEATURES, n_categorical=0, seed=_SEED)
    X, y = table.X, table.y
    return [(X[i::len(_CLIENTS)], y[i::len(_CLIENTS)]) for i in range(len(_CLIENTS))]


def _parties(networks: dict[str, Network]) -> Server:
    """The fit's parties, each registered on its network; the server, ready to train."""
    for (name, (X, y)), seed in zip(zip(_CLIENTS, parts(), strict=True), (11, 12), strict=True):
        Client(name, networks[name], X, y, seed=seed)
    return Server("server", networks["server"], _CLIENTS, _config(), random_state=10)


def reference_trees() -> list[Tree]:
    """The fit without attack, every party in one process."""
    network = InProcessNetwork()
    return _parties({name: network for name in ("server", *_CLIENTS)}).train()


def same_trees(a: list[Tree], b: list[Tree]) -> bool:
    """Whether two forests are the same, array by array (NaN equal to NaN)."""
    return len(a) == len(b) and all(
        np.array_equal(getattr(s, f.name), getattr(t, f.name), equal_nan=getattr(s, f.name).dtype.kind == "f")
        if isinstance(getattr(s, f.name), np.ndarray) else getattr(s, f.name) == getattr(t, f.name)
        for s, t in zip(a, b, strict=True) for f in fields(s))


def _passphrase(name: str) -> bytes:
    return f"load-{name}".encode()  # a throwaway test PKI


def identities(folder: Path) -> dict[str, TlsIdentity]:
    """A fresh test PKI in ``folder`` for every name of :data:`ROLES`, and each party's identity."""
    make_test_pki(list(ROLES), folder, {n: _passphrase(n) for n in ROLES})
    return {n: identity(folder, n) for n in ROLES}


def identity(folder: Path, name: str) -> TlsIdentity:
    """Party ``name``'s identity from the PKI :func:`identities` wrote (another process's copy)."""
    return load_identity(name, folder / "ca.pem", folder / f"{name}.crt", folder / f"{name}.key", _passphrase(name))


def flood_from_child(folder: Path, address: str, *, frames: int, size: int, in_flight: int) -> dict[str, int]:
    """``mallory`` sends ``frames`` random frames of ``size`` bytes to ``client0`` from a child process
    (so that its buffers stay out of this process's memory); the status name of each call, counted."""
    code = ("import json, sys; from pathlib import Path; "
            "from securetrees.protocols.histogram_forest import hostile_load as h; "
            "print(json.dumps(h.flood(Path(sys.argv[1]), sys.argv[2], *map(int, sys.argv[3:]))))")
    out = subprocess.run([sys.executable, "-c", code, str(folder), address, str(frames), str(size), str(in_flight)],  # noqa: S603
                         check=True, capture_output=True, text=True)
    counts: dict[str, int] = json.loads(out.stdout)
    return counts


def flood(folder: Path, address: str, frames: int, size: int, in_flight: int) -> dict[str, int]:
    """The child's side of :func:`flood_from_child`: one frame, sent ``frames`` times."""
    frame = next(random_frames(1, size))
    with FrameSender(identity(folder, HOSTILE), address, ATTACKED, max_bytes=size + 1024) as sender:
        codes = sender.send(in_round(frame for _ in range(frames)), in_flight=in_flight)
    return {code.name: n for code, n in codes.items()}


def _out_of_order(count: int) -> Iterator[tuple[bytes, str]]:
    """Valid requests ``client0`` must refuse: layer steps never due, an undecodable round number,
    and replies sent as requests; with the round each is sent under."""
    for i in range(count):
        if i % 4 == 3:
            yield codec.encode(CountsReply(counts=np.zeros(4, dtype=np.uint64))), "1"
            continue
        layer = LayerRequest(step=10**6 + i, tree=0, layer=0, split_feature=np.zeros(0, np.int64),
                             split_threshold=np.zeros(0), split_categorical=np.zeros(0, bool),
                             split_missing_left=np.zeros(0, bool), keep=np.zeros(1, np.int64),
                             features=np.ones((1, _N_FEATURES), bool))
        yield codec.encode(layer), "not-a-round" if i % 4 == 2 else str(i)


def wait_until(predicate: Callable[[], bool], what: str, limit: float = 120.0) -> None:
    """Until ``predicate`` holds (an event of the run, not a measure of speed); a generous limit."""
    end = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > end:
            raise PeerTimeout(f"{what} did not happen within {limit:g} s")
        time.sleep(0.01)


def reset_peak() -> int:
    """Reset this process's ``VmHWM`` to its current RSS (Linux); the current peak figure."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        pass
    return peak_rss_bytes()


def run(folder: Path, plan: LoadPlan | None = None) -> LoadRun:
    """The attacked fit (see the module's docstring); ``folder`` receives the test PKI."""
    plan = plan or LoadPlan()
    ids = identities(folder)
    roster = {n: Peer("127.0.0.1:0", role=r) for n, r in ROLES.items()}
    honest = TransportOptions(deadline=120.0, retries=0)
    # sloth's stalled streams are held through the fit: no request time limit cuts them before it ends
    # (the limit has its own test: tests/net/test_hostile_load.py)
    attacked = TransportOptions(deadline=120.0, retries=0, max_message_bytes=plan.limit_bytes,
                                max_calls_per_peer=plan.calls_per_peer, refusal_log_seconds=None,
                                request_seconds=3600.0)
    nets: dict[str, GrpcNetwork] = {}
    try:
        for name in _CLIENTS:
            nets[name] = GrpcNetwork(ids[name], roster, options=attacked if name == ATTACKED else honest)
            roster[name] = Peer(f"127.0.0.1:{nets[name].start()}", role=ROLES[name])
        for name in _CLIENTS:
            nets[name].roster.update(roster)
        nets["server"] = GrpcNetwork(ids["server"], roster, options=honest)
        address = roster[ATTACKED].address
        base = reset_peak()
        out = LoadRun(trees=[], refusals={})
        with SlowPeer(ids[SLOW], address, ATTACKED) as slow:
            slow.open(plan.slow_connections, plan.slow_streams)
            client0 = nets[ATTACKED]
            busy = max(plan.slow_connections * plan.slow_streams - plan.calls_per_peer, 0)
            wait_until(lambda: client0.refusals.counts().get((SLOW, "busy"), 0) >= busy,
                  "the slow peer's streams reaching the server")
            out.slots_held = client0.open_calls(SLOW)
            fit: list[list[Tree]] = []
            failed: list[BaseException] = []
            server = _parties(dict(nets))

            def honest_fit() -> None:
                try:
                    fit.append(server.train())
                except BaseException as exc:  # re-raised in this thread below
                    failed.append(exc)

            fitter = threading.Thread(target=honest_fit, name="honest-fit")
            fitter.start()
            with FrameSender(ids[HOSTILE], address, ATTACKED, max_bytes=2 * plan.limit_bytes) as sender:
                layer = LayerRequest.wire_type
                loads = {
                    "random": in_round(random_frames(plan.random, plan.random_bytes)),
                    "at_limit": in_round(limit_frames(plan.at_limit, plan.limit_bytes, layer)),
                    "over_limit": in_round(limit_frames(plan.over_limit, plan.limit_bytes + 1, layer)),
                    "nested": in_round(nested_frames(plan.nested, plan.nested_depth, layer)),
                    "out_of_order": _out_of_order(plan.out_of_order),
                }
                for load, frames in loads.items():
                    start = time.perf_counter()
                    out.codes[load] = sender.send(frames, in_flight=plan.in_flight)
                    out.seconds[load] = time.perf_counter() - start
            fitter.join()
        if failed:
            raise failed[0]
        out.peak_growth = peak_rss_bytes() - base
        out.trees = fit[0] if fit else []
        out.refusals = client0.refusals.counts()
        return out
    finally:
        for net in nets.values():
            net.close()
