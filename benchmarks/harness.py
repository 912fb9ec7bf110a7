"""Shared machinery of the benchmark suites: timing, tables, checks and JSON.

Every figure is a median over repeated runs (with the quartiles kept); a
speed claim is a ratio against a baseline timed in the same run.  Suites
build a :class:`Report`; ``run.py`` prints it and writes it as JSON.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Timing:
    """Seconds per call: median and quartiles over ``repeats`` runs of ``number`` calls each."""

    median: float
    q1: float
    q3: float
    repeats: int
    number: int

    def per(self, n: int) -> Timing:
        """The same timing divided by ``n`` (e.g. per item of a batch)."""
        return Timing(self.median / n, self.q1 / n, self.q3 / n, self.repeats, self.number)


def _quartiles(samples: list[float]) -> tuple[float, float]:
    if len(samples) < 2:
        return samples[0], samples[0]
    q = statistics.quantiles(samples, n=4, method="inclusive")
    return q[0], q[2]


def measure(
    fn: Callable[[], object],
    *,
    repeats: int = 7,
    number: int | None = None,
    min_time: float = 0.05,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Time ``fn()``: ``repeats`` runs of ``number`` calls each (auto-calibrated to ``min_time``)."""
    if number is None:
        number = 1
        while True:
            t0 = clock()
            for _ in range(number):
                fn()
            elapsed = clock() - t0
            if elapsed >= min_time or number >= 1 << 20:
                break
            number *= 2 if elapsed <= 0 else max(2, min(10, int(min_time / elapsed) + 1))
    samples = []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(number):
            fn()
        samples.append((clock() - t0) / number)
    q1, q3 = _quartiles(samples)
    return Timing(statistics.median(samples), q1, q3, repeats, number)


def measure_each(fn: Callable[[], object], *, repeats: int = 5,
                 clock: Callable[[], float] = time.perf_counter) -> Timing:
    """Time single calls of a slow ``fn`` (key generation, a whole protocol run)."""
    return measure(fn, repeats=repeats, number=1, clock=clock)


def measure_interleaved(fns: dict[str, Callable[[], object]], *, repeats: int = 3,
                        clock: Callable[[], float] = time.perf_counter,
                        cpu_clock: Callable[[], float] = time.process_time) -> dict[str, tuple[Timing, Timing]]:
    """Time single calls of several slow functions in rounds (each once per round, in
    order), so that a change in the machine's load hits every function alike.  Returns,
    per function, the wall-clock and the process CPU-time timings of the same calls (CPU
    time is what a single-threaded run costs, whatever else runs on a shared machine)."""
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            c0, t0 = cpu_clock(), clock()
            fn()
            wall[name].append(clock() - t0)
            cpu[name].append(cpu_clock() - c0)

    def timing(xs: list[float]) -> Timing:
        q1, q3 = _quartiles(xs)
        return Timing(statistics.median(xs), q1, q3, repeats, 1)

    return {name: (timing(wall[name]), timing(cpu[name])) for name in fns}


def fmt_seconds(s: float) -> str:
    """Seconds in a readable unit (ns, µs, ms, s)."""
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    note: str = ""

    def add(self, *cells: Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"row has {len(cells)} cells, table {self.title!r} has {len(self.columns)}")
        self.rows.append(list(cells))

    def render(self) -> str:
        def cell(v: Any) -> str:
            if isinstance(v, Timing):
                return fmt_seconds(v.median)
            if isinstance(v, float):
                return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
            return str(v)

        body = [[cell(v) for v in r] for r in self.rows]
        widths = [max(len(c), *(len(r[i]) for r in body)) if body else len(c)
                  for i, c in enumerate(self.columns)]
        lines = [f"## {self.title}", ""]
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True)) + " |")
        lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for r in body:
            lines.append("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) + " |")
        if self.note:
            lines += ["", self.note]
        return "\n".join(lines)


@dataclass
class Check:
    """A target from an issue, evaluated on this run's figures."""

    name: str
    value: float
    op: str  # "<=" or ">="
    target: float

    @property
    def met(self) -> bool:
        return self.value <= self.target if self.op == "<=" else self.value >= self.target

    def render(self) -> str:
        status = "met" if self.met else "NOT MET"
        return f"- {self.name}: {self.value:.4g} {self.op} {self.target:g}: {status}"


@dataclass
class Report:
    suite: str
    quick: bool
    tables: list[Table] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    figure_dir: Path | None = None
    """Where :meth:`save_figure` writes PNGs (run.py sets it beside the ``--json`` output)."""

    def table(self, title: str, columns: list[str], note: str = "") -> Table:
        t = Table(title, columns, note=note)
        self.tables.append(t)
        return t

    def check(self, name: str, value: float, op: str, target: float) -> Check:
        if op not in ("<=", ">="):
            raise ValueError("op must be '<=' or '>='")
        c = Check(name, float(value), op, float(target))
        self.checks.append(c)
        return c

    def save_figure(self, name: str, fig: Any) -> Path | None:
        """Save a matplotlib figure as ``<figure_dir>/<suite>-<name>.png`` and close it.

        Without a figure directory (no ``--json``) the figure is only closed.
        """
        import matplotlib.pyplot as plt

        path = None
        if self.figure_dir is not None:
            self.figure_dir.mkdir(parents=True, exist_ok=True)
            path = self.figure_dir / f"{self.suite}-{name}.png"
            fig.savefig(path, dpi=110, bbox_inches="tight")
            self.data.setdefault("png_figures", []).append(str(path))
        plt.close(fig)
        return path

    def render(self) -> str:
        parts = [t.render() for t in self.tables]
        if self.checks:
            parts.append("## Targets\n\n" + "\n".join(c.render() for c in self.checks))
        return "\n\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        def conv(v: Any) -> Any:
            if isinstance(v, Timing):
                return asdict(v)
            if isinstance(v, (list, tuple)):
                return [conv(x) for x in v]
            if isinstance(v, dict):
                return {str(k): conv(x) for k, x in v.items()}
            if hasattr(v, "item") and callable(v.item):  # numpy scalars
                return v.item()
            return v

        return {
            "suite": self.suite,
            "quick": self.quick,
            "machine": machine_info(),
            "tables": [
                {"title": t.title, "columns": t.columns, "rows": conv(t.rows), "note": t.note}
                for t in self.tables
            ],
            "checks": [{**asdict(c), "met": c.met} for c in self.checks],
            "data": conv(self.data),
        }

    def write_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")


def machine_info() -> dict[str, Any]:
    import gmpy2
    import numpy

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "gmpy2": gmpy2.version(),
        "gmp": gmpy2.mp_version(),
        "numpy": numpy.__version__,
    }
