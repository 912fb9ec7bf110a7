"""One progress mechanism: bars or lines when enabled, a heartbeat through long steps,
nothing at all when disabled; and every demo (but HybridTree's) keeps the terminal alive.

The demo check runs each demo on a small configuration in a subprocess with the heartbeat
lowered to 0.25 s and asserts that no gap between two pieces of output reaches 3 s (start-up
before the first output and teardown after the last are not the demo's to fill), so a
phase of a demo that no progress display covers (and that lasts 3 s, which the small runs
make likely for any real phase) fails it.  The margin is twelve heartbeats: a gap that large
needs the process starved of the CPU for seconds, not just a loaded machine.  The planted
companion shows the measurement fails on a command that is silent for 3.5 s.
"""

from __future__ import annotations

import logging
import sys
import time

import pytest

import securetrees.progress as prog
from securetrees.progress import phase, progress, tracked
from securetrees.testing.silence import longest_silence

GAP_BOUND = 3.0
HEARTBEAT = 0.25


@pytest.fixture
def no_tqdm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prog, "_tqdm", lambda: None)


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "securetrees.progress"]


def _await_line(caplog: pytest.LogCaptureFixture, prefix: str, count: int = 1, timeout: float = 60.0) -> None:
    """Block until ``count`` progress lines starting with ``prefix`` are logged.  A beat is due
    0.05 s in; waiting for it (rather than sleeping a fixed time and counting) keeps the outcome
    independent of the machine's load: a starved heartbeat thread only makes the test slower."""
    end = time.monotonic() + timeout
    while len([ln for ln in _lines(caplog) if ln.startswith(prefix)]) < count:
        assert time.monotonic() < end, f"no line {prefix!r} within {timeout} s: {_lines(caplog)}"
        time.sleep(0.01)


def test_disabled_is_a_plain_loop(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    with caplog.at_level(logging.DEBUG, logger="securetrees"):
        assert list(progress(range(5), desc="x", enabled=False)) == list(range(5))
        with phase("y", enabled=False) as p:
            p.update()
    assert _lines(caplog) == [] and capsys.readouterr().err == ""


def test_lines_without_tqdm_and_a_heartbeat_through_a_long_step(no_tqdm: None,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="securetrees"):
        items = list(progress(range(3), desc="trees", interval=0.05))
        with phase("one long step", interval=0.05):
            _await_line(caplog, "one long step: 0, ")  # a heartbeat inside the step (ticks every 0.0125 s)
    lines = _lines(caplog)
    assert items == [0, 1, 2]
    assert lines[0] == "trees: started (3 steps)" and lines[1].startswith("trees: done, 3 steps in ")
    assert lines[-1].startswith("one long step: done in ")


def test_heartbeat_check_fails_without_a_heartbeat(no_tqdm: None, caplog: pytest.LogCaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: with the heartbeat thread doing nothing, the long step shows no line."""
    monkeypatch.setattr(prog.Progress, "_beat", lambda self: None)
    with caplog.at_level(logging.INFO, logger="securetrees"), phase("one long step", interval=0.05):
        time.sleep(0.3)
    assert not [ln for ln in _lines(caplog) if ln.startswith("one long step: 0, ")]


def test_nested_progress_beats_only_the_innermost(no_tqdm: None, caplog: pytest.LogCaptureFixture) -> None:
    """Once the inner phase is entered only it beats.  The outer may beat before that (it is the
    innermost until then: a main thread starved for 0.05 s between the two entries lets it), so
    the lines are cleared after the inner phase's first beat; the test then waits for 20 more inner
    beats, not a fixed time.  If both phases beat, each beat is the outer's about half the time:
    20 inner beats in a row would hide that with probability about 1e-6."""
    with caplog.at_level(logging.INFO, logger="securetrees"), phase("outer", interval=0.05), \
            phase("inner", interval=0.05):
        _await_line(caplog, "inner: 0, ")
        caplog.clear()
        _await_line(caplog, "inner: 0, ", count=20)
    assert not [ln for ln in _lines(caplog) if ln.startswith("outer: 0, ")]


def test_tqdm_bar_when_installed(capsys: pytest.CaptureFixture[str]) -> None:
    if prog._tqdm() is None:  # tqdm is in the progress extra; without it the lines above are the display
        return
    assert list(progress(range(4), desc="layers")) == [0, 1, 2, 3]
    assert "layers" in capsys.readouterr().err


def test_tracked_follows_the_estimators_switch(no_tqdm: None, caplog: pytest.LogCaptureFixture) -> None:
    class Model:
        def __init__(self, progress: bool) -> None:
            self.progress = progress

        @tracked("Model fit")
        def fit(self, n: int) -> int:
            return n + 1

    with caplog.at_level(logging.INFO, logger="securetrees"):
        assert Model(False).fit(1) == 2
        assert _lines(caplog) == []
        assert Model(True).fit(2) == 3
    assert _lines(caplog)[0] == "Model fit: started"


# ---------------------------------------------------------------------- demos


def _demo_silence(args: list[str]) -> float:
    code = (f"import sys, securetrees.progress as p; p.HEARTBEAT_SECONDS = {HEARTBEAT!r}; "
            "from securetrees.cli import main; sys.exit(main(sys.argv[1:]))")
    res = longest_silence([sys.executable, "-c", code, "demo", *args], timeout=900)
    assert res.returncode == 0, res.output.decode(errors="replace")[-2000:]
    return res.longest


SMALL_DEMOS = {
    "revfrf": ["revfrf", "--rows", "400", "--trees", "2", "--depth", "3", "--bits", "1024", "--insecure",
               "--test-rows", "300", "--requests", "1"],
    "federated-forest": ["federated-forest", "--rows", "1500", "--trees", "2", "--depth", "3"],
    "histogram-forest": ["histogram-forest", "--quick", "--clients", "3"],
}


@pytest.mark.parametrize("name", sorted(SMALL_DEMOS))
def test_demo_is_never_silent(name: str) -> None:
    assert _demo_silence(SMALL_DEMOS[name]) < GAP_BOUND


def test_silence_measure_catches_a_silent_command() -> None:
    """Planted: a command silent for 3.5 s between two lines fails the demo check."""
    res = longest_silence([sys.executable, "-c", "import time; print('a'); time.sleep(3.5); print('b')"])
    assert res.returncode == 0 and res.longest >= GAP_BOUND
