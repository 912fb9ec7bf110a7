"""Edges of the secure-aggregation roles, the pairwise masker and the simulation that mutation
testing found unguarded (specs/testing.md, "Mutation runs"): the signed statements' layout,
the roster copy and Shamir points, input replacement, sticky dropouts, requests before the
session directory, duplicate or unrequested unmask shares, the 32-byte session id, a
reproducible simulation under a seeded source, and purpose separation and repr of the masker."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
import pytest

from securetrees.errors import ParameterError, ProtocolError, UnexpectedMessage
from securetrees.rand import DeterministicRandom
from securetrees.runtime import InProcessNetwork
from securetrees.secagg import (
    PairwiseMasker,
    SecAggConfig,
    Stage,
    Z2k,
    build_simulation,
    make_roster,
    simulate_secure_sum,
)
from securetrees.secagg.keyagree import AgreementKey
from securetrees.secagg.messages import (
    AdvertiseRound,
    NamedShare,
    RoundKey,
    SessionStart,
    SignedKey,
    UnmaskRequest,
    UnmaskShares,
)
from securetrees.secagg.roles import SecAggClient, _statement
from securetrees.secagg.simulation import Simulation

NAMES = [f"p{i}" for i in range(5)]
LENGTH = 4


def _field(tag: bytes, raw: bytes) -> bytes:
    return tag + len(raw).to_bytes(4, "big") + raw


def started(drops: dict[str, Stage] | None = None, rounds: tuple[int, ...] = (1,)) -> Simulation:
    sim = build_simulation(NAMES, drops=drops)
    for r in rounds:
        for i, n in enumerate(NAMES):
            sim.clients[n].provide(r, np.full(LENGTH, i, dtype=np.uint64))
    sim.server.setup()
    return sim


# --- configuration and client state -------------------------------------------------------


def test_signed_statement_known_answer() -> None:
    assert _statement("survivors", b"s" * 16, 1, "p0") == b"".join([
        _field(b"b", b"securetrees/secagg/sig"), _field(b"s", b"survivors"), _field(b"b", b"s" * 16),
        _field(b"i", b"\x01"), _field(b"s", b"p0"),
    ])


def test_config_keeps_its_own_copy_of_the_roster_and_numbers_points_from_one() -> None:
    roster, _ = make_roster(NAMES)
    config = SecAggConfig(roster)
    roster.pop("p0")
    assert sorted(config.roster) == NAMES
    assert [config.point(n) for n in NAMES] == [1, 2, 3, 4, 5]


def test_an_input_cannot_be_replaced_or_reused() -> None:
    sim = started()
    client = sim.clients["p0"]
    with pytest.raises(ParameterError, match="already set"):
        client.provide(1, [9] * LENGTH)
    sim.server.aggregate(1, LENGTH)
    with pytest.raises(ParameterError, match="already set"):
        client.provide(1, [9] * LENGTH)


def test_a_dropped_client_stays_dropped_in_later_rounds() -> None:
    sim = started(drops={"p4": Stage.MASKED_INPUT}, rounds=(1, 2))
    first = sim.server.aggregate(1, LENGTH)
    assert first.dropped == ("p4",) and list(first.total) == [6] * LENGTH
    second = sim.server.aggregate(2, LENGTH)  # p4 no longer answers even the advertisement
    assert second.dropped == () and "p4" not in second.contributors
    assert list(second.total) == [6] * LENGTH


def test_a_round_before_the_session_directory_is_refused() -> None:
    sim = build_simulation(NAMES)
    sim.clients["p0"].provide(1, [1] * LENGTH)
    sim.server.call("p0", SessionStart(b"x" * 32), expect=SignedKey)
    with pytest.raises(UnexpectedMessage, match="not set up"):
        sim.server.call("p0", AdvertiseRound(1, LENGTH), expect=RoundKey)


def test_a_simulation_may_drop_everyone_and_then_lacks_a_quorum() -> None:
    sim = build_simulation(NAMES, drops={n: Stage.SETUP for n in NAMES})
    with pytest.raises(ProtocolError, match="at least t"):
        sim.server.setup()
    # the failed setup leaves no members: a round is refused with the same typed error
    with pytest.raises(ProtocolError, match="at least t"):
        sim.server.aggregate(1, LENGTH)
    with pytest.raises(ProtocolError, match="already set up"):
        sim.server.setup()


# --- the server's unmasking ---------------------------------------------------------------


@pytest.mark.parametrize("extra", ["duplicate", "unrequested"])
def test_a_duplicate_or_unrequested_unmask_share_is_refused(
    monkeypatch: pytest.MonkeyPatch, extra: str
) -> None:
    real = SecAggClient.on_unmask

    def padded(self: SecAggClient, sender: str, msg: UnmaskRequest) -> UnmaskShares:
        reply = real(self, sender, msg)
        if self.name != "p1":
            return reply
        first = reply.seed_shares[0]
        added = first if extra == "duplicate" else NamedShare("nobody", first.share)
        return dataclasses.replace(reply, seed_shares=(*reply.seed_shares, added))

    monkeypatch.setattr(SecAggClient, "on_unmask", padded)
    sim = started()
    with pytest.raises(ProtocolError, match="p1 revealed an unrequested or duplicate share"):
        sim.server.aggregate(1, LENGTH)


# --- the simulation ------------------------------------------------------------------------


def _seeded_run() -> tuple[list[bytes], Any]:
    net = InProcessNetwork()
    inputs = {n: [i, 2 * i] for i, n in enumerate(NAMES)}
    result = simulate_secure_sum(inputs, network=net, rng=DeterministicRandom("secagg-edges"))
    return [r.data or b"" for r in net.transcript], result


def test_a_seeded_simulation_is_reproducible_and_uses_a_32_byte_session() -> None:
    """Every draw (roster keys, session id, round keys, seeds, Shamir coefficients, nonces)
    comes from the given source, so the same seed gives the same bytes on the wire."""
    first, result = _seeded_run()
    second, _ = _seeded_run()
    assert first == second
    assert list(result.total) == [10, 20]
    net = InProcessNetwork()
    simulate_secure_sum({n: [1] for n in NAMES}, network=net)
    starts = [r.payload for r in net.transcript if isinstance(r.payload, SessionStart)]
    assert len(starts) == len(NAMES) and all(len(s.session) == 32 for s in starts)


# --- the pairwise masker --------------------------------------------------------------------


def _maskers(cls: type[PairwiseMasker] = PairwiseMasker) -> dict[str, PairwiseMasker]:
    names = ["g0", "g1", "g2"]
    keys = {n: AgreementKey.generate() for n in names}
    session = os.urandom(32)
    return {n: cls(n, keys[n], {p: keys[p].public for p in names if p != n}, session=session)
            for n in names}


def check_purposes_get_distinct_masks(masker: PairwiseMasker) -> None:
    """Masks of two purposes in one round share no word (false alarm: 8 · 2^-64 per call)."""
    zero = np.zeros(8, np.uint64)
    a = masker.mask(zero, ring=Z2k(), round=1, purpose="a")
    b = masker.mask(zero, ring=Z2k(), round=1, purpose="b")
    assert not (a == b).any(), "two purposes share a mask"


def test_mask_binds_the_purpose() -> None:
    check_purposes_get_distinct_masks(_maskers()["g0"])


def test_a_mask_ignoring_the_purpose_is_caught() -> None:
    """Planted leak: a masker that derives every purpose's mask under one label."""

    class OnePurpose(PairwiseMasker):
        def mask(self, values: Any, *, ring: Any, round: int, purpose: str, peers: Any = None) -> Any:
            return super().mask(values, ring=ring, round=round, purpose="fixed", peers=peers)

    with pytest.raises(AssertionError, match="share a mask"):
        check_purposes_get_distinct_masks(_maskers(OnePurpose)["g0"])


def check_repr_hides_the_pair_secrets(masker: PairwiseMasker) -> None:
    text = repr(masker)
    for secret in masker._shared.values():
        assert secret.hex() not in text and repr(secret) not in text, "a pair secret is printed"


def test_masker_repr_names_the_parties_only() -> None:
    masker = _maskers()["g1"]
    assert repr(masker) == "PairwiseMasker(me='g1', peers=['g0', 'g2'])"
    check_repr_hides_the_pair_secrets(masker)


def test_a_masker_repr_printing_its_pair_secrets_is_caught() -> None:
    """Planted leak: a repr that shows the agreed secrets."""

    class Leaky(PairwiseMasker):
        def __repr__(self) -> str:
            return f"PairwiseMasker(me={self.me!r}, shared={self._shared!r})"

    with pytest.raises(AssertionError, match="is printed"):
        check_repr_hides_the_pair_secrets(_maskers(Leaky)["g1"])
