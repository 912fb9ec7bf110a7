"""``securetrees operator``: drive a running federation from the operator's machine.

Every role has been started on its own machine (``securetrees party``); the operator, with its
own certificate and key, connects to them through :class:`~securetrees.net.control.Operator`
and runs one action per command:

``status``
    each role's reachability (a readiness call) and state (its ``status`` control action:
    role, steps run, last step, e.g. the number of trees);
``fit`` / ``predict`` / ``revoke``
    the deployment module's step of that name (``fit(operator, config)``,
    ``predict(operator, config, method)``, ``revoke(operator, config, party, level)``); a
    protocol without it refuses with :class:`UnsupportedActionError`.  The roles keep their state
    between commands, so ``fit`` then ``predict`` are two invocations.

``stop``
    every role's ``shutdown`` control action: each process stops serving and exits (the
    graceful end of ``securetrees party``).

Predictions are written as CSV (:func:`write_csv`).  The operator logs its steps (wall time,
bytes, rounds) like every role.
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from securetrees.errors import (
    ParameterError,
    PartyUnavailable,
    PeerTimeout,
    SecureTreesError,
    UnsupportedActionError,
)
from securetrees.files import open_private
from securetrees.log import get_logger
from securetrees.net.alignment import in_alignment
from securetrees.net.config import RunConfig, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.failed import check_started
from securetrees.net.service import job_module, network_for

__all__ = ["ACTIONS", "check_fitted", "class_names", "connect", "perform", "run_step", "status", "step_of", "stop",
           "watching", "write_csv"]

ACTIONS: Final = ("fit", "resume", "predict", "revoke", "status", "stop")

PROGRESS_SECONDS: Final = 1.0
"""How often the operator asks the training role for its progress during ``fit``."""

_log = get_logger("net.operate")


@contextmanager
def connect(config: RunConfig, passphrase: bytes, roles: list[str], timeout: float) -> Iterator[Operator]:
    """The operator's end of the run (its TLS identity from the configuration) once every one of
    ``roles`` answers within ``timeout`` seconds (:class:`PeerTimeout` otherwise) and none failed at
    start-up (its typed error otherwise, :func:`~securetrees.net.failed.check_started`); closed on exit."""
    with network_for(config, config.operator, passphrase) as net:
        end = time.monotonic() + timeout
        for role in roles:
            try:
                net.wait_for([role], _remaining(end, 1e-3))
            except PeerTimeout:
                raise PeerTimeout(
                    f"party {role!r} did not come up within {timeout:g} s: start it on its machine "
                    f"(securetrees party --config {config.path} --role {role}); if it was started, its log "
                    f"({config.path.parent / 'logs' / f'{role}.log'} unless --log-dir moved it) says why it "
                    "stopped") from None
        operator = Operator(config.operator, net)
        check_started(operator, roles)  # a role that failed at start-up: its typed error, now
        yield operator


def _remaining(end: float, floor: float = 0.25) -> float:
    """Seconds left until ``end`` (``time.monotonic``), at least ``floor``: a sweep over the roles
    shares one deadline, so several roles that are down cost one timeout, not one each, and a role
    that is up still gets a moment to answer once the deadline has passed."""
    return max(end - time.monotonic(), floor)


def status(config: RunConfig, passphrase_file: str | Path | None, *, timeout: float = 5.0
           ) -> dict[str, dict[str, str]]:
    """Each role's ``reachable`` (``yes``/``no``) and, when it is, its ``status`` reply; an
    unreachable role's entry carries the ``error``, a role that failed at start-up its typed error
    as ``failed`` (:mod:`securetrees.net.failed`).  ``timeout`` bounds the whole sweep, not each
    role (:func:`_remaining`)."""
    out: dict[str, dict[str, str]] = {}
    end = time.monotonic() + timeout
    with network_for(config, config.operator, read_passphrase(config.operator, passphrase_file)) as net:
        operator = Operator(config.operator, net)
        for role in config.roles:
            try:
                net.wait_for([role], _remaining(end))
                out[role] = {"reachable": "yes", **operator.control(role, "status").info}
            except PartyUnavailable as exc:
                out[role] = {"reachable": "no", "error": str(exc)}
            except SecureTreesError as exc:  # it serves, but its role failed at start-up
                out[role] = {"reachable": "yes", "failed": f"{type(exc).__name__}: {exc}"}
    return out


def stop(config: RunConfig, passphrase_file: str | Path | None, *, timeout: float = 5.0) -> list[str]:
    """Ask every reachable role to shut down (its ``shutdown`` control action); returns the roles
    asked.  A role that does not answer within ``timeout`` seconds (for the whole sweep) is left
    alone (it may be down)."""
    asked = []
    end = time.monotonic() + timeout
    with network_for(config, config.operator, read_passphrase(config.operator, passphrase_file)) as net:
        operator = Operator(config.operator, net)
        for role in config.roles:
            try:
                net.wait_for([role], _remaining(end))
            except PartyUnavailable:
                continue
            operator.control(role, "shutdown")
            asked.append(role)
    return asked


def check_fitted(operator: Operator, config: RunConfig, roles: list[str]) -> None:
    """Refuse ``predict`` or ``revoke`` in a fit run while a data holder still serves the alignment
    phase: nothing has been trained (:class:`ParameterError` saying to run ``fit`` first).  A
    predict-only run aligns its new rows in ``predict`` and passes."""
    if config.job != "fit":
        return
    waiting = [r for r in roles if in_alignment(operator, r)]
    if waiting:
        raise ParameterError(f"no model yet: {waiting} still wait in the alignment phase; run securetrees operator "
                             f"fit --config {config.path} first")


def step_of(config: RunConfig, action: str, party: str | None) -> Callable[..., dict[str, Any]]:
    """The deployment's step ``action`` (``fit``, ``resume``, ``predict`` or ``revoke``), refused before
    any connection when there is none.  ``resume`` finishes an interrupted fit from the parties'
    checkpoints (a deployment with a ``resume`` step)."""
    if action not in ("fit", "resume", "predict", "revoke"):
        raise ParameterError(f"the operator's steps are fit, resume, predict and revoke, not {action!r}")
    step = getattr(job_module(config), action, None)
    if not callable(step):
        raise UnsupportedActionError(f"the protocol {config.protocol!r} has no {action!r} step")
    if action == "revoke" and party is None:
        raise ParameterError("revoke needs the participant that leaves (--party)")
    return step  # type: ignore[no-any-return]


@contextmanager
def watching(operator: Operator, role: str | None, show: Callable[[str], None], *,
             every: float = PROGRESS_SECONDS) -> Iterator[None]:
    """While the body runs, ask ``role`` for its ``status`` every ``every`` seconds and pass each new
    ``progress`` it reports to ``show`` as ``ROLE: PROGRESS`` (e.g. ``master: federated forest 3/10``),
    and each new step of the operator's own (``operator: align``, :attr:`Operator.current_step`);
    nothing when ``role`` is ``None``.  A poll that fails is skipped (the step itself reports the
    failure).  Reveals what ``status`` does: counts and step names."""
    if role is None:
        yield
        return
    stop = threading.Event()

    def poll() -> None:
        last, own = "", ""
        while not stop.wait(every):
            step = getattr(operator, "current_step", "")
            if step and step != own:
                show(f"{operator.name}: {step}")
            own = step
            try:
                text = operator.control(role, "status").info.get("progress", "")
            except SecureTreesError:
                continue
            if text and text != last:
                last = text
                show(f"{role}: {text}")

    thread = threading.Thread(target=poll, name="operator-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10 * every)  # a poll in flight ends with its reply


def perform(operator: Operator, config: RunConfig, action: str, *, method: str | None = None,
            party: str | None = None, level: int = 2, on_progress: Callable[[str], None] | None = None
            ) -> dict[str, Any]:
    """Run the deployment's step ``action`` (``fit``, ``resume``, ``predict`` or ``revoke``) over a
    connection (:func:`connect`); returns what the step returns.  During ``fit`` and ``resume`` the deployment's
    ``PROGRESS_ROLE`` (the role that drives training) is polled (:func:`watching`): each change is
    logged and passed to ``on_progress``."""
    step = step_of(config, action, party)
    if action not in ("fit", "resume"):
        check_fitted(operator, config, config.roles)
    _log.info("%s: %s on %s", config.operator, action, config.protocol)
    if action in ("fit", "resume"):
        def show(line: str) -> None:
            _log.info("fit: %s", line)
            if on_progress is not None:
                on_progress(line)

        with watching(operator, getattr(job_module(config), "PROGRESS_ROLE", None), show):
            result: dict[str, Any] = step(operator, config)
    elif action == "predict":
        result = step(operator, config, method)
    else:
        result = step(operator, config, party, level)
    return result


def run_step(config: RunConfig, action: str, passphrase_file: str | Path | None, *, method: str | None = None,
             party: str | None = None, level: int = 2, timeout: float = 30.0) -> dict[str, Any]:
    """:func:`perform` once every role answers (within ``timeout`` seconds)."""
    step_of(config, action, party)
    with connect(config, read_passphrase(config.operator, passphrase_file), config.roles, timeout) as operator:
        return perform(operator, config, action, method=method, party=party, level=level)


def class_names(operator: Operator, config: RunConfig) -> tuple[str, ...]:
    """The class names of the predictions' columns, from the deployment's ``classes(operator, config)``
    (the party holding the labels answers); none when the module has no such step (or in a
    regression).  Reveals the label column's distinct values to the operator, not a row's label."""
    fn = getattr(job_module(config), "classes", None)
    return tuple(str(c) for c in fn(operator, config)) if callable(fn) else ()


def write_csv(path: str | Path, results: Mapping[str, npt.NDArray[Any]], classes: Sequence[str] = ()) -> Path:
    """Write prediction arrays of one row per test row as CSV: a ``row`` column (each row's number in
    the order the operator received them), then one column per array (``NAME``) or per array column:
    ``proba_CLASS`` for an array of one column per class of ``classes`` (``NAME_proba_CLASS`` when
    there are several arrays), else ``NAME_0``, ``NAME_1`` ...; floats in full precision.  The operator
    holds no id of the rows (no party's ids leave its machine, ``specs/deployment.md``): the party
    entitled to the predictions keeps the same ``row`` beside its own ids (Federated Forest's label
    holder in ``out/NAME.predictions.csv``; RevFRF's participants in ``out/NAME.test_rows.csv``), so
    it alone can join the two files."""
    if not results:
        raise ParameterError("no predictions to write")
    blocks = {k: np.asarray(v) for k, v in results.items()}
    n = {b.shape[0] if b.ndim else -1 for b in blocks.values()}
    if len(n) != 1 or -1 in n:
        raise ParameterError(f"the predictions do not have one row per test row: {[b.shape for b in blocks.values()]}")
    header, columns = ["row"], []
    for name, b in blocks.items():
        flat = b.reshape(b.shape[0], -1)
        if b.ndim == 2 and classes and flat.shape[1] == len(classes):
            prefix = f"{name}_" if len(blocks) > 1 else ""
            header += [f"{prefix}proba_{c}" for c in classes]
        else:
            header += [name] if b.ndim == 1 else [f"{name}_{j}" for j in range(flat.shape[1])]
        columns.append(flat)
    table = np.hstack(columns)
    out = Path(path)
    with open_private(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for i, row in enumerate(table):
            writer.writerow([i, *(repr(float(x)) if np.issubdtype(table.dtype, np.floating) else str(x)
                                  for x in row)])
    return out
