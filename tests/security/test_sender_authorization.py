"""Sender authorization: every message type declares which roles may send it, to which role,
and the network refuses any other sender before a handler runs (specs/runtime.md, "Authorization").

The enumeration covers every message type registered by the library and the protocols (it imports
every module first, so it sees the same types alone as in the full run).  Each request is sent,
inside a real small run of its protocol, by a real party of every other role of that run (u2 → u1
``PathRequest``, a participant → the CC's HoLT request, a client → another client's instructions,
...): the typed error is raised, the receiver's handler never runs, the receiver's view holds
nothing new and the refusal is recorded.  Replies and messages that are never sent on their own are
refused as requests from anybody.  The companion test switches the check off and shows the attack it
stops: u2 learns u1's comparison bits ``x ≤ s``.
"""

from __future__ import annotations

import types
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import securetrees.protocols.federated_forest.estimators as ff_estimators
import securetrees.protocols.histogram_forest.facade as hf_facade
import securetrees.protocols.hybridtree.estimators as ht_estimators
import securetrees.protocols.secureboost.estimators as sb_estimators
import securetrees.runtime.network as network_module
from securetrees.errors import DecodeError, ParameterError, UnauthorizedSender, UnexpectedMessage
from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.protocols.federated_forest.testing import mixed_data, small_key_options
from securetrees.protocols.histogram_forest import HistogramForestClassifier
from securetrees.protocols.histogram_forest.testing import fit_parts
from securetrees.protocols.hybridtree import HybridTreeClassifier
from securetrees.protocols.hybridtree.testing import fit_layout, hybrid_data
from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.revfrf.messages import PathReply, PathRequest, TestReply
from securetrees.protocols.revfrf.participant import Participant
from securetrees.protocols.secureboost import SecureBoostRegressor
from securetrees.psi import intersect
from securetrees.runtime import ANY_ROLE, InProcessNetwork, Message, Party, codec, message
from securetrees.runtime.messages import message_fields, registered_messages
from securetrees.secagg import build_simulation
from securetrees.testing.dtpkc import dtpkc_test_kgc
from securetrees.testing.modules import import_library
from securetrees.testing.paillier import small_keypair

MODULES = {m.__name__ for m in import_library()}
"""Every module of the library, imported here: the registry then holds the same types whether this
test runs alone or after others in its process (an xdist worker imports what its share needed)."""
LIBRARY = {cls.wire_type: cls for cls in registered_messages().values()
           if cls.__module__ in MODULES and not cls.wire_type.startswith("test.")}
"""The library's message types (a ``test.`` type is a planted attack's, never a protocol's)."""
REQUESTS = sorted(name for name, cls in LIBRARY.items() if cls.sent_by)
OTHERS = sorted(name for name, cls in LIBRARY.items() if not cls.sent_by)
STORED = {"securetrees.keyfile", "federated_forest.state.master", "federated_forest.state.client",
          "federated_forest.state.journal", "securetrees.model.file", "federated_forest.model.master",
          "federated_forest.model.client_part", "hybridtree.model.host", "hybridtree.model.guest",
          "hybridtree.deploy.host_part",
          "histogram_forest.model.server", "histogram_forest.model.client", "revfrf.model.cs",
          "revfrf.model.participant", "revfrf.model.revoked",
          "secureboost.model.active_part", "secureboost.model.passive_part", "securetrees.alignment.record",
          "secureboost.state.active", "secureboost.state.passive",
          "histogram_forest.state.server", "histogram_forest.state.client", "histogram_forest.state.journal",
          "hybridtree.state.host", "hybridtree.state.guest", "securetrees.journal",
          "revfrf.state.server", "revfrf.state.participant"}
"""Written to disk, never sent (a key file, checkpoints, each party's model part and its bodies)."""

RUN_OF = {"revfrf": "revfrf", "dtpkc": "revfrf", "federated_forest": "federated_forest", "hybridtree": "hybridtree",
          "histogram_forest": "histogram_forest", "secagg": "secagg", "securetrees": "federated_forest",
          "psi": "psi", "secureboost": "secureboost"}
"""The run each message family is tried in (HoAdd/HoLT serve RevFRF; the control plane any run)."""


# --------------------------------------------------------------------------- real small runs


@dataclass
class Run:
    network: InProcessNetwork
    parties: dict[str, Party]

    def of_role(self, role: str) -> list[Party]:
        return [p for p in self.parties.values() if p.role == role]


def _run(net: InProcessNetwork) -> Run:
    return Run(net, {name: net._party(name) for name in net.parties})


def _fit_capturing(module: types.ModuleType, fit: Callable[[], object]) -> InProcessNetwork:
    """Run ``fit`` and return the network its facade made (the module's InProcessNetwork)."""
    made: list[InProcessNetwork] = []

    class Capturing(InProcessNetwork):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            made.append(self)

    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mp.setattr(module, "InProcessNetwork", Capturing)
        fit()
    assert len(made) == 1
    return made[0]


def _revfrf() -> tuple[Run, RevFRFClassifier, np.ndarray]:
    rng = np.random.default_rng(3)  # test data only
    X = rng.integers(0, 40, size=(60, 4)).astype(np.float64)
    y = (X[:, 0] + X[:, 2] > 40).astype(np.int64)
    model = RevFRFClassifier(n_estimators=1, max_depth=2, random_state=7,
                             kgc_factory=lambda: dtpkc_test_kgc(512))
    net = InProcessNetwork()
    model.set_params(partition=[[0, 1], [2], [3]]).fit(X, y, network=net)
    model.requester()
    return _run(net), model, X


def _federated_forest() -> Run:
    X, y, cat = mixed_data(80, seed=0)
    ff = FederatedForestClassifier(1, max_depth=2, random_state=0, label_protection="encrypted",
            categorical_features=cat,
                                   **small_key_options())
    return _run(_fit_capturing(ff_estimators, lambda: ff.set_params(partition=[[0, 3, 4], [1, 2, 5]]).fit(X, y)))


def _hybridtree() -> Run:
    d = hybrid_data(120, 3)
    model = HybridTreeClassifier(1, host_depth=2, guest_depth=1, max_bins=8, keypair=small_keypair(512))
    return _run(_fit_capturing(ht_estimators, lambda: fit_layout(model, d.X, d.y, d.host_features, d.guest_features,
                                                                d.guest_rows)))


def _histogram_forest() -> Run:
    rng = np.random.default_rng(5)  # test data only
    parts = []
    for _ in range(3):
        X = np.column_stack([rng.uniform(0, 10, 50), rng.integers(0, 21, 50), rng.integers(0, 4, 50)])
        parts.append((X.astype(np.float64), (X[:, 0] > 4).astype(np.int64)))
    model = HistogramForestClassifier(n_estimators=1, max_depth=2, n_bins=8, histogram="fixed", sampling="none",
                                      max_features=None, categorical_features=[False, False, True],
                                      feature_ranges=[(0.0, 10.0), (0.0, 20.0), None])
    return _run(_fit_capturing(hf_facade, lambda: fit_parts(model, parts)))


def _secagg() -> Run:
    sim = build_simulation(["p0", "p1", "p2"])
    sim.server.setup()
    for i, client in enumerate(sim.clients.values()):
        client.provide(1, np.array([i, 7], dtype=np.uint64))
    sim.server.aggregate(1, 2)
    assert isinstance(sim.network, InProcessNetwork)
    return _run(sim.network)


def _psi() -> Run:
    net = InProcessNetwork()
    intersect({"lead": ["a", "b", "c"], "m1": ["b", "c"], "m2": ["c", "d"]}, network=net)
    return _run(net)


def _secureboost() -> Run:
    rng = np.random.default_rng(11)  # test data only
    X = rng.normal(size=(60, 4))
    y = X[:, 0] + X[:, 2]
    model = SecureBoostRegressor([[0], [1, 2], [3]], 1, max_depth=2, max_bins=8, keypair=small_keypair(1024),
                                 allow_insecure=True)
    net = _fit_capturing(sb_estimators, lambda: model.fit(X, y))
    model.predict(X[:5])
    return _run(net)


BUILDERS: dict[str, Callable[[], Run]] = {
    "revfrf": lambda: _revfrf()[0], "federated_forest": _federated_forest, "hybridtree": _hybridtree,
    "histogram_forest": _histogram_forest, "secagg": _secagg, "psi": _psi, "secureboost": _secureboost,
}


@pytest.fixture(scope="module")
def runs() -> Callable[[str], Run]:
    cache: dict[str, Run] = {}

    def get(kind: str) -> Run:
        if kind not in cache:
            cache[kind] = BUILDERS[kind]()
        return cache[kind]

    return get


# --------------------------------------------------------------------------- messages to send


def _sample(tp: Any) -> Any:
    """A value of the annotated type (the receiver refuses before reading it)."""
    if tp is Message:  # a model file's body: any registered message
        return _synthetic(LIBRARY["securetrees.model.schema"])
    if isinstance(tp, type) and issubclass(tp, Message):
        return _synthetic(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        return None if type(None) in args else _sample(args[0])
    if origin is tuple:
        return () if len(args) == 2 and args[1] is Ellipsis else tuple(_sample(a) for a in args)
    if origin is list:
        return []
    if origin is dict:
        return {}
    if tp is np.ndarray:
        return np.zeros(0, dtype=np.int64)
    return {bool: False, int: 0, float: 0.0, str: "x", bytes: b"", type(None): None}[tp]


def _synthetic(cls: type[Message]) -> Message:
    """Well-typed fields, its own validation skipped: the receiver refuses on the frame's header,
    before decoding (and validating) anything."""
    msg = object.__new__(cls)
    for name, tp in message_fields(cls):
        object.__setattr__(msg, name, _sample(tp))
    return msg


def _example(run: Run, cls: type[Message]) -> Message:
    """A message of type ``cls`` as the run really sent it, else a well-typed synthetic one."""
    for rec in run.network.transcript:
        if rec.type_name == cls.wire_type and rec.payload is not None:
            return rec.payload
    return _synthetic(cls)


def _nested(cls: type[Message]) -> bool:
    """``cls`` is a field type (at any depth) of another registered message."""
    def mentions(tp: Any) -> bool:
        return tp is cls or any(mentions(a) for a in typing.get_args(tp))

    return any(mentions(t) for other in LIBRARY.values() if other is not cls for _, t in message_fields(other))


def _assert_refused(run: Run, sender: Party, receiver: Party, msg: Message) -> None:
    """``sender``'s ``msg`` raises UnauthorizedSender; the handler never ran, the receiver's view is
    unchanged and exactly this refusal was recorded."""
    t = run.network.transcript
    attr = type(receiver)._handlers.get(type(msg))
    ran: list[str] = []
    if attr is not None:
        setattr(receiver, attr, lambda s, m: ran.append(s))  # shadows the handler on this instance
    view, refusals = len(t.view(receiver.name)), len(t.refusals)
    try:
        with pytest.raises(UnauthorizedSender) as info:
            run.network.call(sender.name, receiver.name, msg)
    finally:
        if attr is not None:
            delattr(receiver, attr)
    assert type(info.value) is UnauthorizedSender
    assert ran == [], f"{type(receiver).__name__}.{attr} ran for {sender.name}"
    assert len(t.view(receiver.name)) == view
    assert len(t.refusals) == refusals + 1
    got = t.refusals[-1]
    assert (got.sender, got.receiver, got.type_name) == (sender.name, receiver.name, msg.wire_type)


# --------------------------------------------------------------------------- the registry


def test_every_message_type_declares_who_may_send_it() -> None:
    assert len(REQUESTS) >= 50 and len(OTHERS) >= 40
    for name in OTHERS:
        cls = LIBRARY[name]
        assert not cls.sent_to
        if cls.replies_to:  # a reply names requests that exist
            assert all(r in LIBRARY and LIBRARY[r].sent_by for r in cls.replies_to), name
        else:  # never sent on its own: a part of other messages, or a stored record
            assert name in STORED or _nested(cls), f"{name} declares neither roles nor reply_to"
    for name in REQUESTS:
        cls = LIBRARY[name]
        assert cls.sent_to and not cls.replies_to
        assert any(name in LIBRARY[r].replies_to for r in OTHERS) or name.endswith(("notice", "edges")), name
    outside = {n for n in registered_messages() if not n.startswith("test.")} - set(LIBRARY)
    assert not outside, f"message types defined outside the library: {sorted(outside)}"


def test_declarations_are_checked() -> None:
    with pytest.raises(ParameterError, match="both its sender and its receiver"):
        message("test.authz.half", sender="cs")
    with pytest.raises(ParameterError, match="request or a reply"):
        message("test.authz.both", sender="cs", receiver="cc", reply_to="dtpkc.holt.request")
    with pytest.raises(ParameterError, match="invalid sender role"):
        message("test.authz.bad", sender="CS!", receiver="cc")
    with pytest.raises(ParameterError, match=r"invalid Party role"):
        Party("nobody", InProcessNetwork())


@pytest.mark.parametrize("wire", REQUESTS)
def test_request_is_refused_from_every_other_role_of_its_run(wire: str, runs: Callable[[str], Run]) -> None:
    cls = LIBRARY[wire]
    run = runs(RUN_OF[wire.split(".")[0]])
    msg = _example(run, cls)
    receivers = [p for p in run.parties.values() if ANY_ROLE in cls.sent_to or p.role in cls.sent_to]
    assert receivers, f"no party of the run may receive {wire}"
    if ANY_ROLE not in cls.sent_to:  # the declaration matches the roles' handlers
        assert all(cls in type(p)._handlers for p in receivers), wire
    receiver = receivers[0]
    wrong = sorted({p.role for p in run.parties.values()} - cls.sent_by)
    tried = 0
    for role in wrong:  # one real party of each other role (a party does not call itself)
        for sender in [p for p in run.of_role(role) if p is not receiver][:1]:
            _assert_refused(run, sender, receiver, msg)
            tried += 1
    assert tried, f"no party of another role could try {wire}"


@pytest.mark.parametrize("wire", OTHERS)
def test_replies_and_parts_are_never_accepted_as_requests(wire: str, runs: Callable[[str], Run]) -> None:
    cls = LIBRARY[wire]
    run = runs(RUN_OF[wire.split(".")[0]])
    msg = _example(run, cls)
    for role in sorted({p.role for p in run.parties.values()}):
        sender = run.of_role(role)[0]
        receiver = next(p for p in run.parties.values() if p is not sender)
        _assert_refused(run, sender, receiver, msg)


# --------------------------------------------------------------------------- the cases of issue 14


@pytest.fixture(scope="module")
def revfrf() -> tuple[Run, RevFRFClassifier, np.ndarray]:
    return _revfrf()


def _victim(model: RevFRFClassifier, X: np.ndarray) -> tuple[Participant, Participant, PathRequest, np.ndarray]:
    """The participant with most nodes, another participant, a path request for one of the
    victim's nodes over every row, and the victim's true bits ``x ≤ s`` for it."""
    parts = sorted(model.participants_.values(), key=lambda p: -len(p.own_nodes()))
    victim, attacker = parts[0], parts[1]
    (tree, node), own = sorted(victim.own_nodes().items())[0]
    victim.load_rows("attack", X[:, list(victim.columns)])
    rows = np.arange(X.shape[0], dtype=np.int64)
    req = PathRequest("attack", rows, np.full(rows.size, tree, np.int64), np.full(rows.size, node, np.int64))
    return victim, attacker, req, X[:, own.column] <= own.threshold


def test_u2_cannot_ask_u1_for_its_comparison_bits(revfrf: tuple[Run, RevFRFClassifier, np.ndarray]) -> None:
    run, model, X = revfrf
    victim, attacker, req, _ = _victim(model, X)
    _assert_refused(run, attacker, victim, req)
    with pytest.raises(UnauthorizedSender, match=r"\(participant\) may not send revfrf\.path\.request"):
        attacker.call(victim.name, req, expect=PathReply)
    # refused from the frame's header: a body that would not even decode gets the same answer
    truncated = codec.encode(req)[:-5]
    with pytest.raises(UnauthorizedSender):
        run.network.receive(0, attacker.name, victim, truncated)
    with pytest.raises(DecodeError):  # while from the CS the same bytes fail to decode
        run.network.receive(0, "cs", victim, truncated)


def test_planted_leak_without_the_check_u2_learns_u1s_comparison_bits(
        revfrf: tuple[Run, RevFRFClassifier, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    """Companion: with the role check switched off the refusal test fails, and u2 gets u1's bits."""
    run, model, X = revfrf
    victim, attacker, req, truth = _victim(model, X)
    monkeypatch.setattr(network_module, "authorize_request", lambda *args: None)
    with pytest.raises(pytest.fail.Exception):
        _assert_refused(run, attacker, victim, req)
    stolen = attacker.call(victim.name, req, expect=PathReply)
    assert np.array_equal(stolen.left, truth) and 0 < truth.sum() < truth.size


def test_a_participant_cannot_use_the_cc_for_holt(revfrf: tuple[Run, RevFRFClassifier, np.ndarray]) -> None:
    run, model, _ = revfrf
    holt = _example(run, LIBRARY["dtpkc.holt.request"])
    for u in model.participants_.values():
        _assert_refused(run, u, model.cc_, holt)
    _assert_refused(run, model.requester(), model.cc_, holt)


def test_a_client_cannot_instruct_another_client(runs: Callable[[str], Run]) -> None:
    for kind, wire in (("federated_forest", "federated_forest.tree_start"),
                       ("histogram_forest", "histogram_forest.layer")):
        run = runs(kind)
        a, b = run.of_role("client")[:2]
        _assert_refused(run, a, b, _example(run, LIBRARY[wire]))


def test_a_reply_to_another_request_is_refused_at_the_caller(
        revfrf: tuple[Run, RevFRFClassifier, np.ndarray]) -> None:
    run, model, X = revfrf
    victim, _, req, _ = _victim(model, X)
    t = run.network.transcript
    victim.on_path = lambda sender, msg: TestReply((), ())  # type: ignore[method-assign]
    try:
        before, refusals = len(t.view("cs")), len(t.refusals)
        with pytest.raises(UnauthorizedSender, match=r"is not a reply to revfrf\.path\.request"):
            model.cs_.call(victim.name, req, expect=PathReply)
    finally:
        del victim.on_path
    assert len(t.view("cs")) == before and len(t.refusals) == refusals + 1
    assert (t.refusals[-1].sender, t.refusals[-1].receiver) == (victim.name, "cs")
    assert model.cs_.call(victim.name, req, expect=PathReply).left.size == X.shape[0]


def test_the_control_plane_obeys_the_operator_role_only(runs: Callable[[str], Run]) -> None:
    from securetrees.net.control import ControlRequest, Operator

    run = runs("federated_forest")
    master = run.of_role("master")[0]
    for p in run.parties.values():
        if p is not master:
            _assert_refused(run, p, master, ControlRequest("shutdown"))
    net = InProcessNetwork()  # an operator passes the role check (the plain master has no control handler)
    op, m = Operator("operator", net), type("M", (Party,), {"role": "master"})("master", net)
    with pytest.raises(UnexpectedMessage, match="does not accept") as info:
        op.control(m.name, "stats")
    assert type(info.value) is UnexpectedMessage


# --------------------------------------------------------------------------- over gRPC


def test_over_grpc_the_certificate_names_role_is_checked(tmp_path: Path) -> None:
    from securetrees.dtpkc import encrypt
    from securetrees.dtpkc.twoserver import CentralServer, ComputationServer, HoLTRequest
    from securetrees.net import GrpcNetwork, Peer, TransportOptions, load_identity
    from securetrees.net.tls import make_test_pki
    from securetrees.protocols.revfrf.requester import Requester
    from securetrees.testing.dtpkc import dtpkc_test_keys

    keys = dtpkc_test_keys(512)
    names = ["cs", "cc", "u1"]
    pw = {n: f"pw-{n}".encode() for n in names}
    paths = make_test_pki(names, tmp_path, pw)
    ident = {n: load_identity(n, tmp_path / "ca.pem", *paths[n], pw[n]) for n in names}
    roster = {"cs": Peer("127.0.0.1:0", role="cs"), "cc": Peer("127.0.0.1:0", role="cc"),
              "u1": Peer("127.0.0.1:0", role="requester")}
    opts = TransportOptions(deadline=20.0, retries=0)
    ncc = GrpcNetwork(ident["cc"], roster, options=opts)
    cc = ComputationServer("cc", ncc, share=keys.cc_share, weak_key=keys.weak["cc"], directory=keys.directory())
    roster["cc"] = Peer(f"127.0.0.1:{ncc.start()}", role="cc")
    ncs = GrpcNetwork(ident["cs"], roster, options=opts)
    nu1 = GrpcNetwork(ident["u1"], roster, options=opts)
    try:
        cs = CentralServer("cs", ncs, share=keys.cs_share, weak_key=keys.weak["cs"])
        requester = Requester("u1", nu1, weak_key=keys.weak["u1"])
        cs.holt(encrypt(keys.pk("u1"), 3), encrypt(keys.pk("u1"), 5))  # the CS is served
        (holt,) = [r.payload for r in ncc.transcript.view("cc") if isinstance(r.payload, HoLTRequest)]
        ran: list[str] = []
        cc.on_holt = lambda sender, msg: ran.append(sender)  # type: ignore[method-assign, assignment]
        with pytest.raises(UnauthorizedSender, match=r"'u1' \(requester\) may not send dtpkc\.holt\.request") as info:
            requester.call("cc", holt, expect=HoLTRequest)  # replayed by a real party of another role
        assert type(info.value) is UnauthorizedSender and ran == []
        assert [r.type_name for r in ncc.transcript.view("cc")] == ["dtpkc.holt.request"]
        (refusal,) = ncc.transcript.refusals
        assert (refusal.sender, refusal.receiver, refusal.type_name) == ("u1", "cc", "dtpkc.holt.request")
    finally:
        for n in (nu1, ncs, ncc):
            n.close()


def test_the_run_configuration_gives_every_party_one_valid_role(tmp_path: Path) -> None:
    from securetrees.net import Peer
    from securetrees.net.config import load_config

    def config(cs: str, op: str) -> Path:
        path = tmp_path / "run.toml"
        path.write_text(f'[run]\nprotocol = "revfrf"\noperator = "operator"\n[tls]\nca = "ca.pem"\n'
                        f'[parties.cs]\naddress = "127.0.0.1:1"\ncert = "cs.crt"\nkey = "cs.key"\n{cs}\n'
                        f'[parties.operator]\naddress = "127.0.0.1:2"\ncert = "o.crt"\nkey = "o.key"\n{op}\n',
                        encoding="utf-8")
        return path

    roster = load_config(config('role = "cs"', "")).roster()
    assert (roster["cs"].role, roster["operator"].role) == ("cs", "operator")
    for cs, op in (("", ""), ('role = "operator"', ""), ('role = "cs"', 'role = "cs"'), ('role = "CS!"', "")):
        with pytest.raises(ParameterError, match="role"):
            load_config(config(cs, op))
    with pytest.raises(ParameterError, match="invalid party role"):
        Peer("127.0.0.1:1", role="Not a role")
    from securetrees.net.trial import TrialPlan

    with pytest.raises(ParameterError, match="belongs to the run's operator"):
        TrialPlan("revfrf", {}).add("u1", role="operator")
