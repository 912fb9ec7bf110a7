"""A PSI party's secrets stay fresh and the agreed order stays the leader's secret
(``specs/psi.md``, "Scalars" and "Flow"), audited with :mod:`securetrees.testing.psi_audit`.

* Each party draws a fresh scalar each run: two runs under one session id (a curious leader
  repeats it) share no point the leader or the member sent.  Planted companions: one party
  keeps its first scalar; the check names it and only it.
* The agreed order is the leader's keyed hash of the double-blinded values.  The first member,
  trying every public ordering of what it saw (the double-blinded values it computed, their
  numbers, the leader's row order), names almost none of the leader rows that hold its ids; and
  two runs that send the same messages under two order keys give two orders (an order that is
  any function of the messages gives one).  Planted companions: the order sorted by the
  double-blinded values, left in the leader's row order, or sorted by an unkeyed hash.

Every party's randomness comes from a fixed stream, so each outcome is the same on every run;
with system randomness the honest checks would fail with probability below 2^-240 (a point
shared by two runs), 3/11! < 8e-8 (11 or more rows named under one of three orderings) and
1/30! (two keys, one order).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import pytest

import securetrees.psi.roles as roles
from securetrees.psi import PsiLeader, PsiMember
from securetrees.psi import messages as m
from securetrees.psi.group import SESSION_BYTES, Id
from securetrees.rand import DeterministicRandom, RandomSource
from securetrees.runtime import InProcessNetwork, Record
from securetrees.testing.psi_audit import Overridden, order_attack, reused_points, sent_points

LEADER: list[Id] = [f"order-id-{i:03d}" for i in range(0, 30)]
MEMBER: list[Id] = [f"order-id-{i:03d}" for i in range(-10, 35)]  # holds every leader id
NAMED_BY_CHANCE = 11
"""Fewest correctly named rows that count as a leak (3/11! < 8e-8 for a uniform order, over the
member's three orderings)."""
ORDER_KEY_BYTES = 32
"""The size of the leader's order key (its only 32-byte draw)."""


SESSION = bytes(range(16))


def _same_session_twice() -> tuple[list[Record], list[Record]]:
    """One leader and one member, each running twice; the leader draws one session id both times."""
    net = InProcessNetwork()
    PsiMember("bob", net, MEMBER, rng=DeterministicRandom("psi secrets: bob"))
    leader = PsiLeader("alice", net, LEADER, ["bob"], chunk_size=8,
                       rng=Overridden(DeterministicRandom("psi secrets: alice"), SESSION_BYTES, SESSION))
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
    source is the harness's :class:`Overridden`)."""
    honest, kept = roles.random_scalar, {}

    def draw(rng: RandomSource = roles.SYSTEM_RANDOM) -> bytes:
        if isinstance(rng, Overridden) != (party == "alice"):
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


def _run(leader_rng: RandomSource, member_rng: RandomSource) -> tuple[InProcessNetwork, PsiMember]:
    net = InProcessNetwork()
    member = PsiMember("bob", net, MEMBER, rng=member_rng)
    PsiLeader("alice", net, LEADER, ["bob"], chunk_size=8, rng=leader_rng).run()
    assert member.result is not None and len(member.result.rows) == len(LEADER)  # every leader id is in it
    return net, member


def _order_attack() -> int:
    net, member = _run(DeterministicRandom("psi secrets: order/alice"), DeterministicRandom("psi secrets: order/bob"))
    assert member.result is not None
    return order_attack(net.transcript, "bob", MEMBER, member.result.rows, LEADER)


def check_order_unknown_to_the_member() -> None:
    named = _order_attack()
    assert named < NAMED_BY_CHANCE, f"the member named {named} of the leader's rows from the agreed order"


def _orders_under_two_keys() -> list[np.ndarray]:
    """The agreed order of two runs that send the same messages, under two order keys."""
    runs = [_run(Overridden(DeterministicRandom("psi secrets: keys/alice"), ORDER_KEY_BYTES, key),
                 DeterministicRandom("psi secrets: keys/bob")) for key in (b"\x01" * 32, b"\x02" * 32)]
    views = [[sent_points(net.transcript.records, p) for p in ("alice", "bob")] for net, _ in runs]
    assert views[0] == views[1]  # the premise: only the key differs
    return [np.asarray(member.result.rows) for _, member in runs if member.result is not None]


def check_order_needs_the_key() -> None:
    first, second = _orders_under_two_keys()
    assert not np.array_equal(first, second), "the agreed order is a function of the messages: no secret key in it"


def test_agreed_order_is_the_leaders_secret() -> None:
    check_order_unknown_to_the_member()
    check_order_needs_the_key()


def _constant_digest(value: Callable[[bytes], bytes]) -> SimpleNamespace:
    """``hashlib`` whose ``blake2b(data, ...).digest()`` is ``value(data)``."""
    return SimpleNamespace(blake2b=lambda data, **_: SimpleNamespace(digest=lambda: value(data)))


def test_planted_order_by_double_blinded_values_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader's keyed hash replaced by the identity: the order sorts the double-blinded values."""
    monkeypatch.setattr(roles, "hashlib", _constant_digest(lambda data: data))
    assert _order_attack() == len(LEADER)
    with pytest.raises(AssertionError, match="named 30 of the leader's rows"):
        check_order_unknown_to_the_member()
    with pytest.raises(AssertionError, match="no secret key"):
        check_order_needs_the_key()


def test_planted_order_by_leader_rows_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every digest equal: the stable sort keeps the intersection in the leader's row order."""
    monkeypatch.setattr(roles, "hashlib", _constant_digest(lambda data: b""))
    with pytest.raises(AssertionError, match="named 30 of the leader's rows"):
        check_order_unknown_to_the_member()
    with pytest.raises(AssertionError, match="no secret key"):
        check_order_needs_the_key()


def test_planted_order_by_an_unkeyed_hash_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A public hash of the double-blinded values (no key): only the two-key check sees it."""
    monkeypatch.setattr(roles, "hashlib", _constant_digest(lambda data: hashlib.sha256(data).digest()))
    check_order_unknown_to_the_member()  # none of the member's three orderings is this one
    with pytest.raises(AssertionError, match="no secret key"):
        check_order_needs_the_key()
