"""Progress during ``fit``: the training role's ``status`` carries what its progress display shows
(``securetrees.progress.current``), the operator polls it and shows each change
(``securetrees.net.operate.watching``), and a role process logs a line per finished step.  No
wall-clock bound: the polls are counted, not timed."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import pytest

from securetrees.errors import PartyUnavailable
from securetrees.net.control import Controllable, ControlReply, Operator
from securetrees.net.operate import watching
from securetrees.progress import current, log_lines, note, phase
from securetrees.runtime import InProcessNetwork, Party


class Trainer(Controllable, Party):
    role = "master"


def test_status_carries_the_running_progress() -> None:
    net = InProcessNetwork()
    Trainer("master", net)
    operator = Operator("operator", net)
    assert "progress" not in operator.control("master", "status").info  # nothing runs
    log_lines()
    try:
        with phase("federated forest", total=3) as trees:
            trees.update()
            trees.note = "tree 2"
            assert operator.control("master", "status").info["progress"] == "federated forest 1/3 (tree 2)"
            with phase("layers", total=4) as layers:
                layers.update(2)
                assert current() == "federated forest 1/3 (tree 2); layers 2/4"
    finally:
        log_lines(False)
    assert current() == ""


def test_a_role_logs_a_line_per_finished_step(caplog: pytest.LogCaptureFixture) -> None:
    log_lines()
    try:
        with caplog.at_level(logging.INFO, logger="securetrees.progress"), phase("trees", total=2) as shown:
            shown.update()
            shown.update()
    finally:
        log_lines(False)
    lines = [r.getMessage() for r in caplog.records if r.name == "securetrees.progress"]
    assert [line.split(",")[0] for line in lines if "/" in line] == ["trees: 1/2", "trees: 2/2"], lines


@dataclass
class _Polled:
    """The operator's end of ``status`` polls: answers from ``script`` (an error for ``None``), then
    sets ``finished``."""

    script: list[str | None]
    finished: threading.Event = field(default_factory=threading.Event)
    polls: int = 0
    name: str = "operator"
    current_step: str = "align"  # the operator's own step (Operator.step)

    def control(self, role: str, action: str) -> ControlReply:
        assert action == "status"
        self.polls += 1
        if self.polls >= len(self.script):
            self.finished.set()
        text = self.script[min(self.polls, len(self.script)) - 1]
        if text is None:
            raise PartyUnavailable("master is busy")
        return ControlReply(info={"progress": text} if text else {})


def test_the_operator_shows_each_change_of_the_training_role_s_progress() -> None:
    polled = _Polled(["", "forest 0/3", "forest 0/3", None, "forest 1/3 (tree 2)", "forest 3/3"])
    shown: list[str] = []
    with watching(polled, "master", shown.append, every=0.001):  # type: ignore[arg-type]
        assert polled.finished.wait(60)  # a guard against a hang, not a bound on time
    # repeated and empty answers shown once or not at all; a failed poll skipped
    assert shown == ["operator: align", "master: forest 0/3", "master: forest 1/3 (tree 2)", "master: forest 3/3"]
    nothing: list[str] = []
    with watching(polled, None, nothing.append, every=0.001):  # type: ignore[arg-type]
        pass
    assert nothing == []


def test_a_loop_names_its_current_step_on_the_innermost_display() -> None:
    note("tree 1")  # nothing runs: nothing to describe
    assert current() == ""
    log_lines()
    try:
        with phase("federated forest", total=2) as trees:
            note("tree 1, layer 2")
            assert current() == "federated forest 0/2 (tree 1, layer 2)"
            trees.update()  # the step described is over
            assert current() == "federated forest 1/2"
    finally:
        log_lines(False)
