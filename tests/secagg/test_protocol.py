"""The dropout-tolerant protocol end to end (specs/secagg.md, "Setup" and "Round")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees.errors import ProtocolError
from securetrees.runtime import InProcessNetwork
from securetrees.secagg import (
    ZN,
    FixedPointVectors,
    Stage,
    Z2k,
    build_simulation,
    simulate_secure_sum,
)

PRIME_127 = (1 << 127) - 1


def random_inputs(names: list[str], length: int, seed: int, bits: int = 64) -> dict[str, np.ndarray]:
    gen = np.random.default_rng(seed)  # test data only, never a mask
    return {n: gen.integers(0, 1 << bits, size=length, dtype=np.uint64) for n in names}


def test_sum_is_exact_without_dropouts() -> None:
    names = [f"p{i}" for i in range(5)]
    inputs = random_inputs(names, 257, seed=1)
    result = simulate_secure_sum(inputs)
    assert result.contributors == tuple(names) and result.dropped == ()
    assert (result.total == sum(inputs.values())).all()


STAGES = st.one_of(st.none(), st.sampled_from(list(Stage)))


@settings(max_examples=40)
@given(st.integers(3, 7).flatmap(lambda n: st.lists(STAGES, min_size=n, max_size=n)), st.data())
def test_sum_is_exact_for_any_dropout_pattern(drops: list[Stage | None], data: st.DataObject) -> None:
    """R1-R5 with every party possibly dropping at any stage: exact, or refused below quorum."""
    n = len(drops)
    names = [f"p{i}" for i in range(n)]
    t = data.draw(st.integers(n // 2 + 1, n))
    bits = data.draw(st.sampled_from([8, 32, 64]))
    inputs = random_inputs(names, 11, seed=n, bits=bits)
    plan = {name: stage for name, stage in zip(names, drops, strict=True) if stage is not None}

    def alive(stage: Stage) -> list[str]:
        return [p for p in names if p not in plan or plan[p] > stage]

    if len(alive(Stage.UNMASK)) < max(t, 3):
        with pytest.raises(ProtocolError, match="at least t"):
            simulate_secure_sum(inputs, ring=Z2k(bits), threshold=t, drops=plan)
        return
    result = simulate_secure_sum(inputs, ring=Z2k(bits), threshold=t, drops=plan)
    contributors = alive(Stage.MASKED_INPUT)
    assert list(result.contributors) == contributors
    assert set(result.dropped) == set(alive(Stage.SHARE_KEYS)) - set(contributors)
    expected = sum(inputs[p] for p in contributors) % np.uint64(1 << bits) if bits < 64 else sum(
        inputs[p] for p in contributors
    )
    assert (result.total == expected).all()


def test_fixed_point_inputs_through_the_protocol_at_the_bounds() -> None:
    names = [f"p{i}" for i in range(4)]
    codec = FixedPointVectors(bound=10.0, parties=4, frac_bits=24)
    xs = {n: np.array([10.0, -10.0, 0.125 * i, -3.5]) for i, n in enumerate(names)}
    result = simulate_secure_sum(
        {n: codec.encode(x) for n, x in xs.items()}, ring=codec.ring, drops={"p3": Stage.MASKED_INPUT}
    )
    assert codec.decode(result.total).tolist() == [30.0, -30.0, 0.375, -10.5]


def test_mod_n_inputs_through_the_protocol() -> None:
    names = [f"p{i}" for i in range(5)]
    inputs = {n: [PRIME_127 - 1 - i, i, 12345] for i, n in enumerate(names)}
    result = simulate_secure_sum(
        inputs, ring=ZN(PRIME_127), drops={"p0": Stage.MASKED_INPUT, "p4": Stage.UNMASK}
    )
    assert result.contributors == ("p1", "p2", "p3", "p4")
    assert result.total == [sum(inputs[p][j] for p in result.contributors) % PRIME_127 for j in range(3)]


def test_several_rounds_in_one_session_with_a_network_level_dropout() -> None:
    names = [f"p{i}" for i in range(6)]
    net = InProcessNetwork()
    sim = build_simulation(names, network=net)
    sim.server.setup()
    for rnd in (1, 2, 3):
        for i, n in enumerate(names):
            sim.clients[n].provide(rnd, np.full(4, 10 * rnd + i, dtype=np.uint64))
    first = sim.server.aggregate(1, 4)
    assert (first.total == sum(10 + i for i in range(6))).all()
    net.disconnect("p2")  # gone from round 2 on
    second = sim.server.aggregate(2, 4)
    assert "p2" not in second.contributors
    assert (second.total == sum(20 + i for i in range(6) if i != 2)).all()
    net.reconnect("p2")  # per-round keys: a party may come back
    third = sim.server.aggregate(3, 4)
    assert (third.total == sum(30 + i for i in range(6))).all()
