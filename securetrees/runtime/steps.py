"""Per-step accounting for a party's log: wall time, bytes sent and received, rounds.

A *step* is one thing a party is told to do as a whole (a control action of a deployed
role: ``fit``, ``predict``, ``revoke`` ...; a job step of the operator).  :func:`logged_step`
measures it from the party's network (the transcript counts what the party received and the
rounds of its calls; :meth:`Network.bytes_sent` what it sent) and writes one INFO line on the
party's logger::

    cs step fit: 12.345 s, sent 1234567 B, received 2345678 B, rounds 321

A deployed role's step counts the traffic the step caused (the protocol messages it sent and
received while running it), not the control request and reply that carried the order; the
operator's step counts its control requests and their replies.  On a networked run a process's
transcript holds only its own party's traffic; on the in-process network, rounds are the whole
network's.  Nothing secret is logged: counts, sizes and times.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from securetrees.errors import SecureTreesError
from securetrees.runtime.network import Network

__all__ = ["Traffic", "logged_step", "traffic"]


@dataclass(frozen=True, slots=True)
class Traffic:
    """What a party has sent and received so far, in codec-frame bytes, and the rounds of its calls."""

    sent: int
    received: int
    rounds: int

    def __sub__(self, other: Traffic) -> Traffic:
        return Traffic(self.sent - other.sent, self.received - other.received, self.rounds - other.rounds)


def traffic(network: Network, party: str) -> Traffic:
    """``party``'s traffic on ``network`` up to now."""
    t = network.transcript
    return Traffic(network.bytes_sent(party), t.bytes_received(party), t.rounds)


def describe(step: str, seconds: float, used: Traffic) -> str:
    """The text of a step line (after the party's name)."""
    return (f"step {step}: {seconds:.3f} s, sent {used.sent} B, received {used.received} B, "
            f"rounds {used.rounds}")


@contextmanager
def logged_step(logger: logging.Logger, party: str, network: Network, step: str) -> Iterator[None]:
    """Run the body as ``party``'s step ``step`` and log its line (ERROR with ``failed`` and the
    error when it raises: a securetrees error with its message, any other by its type only; the
    exception propagates)."""
    t0, before = time.perf_counter(), traffic(network, party)
    try:
        yield
    except BaseException as exc:
        # a library error's message is what the peers see too; any other error logs its type only
        why = f"{type(exc).__name__}: {exc}" if isinstance(exc, SecureTreesError) else type(exc).__name__
        logger.error("%s %s; failed: %s", party, describe(step, time.perf_counter() - t0,
                                                           traffic(network, party) - before), why)
        raise
    logger.info("%s %s", party, describe(step, time.perf_counter() - t0, traffic(network, party) - before))
