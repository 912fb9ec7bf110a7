"""A step line carries the step's wall time, the bytes the party sent and received and the rounds,
read from the network: here checked against the transcript of an in-process run."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import numpy as np
import pytest

from securetrees.errors import ParameterError
from securetrees.net.control import Controllable, ControlReply, Operator
from securetrees.runtime import InProcessNetwork, Message, Party, handles, message

LINE = re.compile(r"(\w+) step (\w+): ([0-9.]+) s, sent (\d+) B, received (\d+) B, rounds (\d+)")


@message("test.steps.blob", sender="echo", receiver="echo")
@dataclass(frozen=True)
class Blob(Message):
    data: bytes


@message("test.steps.back", reply_to=Blob)
@dataclass(frozen=True)
class Back(Message):
    data: bytes


class Echo(Controllable, Party):
    role = "echo"

    def control_ping(self, args: dict[str, str]) -> ControlReply:
        return ControlReply(arrays={"x": np.zeros(int(args["n"]))})

    def control_relay(self, args: dict[str, str]) -> ControlReply:
        """The step's own traffic: one call to the peer (its request and reply)."""
        self.call(args["peer"], Blob(b"x" * int(args["n"])), expect=Back)
        return ControlReply()

    @handles(Blob)
    def on_blob(self, sender: str, msg: Blob) -> Back:
        return Back(msg.data[:10])

    def control_fail(self, args: dict[str, str]) -> ControlReply:
        raise ParameterError("planted failure")

    def control_state(self) -> dict[str, str]:
        return {"colour": "blue"}


def _lines(caplog: pytest.LogCaptureFixture) -> dict[str, tuple[int, int, int]]:
    found = {}
    for rec in caplog.records:
        m = LINE.fullmatch(rec.getMessage())
        if m:
            found[f"{m[1]}.{m[2]}"] = (int(m[4]), int(m[5]), int(m[6]))
    return found


def test_step_lines_match_the_transcript(caplog: pytest.LogCaptureFixture) -> None:
    net = InProcessNetwork()
    Echo("echo", net)
    Echo("peer", net)
    op = Operator("operator", net)
    caplog.set_level(logging.INFO, logger="securetrees")
    with op.step("job"):
        op.control("echo", "ping", n=1000)
        op.control("echo", "relay", peer="peer", n=5000)
    lines = _lines(caplog)
    blob, back = (r for r in net.transcript if r.type_name.startswith("test.steps."))
    # a role's step counts the traffic it caused, not the control request and reply around it
    assert lines["echo.relay"] == (blob.size, back.size, 1)
    assert lines["echo.ping"] == (0, 0, 0)
    assert blob.size > 5000 > back.size
    # the operator's step counts its control requests and the replies (the 1000 zeros came back)
    assert lines["operator.job"] == (net.transcript.bytes_sent("operator"), net.transcript.bytes_received("operator"),
                                     3)
    assert lines["operator.job"][1] > 8000 > lines["operator.job"][0]


def test_status_counts_steps_and_a_failed_step_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    net = InProcessNetwork()
    Echo("echo", net)
    op = Operator("operator", net)
    caplog.set_level(logging.INFO, logger="securetrees")
    assert op.control("echo", "status").info == {"colour": "blue", "role": "echo", "steps": "0", "last_step": "-"}
    op.control("echo", "ping", n=1)
    with pytest.raises(ParameterError, match="planted failure"):
        op.control("echo", "fail")
    assert op.control("echo", "status").info["steps"] == "1"
    assert op.control("echo", "status").info["last_step"] == "ping"
    failed = [r for r in caplog.records if r.levelno == logging.ERROR and "step fail" in r.getMessage()]
    assert len(failed) == 1 and failed[0].getMessage().endswith("failed: ParameterError: planted failure")


def test_shutdown_logs_totals_by_message_type(caplog: pytest.LogCaptureFixture) -> None:
    net = InProcessNetwork()
    Echo("echo", net)
    Echo("peer", net)
    op = Operator("operator", net)
    caplog.set_level(logging.INFO, logger="securetrees")
    op.control("echo", "relay", peer="peer", n=300)
    op.control("echo", "relay", peer="peer", n=300)
    net.close = lambda: None  # type: ignore[method-assign]  # nothing to stop in process
    op.control("peer", "shutdown")
    blobs = [r for r in net.transcript.view("peer") if r.type_name == "test.steps.blob"]
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("peer ")]
    assert f"peer received 2 x test.steps.blob, {sum(r.size for r in blobs)} B" in lines
    assert any(m.startswith("peer stopping after 0 steps: sent ") for m in lines)
