"""A PSI party's secrets stay fresh and the agreed order stays the leader's secret
(``specs/psi.md``, "Scalars" and "Flow"), audited with :mod:`securetrees.testing.psi_audit`.

* Each party draws a fresh scalar each run: two runs under one session id (a curious leader
  repeats it) share no point the leader or the member sent.  Planted companions: one party
  keeps its first scalar; the check names it and only it.
* The agreed order is the leader's keyed hash of the double-blinded values: the first member,
  sorting the double-blinded values it computed, names almost none of the leader rows that hold
  its ids.  Planted companion: the order sorted by the double-blinded values themselves.

Every party's randomness comes from a fixed stream, so each outcome is the same on every run;
with system randomness the honest checks would fail with probability below 2^-240 (a point
shared by two runs) and 2/11! < 6e-8 (11 or more rows named under one of two orderings).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest

import securetrees.psi.roles as roles
from securetrees.psi import PsiLeader, PsiMember, intersect
from securetrees.psi import messages as m
from securetrees.psi.group import Id
from securetrees.rand import DeterministicRandom, RandomSource
from securetrees.runtime import InProcessNetwork, Record
from securetrees.testing.psi_audit import SessionPinned, order_attack, reused_points

LEADER: list[Id] = [f"order-id-{i:03d}" for i in range(0, 30)]
MEMBER: list[Id] = [f"order-id-{i:03d}" for i in range(-10, 35)]  # holds every leader id
NAMED_BY_CHANCE = 11
"""Fewest correctly named rows that count as a leak (2/11! < 6e-8 for a uniform order)."""


SESSION = bytes(range(16))


def _same_session_twice() -> tuple[list[Record], list[Record]]:
    """One leader and one member, each running twice; the leader draws one session id both times."""
    net = InProcessNetwork()
    PsiMember("bob", net, MEMBER, rng=DeterministicRandom("psi secrets: bob"))
    leader = PsiLeader("alice", net, LEADER, ["bob"], chunk_size=8,
                       rng=SessionPinned(DeterministicRandom("psi secrets: alice"), SESSION))
    leader.run()
    first = list(net.transcript.records)
    leader.run()
    second = net.transcript.records[len(first):]
    sessions = [r.payload.session for r in net.transcript.view("bob") if isinstance(r.payload, m.Hello)]
    assert sessions == [SESSION, SESSION]  # the audit's premise: one session id
    return first, second


def check_scalars_fresh(runs: tuple[list[Record], list[Record]], party: str) -> None:
    reused = reused_points(*runs, party)
    assert not reused, f"{party} sent {len(reused)} points again in a second run: its scalar was reused"


@pytest.mark.parametrize("party", ["alice", "bob"])
def test_scalars_are_fresh_per_run(party: str) -> None:
    check_scalars_fresh(_same_session_twice(), party)


def _kept_scalar(party: str) -> Callable[[RandomSource], bytes]:
    """``random_scalar`` as it would be if ``party`` kept its first scalar (the leader's random
    source is the harness's :class:`SessionPinned`)."""
    honest, kept = roles.random_scalar, {}

    def draw(rng: RandomSource = roles.SYSTEM_RANDOM) -> bytes:
        if isinstance(rng, SessionPinned) != (party == "alice"):
            return honest(rng)
        return kept.setdefault(id(rng), honest(rng))

    return draw


@pytest.mark.parametrize(("party", "other"), [("alice", "bob"), ("bob", "alice")])
def test_planted_scalar_reuse_is_caught(party: str, other: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One party keeps its first scalar: the check names it, and only it."""
    monkeypatch.setattr(roles, "random_scalar", _kept_scalar(party))
    runs = _same_session_twice()
    check_scalars_fresh(runs, other)
    with pytest.raises(AssertionError, match=f"{party} sent .* scalar was reused"):
        check_scalars_fresh(runs, party)


def _order_attack() -> int:
    results, transcript = intersect({"alice": LEADER, "bob": MEMBER}, chunk_size=8,
                                    rng=DeterministicRandom("psi secrets: order"))
    assert len(results["bob"].rows) == len(LEADER)  # every leader id is in the intersection
    return order_attack(transcript, "bob", MEMBER, results["bob"].rows, LEADER)


def check_order_is_keyed() -> None:
    named = _order_attack()
    assert named < NAMED_BY_CHANCE, f"the member named {named} of the leader's rows from the agreed order"


def test_agreed_order_names_no_leader_row() -> None:
    check_order_is_keyed()


def test_planted_order_by_double_blinded_values_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader's keyed hash replaced by the identity: the order sorts the double-blinded values."""
    identity = SimpleNamespace(blake2b=lambda data, **_: SimpleNamespace(digest=lambda: data))
    monkeypatch.setattr(roles, "hashlib", identity)
    assert _order_attack() == len(LEADER)
    with pytest.raises(AssertionError, match="named 30 of the leader's rows"):
        check_order_is_keyed()
