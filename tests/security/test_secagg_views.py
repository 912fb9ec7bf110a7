"""What the server sees: uniform masked inputs and no planted input (specs/secagg.md, "What each party learns")."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from securetrees.errors import ProtocolError
from securetrees.rand import DeterministicRandom
from securetrees.runtime import InProcessNetwork
from securetrees.secagg import FixedPointVectors, Stage, Z2k, build_simulation, roles, shamir, simulate_secure_sum
from securetrees.secagg.keyagree import AgreementKey, KeyContext, derive_key, derive_own_key
from securetrees.secagg.masker import mask_purpose
from securetrees.secagg.messages import (
    ConsistencyRequest,
    MaskedInput,
    MaskRequest,
    NamedShare,
    SurvivorSignature,
    UnmaskRequest,
    UnmaskShares,
)
from securetrees.secagg.prg import MaskExpander, MaskTerm
from securetrees.secagg.roles import SecAggClient
from securetrees.secagg.simulation import Simulation
from securetrees.testing.canaries import assert_no_canaries
from securetrees.testing.secagg import ScriptedRound

NAMES = [f"p{i}" for i in range(5)]
LENGTH = 8

# Chi-square test of 256 byte values (255 degrees of freedom) at a false-alarm rate of
# 1e-7 per vector (the test checks 5: below 1e-6 per run even with fresh masks, with a factor 2
# to spare for the chi-square approximation); the critical value from the Wilson-Hilferty
# approximation (z = 5.199, the one-sided normal 1e-7 quantile).  The masks come from a fixed
# DeterministicRandom, so the outcome is the same on every run.
FALSE_ALARM_Z = 5.199


def chi_square_critical(df: int, z: float = FALSE_ALARM_Z) -> float:
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def byte_chi_square(values: np.ndarray) -> float:
    counts = np.bincount(values.view(np.uint8), minlength=256).astype(np.float64)
    expected = counts.sum() / 256
    return float(((counts - expected) ** 2 / expected).sum())


def masked_views(inputs: dict[str, np.ndarray], drops: dict[str, Stage]) -> list[np.ndarray]:
    net = InProcessNetwork()
    simulate_secure_sum(inputs, drops=drops, network=net, rng=DeterministicRandom("secagg views/uniform"))
    return [
        rec.payload.vector
        for rec in net.transcript.view("server")
        if isinstance(rec.payload, MaskedInput)
    ]


@pytest.mark.statistical
def test_masked_inputs_look_uniform() -> None:
    """Constant inputs, masked: every byte value equally frequent (chi-square, false alarm 1e-7 per
    vector, 5e-7 per run)."""
    inputs = {n: np.full(4096, 0x0101010101010101 * (i + 1), dtype=np.uint64) for i, n in enumerate(NAMES)}
    views = masked_views(inputs, {"p4": Stage.CONSISTENCY})
    assert len(views) == 5
    critical = chi_square_critical(255)
    for vector in views:
        assert byte_chi_square(vector) < critical
    # The test has power: the unmasked constant inputs fail it by far.
    assert byte_chi_square(inputs["p0"]) > 100 * critical
    assert byte_chi_square(np.arange(4096, dtype=np.uint64)) > critical


def test_server_view_contains_no_canary_input() -> None:
    canary_int = 9_181_726_354_637
    canary_real = 731.0271849
    codec = FixedPointVectors(bound=1000.0, parties=5, frac_bits=32)
    ints = {n: np.array([canary_int, i, 7], dtype=np.uint64) for i, n in enumerate(NAMES)}
    reals = {n: codec.encode([canary_real, -canary_real, float(i)]) for i, n in enumerate(NAMES)}
    for inputs, ring in ((ints, Z2k()), (reals, codec.ring)):
        net = InProcessNetwork()
        result = simulate_secure_sum(inputs, ring=ring, drops={"p2": Stage.CONSISTENCY}, network=net)
        assert result.contributors == tuple(NAMES)
        for party in ["server", *NAMES]:
            assert_no_canaries(
                net.transcript.view(party), [canary_int, canary_real, -canary_real], frac_bits=(32,)
            )


def test_canary_scan_can_fail_on_an_unmasked_value() -> None:
    """Control: the same scan catches the canary when it is sent in the clear."""
    from securetrees.runtime import Party, handles

    class Leaky(Party):
        role = "client"

        @handles(MaskRequest)
        def take(self, sender: str, msg: MaskRequest) -> MaskedInput:
            return MaskedInput(msg.round, np.array([9_181_726_354_637], dtype=np.uint64))

    class Server(Party):
        role = "server"

    net = InProcessNetwork()
    Leaky("p0", net)
    Server("server", net).call("p0", MaskRequest(1, ("p0",), ()), expect=MaskedInput)
    with pytest.raises(AssertionError):
        assert_no_canaries(net.transcript.view("server"), [9_181_726_354_637])


# -- the self mask b_u: a server that reports a survivor as dropped learns nothing -----------------
#
# The attack the double mask defends against (specs/secagg.md, "Threat model"): the server receives
# every y_u in R3, then tells the others that the victim dropped before R3 and asks for shares of
# its mask key s_victim.  With s_victim it removes every pairwise mask from y_victim; what is left
# is x_victim + PRG(b_victim), uniform while the self mask is there, and x_victim if it is not.

VICTIM = "p0"
SECRET = 9_181_726_354_637  # the victim's input, a canary


def _reconstruct(sim: Simulation, shares: dict[str, bytes]) -> bytes:
    cfg = sim.server.config
    return shamir.reconstruct({cfg.point(p): shamir.share_from_bytes(b) for p, b in shares.items()}, cfg.threshold)


def _strip_masks(sim: Simulation, script: ScriptedRound, victim: str, y: np.ndarray, mask_key: bytes,
                 seed: bytes | None) -> np.ndarray:
    """``y`` minus the victim's pairwise masks (from its mask key) and, given ``seed``, its self mask."""
    ring, session = sim.server.config.ring, sim.server._session
    assert session is not None
    secret = AgreementKey.from_secret(mask_key)
    assert secret.public == script.keys[victim].public
    purpose = mask_purpose("secagg/input", ring)
    terms = [
        MaskTerm(derive_key(secret.agree(script.keys[v].public), KeyContext(session, 1, purpose, (v, victim))),
                 subtract=v > victim)  # the victim added +PRG(s) for every v > victim: undo it
        for v in sorted(script.keys) if v != victim
    ]
    if seed is not None:
        own = derive_own_key(seed, session=session, round=1, purpose=purpose, party=victim)
        terms.append(MaskTerm(own, subtract=True))
    return ring.finish(ring.accumulate(ring.from_wire(y, LENGTH), terms, MaskExpander()))


def recovered_by_a_lying_server(sim: Simulation, victim: str = VICTIM) -> np.ndarray:
    """What a malicious server computes for ``victim`` after claiming it dropped (R4-R5 replayed
    with ``victim`` left out of the survivor set): ``y_victim`` minus every pairwise mask."""
    script = ScriptedRound(sim.server, 1, LENGTH)
    script.advertise()
    script.share()
    masked = script.mask()
    assert victim in masked
    others = tuple(sorted(p for p in masked if p != victim))
    signed = sim.server.call_many({p: ConsistencyRequest(1, others) for p in others}, expect=SurvivorSignature)
    answers = script.unmask(others, UnmaskRequest(1, others, (victim,), tuple(signed[p] for p in others)))
    assert all(a.key_shares[0].owner == victim for a in answers.values())
    key = _reconstruct(sim, {p: a.key_shares[0].share for p, a in answers.items()})
    return _strip_masks(sim, script, victim, masked[victim].vector, key, None)


def recovered_by_asking_for_both_secrets(sim: Simulation, victim: str = VICTIM) -> np.ndarray:
    """A malicious server asks for the victim's seed b (as a survivor) and mask key s (as dropped) in
    one R5 request; with both it strips every mask.  Honest clients refuse (ProtocolError)."""
    script = ScriptedRound(sim.server, 1, LENGTH)
    script.advertise()
    script.share()
    masked = script.mask()
    survivors = tuple(sorted(masked))
    signatures = tuple(script.consistency().values())
    answers = script.unmask(survivors, UnmaskRequest(1, survivors, (victim,), signatures))
    seed = _reconstruct(sim, {p: next(s.share for s in a.seed_shares if s.owner == victim) for p, a in answers.items()})
    key = _reconstruct(sim, {p: next(s.share for s in a.key_shares if s.owner == victim) for p, a in answers.items()})
    return _strip_masks(sim, script, victim, masked[victim].vector, key, seed)


def check_self_mask_hides_the_input(recovered: np.ndarray, secret: np.ndarray) -> None:
    """The property: what the lying server recovers shares no entry with the victim's input
    (an entry matches by chance with probability 2^-64)."""
    same = int(np.count_nonzero(recovered == secret))
    assert same == 0, f"the server recovered {same} of {secret.size} input entries of the victim"


def _victim_simulation() -> tuple[Simulation, np.ndarray]:
    sim = build_simulation(NAMES)
    secret = np.array([SECRET + i for i in range(LENGTH)], dtype=np.uint64)
    for i, n in enumerate(NAMES):
        sim.clients[n].provide(1, secret if n == VICTIM else np.full(LENGTH, i, dtype=np.uint64))
    sim.server.setup()
    return sim, secret


def _lying_server_run() -> tuple[np.ndarray, np.ndarray]:
    sim, secret = _victim_simulation()
    return recovered_by_a_lying_server(sim), secret


def test_a_server_that_lies_about_a_dropout_cannot_unmask_the_victim() -> None:
    recovered, secret = _lying_server_run()
    check_self_mask_hides_the_input(recovered, secret)


def test_without_the_self_mask_the_lying_server_recovers_the_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: b_u dropped by every client and by the server (the sum stays right, so only
    this check notices).  The property check fails and the attack returns the input exactly."""
    own_keys: set[bytes] = set()
    real_own, real_accumulate = roles.derive_own_key, MaskExpander.accumulate

    def recording_own_key(*args: Any, **kwargs: Any) -> bytes:
        key = real_own(*args, **kwargs)
        own_keys.add(key)
        return key

    def without_self_masks(self: MaskExpander, acc: Any, masks: Any, *, plus: Any = ()) -> None:
        real_accumulate(self, acc, [t for t in masks if t.key not in own_keys], plus=plus)

    monkeypatch.setattr(roles, "derive_own_key", recording_own_key)
    monkeypatch.setattr(MaskExpander, "accumulate", without_self_masks)
    inputs = {n: np.full(LENGTH, i + 1, dtype=np.uint64) for i, n in enumerate(NAMES)}
    summed = simulate_secure_sum(inputs, drops={"p4": Stage.MASKED_INPUT})
    np.testing.assert_array_equal(summed.total, np.full(LENGTH, 1 + 2 + 3 + 4, dtype=np.uint64))
    recovered, secret = _lying_server_run()
    np.testing.assert_array_equal(recovered, secret)
    with pytest.raises(AssertionError, match="recovered 8 of 8"):
        check_self_mask_hides_the_input(recovered, secret)


def test_clients_refuse_to_reveal_both_secrets_of_one_party() -> None:
    with pytest.raises(ProtocolError, match="refusing to reveal both"):
        recovered_by_asking_for_both_secrets(_victim_simulation()[0])


def test_clients_that_reveal_both_secrets_expose_the_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: clients answer a request for both secrets of one party (the refusal removed:
    they drop the party from the dropped set to pass their checks, then add its key share)."""
    real = SecAggClient.on_unmask

    def leaky(self: SecAggClient, sender: str, msg: UnmaskRequest) -> UnmaskShares:
        both = sorted(set(msg.survivors) & set(msg.dropped))
        held = self._rounds[msg.round].held
        extra = tuple(NamedShare(v, shamir.share_to_bytes(held[v][0])) for v in both)
        reply = real(self, sender, dataclasses.replace(msg, dropped=tuple(d for d in msg.dropped if d not in both)))
        return dataclasses.replace(reply, key_shares=reply.key_shares + extra)

    monkeypatch.setattr(SecAggClient, "on_unmask", leaky)
    sim, secret = _victim_simulation()
    np.testing.assert_array_equal(recovered_by_asking_for_both_secrets(sim), secret)
