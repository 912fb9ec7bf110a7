"""Run the README's "Your own data" walk-through exactly as written, timing each command.

The commands are the lines of the shell block between ``<!-- walk-through: begin -->`` and
``<!-- walk-through: end -->`` in ``README.md`` (:func:`readme_commands`: a trailing ``#`` comment and
``\\`` continuations are kept as the shell reads them).  :func:`run_walkthrough` runs them in
one ``bash`` process (``set -e``; background ``&`` commands keep running until the block stops
them, and on any exit every job left is stopped), in a given folder, and returns each command's
wall time.  ``tests/net/test_readme_walkthrough.py`` runs it so the README cannot rot, on free
ports (:func:`with_ports` puts them in place of the README's fixed ones, so two test sessions on
one machine do not collide); ``benchmarks/suites/walkthrough.py`` measures the times the README states.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from securetrees.errors import ParameterError

__all__ = ["BEGIN", "END", "Step", "readme_commands", "readme_ports", "run_walkthrough", "with_ports"]

BEGIN = "<!-- walk-through: begin -->"
END = "<!-- walk-through: end -->"


@dataclass(frozen=True)
class Step:
    command: str
    seconds: float


def readme_commands(readme: str) -> list[str]:
    """The walk-through's commands: the fenced block's lines between the markers, continuation
    lines joined, blank lines and whole-line comments left out."""
    try:
        block = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    except IndexError:
        raise ParameterError(f"the README has no {BEGIN} ... {END} section") from None
    lines = [ln for ln in block.splitlines() if not ln.startswith("```")]
    commands, pending = [], ""
    for line in lines:
        text = pending + line
        if text.rstrip().endswith("\\"):
            pending = text.rstrip()[:-1] + " "
            continue
        pending = ""
        if text.strip() and not text.lstrip().startswith("#"):
            commands.append(text.strip())
    if pending or not commands:
        raise ParameterError("the walk-through block is empty or ends inside a continued line")
    return commands


_LOOPBACK = re.compile(r"(?<![\w.])127\.0\.0\.1:(\d+)\b")


def readme_ports(commands: list[str]) -> list[int]:
    """The distinct loopback ports (``127.0.0.1:PORT``) the commands name, in order of first use."""
    return list(dict.fromkeys(int(m.group(1)) for c in commands for m in _LOOPBACK.finditer(c)))


def with_ports(commands: list[str], ports: list[int]) -> list[str]:
    """``commands`` with each of their loopback ports (:func:`readme_ports`) replaced by the port at
    the same place in ``ports`` (e.g. ports a test holds free); :class:`ParameterError` when the
    numbers differ."""
    fixed = readme_ports(commands)
    if len(fixed) != len(ports) or len(set(ports)) != len(ports):
        raise ParameterError(f"the commands name {len(fixed)} ports; {len(ports)} distinct ones are needed")
    swap = dict(zip(fixed, ports, strict=True))
    return [_LOOPBACK.sub(lambda m: f"127.0.0.1:{swap[int(m.group(1))]}", c) for c in commands]


def run_walkthrough(commands: list[str], folder: str | Path, *, env: dict[str, str] | None = None,
                    timeout: float = 300.0) -> tuple[list[Step], subprocess.CompletedProcess[str]]:
    """Run ``commands`` in one ``bash -e`` in ``folder``; each command's wall time (a background
    command's is the time to start it).  Raises :class:`ParameterError` with the output when a
    command fails or the whole does not finish within ``timeout`` seconds (the shell's process
    group, every role it started included, is then killed)."""
    with tempfile.TemporaryDirectory() as tmp:
        times = Path(tmp) / "times"
        script = ["set -e", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
        for i, cmd in enumerate(commands):
            script += [f"__t=$(date +%s%N); echo {shlex.quote('$ ' + cmd)}", cmd,
                       f'echo "{i} $(( $(date +%s%N) - __t ))" >> {shlex.quote(str(times))}']
        proc = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=folder,  # noqa: S603, S607 - our README
                                env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the shell and every role it started
            out, err = proc.communicate()
            raise ParameterError(f"the walk-through did not finish in {timeout} s:\n{out}\n{err}") from None
        finally:
            if proc.poll() is None:  # pragma: no cover - communicate returned
                os.killpg(proc.pid, signal.SIGKILL)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        recorded = times.read_text().split("\n") if times.exists() else []
    if done.returncode != 0:
        raise ParameterError(f"the walk-through failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    ns = {int(a): int(b) for a, b in (ln.split() for ln in recorded if ln)}
    return [Step(c, ns[i] / 1e9) for i, c in enumerate(commands)], done
