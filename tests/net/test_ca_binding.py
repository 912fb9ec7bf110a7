"""Several CAs in one run: every roster name is bound to the one CA allowed to issue it.

Three organisations bring their own CA, bundled into one ``ca.pem``: org A runs the
operator and the CS, org B is participant u1, org C is participant u2.  Org B's CA is
also a working CA of the bundle, so it can mint certificates named ``operator``, ``cs``
and ``u2``; each must be refused both when the attacker connects in and when it serves
under the name and an honest party connects out to it, with nothing delivered.  The
companions disable one binding check at a time and show the same attack then succeeds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("grpc")

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from securetrees.errors import AuthenticationError, ParameterError, PartyUnavailable
from securetrees.net import GrpcNetwork, Peer, TlsIdentity, TransportOptions, fingerprint, load_identity
from securetrees.net.config import dump_toml, load_config
from securetrees.net.control import Controllable, ControlReply, ControlRequest, Operator
from securetrees.net.service import network_for
from securetrees.net.tls import load_ca_bundle, make_test_pki
from securetrees.net.trial import TrialPlan, write_trial
from securetrees.runtime import Message, Party, handles, message

HONEST_CA = {"operator": "A", "cs": "A", "u1": "B", "u2": "C"}
"""Which organisation's CA issues each name of the run."""
OPTS = TransportOptions(deadline=5.0, retries=0)


@message("test.cabind.ping", sender="echo", receiver=("echo", "operator"))
@dataclass(frozen=True)
class Ping(Message):
    x: int


@message("test.cabind.pong", reply_to=Ping)
@dataclass(frozen=True)
class Pong(Message):
    y: int


class Echo(Controllable, Party):
    role = "echo"
    calls = 0

    @handles(Ping)
    def on_ping(self, sender: str, msg: Ping) -> Pong:
        self.calls += 1
        return Pong(msg.x + 1)

    def control_double(self, args: dict[str, str]) -> ControlReply:
        self.calls += 1
        return ControlReply(info={"who": self.name})


@dataclass
class Pki:
    bundle: Path
    ca_fp: dict[str, str]
    honest: dict[str, TlsIdentity]
    rogue: dict[str, TlsIdentity]
    """Certificates org B's CA minted for names it may not issue."""
    dirs: dict[str, Path]


def _pw(name: str) -> bytes:
    return f"pw-{name}".encode()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    dirs = {org: tmp_path_factory.mktemp(f"org{org}") for org in "ABC"}
    issued = {"A": ["operator", "cs"], "B": ["u1", "operator", "cs", "u2"], "C": ["u2"]}
    paths = {org: make_test_pki(names, dirs[org], {n: _pw(n) for n in names}, ca_name=f"org {org} CA")
             for org, names in issued.items()}
    bundle = tmp_path_factory.mktemp("run") / "ca.pem"
    bundle.write_bytes(b"".join((dirs[org] / "ca.pem").read_bytes() for org in "ABC"))
    honest = {n: load_identity(n, bundle, *paths[org][n], _pw(n)) for n, org in HONEST_CA.items()}
    rogue = {n: load_identity(n, bundle, *paths["B"][n], _pw(n)) for n in ("operator", "cs", "u2")}
    ca_fp = {org: fingerprint((dirs[org] / "ca.pem").read_bytes()) for org in "ABC"}
    return Pki(bundle, ca_fp, honest, rogue, dirs)


class OperatorEcho(Echo):
    """An Echo under the operator's name (the role its roster entry gives it)."""

    role = "operator"


def _peer(pki: Pki, name: str, address: str = "127.0.0.1:0", org: str | None = None) -> Peer:
    return Peer(address, issuer=pki.ca_fp[org or HONEST_CA[name]], role="operator" if name == "operator" else "echo")


@pytest.fixture
def closing() -> Iterator[list[GrpcNetwork]]:
    nets: list[GrpcNetwork] = []
    yield nets
    for n in nets:
        n.close(grace=None)


def _serve(identity: TlsIdentity, roster: dict[str, Peer], nets: list[GrpcNetwork]) -> tuple[Echo, GrpcNetwork, str]:
    """An Echo party serving under ``identity``; returns it, its network and its address."""
    net = GrpcNetwork(identity, {**roster, identity.name: roster[identity.name]}, options=OPTS)
    nets.append(net)
    party = (OperatorEcho if roster[identity.name].role == "operator" else Echo)(identity.name, net)
    return party, net, f"127.0.0.1:{net.start()}"


# ---------------------------------------------------------------- honest parties under several CAs

def test_every_ca_of_the_bundle_loads(pki: Pki) -> None:
    assert [c.subject.rfc4514_string() for c in load_ca_bundle(pki.bundle.read_bytes())] == [
        "CN=org A CA", "CN=org B CA", "CN=org C CA"]
    # u2's certificate is signed by the bundle's third CA: it loads (a reader of the first CA only refuses it)
    assert pki.honest["u2"].name == "u2"


def test_honest_parties_under_different_cas_start_and_talk(pki: Pki, closing: list[GrpcNetwork],
                                                          held_ports: Callable[[int], list[int]]) -> None:
    ports = held_ports(3)
    roster = {n: _peer(pki, n, f"127.0.0.1:{ports.pop()}" if n != "operator" else "127.0.0.1:0") for n in HONEST_CA}
    cs, cs_net, _ = _serve(pki.honest["cs"], roster, closing)
    u1, _, _ = _serve(pki.honest["u1"], roster, closing)
    u2, _, _ = _serve(pki.honest["u2"], roster, closing)
    assert u1.call("cs", Ping(1), expect=Pong) == Pong(2)       # B -> A
    assert u2.call("cs", Ping(2), expect=Pong) == Pong(3)       # C -> A
    assert cs.call("u2", Ping(3), expect=Pong) == Pong(4)       # A -> C
    assert u2.call("u1", Ping(4), expect=Pong) == Pong(5)       # C -> B
    op_net = GrpcNetwork(pki.honest["operator"], roster, options=OPTS)
    closing.append(op_net)
    assert Operator("operator", op_net).control("u1", "double").info == {"who": "u1"}
    assert [r.sender for r in cs_net.transcript.view("cs") if r.type_name == "test.cabind.ping"] == ["u1", "u2"]


# ---------------------------------------------------------------- incoming: the attacker connects

INCOMING = [("operator", "cs"), ("u2", "cs"), ("cs", "u2")]
"""(name org B's CA minted, the honest server the attacker connects to)."""


def _attack_in(pki: Pki, minted: str, target: str, nets: list[GrpcNetwork]) -> tuple[Echo, GrpcNetwork, object]:
    roster = {n: _peer(pki, n) for n in HONEST_CA}
    victim, victim_net, addr = _serve(pki.honest[target], roster, nets)
    # the attacker's own roster states the truth about its certificate (org B), so it starts
    attacker_net = GrpcNetwork(pki.rogue[minted], {minted: _peer(pki, minted, org="B"),
                                                   target: _peer(pki, target, addr)}, options=OPTS)
    nets.append(attacker_net)
    msg: Message = ControlRequest("double") if minted == "operator" else Ping(7)
    try:
        reply: object = attacker_net.call(minted, target, msg)
    except AuthenticationError as exc:
        reply = exc
    return victim, victim_net, reply


@pytest.mark.parametrize(("minted", "target"), INCOMING)
def test_incoming_name_minted_by_another_ca_is_refused(pki: Pki, closing: list[GrpcNetwork],
                                                       minted: str, target: str) -> None:
    victim, victim_net, reply = _attack_in(pki, minted, target, closing)
    assert isinstance(reply, AuthenticationError) and "not issued by the CA" in str(reply)
    assert victim.calls == 0 and len(victim_net.transcript) == 0


@pytest.mark.parametrize(("minted", "target"), INCOMING)
def test_planted_leak_incoming_without_the_issuer_check_the_attack_succeeds(
        pki: Pki, closing: list[GrpcNetwork], monkeypatch: pytest.MonkeyPatch, minted: str, target: str) -> None:
    monkeypatch.setattr(GrpcNetwork, "_issuer_ok", lambda self, name, pem: True)
    victim, victim_net, reply = _attack_in(pki, minted, target, closing)
    assert not isinstance(reply, Exception)
    assert victim.calls == 1 and [r.sender for r in victim_net.transcript] == [minted]


# ---------------------------------------------------------------- outgoing: the attacker serves

OUTGOING = [("operator", "cs"), ("cs", "u1"), ("u2", "cs")]
"""(name org B's CA minted and the attacker serves under, the honest party connecting out to it)."""


def _attack_out(pki: Pki, minted: str, caller: str, nets: list[GrpcNetwork]
                ) -> tuple[Echo, GrpcNetwork, GrpcNetwork, object]:
    attacker, attacker_net, addr = _serve(pki.rogue[minted], {minted: _peer(pki, minted, org="B"),
                                                              caller: _peer(pki, caller)}, nets)
    # the honest caller's roster has the attacker's address under the minted name (DNS or routing
    # hijacked) and binds the name to its true CA
    roster = {n: _peer(pki, n) for n in HONEST_CA}
    roster[minted] = _peer(pki, minted, addr)
    caller_net = GrpcNetwork(pki.honest[caller], roster, options=OPTS)
    nets.append(caller_net)
    try:
        reply: object = caller_net.call(caller, minted, Ping(7))
    except PartyUnavailable as exc:
        reply = exc
    return attacker, attacker_net, caller_net, reply


@pytest.mark.parametrize(("minted", "caller"), OUTGOING)
def test_outgoing_server_minted_by_another_ca_is_refused(pki: Pki, closing: list[GrpcNetwork],
                                                         minted: str, caller: str) -> None:
    attacker, attacker_net, caller_net, reply = _attack_out(pki, minted, caller, closing)
    assert isinstance(reply, PartyUnavailable)  # the TLS handshake fails at the caller
    assert attacker.calls == 0 and len(attacker_net.transcript) == 0
    assert len(caller_net.transcript) == 0


@pytest.mark.parametrize(("minted", "caller"), OUTGOING)
def test_planted_leak_outgoing_trusting_the_whole_bundle_the_attack_succeeds(
        pki: Pki, closing: list[GrpcNetwork], monkeypatch: pytest.MonkeyPatch, minted: str, caller: str) -> None:
    monkeypatch.setattr(GrpcNetwork, "_trusted_roots", lambda self, peer: self.identity.ca_pem)
    attacker, attacker_net, caller_net, reply = _attack_out(pki, minted, caller, closing)
    assert reply == Pong(8) and [r.sender for r in caller_net.transcript] == [minted]
    assert attacker.calls == 1 and [r.sender for r in attacker_net.transcript] == [caller]


# ---------------------------------------------------------------- refused at start-up

def test_several_cas_need_an_issuer_for_every_name(pki: Pki) -> None:
    roster = {n: _peer(pki, n) for n in HONEST_CA}
    roster["u2"] = Peer("127.0.0.1:0")
    with pytest.raises(ParameterError, match=r"3 CAs.*missing for \['u2'\]"):
        GrpcNetwork(pki.honest["cs"], roster)
    roster["u2"] = Peer("127.0.0.1:0", fingerprint=fingerprint(pki.honest["u2"].cert_pem))  # a pin alone
    with pytest.raises(ParameterError, match="does not bind outgoing"):
        GrpcNetwork(pki.honest["cs"], roster)
    roster["u2"] = Peer("127.0.0.1:0", issuer="ab" * 32)
    with pytest.raises(ParameterError, match="not a CA of the run's bundle"):
        GrpcNetwork(pki.honest["cs"], roster)
    roster["u2"] = Peer("127.0.0.1:0", issuer="not hex")
    with pytest.raises(ParameterError, match="64 hex digits"):
        GrpcNetwork(pki.honest["cs"], roster)


def test_own_certificate_from_the_wrong_ca_is_refused_at_start_up(pki: Pki) -> None:
    with pytest.raises(AuthenticationError, match="not issued by the CA the roster binds 'operator'"):
        GrpcNetwork(pki.rogue["operator"], {n: _peer(pki, n) for n in HONEST_CA})


def test_one_ca_needs_no_issuer_and_duplicates_count_once(pki: Pki, tmp_path: Path) -> None:
    ca = (pki.dirs["A"] / "ca.pem").read_bytes()
    assert len(load_ca_bundle(ca + ca)) == 1
    ident = TlsIdentity("cs", ca + ca, pki.honest["cs"].cert_pem, pki.honest["cs"].key_pem)
    GrpcNetwork(ident, {"cs": Peer("127.0.0.1:0"), "operator": Peer("127.0.0.1:0")}).close()
    with pytest.raises(AuthenticationError):  # one CA: still bound, a u2 certificate from B is no party here
        GrpcNetwork(TlsIdentity("u2", ca, pki.rogue["u2"].cert_pem, pki.rogue["u2"].key_pem),
                    {"u2": Peer("127.0.0.1:0")})


def test_a_leaf_certificate_in_the_bundle_is_refused(pki: Pki) -> None:
    with pytest.raises(ParameterError, match="not a CA"):
        load_ca_bundle(pki.bundle.read_bytes() + pki.honest["u1"].cert_pem)
    with pytest.raises(ParameterError, match="no readable PEM"):
        load_ca_bundle(b"")


# ---------------------------------------------------------------- the configuration file

def _write_run(pki: Pki, tmp: Path, issuers: dict[str, str | None]) -> Path:
    pdir = tmp / "pki"
    pdir.mkdir(exist_ok=True)
    (pdir / "ca.pem").write_bytes(pki.bundle.read_bytes())
    parties = {}
    for name, org in HONEST_CA.items():
        ident = pki.honest[name]
        (pdir / f"{name}.crt").write_bytes(ident.cert_pem)
        key = serialization.load_pem_private_key(ident.key_pem, None)
        (pdir / f"{name}.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(_pw(name))))
        parties[name] = {"role": {"operator": "operator", "cs": "cs"}.get(name, "participant"),  # RevFRF's roles
                         "address": "127.0.0.1:0", "cert": f"pki/{name}.crt", "key": f"pki/{name}.key",
                         "issuer": issuers.get(name, pki.ca_fp[org])}
    doc = {"run": {"protocol": "revfrf", "operator": "operator"}, "tls": {"ca": "pki/ca.pem"}, "parties": parties}
    path = tmp / "run.toml"
    path.write_text(dump_toml(doc), encoding="utf-8")
    return path


def test_config_binds_each_name_to_its_issuer(pki: Pki, tmp_path: Path) -> None:
    # openssl's "AB:CD:…" form is accepted for the issuer
    colons = ":".join(pki.ca_fp["C"][i:i + 2] for i in range(0, 64, 2)).upper()
    cfg = load_config(_write_run(pki, tmp_path, {"u2": colons}))
    assert {n: p.issuer for n, p in cfg.roster().items()} == {n: pki.ca_fp[o] for n, o in HONEST_CA.items()}
    net = network_for(cfg, "u2", _pw("u2"))  # an honest party under the third CA starts
    assert x509.load_pem_x509_certificate(net._trusted_roots("cs")).subject.rfc4514_string() == "CN=org A CA"
    net.close()
    cfg = load_config(_write_run(pki, tmp_path, {"u1": None}))
    with pytest.raises(ParameterError, match=r"missing for \['u1'\]"):
        network_for(cfg, "u2", _pw("u2"))
    with pytest.raises(ParameterError, match="issuer must be a SHA-256"):
        load_config(_write_run(pki, tmp_path, {"cs": "4c" * 31}))


def test_trial_config_names_its_one_ca(tmp_path: Path) -> None:
    plan = TrialPlan("revfrf", {"n_estimators": 1})
    plan.add("cs", role="cs")
    cfg = load_config(write_trial(tmp_path, plan))
    ca_fp = fingerprint((tmp_path / "pki" / "ca.pem").read_bytes())
    assert {p.issuer for p in cfg.parties.values()} == {ca_fp}
    pw = (tmp_path / "pki" / "cs.pass").read_bytes().strip()
    network_for(cfg, "cs", pw).close()
