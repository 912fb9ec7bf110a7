"""Demo progress (issue 15, "The first hour"): the longest silence of every demo.

``python benchmarks/run.py demo_progress [--quick]``

Each demo runs as ``python -m securetrees demo NAME`` in a subprocess with unbuffered
output (what a terminal shows); :func:`securetrees.testing.silence.longest_silence` records
the longest gap between two pieces of output (stdout and stderr merged; a progress bar's
in-place refresh counts), the time to the first output (interpreter start-up and imports)
and the time from the last output to the exit (interpreter teardown).
Each demo runs once at its defaults (the quick run uses small configurations); the target
is no silence of 10 s or more, start and exit included.  HybridTree's demo is left out here (its
progress belongs to the HybridTree work).
"""

from __future__ import annotations

import sys

from harness import Report

from securetrees.testing.silence import longest_silence

TARGET_SECONDS = 10.0

FULL: dict[str, list[str]] = {
    "paillier": [],
    "dtpkc": [],
    "revfrf": [],
    "federated-forest": [],
    "histogram-forest": [],
}
QUICK: dict[str, list[str]] = {
    "paillier": [],
    "dtpkc": ["--bits", "1024"],
    "revfrf": ["--rows", "600", "--trees", "2", "--depth", "3", "--bits", "1024", "--insecure",
               "--test-rows", "1000", "--requests", "1"],
    "federated-forest": ["--rows", "3000", "--trees", "2", "--depth", "4"],
    "histogram-forest": ["--quick", "--clients", "3"],
}


def run(report: Report, quick: bool) -> None:
    table = report.table("Silences of each demo (seconds)",
                         ["demo", "arguments", "first output", "longest gap between outputs", "it ends at",
                          "last output to exit", "total", "status"])
    for name, extra in (QUICK if quick else FULL).items():
        res = longest_silence([sys.executable, "-m", "securetrees", "demo", name, *extra])
        table.add(name, " ".join(extra) or "(defaults)", f"{res.first_output:.1f}", f"{res.longest:.1f}",
                  f"{res.ended_at:.1f}", f"{res.tail:.1f}", f"{res.seconds:.1f}", res.returncode)
        report.data[name] = {"first_output": res.first_output, "longest": res.longest, "tail": res.tail,
                             "seconds": res.seconds, "returncode": res.returncode}
        report.check(f"{name}: longest silence, start and exit included (s)",
                     max(res.first_output, res.longest, res.tail), "<=", TARGET_SECONDS)
