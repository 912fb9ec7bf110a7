"""Every refusal of the secure-aggregation protocol raises its one typed error (specs/secagg.md, "Threat model")."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import (
    DecodeError,
    InvalidCiphertext,
    ParameterError,
    ProtocolError,
    UnauthorizedSender,
    UnexpectedMessage,
)
from securetrees.runtime import codec
from securetrees.secagg import SecAggConfig, Stage, build_simulation, make_roster, simulate_secure_sum
from securetrees.secagg.keyagree import AgreementKey
from securetrees.secagg.messages import (
    Ack,
    AdvertiseRound,
    KeyEntry,
    MaskedInput,
    MaskRequest,
    RoundDirectory,
    RoundShares,
    SealedShare,
    SessionDirectory,
    SessionStart,
    SignedKey,
    UnmaskRequest,
)
from securetrees.secagg.simulation import Simulation
from securetrees.testing.secagg import ScriptedRound

NAMES = [f"p{i}" for i in range(5)]
LENGTH = 8


def started(drops: dict[str, Stage] | None = None, rounds: tuple[int, ...] = (1,)) -> Simulation:
    sim = build_simulation(NAMES, drops=drops)
    for r in rounds:
        for i, n in enumerate(NAMES):
            sim.clients[n].provide(r, np.full(LENGTH, i, dtype=np.uint64))
    sim.server.setup()
    return sim


def test_fewer_than_three_parties_is_refused() -> None:
    roster, _ = make_roster(["a", "b"])
    with pytest.raises(ParameterError, match="at least 3 parties"):
        SecAggConfig(roster)
    with pytest.raises(ParameterError, match="other's input"):
        simulate_secure_sum({"a": [1], "b": [2]})


def test_threshold_must_exceed_half() -> None:
    roster, _ = make_roster(NAMES)
    with pytest.raises(ParameterError, match="threshold"):
        SecAggConfig(roster, threshold=2)
    with pytest.raises(ParameterError, match="threshold"):
        SecAggConfig(roster, threshold=6)


@pytest.mark.parametrize("stage", [Stage.SETUP, Stage.SHARE_KEYS, Stage.MASKED_INPUT, Stage.UNMASK])
def test_fewer_survivors_than_t_is_refused(stage: Stage) -> None:
    inputs = {n: [1, 2] for n in NAMES}
    drops = {"p0": stage, "p1": stage}
    survived = simulate_secure_sum(inputs, threshold=3, drops=drops)
    assert len(survived.responders) == 3
    with pytest.raises(ProtocolError, match="at least t = 4"):
        simulate_secure_sum(inputs, threshold=4, drops=drops)


def run_to_consistency(sim: Simulation) -> ScriptedRound:
    script = ScriptedRound(sim.server, 1, LENGTH)
    script.advertise()
    script.share()
    script.mask()
    return script


def test_a_request_for_both_secrets_of_one_party_is_refused() -> None:
    sim = started({"p4": Stage.MASKED_INPUT})
    script = run_to_consistency(sim)
    survivors = tuple(sorted(script.masked))
    assert "p4" not in survivors
    signatures = tuple(script.consistency().values())
    both = UnmaskRequest(1, (*survivors, "p4"), ("p4",), signatures)
    with pytest.raises(ProtocolError, match=r"refusing to reveal both .*p4"):
        script.unmask(["p0"], both)


def test_a_survivor_passed_off_as_dropped_is_refused() -> None:
    sim = started()
    script = run_to_consistency(sim)
    survivors = tuple(sorted(script.masked))
    signatures = tuple(script.consistency().values())
    shifted = UnmaskRequest(1, survivors[1:], survivors[:1], signatures)
    with pytest.raises(ProtocolError, match="other than the one signed"):
        script.unmask(["p1"], shifted)


def test_inconsistent_survivor_sets_are_detected() -> None:
    """A server shows p0 a set without p3, the others the true set; the signatures give it away."""
    sim = started()
    script = run_to_consistency(sim)
    survivors = tuple(sorted(script.masked))
    fake = tuple(p for p in survivors if p != "p3")
    signed = script.consistency(shown={"p0": fake})
    request = UnmaskRequest(1, survivors, (), tuple(signed.values()))
    with pytest.raises(ProtocolError, match="inconsistent survivor sets: p0"):
        script.unmask(["p1"], request)
    # p0 itself refuses the true set too: it signed another one.
    with pytest.raises(ProtocolError, match="other than the one signed"):
        script.unmask(["p0"], request)


def test_too_few_consistency_signatures_are_refused() -> None:
    sim = started()
    script = run_to_consistency(sim)
    survivors = tuple(sorted(script.masked))
    signatures = tuple(script.consistency().values())[:2]
    with pytest.raises(ProtocolError, match="at least t"):
        script.unmask(["p1"], UnmaskRequest(1, survivors, (), signatures))


def test_a_second_unmask_request_is_refused() -> None:
    sim = started()
    script = run_to_consistency(sim)
    survivors = tuple(sorted(script.masked))
    request = UnmaskRequest(1, survivors, (), tuple(script.consistency().values()))
    script.unmask(["p1"], request)
    with pytest.raises(UnexpectedMessage):
        script.unmask(["p1"], request)


def test_tampered_share_ciphertext_is_rejected() -> None:
    sim = started()
    script = ScriptedRound(sim.server, 1, LENGTH)
    script.advertise()
    script.share()
    reply = script.shares["p0"]
    first = reply.shares[0]
    bad = dataclasses.replace(first, blob=first.blob[:-1] + bytes([first.blob[-1] ^ 0x80]))
    script.shares["p0"] = RoundShares(1, (bad, *reply.shares[1:]))
    with pytest.raises(InvalidCiphertext, match="failed authentication"):
        script.mask()


def test_replayed_share_ciphertext_is_rejected() -> None:
    sim = started(rounds=(1, 2))
    old = ScriptedRound(sim.server, 1, LENGTH)
    old.advertise()
    old.share()
    new = ScriptedRound(sim.server, 2, LENGTH)
    new.advertise()
    new.share()
    new.shares["p0"] = dataclasses.replace(old.shares["p0"], round=2)  # round-1 ciphertexts
    with pytest.raises(InvalidCiphertext, match="replayed"):
        new.mask()


def test_share_ciphertext_in_another_senders_name_is_rejected() -> None:
    sim = started()
    script = ScriptedRound(sim.server, 1, LENGTH)
    script.advertise()
    script.share()
    item = next(s for s in script.shares["p0"].shares if s.recipient == "p2")
    forged = SealedShare("p1", "p2", item.blob)
    inbox = (*(s for s in script.inbox("p2") if s.sender != "p1"), forged)
    u2 = tuple(sorted(script.shares))
    with pytest.raises(InvalidCiphertext):
        sim.server.call("p2", MaskRequest(1, u2, inbox), expect=MaskedInput)


def test_substituted_round_key_is_rejected() -> None:
    """The server shows p2 a round key of its own making for p0. p2 refuses in R3, before it sends
    anything that depends on its input: p0's share ciphertext binds p0's real round key."""
    sim = started()
    script = ScriptedRound(sim.server, 1, LENGTH)
    script.advertise()
    honest = script.entries()
    forged = AgreementKey.generate().public
    shown = tuple(dataclasses.replace(e, public=forged) if e.name == "p0" else e for e in honest)
    script.shares = {
        p: sim.server.call(p, RoundDirectory(1, shown if p == "p2" else honest), expect=RoundShares)
        for p in NAMES
    }
    u2 = tuple(sorted(script.shares))
    with pytest.raises(InvalidCiphertext, match="failed authentication"):
        sim.server.call("p2", MaskRequest(1, u2, script.inbox("p2")), expect=MaskedInput)
    # The parties shown the true directory accept the same ciphertexts.
    assert isinstance(sim.server.call("p1", MaskRequest(1, u2, script.inbox("p1")), expect=MaskedInput),
                      MaskedInput)


def test_a_directory_altering_a_partys_own_round_key_is_refused_at_once() -> None:
    sim = started()
    script = ScriptedRound(sim.server, 1, LENGTH)
    keys = script.advertise()
    keys["p0"] = dataclasses.replace(keys["p0"], public=keys["p1"].public)
    with pytest.raises(ProtocolError, match="own key"):
        sim.server.call("p0", RoundDirectory(1, script.entries()), expect=RoundShares)


def test_an_altered_own_entry_or_signature_is_still_checked() -> None:
    """A client skips verifying only what it sent itself, byte for byte; anything else in its name
    is verified like every other entry."""
    sim = build_simulation(NAMES)
    adverts = sim.server.call_many({p: SessionStart(bytes(range(32))) for p in NAMES}, expect=SignedKey)
    forged_sig = bytes(64)
    entries = tuple(
        KeyEntry(p, k.public, forged_sig if p == "p0" else k.signature) for p, k in sorted(adverts.items())
    )
    with pytest.raises(ProtocolError, match="invalid signature"):
        sim.server.call("p0", SessionDirectory(entries), expect=Ack)

    sim = started()
    script = run_to_consistency(sim)
    survivors = tuple(sorted(script.masked))
    signed = script.consistency()
    signed["p1"] = dataclasses.replace(signed["p1"], signature=forged_sig)
    request = UnmaskRequest(1, survivors, (), tuple(signed.values()))
    with pytest.raises(ProtocolError, match="inconsistent survivor sets: p1"):
        script.unmask(["p1"], request)


def test_out_of_order_and_foreign_requests_are_refused() -> None:
    sim = started()
    with pytest.raises(UnexpectedMessage, match="not waiting"):
        sim.server.call("p0", MaskRequest(1, tuple(NAMES), ()), expect=MaskedInput)
    with pytest.raises(UnauthorizedSender, match=r"'p1' \(client\) may not send"):
        sim.clients["p1"].call("p0", AdvertiseRound(1, LENGTH), expect=MaskedInput)
    with pytest.raises(ProtocolError, match="no input"):
        sim.server.aggregate(7, LENGTH)


def test_malformed_round_messages_are_refused() -> None:
    sim = started()
    script = ScriptedRound(sim.server, 1, LENGTH)
    script.advertise()
    script.share()
    u2 = tuple(sorted(script.shares))
    with pytest.raises(ProtocolError, match="duplicate"):
        sim.server.call("p0", MaskRequest(1, (*u2, "p1"), script.inbox("p0")), expect=MaskedInput)
    with pytest.raises(ProtocolError, match="do not match"):
        sim.server.call("p0", MaskRequest(1, u2, script.inbox("p0")[1:]), expect=MaskedInput)


def test_server_rejects_a_malformed_masked_vector() -> None:
    sim = started()
    for client in sim.clients.values():
        client.provide(2, np.zeros(LENGTH + 1, dtype=np.uint64))
    with pytest.raises(ProtocolError, match="sums vectors of"):
        sim.server.aggregate(2, LENGTH)
    wire = codec.encode(MaskedInput(1, np.zeros(3, dtype=np.int32)))
    received = codec.decode(wire)
    with pytest.raises(ProtocolError, match="uint64 vector"):
        sim.server.config.ring.from_wire(received.vector, 3)  # type: ignore[attr-defined]


VALID = [
    codec.encode(MaskedInput(3, np.arange(4, dtype=np.uint64))),
    codec.encode(UnmaskRequest(2, ("a", "b"), ("c",), ())),
]


@given(st.sampled_from(VALID), st.data())
def test_decoding_mutated_secagg_messages_raises_decode_error_or_yields_a_message(
    data: bytes, draw: st.DataObject
) -> None:
    pos = draw.draw(st.integers(0, len(data) - 1))
    mutated = data[:pos] + bytes([draw.draw(st.integers(0, 255))]) + data[pos + 1 :]
    cut = draw.draw(st.integers(0, len(mutated)))
    for blob in (mutated, mutated[:cut]):
        try:
            msg = codec.decode(blob)
        except DecodeError:
            continue
        assert type(msg).__name__ in {"MaskedInput", "UnmaskRequest"}
