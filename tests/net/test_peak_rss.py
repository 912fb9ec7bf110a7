"""A role's peak memory, as the control plane's ``stats`` reports it (the scale benchmark reads it)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from securetrees.net.control import peak_rss_bytes

MB = 1 << 20
_CHILD = "from securetrees.net.control import peak_rss_bytes as p; print(p())"
_CHILD_RUSAGE = "import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"


def _child(code: str) -> int:
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)  # noqa: S603
    return int(out.stdout.strip())


def test_peak_grows_with_an_allocation() -> None:
    """In a fresh process (this one's peak is whatever earlier tests left)."""
    grown = _child("import numpy as np; from securetrees.net.control import peak_rss_bytes as p; "
                   f"a = p(); b = np.ones({200 * MB // 8}); print(p() - a)")  # 200 MB, every page written
    assert grown >= 150 * MB


def test_a_child_process_does_not_inherit_its_parents_peak() -> None:
    """Each role is started by a parent holding the whole table: a role's figure must be its own.
    Planted: ``ru_maxrss`` (the obvious reading) carries the parent's peak into the child, so the
    same check fails on it."""
    block = np.ones(400 * MB // 8)  # the parent now holds 400 MB
    parent = peak_rss_bytes()
    assert parent >= 400 * MB
    assert _child(_CHILD) < 300 * MB  # the child imports numpy and the control plane: ~100 MB
    assert _child(_CHILD_RUSAGE) >= 400 * MB  # the leaky reading fails the check above
    del block
