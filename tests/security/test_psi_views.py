"""What each party of a PSI run sees (specs/psi.md, "What each party learns").

A member's view holds the session id, the leader's set size, blinded points ``a·H(x)`` and
the positions of the global intersection in its own shuffled list; the leader's view holds
the member's set size and blinded points.  No id, and no unblinded hash ``H(x)`` of any id
(which anyone could recompute over guessed ids), may appear in any view; every point is a
canonical X25519 u-coordinate of a point of the prime-order subgroup.  The companions plant a leak (a party sending its
unblinded hashes) and show that the check fails.
"""

from __future__ import annotations

import pytest

from securetrees.psi import PsiLeader, PsiMember, intersect
from securetrees.psi import messages as m
from securetrees.psi.group import POINT_BYTES, Id, encode_id, hash_ids, join_points, split_points
from securetrees.runtime import InProcessNetwork, Transcript, handles
from securetrees.testing.canaries import assert_no_canaries
from securetrees.testing.curve25519 import in_prime_order_subgroup

SETS: dict[str, list[Id]] = {
    "alice": [f"canary-id-{i:04d}" for i in range(0, 30)],
    "bob": [f"canary-id-{i:04d}" for i in range(20, 45)],
    "carol": [f"canary-id-{i:04d}" for i in range(10, 40)],
}
MEMBER_TYPES = {"psi.hello", "psi.exchange", "psi.result.notice"}
LEADER_TYPES = {"psi.hello_reply", "psi.exchange_reply"}


def _points(record_payload: object) -> list[bytes]:
    if isinstance(record_payload, m.Exchange):
        return split_points(record_payload.points)
    if isinstance(record_payload, m.ExchangeReply):
        return split_points(record_payload.double) + split_points(record_payload.own)
    return []


def check_views(transcript: Transcript, sets: dict[str, list[Id]], leader: str) -> None:
    """Raise AssertionError if any view holds an id, an unblinded hash or a non-subgroup point,
    or a message type outside its role's list."""
    members = [n for n in sets if n != leader]
    sessions = [r.payload.session for n in members for r in transcript.view(n) if isinstance(r.payload, m.Hello)]
    assert len(sessions) == len(members) and len(set(sessions)) == len(sessions)  # fresh per pairwise run
    all_ids = [i for s in sets.values() for i in s]
    unblinded = [h for s in sessions for h in hash_ids(s, [encode_id(i) for i in all_ids])]
    for name in sets:
        view = transcript.view(name)
        assert {r.type_name for r in view} <= (LEADER_TYPES if name == leader else MEMBER_TYPES)
        assert_no_canaries(view, [str(i) for i in all_ids] + unblinded)
        for r in view:
            for p in _points(r.payload):
                assert len(p) == POINT_BYTES and in_prime_order_subgroup(p)


def test_views_hold_only_blinded_points_and_sizes() -> None:
    _, transcript = intersect(SETS, chunk_size=8)
    check_views(transcript, SETS, "alice")
    # counts: each member received the leader's 30 points; the leader got 30 + |member set| per member
    for member in ("bob", "carol"):
        got = sum(len(_points(r.payload)) for r in transcript.view(member))
        assert got == len(SETS["alice"])
    assert sum(len(_points(r.payload)) for r in transcript.view("alice")) == 2 * 30 + 25 + 30


def test_blinded_values_are_fresh_per_run() -> None:
    """New session and scalars each run: the same ids give unrelated points in two runs."""
    _, t1 = intersect(SETS)
    _, t2 = intersect(SETS)
    p1 = {p for r in t1.view("bob") for p in _points(r.payload)}
    p2 = {p for r in t2.view("bob") for p in _points(r.payload)}
    assert p1 and not p1 & p2


class LeakyMember(PsiMember):
    """Planted leak: sends its unblinded hashes H(y) instead of b·H(y)."""

    @handles(m.Exchange)
    def on_exchange(self, sender: str, msg: m.Exchange) -> m.ExchangeReply:
        reply = super().on_exchange(sender, msg)
        if self._session is None:  # pragma: no cover - set by hello
            return reply
        count = len(reply.own) // POINT_BYTES
        start = msg.index * self._chunk_size
        raw = hash_ids(self._session, [self._ids[int(k)] for k in self._perm[start:start + count]])
        return m.ExchangeReply(reply.index, reply.double, join_points(raw))


class LeakyLeader(PsiLeader):
    """Planted leak: sends its unblinded hashes H(x) instead of a·H(x)."""

    def _own_chunk(self, session: bytes, scalar: bytes, index: int) -> bytes:
        rows = range(index * self.chunk_size, min((index + 1) * self.chunk_size, len(self._ids)))
        return join_points(hash_ids(session, [self._ids[k] for k in rows]))


@pytest.mark.parametrize("leaky", ["member", "leader"])
def test_planted_unblinded_hashes_are_caught(leaky: str) -> None:
    net = InProcessNetwork()
    member_cls = LeakyMember if leaky == "member" else PsiMember
    leader_cls = LeakyLeader if leaky == "leader" else PsiLeader
    member_cls("bob", net, SETS["bob"])
    leader_cls("alice", net, SETS["alice"], ["bob"], chunk_size=8).run()
    with pytest.raises(AssertionError, match="private values leaked"):
        check_views(net.transcript, {"alice": SETS["alice"], "bob": SETS["bob"]}, "alice")

