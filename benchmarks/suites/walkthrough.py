"""The README's "Your own data" walk-through (issue 16, part 7): each command's wall time.

Runs exactly the README's commands (``securetrees.testing.walkthrough``: the block between its
markers, in one ``bash -e``, in a fresh folder), three times (``--quick``: once), and reports the
median time of each command.  A background ``securetrees party ... &`` is timed as its launch; its
start-up is inside the first operator command, which waits for every role to answer.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path

from harness import Report

from securetrees.testing.walkthrough import readme_commands, run_walkthrough

ROOT = Path(__file__).resolve().parents[2]


def run(report: Report, quick: bool) -> None:
    commands = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    times: list[list[float]] = []
    for _ in range(1 if quick else 3):
        with tempfile.TemporaryDirectory() as tmp:
            steps, _ = run_walkthrough(commands, tmp, env=env)
        times.append([s.seconds for s in steps])
    table = report.table("README walk-through, each command (median wall time)", ["command", "seconds"],
                         note=f"median of {len(times)} runs, every role on this machine")
    for i, cmd in enumerate(commands):
        short = cmd if len(cmd) <= 70 else cmd[:67] + "..."
        table.add(short.split("  #")[0].strip(), round(statistics.median(t[i] for t in times), 2))
    table.add("(total)", round(statistics.median(sum(t) for t in times), 2))
