"""Running roles as services: one role per process, a launcher for a local federation.

A protocol supports deployment by a module (a ``securetrees.deployments`` entry point,
:mod:`securetrees.plugins`, imported only when used, so the core names no protocol); its
interface is in ``specs/deployment.md``: ``PARAMETERS`` (the ``[protocol]`` keys),
``make_role``, ``run_job``, ``trial`` and the operator's steps ``fit`` / ``predict`` /
``revoke`` (each optional; :mod:`securetrees.net.operate`).

Every role process logs to a file (``--log-dir``, default ``logs/`` beside the
configuration: ``logs/ROLE.log``): its start, one line per step with wall time, bytes and
rounds (:mod:`securetrees.runtime.steps`), its totals when stopped, and an error that ends
it.  :func:`launch` keeps those files and, when a role fails, reports the end of its log.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from securetrees import plugins
from securetrees.errors import (
    OutputExistsError,
    ParameterError,
    PartyUnavailable,
    PeerTimeout,
    RunStopped,
    SecureTreesError,
    UnsupportedActionError,
)
from securetrees.files import open_private
from securetrees.log import get_logger
from securetrees.net.config import RunConfig, load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.failed import FAILED_ROLE_SECONDS, FailedRole, check_started
from securetrees.net.keyfile import open_key_file
from securetrees.net.tls import load_identity
from securetrees.net.transport import GrpcNetwork

__all__ = ["await_roles", "default_log_dir", "job_module", "launch", "load_data", "log_tail", "network_for",
           "protocol_module", "spawn_role", "start_role"]

TAIL_LINES: Final = 20
"""How many last lines of a failed role's log :func:`launch` prints."""

_log = get_logger("net.service")

def protocol_module(name: str) -> ModuleType:
    """The deployment module of protocol ``name`` (a ``securetrees.deployments`` entry point)."""
    return plugins.load_deployment(name)


def job_module(config: RunConfig) -> ModuleType:
    """The run's deployment module, refusing a predict-only run (``[run] job = "predict"``) of a
    protocol whose module does not declare ``PREDICT_ONLY = True`` (it keeps no model parts)."""
    module = protocol_module(config.protocol)
    if config.job == "predict" and getattr(module, "PREDICT_ONLY", False) is not True:
        raise UnsupportedActionError(f"the protocol {config.protocol!r} has no predict-only job: its parties keep "
                                     "no model parts (a new batch of rows means a new run)")
    return module


def load_data(path: Path | None) -> dict[str, npt.NDArray[Any]]:
    """A party's own arrays (``.npz``, read without pickle); none for a table (CSV, Parquet),
    which the deployment reads itself (:mod:`securetrees.net.tables`)."""
    if path is None or path.suffix.lower() != ".npz":
        return {}
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as exc:  # zipfile, zlib and numpy each have their own errors
        # (BadZipFile, zlib.error, NotImplementedError for an unknown zip version, struct.error,
        # EOFError, ValueError...): whichever it is, the file is not a readable data file.
        raise ParameterError(f"cannot read the data file {path}: {exc!r}") from exc


def network_for(config: RunConfig, role: str, passphrase: bytes) -> GrpcNetwork:
    p = config.party(role)
    identity = load_identity(role, config.ca, p.cert, p.key, passphrase)
    return GrpcNetwork(identity, config.roster(), options=config.transport)


def start_role(config: RunConfig, role: str, passphrase: bytes) -> GrpcNetwork:
    """Build ``role`` (its TLS identity, key file and data) and start serving it."""
    if role == config.operator:
        raise ParameterError("the operator is not a served role (it runs the launcher's job)")
    module = job_module(config)
    p = config.party(role)
    secrets = open_key_file(p.secrets, role, passphrase) if p.secrets is not None else {}
    net = network_for(config, role, passphrase)
    try:
        # a predict-only run reads no training data: its arrays (.npz) are the test_data's
        data = load_data(p.test_data if config.job == "predict" else p.data)
        module.make_role(role, config, net, secrets, data, passphrase)
    except SecureTreesError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, OverflowError) as exc:
        # a missing or malformed [protocol] parameter, key-file item or data array
        raise ParameterError(f"cannot build {role!r} from the run configuration: {exc!r}") from exc
    net.start()
    return net


def serve(config_path: str | Path, role: str, passphrase_file: str | Path | None, *,
          failed_seconds: float = FAILED_ROLE_SECONDS) -> int:
    """``securetrees party``: serve one role until the operator (or a signal) stops it.  A role
    that fails to start answers with its error for ``failed_seconds`` (:func:`serve_failure`),
    then the error ends the command."""
    config = load_config(config_path)
    passphrase = read_passphrase(role, passphrase_file)
    try:
        net = start_role(config, role, passphrase)
    except RunStopped as exc:  # `operator stop` before `fit`: a clean end, not a failure
        _log.info("%s", exc)
        _log.info("%s stopped", role)
        return 0
    except SecureTreesError as exc:
        serve_failure(config, role, passphrase, exc, failed_seconds)
        raise
    signal.signal(signal.SIGTERM, lambda *_: net.close(grace=2.0))
    _log.info("%s serving %s on %s", role, config.protocol, config.party(role).address)
    try:
        net.wait()
    finally:
        net.close()
    _log.info("%s stopped", role)
    return 0


def serve_failure(config: RunConfig, role: str, passphrase: bytes, exc: SecureTreesError, seconds: float) -> None:
    """Serve a :class:`~securetrees.net.failed.FailedRole` for ``role`` on its address for ``seconds``
    (or until the operator's ``shutdown`` or SIGTERM), so that the operator's next command gets the
    typed start-up error ``exc`` within one round.  Where this party cannot even serve (its TLS
    identity does not load, its address is taken: a second copy of a running party) it serves
    nothing and the error ends the process at once."""
    _log.error("%s could not start: %s: %s", role, type(exc).__name__, exc)
    try:
        net = network_for(config, role, passphrase)
        stand_in = FailedRole.serving(config.party(role).role, role, net, exc)
        net.start()
    except SecureTreesError as why:
        _log.info("%s cannot tell the operator (%s: %s); it stops", role, type(why).__name__, why)
        return
    signal.signal(signal.SIGTERM, lambda *_: stand_in.stopped.set())
    _log.info("%s answers every message with its %s for %g s (securetrees operator stop ends it)", role,
              type(exc).__name__, seconds)
    try:
        stand_in.stopped.wait(seconds)
    finally:
        net.close(grace=1.0)


def loopback_bytes() -> int:
    """Bytes transmitted so far on the loopback interface (``/proc/net/dev``), or 0 where unknown."""
    try:
        with open("/proc/net/dev", encoding="ascii") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == "lo":
                    return int(rest.split()[8])
    except (OSError, ValueError, IndexError):
        pass
    return 0


_ROLE_MAIN: Final = ("import sys; sys.path = [p for p in sys.path if p not in ('', '.')]; "
                     "from securetrees.cli import main; sys.exit(main(sys.argv[1:]))")


def default_log_dir(config_path: str | Path) -> Path:
    """``logs/`` beside the configuration: where each role's ``ROLE.log`` goes by default."""
    return Path(config_path).resolve().parent / "logs"


def spawn_role(config: RunConfig, role: str, passphrase_file: Path, log: Path | None = None
               ) -> subprocess.Popen[bytes]:
    """``securetrees party`` for ``role`` as a child process, logging to ``log`` (default
    ``logs/ROLE.log`` beside the configuration); the child's own output (a traceback, say) is
    appended to the same file.

    The child drops the working directory from its import path before importing anything, so a
    module in the caller's folder (a ``protocols.py``, a ``grpc.py``) cannot stand in for ours."""
    path = log if log is not None else default_log_dir(config.path) / f"{role}.log"
    cmd = [sys.executable, "-c", _ROLE_MAIN, "party", "--config", str(config.path), "--role", role,
           "--passphrase-file", str(passphrase_file), "--log-file", str(path)]
    with open_private(path, "ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603 - our interpreter, no shell


def await_roles(net: GrpcNetwork, procs: dict[str, subprocess.Popen[bytes]], timeout: float) -> None:
    """Wait until every role accepts connections; fail at once if one of them exits."""
    end = time.monotonic() + timeout
    pending = list(procs)
    while pending:
        dead = {r: procs[r].returncode for r in pending if procs[r].poll() is not None}
        if dead:
            raise PartyUnavailable(f"roles exited during start-up (exit codes {dead})")
        if time.monotonic() > end:
            raise PeerTimeout(f"roles {pending} did not come up within {timeout:g} s")
        try:
            net.wait_for(pending[:1], 0.5)
            pending.pop(0)
        except PeerTimeout:
            continue


def log_tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last ``lines`` lines of the log file ``path`` (its last 64 KiB at most); [] if unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 65536))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


def _failed_roles(procs: dict[str, subprocess.Popen[bytes]], exc: BaseException) -> list[str]:
    """Roles whose process ended with an error, or that the error names (``'cs'``)."""
    time.sleep(0.2)  # a role that is dying has a moment to finish its log
    text = str(exc)
    return [r for r, proc in procs.items() if proc.poll() not in (None, 0) or repr(r) in text]


def _report_tails(roles: list[str], logs: dict[str, Path]) -> None:
    """Log (ERROR, on ``securetrees.net.service``: the command line's stderr) each failed role's tail."""
    for role in roles:
        tail = log_tail(logs[role])
        _log.error("role %r failed; the last %d lines of its log %s:%s", role, len(tail), logs[role],
                   "".join(f"\n  | {line}" for line in tail))


def launch(config_path: str | Path, passphrase_dir: str | Path, *, startup_timeout: float = 60.0,
           log_dir: str | Path | None = None, report: dict[str, Any] | None = None) -> dict[str, npt.NDArray[Any]]:
    """Start every role of the run as its own process on this machine, run the protocol's
    job as the operator, stop the roles and return the job's results.

    ``passphrase_dir`` holds ``NAME.pass`` for every party (a local trial's convenience;
    a real deployment types or injects each passphrase on its own machine).  Each role logs to
    ``log_dir/ROLE.log`` (default :func:`default_log_dir`); the files are kept, and when the
    run fails, the last lines of each failed role's log (one whose process ended with an
    error, or that the error names) are logged as an error with the file's path (the command
    line prints them on stderr).  ``report``, when
    given, receives ``job_seconds`` (the job alone, after start-up), ``loopback_bytes`` (bytes
    transmitted on the loopback interface meanwhile, Linux only: every header and frame) and
    ``stats``: each role's received messages, bytes and rounds (protocol and control).
    """
    config = load_config(config_path)
    module = job_module(config)  # before any role is started
    pdir = Path(passphrase_dir)
    folder = Path(log_dir) if log_dir is not None else default_log_dir(config.path)
    logs = {role: folder / f"{role}.log" for role in config.roles}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for role in config.roles:
            procs[role] = spawn_role(config, role, pdir / f"{role}.pass", logs[role])
        op_pass = read_passphrase(config.operator, pdir / f"{config.operator}.pass")
        with network_for(config, config.operator, op_pass) as net:
            operator = Operator(config.operator, net)
            await_roles(net, procs, startup_timeout)
            check_started(operator, config.roles)
            t0, lo0 = time.perf_counter(), loopback_bytes()
            results: dict[str, npt.NDArray[Any]] = module.run_job(operator, config)
            if report is not None:
                report["job_seconds"] = time.perf_counter() - t0
                report["loopback_bytes"] = loopback_bytes() - lo0
                stats = operator.control_many(config.roles, "stats")
                report["stats"] = {r: dict(rep.info) for r, rep in stats.items()}
                report["stats"][config.operator] = {"bytes_received": str(net.transcript.total_bytes),
                                                    "messages": str(len(net.transcript)),
                                                    "rounds": str(net.transcript.rounds)}
            operator.control_many(config.roles, "shutdown")
        for proc in procs.values():
            proc.wait(timeout=30)
        return results
    except Exception as exc:
        _report_tails(_failed_roles(procs, exc), logs)
        raise
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()


def init_trial(protocol: str, out_dir: str | Path, *, rows: int, trees: int, insecure: bool,
               force: bool = False) -> Path:
    """``securetrees federation init``: the protocol's trial on embedded Adult.

    An existing folder that is not empty (a previous trial: its keys, certificates and
    passphrases) is refused with :class:`OutputExistsError` before anything is generated,
    unless ``force``; then files of the same names are overwritten (others are left)."""
    if rows < 10 or trees < 1:
        raise ParameterError("rows must be >= 10 and trees >= 1")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OutputExistsError(f"{out} exists and is not a folder")
    if not force and out.is_dir() and any(out.iterdir()):
        raise OutputExistsError(f"{out} is not empty (a previous trial's keys would be overwritten); "
                                "choose another folder or pass --force")
    if force and out.is_dir() and any(out.iterdir()):
        _log.warning("overwriting the trial files in %s", out)
    path: Path = protocol_module(protocol).trial(out_dir, rows=rows, trees=trees, insecure=insecure)
    return path
