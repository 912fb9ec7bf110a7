"""Shared test configuration.

Hypothesis runs with the ``securetrees`` profile: no per-example deadline
(big-number arithmetic varies with load) and a derandomised search in CI so
that a failure reproduces.  Tests use small or cached keys wherever the key
size is not the point; 2048-bit key generation carries the ``slow`` marker.

A plain ``pytest`` runs on every CPU this process may use (pytest-xdist, one
worker per CPU of the affinity mask, whole files per worker): see
``specs/testing.md`` ("Parallel runs").  ``-n N`` or ``-n 0`` chooses otherwise,
and ``-p no:xdist`` (or no pytest-xdist installed) runs in this one process.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "securetrees",
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("securetrees")

AUTO_WORKERS = "PYTEST_XDIST_AUTO_NUM_WORKERS"

SLOW_FILES = (
    "tests/net/test_hybridtree_deploy.py",
    "tests/net/test_models.py",
    "tests/net/test_revfrf_models.py",
    "tests/net/test_deployment.py",
    "tests/net/test_revfrf_jobs.py",
    "tests/net/test_operator_cli.py",
    "tests/net/test_secureboost_deploy.py",
    "tests/trees/test_adult_accuracy.py",
    "tests/security/test_hybridtree_leakage.py",
    "tests/net/test_histogram_forest_deploy.py",
    "tests/net/test_secureboost_models.py",
    "tests/security/test_federated_forest_labels.py",
    "tests/net/test_setup_kgc.py",
)
"""The files that take longest, slowest first (``--durations``; specs/testing.md "Parallel runs"):
workers take them before the rest, so no worker is left with a long file when the others are done."""


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def runs_in_parallel(config: pytest.Config) -> bool:
    """Whether a run whose command line chose no distribution gets xdist workers: not when
    xdist is absent or disabled (``-p no:xdist``), the user chose (``-n``, ``--dist``, ``--tx``),
    a debugger is on (``--pdb``, ``--trace``), the run is one file (workers would only add
    their start-up), this process is itself a worker, or one CPU is usable."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return False
    chosen = (config.getoption("numprocesses") is not None or config.getoption("dist") != "no"
              or config.getoption("tx") or config.getoption("distload"))
    if chosen or config.getoption("usepdb") or config.getoption("trace"):
        return False
    files = {arg.split("::", 1)[0] for arg in config.args}
    if len(files) == 1 and Path(config.invocation_params.dir, *files).is_file():
        return False
    return usable_cpus() > 1 or bool(os.environ.get(AUTO_WORKERS))


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, object, object]:
    """Before xdist reads the options: ``-n auto --dist loadfile`` unless the run chose otherwise
    (whole files per worker, so a module's fixtures are made once, on one worker)."""
    if runs_in_parallel(config):
        config.option.numprocesses = "auto"
        config.option.dist = "loadfile"
        config.option.loadscopereorder = False  # xdist would put the files with the most tests first
    return (yield)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker (whose collection order the controller hands out): the
    :data:`SLOW_FILES` first, in that order, then the others in their own order."""
    if not hasattr(config, "workerinput"):
        return
    rank = {path: i for i, path in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker per usable CPU (xdist's own count is of physical cores), unless
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` says how many (xdist reads it)."""
    return None if os.environ.get(AUTO_WORKERS) else usable_cpus()
