"""The alignment phase of the vertical deployments (``securetrees.net.alignment``), its roles on
an in-process network: the agreed orders, what the operator learns, and every refusal."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from securetrees.errors import DuplicateIdError, ParameterError, PointRefusedError, ProtocolError, TableError
from securetrees.net.alignment import (
    AlignLeader,
    AlignMember,
    AlignmentPlan,
    alignment_mode,
    run_alignment,
)
from securetrees.net.config import PartyConfig, RunConfig, load_config
from securetrees.net.control import ControlReply, Operator
from securetrees.net.transport import TransportOptions
from securetrees.protocols.federated_forest import deploy as ff_deploy
from securetrees.protocols.revfrf import deploy as rev_deploy
from securetrees.psi import messages as m
from securetrees.runtime import InProcessNetwork, handles

ORDER8 = bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800")  # an X25519 u of order 8

# RevFRF's shape: the leader "u1" aligns training ids with "u2" and the label holder "cs",
# test ids with "u2" only.
PLAN = AlignmentPlan("u1", {"train": ("u1", "u2", "cs"), "test": ("u1", "u2")})
SETS: dict[str, dict[str, list[str]]] = {
    "u1": {"train": ["a", "b", "c", "d", "e"], "test": ["t1", "t2", "t3"]},
    "u2": {"train": ["e", "d", "c", "b", "z"], "test": ["t3", "t9", "t1"]},
    "cs": {"train": ["b", "c", "e", "y"]},
}


def federation(leader: type[AlignLeader] = AlignLeader, member: type[AlignMember] = AlignMember
               ) -> tuple[Operator, dict[str, AlignLeader | AlignMember], InProcessNetwork]:
    net = InProcessNetwork()
    parties: dict[str, AlignLeader | AlignMember] = {"u1": leader("u1", net, SETS["u1"], PLAN)}
    for name in ("u2", "cs"):
        parties[name] = member(name, net, SETS[name])
    return Operator("operator", net), parties, net


def test_every_party_ends_with_its_rows_in_one_agreed_order() -> None:
    op, parties, _ = federation()
    sizes = run_alignment(op, PLAN)
    assert sizes == {"train": 3, "test": 2}
    for set_name, holders in PLAN.sets.items():
        seen = [[SETS[p][set_name][int(r)] for r in parties[p].rows[set_name]] for p in holders]
        assert all(s == seen[0] for s in seen)
        assert sorted(seen[0]) == sorted(set.intersection(*(set(SETS[p][set_name]) for p in holders)))
    assert set(parties["cs"].rows) == {"train"}
    for p in parties.values():
        op.control(p.name, "align_done")


def replies_to_operator(net: InProcessNetwork) -> list[Any]:
    return [r.payload for r in net.transcript if r.receiver == "operator"]


def operator_learns_sizes_only(net: InProcessNetwork) -> bool:
    """The operator's view: replies with the intersections' sizes, no array and no id."""
    replies = replies_to_operator(net)
    return bool(replies) and all(isinstance(r, ControlReply) and not r.arrays and set(r.info) <= {"size"}
                                 for r in replies)


def test_the_operator_learns_the_intersection_sizes_only() -> None:
    op, _, net = federation()
    run_alignment(op, PLAN)
    assert operator_learns_sizes_only(net)


class LeakyLeader(AlignLeader):
    """Planted leak: the leader's reply carries its rows of the intersection."""

    def control_align_run(self, args: dict[str, str]) -> ControlReply:
        reply = super().control_align_run(args)
        return replace(reply, arrays={"rows": self.rows[args["set"]]})


def test_planted_leak_the_operator_check_catches_a_leaking_leader() -> None:
    op, _, net = federation(leader=LeakyLeader)
    run_alignment(op, PLAN)
    assert not operator_learns_sizes_only(net)


class TamperingMember(AlignMember):
    """Plants a small-order point in its own blinded chunk."""

    @handles(m.Exchange)
    def on_exchange(self, sender: str, msg: m.Exchange) -> m.ExchangeReply:
        reply = super().on_exchange(sender, msg)
        return replace(reply, own=ORDER8 + reply.own[32:]) if reply.own else reply


def test_a_point_libsodium_refuses_aborts_the_alignment_with_the_typed_error() -> None:
    op, parties, _ = federation(member=TamperingMember)
    with pytest.raises(PointRefusedError):
        run_alignment(op, PLAN)
    assert not parties["u1"].rows
    with pytest.raises(ProtocolError, match="has not aligned"):  # and the phase cannot end as if aligned
        op.control("u1", "align_done")


def test_no_common_id_is_refused() -> None:
    net = InProcessNetwork()
    plan = AlignmentPlan("a", {"train": ("a", "b")})
    AlignLeader("a", net, {"train": ["1", "2"]}, plan)
    AlignMember("b", net, {"train": ["3"]})
    with pytest.raises(ParameterError, match="no train id in common"):
        run_alignment(Operator("operator", net), plan)


def _per_member(plan: AlignmentPlan, member_ids: dict[str, list[str]]) -> Operator:
    """A leader ("h", ids 1..6) with one set per member (HybridTree's shape)."""
    net = InProcessNetwork()
    AlignLeader("h", net, {name: [str(i) for i in range(1, 7)] for name in plan.sets}, plan)
    for name, ids in member_ids.items():
        AlignMember(name, net, {f"train:{name}": ids})
    return Operator("operator", net)


def test_disjoint_sets_refuse_a_row_two_members_hold() -> None:
    sets = {"train:g0": ("h", "g0"), "train:g1": ("h", "g1")}
    plan = AlignmentPlan("h", sets, disjoint=(("train:g0", "train:g1"),))
    with pytest.raises(DuplicateIdError, match="'train:g0' and 'train:g1'"):
        run_alignment(_per_member(plan, {"g0": ["1", "2", "9"], "g1": ["2", "3"]}), plan)
    # disjoint holders pass; without the rule the same overlap passes unnoticed (the check is the rule)
    assert run_alignment(_per_member(plan, {"g0": ["1", "2", "9"], "g1": ["3"]}), plan) == {
        "train:g0": 2, "train:g1": 1}
    loose = AlignmentPlan("h", sets)
    assert run_alignment(_per_member(loose, {"g0": ["1", "2"], "g1": ["2", "3"]}), loose) == {
        "train:g0": 2, "train:g1": 2}


def test_a_set_may_be_empty_only_when_the_plan_says_so() -> None:
    sets = {"train:g0": ("h", "g0"), "train:g1": ("h", "g1")}
    plan = AlignmentPlan("h", sets, may_be_empty=("train:g1",))
    assert run_alignment(_per_member(plan, {"g0": ["1"], "g1": ["x"]}), plan) == {"train:g0": 1, "train:g1": 0}
    strict = AlignmentPlan("h", sets)
    with pytest.raises(ParameterError, match="no train:g1 id in common"):
        run_alignment(_per_member(strict, {"g0": ["1"], "g1": ["x"]}), strict)
    with pytest.raises(ParameterError, match="names a set the plan does not hold"):
        AlignmentPlan("h", sets, may_be_empty=("test:g1",))
    with pytest.raises(ParameterError, match="names a set the plan does not hold"):
        AlignmentPlan("h", sets, disjoint=(("train:g0", "train:g9"),))


def test_unknown_sets_and_bad_plans_are_refused() -> None:
    op, _, _ = federation()
    with pytest.raises(ParameterError, match="no id set 'valid'"):
        op.control("u1", "align_run", set="valid")
    with pytest.raises(ParameterError, match="holds no id set 'test'"):
        op.control("cs", "align_use", set="test")
    with pytest.raises(ParameterError, match="needs the leader"):
        AlignmentPlan("u1", {"train": ("u2", "cs")})
    with pytest.raises(ParameterError, match="needs the leader"):
        AlignmentPlan("u1", {"train": ("u1",)})


def _config(params: dict[str, Any], tables: dict[str, dict[str, Any]]) -> RunConfig:
    parties = {n: PartyConfig(n, "client", "127.0.0.1:1", Path("c"), Path("k"), data=Path(f"{n}.csv"),
                              test_data=Path(f"{n}-t.csv"), table=t) for n, t in tables.items()}
    return RunConfig(Path("run.toml"), "x", "operator", Path("ca"), parties, TransportOptions(), params)


def test_the_deployments_choose_their_leaders() -> None:
    ff = _config({"clients": ["c0", "c1", "c2"]}, {"c0": {}, "c1": {"label": "y"}, "c2": {}})
    assert ff_deploy.alignment_plan(ff) == AlignmentPlan("c1", {"train": ("c0", "c1", "c2"),
                                                                "test": ("c0", "c1", "c2")})
    for labels in ({}, {"c0": {"label": "y"}, "c1": {"label": "y"}}):
        with pytest.raises(ParameterError, match="exactly one client names its label column"):
            ff_deploy.alignment_plan(_config({"clients": ["c0", "c1"]}, {"c0": {}, "c1": {}, **labels}))
    rev = _config({"participants": ["u1", "u2"]}, {"u1": {}, "u2": {}, "cs": {"label": "y"}})
    assert rev_deploy.alignment_plan(rev) == AlignmentPlan("u1", {"train": ("u1", "u2", "cs"),
                                                                  "test": ("u1", "u2")})
    with pytest.raises(ParameterError, match="private set intersection only"):
        rev_deploy.alignment_plan(replace(rev, params={**rev.params, "alignment": "hmac-trusted"}))
    with pytest.raises(ParameterError, match="alignment is one of"):
        alignment_mode(replace(ff, params={"alignment": "hmac"}))
    assert alignment_mode(ff) == "psi"


def test_the_agreed_order_is_fresh_each_run() -> None:
    """Two runs over the same sets: the same intersection, an order drawn afresh (the leader's
    key); 40 common ids, so equal orders by chance have probability 1/40! < 1e-6."""
    ids = [f"id{i}" for i in range(40)]
    orders = []
    for _ in range(2):
        net = InProcessNetwork()
        plan = AlignmentPlan("a", {"train": ("a", "b")})
        a = AlignLeader("a", net, {"train": ids}, plan)
        AlignMember("b", net, {"train": ids[::-1]})
        run_alignment(Operator("operator", net), plan)
        orders.append(a.rows["train"])
    assert sorted(orders[0].tolist()) == sorted(orders[1].tolist()) == list(range(40))
    assert not np.array_equal(orders[0], orders[1])


def test_a_deployed_role_refuses_a_broken_table_or_setting_before_serving(tmp_path: Path) -> None:
    X = np.arange(40, dtype=np.float64).reshape(10, 4)
    cfg = ff_deploy.prepare(tmp_path, X, np.arange(10) % 2, [[0, 1], [2, 3]], X_test=X[:4],
                            params={"n_classes": 2, "alignment": "hmac-trusted"})
    config = load_config(cfg)
    with pytest.raises(ParameterError, match="needs the shared id_key"):
        ff_deploy.make_role("client1", config, InProcessNetwork(), {}, {}, b"")
    psi = replace(config, params={**config.params, "alignment": "psi"})
    with pytest.raises(ParameterError, match="runs over gRPC"):
        ff_deploy.make_role("client1", psi, InProcessNetwork(), {}, {}, b"")
    wrong = replace(config, params={**config.params, "feature_ids": [[0, 1], [2]]})
    with pytest.raises(TableError, match="feature_ids lists 1"):  # before the alignment phase, not after it
        ff_deploy.make_role("client1", replace(wrong, params={**wrong.params, "alignment": "psi"}),
                            InProcessNetwork(), {}, {}, b"")
    with pytest.raises(TableError, match="feature_ids lists 1"):
        ff_deploy.make_role("client1", wrong, InProcessNetwork(), {"id_key": bytes(32)}, {}, b"")
    data = config.party("client1").data
    assert data is not None
    lines = data.read_text().splitlines()
    data.write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(DuplicateIdError):
        ff_deploy.make_role("client1", config, InProcessNetwork(), {"id_key": bytes(32)}, {}, b"")


def test_a_stop_during_the_alignment_phase_ends_the_party(tmp_path: Path) -> None:
    """``securetrees operator stop`` before ``fit`` reaches data holders that serve the alignment phase:
    each must end (``RunStopped``, which ``securetrees party`` takes as a clean stop).  Before, the
    party logged 'stopping', closed its phase server and then waited for ``align_done`` forever."""
    import threading

    from securetrees.errors import RunStopped
    from securetrees.net.alignment import serve_alignment
    from securetrees.net.config import read_passphrase
    from securetrees.net.service import network_for
    from securetrees.psi import deploy as psi_deploy

    cfg = load_config(psi_deploy.prepare(tmp_path, {"a": np.arange(3), "b": np.arange(3)}))
    plan = AlignmentPlan("a", {"train": ("a", "b")})
    net = network_for(cfg, "b", read_passphrase("b", tmp_path / "pki" / "b.pass"))
    ended: list[BaseException] = []

    def party() -> None:
        try:
            serve_alignment(cfg, "b", net, plan, {"train": ["1", "2"]})
        except BaseException as exc:
            ended.append(exc)

    thread = threading.Thread(target=party, daemon=True)
    thread.start()
    with network_for(cfg, "operator", read_passphrase("operator", tmp_path / "pki" / "operator.pass")) as op_net:
        op_net.wait_for(["b"], 20.0)
        Operator("operator", op_net).control("b", "shutdown")
    thread.join(10.0)
    assert not thread.is_alive(), "the party kept waiting for align_done after the stop"
    assert len(ended) == 1 and isinstance(ended[0], RunStopped), ended


def test_a_second_fit_is_refused_with_what_to_do() -> None:
    """``operator fit`` once the phase is over (the leader serves its protocol role) says that fit runs
    once per start of the parties; before, it failed with "'shop' has no control action 'align_use'"."""
    from securetrees.net.alignment import align
    from securetrees.net.control import Controllable
    from securetrees.runtime import Party

    class Served(Controllable, Party):
        role = "client"

    net = InProcessNetwork()
    Served("u1", net)
    with pytest.raises(ParameterError, match="operator stop"):
        align(Operator("operator", net), PLAN)
