"""How a plain ``pytest`` spreads the suite (``tests/conftest.py``, specs/testing.md "Parallel runs"):
xdist workers, one per usable CPU, each taking whole files, unless the command line chose
otherwise.  Each case runs pytest in a child process over two small files of the suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = ["tests/test_rand.py", "tests/test_schema_text.py"]


def _pytest(*args: str, workers: str | None = None) -> str:
    """The verbose output of ``python -m pytest ARGS`` from the repository root (it must pass)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_AUTO_NUM_WORKERS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    if workers is not None:
        env["PYTEST_XDIST_AUTO_NUM_WORKERS"] = workers
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", *args],  # noqa: S603
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _worker_of_each_file(out: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for worker, path in re.findall(r"\[(gw\d+)\][^\n]*? PASSED (tests/\S+?\.py)::", out):
        found.setdefault(path, set()).add(worker)
    return found


def test_a_plain_run_starts_a_worker_per_usable_cpu_and_gives_each_file_to_one() -> None:
    """On one CPU the plain run stays in one process (the cases below show what that looks like)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    out = _pytest(*FILES)
    if cpus == 1:
        assert "[gw" not in out
        return
    assert f"created: {cpus}/{cpus} workers" in out  # -n auto, counted by the hook (xdist counts cores)
    assert "LoadFileScheduling" in out
    assert sorted(_worker_of_each_file(out)) == FILES
    assert all(len(workers) == 1 for workers in _worker_of_each_file(out).values())


@pytest.mark.parametrize("args", [["-p", "no:xdist"], ["-n", "0"], [FILES[0]], ["--pdb"]],
                         ids=["xdist-disabled", "n0", "one-file", "pdb"])
def test_a_run_that_chose_or_names_one_file_stays_in_one_process(args: list[str]) -> None:
    """Even with a worker count set for ``-n auto`` (``PYTEST_XDIST_AUTO_NUM_WORKERS``)."""
    files = [] if args[0].endswith(".py") else FILES
    out = _pytest(*args, *files, workers="2")
    assert "created:" not in out
    assert "[gw" not in out
    assert re.search(r"\d+ passed", out)


def test_the_files_the_workers_take_first_exist() -> None:
    """A renamed or removed file would silently drop out of the order."""
    from tests.conftest import SLOW_FILES

    assert len(set(SLOW_FILES)) == len(SLOW_FILES)
    assert [path for path in SLOW_FILES if not (ROOT / path).is_file()] == []
