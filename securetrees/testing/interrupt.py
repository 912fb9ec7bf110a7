"""A deployed role killed in the middle of a fit, for the multi-process resume tests.

Each protocol's resume test starts its roles as real ``securetrees party`` processes, starts the
fit, waits until a role has written a checkpoint, kills a role (that one or another), restarts it
and resumes.  The steps shared by every protocol are here; what the resumed model must equal stays
in the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from securetrees.errors import ProtocolError
from securetrees.net.config import RunConfig
from securetrees.net.control import Operator
from securetrees.net.service import await_roles, spawn_role
from securetrees.net.transport import GrpcNetwork

__all__ = ["end_roles", "interrupt_fit", "restart_role"]

Procs = dict[str, "subprocess.Popen[bytes]"]


def interrupt_fit(operator: Operator, procs: Procs, *, driver: str, victim: str, checkpoint: Path,
                  wait: float = 120.0) -> BaseException | None:
    """Ask ``driver`` to ``fit`` in a background thread; once ``checkpoint`` (a file written mid-fit:
    the victim's own checkpoint, or another role's when the victim writes none or should die at
    another role's step) exists, stop ``victim`` at once (SIGSTOP: it writes nothing more) and kill
    it; return the error the fit ended with (``None`` if it finished regardless).  ``wait`` bounds
    the wait for the checkpoint (a deadline, not a performance claim)."""
    outcome: list[BaseException | None] = []

    def fit() -> None:
        try:
            operator.control(driver, "fit")
            outcome.append(None)
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    worker = threading.Thread(target=fit, name="interrupted-fit")
    worker.start()
    end = time.monotonic() + wait
    while not checkpoint.exists() and time.monotonic() < end and worker.is_alive():
        time.sleep(0.005)
    if not checkpoint.exists():
        worker.join()
        raise ProtocolError(f"no {checkpoint.name} was written before the fit ended ({victim} not killed)")
    os.kill(procs[victim].pid, signal.SIGSTOP)
    os.kill(procs[victim].pid, signal.SIGKILL)
    procs[victim].wait(timeout=30)
    worker.join()
    return outcome[0]


def restart_role(config: RunConfig, procs: Procs, net: GrpcNetwork, role: str, pki: Path, log: Path,
                 wait: float = 60.0) -> None:
    """Start ``role`` again (its passphrase in ``pki/ROLE.pass``, its log in ``log``) and wait until
    it answers."""
    procs[role] = spawn_role(config, role, pki / f"{role}.pass", log)
    await_roles(net, {role: procs[role]}, wait)


def end_roles(procs: Procs) -> None:
    """Kill every role process still running and reap them all."""
    for p in procs.values():
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)
