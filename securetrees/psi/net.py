"""Two-party PSI over gRPC with mutual TLS, one process per party (tests and the ``psi`` benchmark).

:func:`run_two_process` writes a test PKI, starts the member as a child process (this module's
:func:`main`) and runs the leader in the calling process; points cross the network in chunks of
``chunk_size`` (``specs/psi.md``, "Deployment").  The member writes its row permutation to a
``.npy`` file (no pickle).  A federation's own processes host the same roles on their
:class:`~securetrees.net.GrpcNetwork` instead.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

import securetrees
from securetrees.errors import PartyUnavailable, PeerTimeout
from securetrees.files import open_private, write_private
from securetrees.net import GrpcNetwork, Peer, TlsIdentity, TransportOptions, load_identity
from securetrees.net.tls import make_test_pki
from securetrees.net.trial import free_ports
from securetrees.psi.group import Id
from securetrees.psi.messages import LEADER_ROLE, MEMBER_ROLE
from securetrees.psi.roles import DEFAULT_CHUNK_SIZE, DEFAULT_MAX_SET_SIZE, IntArray, PsiLeader, PsiMember, PsiResult
from securetrees.rand import SYSTEM_RANDOM

__all__ = ["TwoProcessRun", "main", "run_two_process"]

LEADER: Final = "leader"
MEMBER: Final = "member"
_CHILD_MAIN: Final = ("import sys; sys.path = [p for p in sys.path if p not in ('', '.')]; "
                      "from securetrees.psi.net import main; sys.exit(main(sys.argv[1:]))")


@dataclass(frozen=True)
class TwoProcessRun:
    leader: PsiResult
    member_rows: IntArray
    seconds: float
    """Wall time of the leader's run (the member already listening), in seconds."""
    bytes_received: int
    """Protocol bytes the leader received (the member's replies)."""
    leader_cpu_seconds: float
    """CPU time of the leader's process during its run (every thread)."""
    member_cpu_seconds: float
    """CPU time of the member's process from listening to its result (every thread)."""


def _roster(addresses: dict[str, str]) -> dict[str, Peer]:
    return {LEADER: Peer(addresses[LEADER], role=LEADER_ROLE), MEMBER: Peer(addresses[MEMBER], role=MEMBER_ROLE)}


def _identity(pki: Path, name: str) -> TlsIdentity:
    return load_identity(name, pki / "ca.pem", pki / f"{name}.crt", pki / f"{name}.key",
                         (pki / f"{name}.pass").read_bytes().strip())


def main(argv: Sequence[str] | None = None) -> int:
    """The member process: serve :class:`PsiMember` until the leader's result arrives."""
    ap = argparse.ArgumentParser(prog="securetrees.psi.net")
    ap.add_argument("--pki", type=Path, required=True)
    ap.add_argument("--leader-address", required=True)
    ap.add_argument("--member-address", required=True)
    ap.add_argument("--ids", type=Path, required=True, help=".npy of int64 ids")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-set-size", type=int, default=DEFAULT_MAX_SET_SIZE)
    ap.add_argument("--timeout", type=float, default=3600.0)
    args = ap.parse_args(argv)
    identity = _identity(args.pki, MEMBER)
    ids = np.load(args.ids, allow_pickle=False).tolist()
    net = GrpcNetwork(identity, _roster({LEADER: args.leader_address, MEMBER: args.member_address}),
                      options=TransportOptions(deadline=600.0), keep_payloads=False)
    member = PsiMember(MEMBER, net, ids, max_set_size=args.max_set_size)
    net.start()
    cpu = time.process_time()
    end = time.monotonic() + args.timeout
    try:
        while member.result is None:
            if time.monotonic() > end:
                return 2
            time.sleep(0.02)
        cpu = time.process_time() - cpu
        for path, array in ((args.out, member.result.rows), (args.out.with_suffix(".cpu.npy"), np.asarray(cpu))):
            with open_private(path, "wb") as f:
                np.save(f, array, allow_pickle=False)
    finally:
        net.close()
    return 0


def _child_env() -> dict[str, str]:
    """The environment with this process's securetrees first on the path (absolute), so the
    member runs the same code as the leader."""
    env = dict(os.environ)
    root = str(Path(securetrees.__file__).resolve().parents[1])
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
    env["PYTHONPATH"] = os.pathsep.join([root, *kept])
    return env


def run_two_process(leader_ids: Sequence[Id], member_ids: Sequence[int], work_dir: str | Path, *,
                    chunk_size: int = DEFAULT_CHUNK_SIZE, max_set_size: int = DEFAULT_MAX_SET_SIZE,
                    startup_timeout: float = 60.0) -> TwoProcessRun:
    """Leader here, member in a child process, both over mutual TLS on loopback."""
    work = Path(work_dir)
    pki = work / "pki"
    passphrases = {n: SYSTEM_RANDOM.token_bytes(16).hex().encode() for n in (LEADER, MEMBER)}
    make_test_pki([LEADER, MEMBER], pki, passphrases)
    for n, pw in passphrases.items():
        write_private(pki / f"{n}.pass", pw + b"\n")
    ports = free_ports(2)
    addresses = {LEADER: f"127.0.0.1:{ports[0]}", MEMBER: f"127.0.0.1:{ports[1]}"}
    with open_private(work / "member_ids.npy", "wb") as f:
        np.save(f, np.asarray(member_ids, dtype=np.int64), allow_pickle=False)
    out = work / "member_rows.npy"
    cmd = [sys.executable, "-c", _CHILD_MAIN, "--pki", str(pki), "--leader-address", addresses[LEADER],
           "--member-address", addresses[MEMBER], "--ids", str(work / "member_ids.npy"), "--out", str(out),
           "--max-set-size", str(max_set_size)]
    with open_private(work / "member.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=_child_env())  # noqa: S603
    net = GrpcNetwork(_identity(pki, LEADER), _roster(addresses), options=TransportOptions(deadline=600.0),
                      keep_payloads=False)
    try:
        leader = PsiLeader(LEADER, net, leader_ids, [MEMBER], max_set_size=max_set_size, chunk_size=chunk_size)
        end = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                raise PartyUnavailable(f"the member exited during start-up (code {proc.returncode}); "
                                       f"see {work / 'member.log'}")
            try:
                net.wait_for([MEMBER], min(1.0, max(0.1, end - time.monotonic())))
                break
            except PeerTimeout:
                if time.monotonic() > end:
                    raise
        t0, cpu0 = time.perf_counter(), time.process_time()
        result = leader.run()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        proc.wait(timeout=60)
        received = net.transcript.bytes_received(LEADER)
    finally:
        net.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise PartyUnavailable(f"the member failed (code {proc.returncode}); see {work / 'member.log'}")
    rows = np.load(out, allow_pickle=False)
    member_cpu = float(np.load(out.with_suffix(".cpu.npy"), allow_pickle=False))
    return TwoProcessRun(result, rows, seconds, received, cpu, member_cpu)
