"""PSI over gRPC with mutual TLS: two processes end aligned; a refusal crosses as its typed error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("grpc")

from securetrees.errors import PointRefusedError, UnauthorizedSender
from securetrees.net import GrpcNetwork, Peer, TlsIdentity, TransportOptions, load_identity
from securetrees.net.tls import make_test_pki
from securetrees.psi import LEADER_ROLE, MEMBER_ROLE, PsiLeader, PsiMember
from securetrees.psi import messages as m
from securetrees.psi.net import run_two_process

NAMES = ["alice", "bob", "mallory"]
ORDER8 = bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800")  # an X25519 u of order 8


def test_two_processes_over_mutual_tls_end_aligned(tmp_path: Path) -> None:
    """Leader here, member in its own process; chunks of 16 points, so several messages each way."""
    leader_ids = [int(i) for i in range(0, 150)]
    member_ids = [int(i) for i in range(300, 99, -1)]  # 100..300, reversed
    run = run_two_process(leader_ids, member_ids, tmp_path, chunk_size=16)
    got_leader = [leader_ids[i] for i in run.leader.rows]
    got_member = [member_ids[i] for i in run.member_rows]
    assert got_leader == got_member
    assert sorted(got_leader) == list(range(100, 150))
    assert run.leader.peer_sizes == {"member": 201}
    assert run.bytes_received > (150 + 201) * 32  # every point crossed the network


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TlsIdentity]:
    d = tmp_path_factory.mktemp("psi-pki")
    pw = {n: f"pw-{n}".encode() for n in NAMES}
    paths = make_test_pki(NAMES, d, pw)
    return {n: load_identity(n, d / "ca.pem", *paths[n], pw[n]) for n in NAMES}


@pytest.fixture
def grpc_pair(pki: dict[str, TlsIdentity]) -> Iterator[tuple[dict[str, Peer], GrpcNetwork]]:
    roster = {"alice": Peer("127.0.0.1:0", role=LEADER_ROLE), "bob": Peer("127.0.0.1:0", role=MEMBER_ROLE),
              "mallory": Peer("127.0.0.1:0", role=MEMBER_ROLE)}
    nb = GrpcNetwork(pki["bob"], roster, options=TransportOptions(deadline=20.0, retries=0))
    yield roster, nb
    nb.close()


class TamperingLeader(PsiLeader):
    def _own_chunk(self, session: bytes, scalar: bytes, index: int) -> bytes:
        blob = super()._own_chunk(session, scalar, index)
        return ORDER8 + blob[32:] if index == 0 else blob


def test_a_refused_point_crosses_the_network_as_its_typed_error(
        pki: dict[str, TlsIdentity], grpc_pair: tuple[dict[str, Peer], GrpcNetwork]) -> None:
    roster, nb = grpc_pair
    bob = PsiMember("bob", nb, ["x", "y"])
    roster["bob"] = Peer(f"127.0.0.1:{nb.start()}", role=MEMBER_ROLE)
    with GrpcNetwork(pki["alice"], roster, options=TransportOptions(deadline=20.0, retries=0)) as na, \
            pytest.raises(PointRefusedError):
        TamperingLeader("alice", na, ["x"], ["bob"]).run()
    assert bob.result is None


def test_only_the_leader_role_may_drive_a_member(
        pki: dict[str, TlsIdentity], grpc_pair: tuple[dict[str, Peer], GrpcNetwork]) -> None:
    """Another member (a roster party of role psi_member) cannot start a run at bob."""
    roster, nb = grpc_pair
    PsiMember("bob", nb, ["x"])
    roster["bob"] = Peer(f"127.0.0.1:{nb.start()}", role=MEMBER_ROLE)
    with GrpcNetwork(pki["mallory"], roster, options=TransportOptions(deadline=20.0, retries=0)) as nm:
        mallory = PsiMember("mallory", nm, ["x"])
        with pytest.raises(UnauthorizedSender):
            mallory.call("bob", m.Hello(bytes(16), 1, 4), expect=m.HelloReply)
    assert len(nb.transcript.refusals) == 1 and not nb.transcript.view("bob")
