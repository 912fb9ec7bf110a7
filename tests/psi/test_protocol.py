"""The PSI roles on the in-process network: correct, agreed order, multi-party, refusals."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from securetrees.errors import (
    DecodeError,
    DuplicateIdError,
    ParameterError,
    PointRefusedError,
    ProtocolError,
    SetSizeError,
    UnexpectedMessage,
)
from securetrees.psi import PsiLeader, PsiMember, intersect, row_permutations
from securetrees.psi import messages as m
from securetrees.psi.group import Id
from securetrees.runtime import InProcessNetwork, handles

ORDER8 = bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800")  # an X25519 u of order 8


def _ids(sets: dict[str, list[Id]], rows: dict[str, np.ndarray]) -> dict[str, list[Id]]:
    return {n: [sets[n][int(i)] for i in rows[n]] for n in sets}


def _check_aligned(sets: dict[str, list[Id]], chunk_size: int = 7) -> dict[str, Any]:
    results, transcript = intersect(sets, chunk_size=chunk_size)
    rows = row_permutations(results)
    seen = _ids(sets, rows)
    want = set.intersection(*(set(s) for s in sets.values()))
    first = next(iter(seen.values()))
    assert set(first) == want and len(first) == len(want)
    for name, got in seen.items():
        assert got == first, f"{name} has another order"
        assert rows[name].dtype == np.int64
    return {"results": results, "transcript": transcript}


@pytest.mark.parametrize("sizes", [(40, 25, 10), (25, 40, 25), (7, 7, 7), (1, 30, 1), (30, 1, 0)])
def test_two_parties_end_aligned(sizes: tuple[int, int, int]) -> None:
    """Every chunk boundary case: leader larger, member larger, exact chunks, a single id, none shared."""
    n_a, n_b, shared = sizes
    a: list[Id] = [f"a{i}" for i in range(n_a - shared)] + [f"s{i}" for i in range(shared)]
    b: list[Id] = [f"s{i}" for i in range(shared)][::-1] + [f"b{i}" for i in range(n_b - shared)]
    out = _check_aligned({"alice": a, "bob": b})
    assert out["results"]["alice"].pairwise == {"bob": shared}
    assert out["results"]["alice"].peer_sizes == {"bob": n_b}
    assert out["results"]["bob"].peer_sizes == {"alice": n_a}


def test_empty_sets() -> None:
    _check_aligned({"alice": [], "bob": ["x"]})
    _check_aligned({"alice": ["x"], "bob": []})


def test_mixed_id_kinds_do_not_collide() -> None:
    out = _check_aligned({"alice": ["7", 7, b"7", "x"], "bob": [7, "x", b"8"]})
    assert len(out["results"]["alice"].rows) == 2


def test_multi_party_global_intersection_and_pairwise_leak() -> None:
    """Four parties: everyone ends with the global intersection in one order; the leader
    learns each pairwise intersection size (stated in the spec), members only the global one."""
    base = [f"id{i}" for i in range(60)]
    sets: dict[str, list[Id]] = {
        "lead": base[:50],
        "m1": base[10:60][::-1],
        "m2": [*base[0:40], "z1", "z2"],
        "m3": base[5:45],
    }
    out = _check_aligned(sets, chunk_size=8)
    res = out["results"]
    assert len(res["m1"].rows) == 30  # base[10:40]
    assert res["lead"].pairwise == {"m1": 40, "m2": 40, "m3": 40}
    assert res["lead"].peer_sizes == {"m1": 50, "m2": 42, "m3": 40}
    assert all(res[n].pairwise == {} for n in ("m1", "m2", "m3"))


def test_order_is_fresh_per_run() -> None:
    """The agreed order comes from a leader-only key: two runs on the same sets order differently
    (40 ids: equal orders by chance with probability 1/40!)."""
    sets: dict[str, list[Id]] = {"a": list(range(40)), "b": list(range(40))}
    r1, _ = intersect(sets)
    r2, _ = intersect(sets)
    assert not np.array_equal(r1["a"].rows, r2["a"].rows)


def test_duplicate_ids_and_oversize_sets_are_refused() -> None:
    net = InProcessNetwork()
    with pytest.raises(DuplicateIdError):
        PsiMember("bob", net, ["x", "x"])
    with pytest.raises(SetSizeError):
        PsiLeader("alice", net, list(range(11)), ["bob"], max_set_size=10)
    with pytest.raises(ParameterError):
        PsiLeader("alice", net, [], [])
    with pytest.raises(ParameterError):
        PsiLeader("alice", net, [], ["bob"], chunk_size=0)


def test_a_peer_announcing_too_many_ids_is_refused() -> None:
    """Each side enforces its own cap on the other's announced size."""
    net = InProcessNetwork()
    PsiMember("bob", net, list(range(5)), max_set_size=10)
    with pytest.raises(SetSizeError):
        PsiLeader("alice", net, list(range(11)), ["bob"], max_set_size=11).run()
    net = InProcessNetwork()
    PsiMember("bob", net, list(range(11)), max_set_size=11)
    with pytest.raises(SetSizeError):
        PsiLeader("alice", net, list(range(5)), ["bob"], max_set_size=10).run()


class TamperingMember(PsiMember):
    """Plants a small-order point in its own blinded chunk."""

    @handles(m.Exchange)
    def on_exchange(self, sender: str, msg: m.Exchange) -> m.ExchangeReply:
        reply = super().on_exchange(sender, msg)
        if reply.own:
            return replace(reply, own=ORDER8 + reply.own[32:])
        return reply


class TamperingLeader(PsiLeader):
    """Plants a small-order point in its first chunk."""

    def _own_chunk(self, session: bytes, scalar: bytes, index: int) -> bytes:
        blob = super()._own_chunk(session, scalar, index)
        return ORDER8 + blob[32:] if index == 0 else blob


def test_a_tampered_point_from_the_member_aborts_the_leader() -> None:
    net = InProcessNetwork()
    TamperingMember("bob", net, ["x", "y"])
    with pytest.raises(PointRefusedError):
        PsiLeader("alice", net, ["x"], ["bob"]).run()


def test_a_tampered_point_from_the_leader_aborts_the_member() -> None:
    net = InProcessNetwork()
    bob = PsiMember("bob", net, ["x", "y"])
    with pytest.raises(PointRefusedError):
        TamperingLeader("alice", net, ["x"], ["bob"]).run()
    assert bob.result is None


class EchoingMember(PsiMember):
    """Returns the same double-blinded point twice."""

    @handles(m.Exchange)
    def on_exchange(self, sender: str, msg: m.Exchange) -> m.ExchangeReply:
        reply = super().on_exchange(sender, msg)
        return replace(reply, double=reply.double[:32] * (len(reply.double) // 32))


def test_duplicate_points_from_a_peer_are_refused() -> None:
    net = InProcessNetwork()
    EchoingMember("bob", net, ["x", "y"])
    with pytest.raises(DuplicateIdError):
        PsiLeader("alice", net, ["x", "y", "z"], ["bob"]).run()


def test_out_of_order_and_premature_messages_are_refused() -> None:
    net = InProcessNetwork()
    bob = PsiMember("bob", net, ["x"])
    lead = PsiLeader("alice", net, ["x"], ["bob"])
    with pytest.raises(UnexpectedMessage):
        lead.call("bob", m.Exchange(0, b""), expect=m.ExchangeReply)
    lead.call("bob", m.Hello(bytes(16), 1, 4), expect=m.HelloReply)
    with pytest.raises(ProtocolError):
        lead.call("bob", m.Exchange(1, b""), expect=m.ExchangeReply)
    with pytest.raises(UnexpectedMessage):
        lead.send("bob", m.Result(np.zeros(0, dtype=np.int64)))
    with pytest.raises(DecodeError):  # a chunk of the wrong size
        lead.call("bob", m.Exchange(0, b""), expect=m.ExchangeReply)
    with pytest.raises(DecodeError):
        lead.call("bob", m.Hello(b"short", 1, 4), expect=m.HelloReply)
    assert bob.result is None


@pytest.mark.parametrize("positions", [[5], [-1], [0, 0], [0.0]])
def test_malformed_results_are_refused(positions: list[Any]) -> None:
    net = InProcessNetwork()
    bob = PsiMember("bob", net, ["x", "y"])
    lead = PsiLeader("alice", net, ["x", "y"], ["bob"])
    lead.exchange("bob")
    arr = np.asarray(positions, dtype=np.float64 if isinstance(positions[0], float) else np.int64)
    with pytest.raises((DecodeError, DuplicateIdError)):
        lead.send("bob", m.Result(arr))
    assert bob.result is None
