"""What the server sees: uniform masked inputs and no planted input (specs/secagg.md, "What each party learns")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from securetrees.runtime import InProcessNetwork
from securetrees.secagg import FixedPointVectors, Stage, Z2k, simulate_secure_sum
from securetrees.secagg.messages import MaskedInput, MaskRequest
from securetrees.testing.canaries import assert_no_canaries

NAMES = [f"p{i}" for i in range(5)]

# Chi-square test of 256 byte values (255 degrees of freedom) at a false-alarm rate of
# 1e-6 per call; the critical value from the Wilson-Hilferty approximation (z = 4.753).
FALSE_ALARM_Z = 4.753


def chi_square_critical(df: int, z: float = FALSE_ALARM_Z) -> float:
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def byte_chi_square(values: np.ndarray) -> float:
    counts = np.bincount(values.view(np.uint8), minlength=256).astype(np.float64)
    expected = counts.sum() / 256
    return float(((counts - expected) ** 2 / expected).sum())


def masked_views(inputs: dict[str, np.ndarray], drops: dict[str, Stage]) -> list[np.ndarray]:
    net = InProcessNetwork()
    simulate_secure_sum(inputs, drops=drops, network=net)
    return [
        rec.payload.vector
        for rec in net.transcript.view("server")
        if isinstance(rec.payload, MaskedInput)
    ]


@pytest.mark.statistical
def test_masked_inputs_look_uniform() -> None:
    """Constant inputs, masked: every byte value equally frequent (chi-square, false alarm 1e-6)."""
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
