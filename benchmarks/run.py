#!/usr/bin/env python3
"""The one benchmark runner: ``python benchmarks/run.py SUITE [--quick] [--json PATH]``.

A suite is a module ``benchmarks/suites/SUITE.py`` with a function
``run(report: Report, quick: bool) -> None`` that fills the report.  ``all``
runs every suite.  The table goes to stdout; ``--json`` writes the machine-
readable results (figures, machine, targets); ``--strict`` exits non-zero
when a target of the issues is not met.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import Report  # noqa: E402


def available_suites() -> list[str]:
    return sorted(p.stem for p in (HERE / "suites").glob("*.py") if not p.stem.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    suites = available_suites()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", choices=[*suites, "all"])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats (a smoke run)")
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="write results as JSON (with 'all': a directory, one file per suite)")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any target is not met")
    args = parser.parse_args(argv)
    failed = False
    for name in suites if args.suite == "all" else [args.suite]:
        module = importlib.import_module(f"suites.{name}")
        report = Report(suite=name, quick=args.quick)
        if args.json:
            report.figure_dir = args.json if args.suite == "all" else args.json.parent
        t0 = time.perf_counter()
        module.run(report, args.quick)
        elapsed = time.perf_counter() - t0
        print(f"# suite {name}{' (quick)' if args.quick else ''}: {elapsed:.1f} s\n")
        print(report.render())
        print()
        if args.json:
            path = args.json / f"{name}.json" if args.suite == "all" else args.json
            report.write_json(path)
        failed |= any(not c.met for c in report.checks)
    return 1 if (failed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
