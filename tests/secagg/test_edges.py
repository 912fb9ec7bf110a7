"""Boundaries of secure aggregation that mutation testing found unguarded (specs/testing.md):
round reuse, vector-length limits, the fixed-point codec's parameter edges and its signed
reading below 64 bits, and the Z_N ring's input and wire checks."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.errors import EncodingOverflowError, ParameterError, ProtocolError
from securetrees.secagg import FixedPointVectors, build_simulation, prg, simulate_secure_sum
from securetrees.secagg.rings import ZN
from securetrees.secagg.roles import MAX_LENGTH

NAMES = ["a", "b", "c", "d"]


def test_a_round_number_is_used_once_and_must_be_positive() -> None:
    sim = build_simulation(NAMES)
    for r in (1, 2):
        for i, n in enumerate(NAMES):
            sim.clients[n].provide(r, np.full(3, i, dtype=np.uint64))
    sim.server.setup()
    assert list(sim.server.aggregate(1, 3).total) == [6, 6, 6]
    with pytest.raises(ParameterError, match="already used"):
        sim.server.aggregate(1, 3)
    with pytest.raises(ParameterError, match="invalid"):
        sim.server.aggregate(0, 3)
    with pytest.raises(ParameterError, match="vector length"):
        sim.server.aggregate(2, 0)
    with pytest.raises(ParameterError, match="vector length"):
        sim.server.aggregate(2, MAX_LENGTH + 1)
    # MAX_LENGTH itself passes the server's check; the clients then refuse the length mismatch
    with pytest.raises(ProtocolError):
        sim.server.aggregate(2, MAX_LENGTH)


def test_length_one_vectors_sum() -> None:
    assert list(simulate_secure_sum({n: [i] for i, n in enumerate(NAMES)}).total) == [6]


def test_fixed_point_parameter_edges() -> None:
    for bad in (dict(bound=0.0, parties=3), dict(bound=1.0, parties=0), dict(bound=1.0, parties=3, frac_bits=63),
                dict(bound=1.0, parties=3, frac_bits=-1)):
        with pytest.raises(ParameterError):
            FixedPointVectors(**bad)  # type: ignore[arg-type]
    assert FixedPointVectors(1.0, 1).parties == 1
    assert FixedPointVectors(1000.0, 3, frac_bits=0).frac_bits == 0
    # the overflow guard is exact: parties · round(bound · 2^f) < 2^(bits-1)
    FixedPointVectors(2.0**31 - 1, 1, frac_bits=0, bits=32)
    with pytest.raises(ParameterError, match="overflow"):
        FixedPointVectors(2.0**31, 1, frac_bits=0, bits=32)


def test_fixed_point_bound_is_inclusive_and_tight() -> None:
    codec = FixedPointVectors(100.0, 3, frac_bits=16)
    codec.encode([100.0, -100.0])
    with pytest.raises(EncodingOverflowError):
        codec.encode([100.0 + 2.0**-16])


@pytest.mark.parametrize("bits", [32, 48, 64])
def test_fixed_point_sums_below_64_bits_read_signed(bits: int) -> None:
    codec = FixedPointVectors(100.0, 3, frac_bits=16, bits=bits)
    inputs = {"a": codec.encode([-1.5, 99.25, -100.0]), "b": codec.encode([0.25, -0.5, -100.0]),
              "c": codec.encode([-0.75, 1.0, -100.0])}
    total = simulate_secure_sum(inputs, ring=codec.ring).total
    np.testing.assert_array_equal(codec.decode(total), [-2.0, 99.75, -300.0])
    # a residue beyond parties · bound is refused, also at the signed edge of the ring
    with pytest.raises(EncodingOverflowError):
        codec.decode(np.array([(1 << (bits - 1)) % (1 << 64)], dtype=np.uint64))


def test_zn_inputs_and_wire_values_are_checked() -> None:
    ring = ZN(1009)
    with pytest.raises(ParameterError, match="integers"):
        ring.check([1.5])
    with pytest.raises(ParameterError, match="integers"):
        ring.check([True])
    with pytest.raises(ParameterError, match="outside"):
        ring.check([1009])
    assert ring.check([0, 1008]) == [0, 1008]
    wire = ring.to_wire([1008, 0])
    assert ring.from_wire(wire, 2) == [1008, 0]
    at_n = np.frombuffer((1009).to_bytes(2, "little") * 2, dtype=np.uint8).reshape(2, 2)
    with pytest.raises(ProtocolError, match="outside"):
        ring.from_wire(at_n, 2)
    for bad in (wire.astype(np.uint16), wire.reshape(1, 4), wire.tolist()):
        with pytest.raises(ProtocolError, match="uint8 array"):
            ring.from_wire(bad, 2)  # type: ignore[arg-type]


def test_an_empty_keystream_is_allowed() -> None:
    assert prg.keystream_bytes(bytes(32), 0) == b""
    with pytest.raises(ParameterError):
        prg.keystream_bytes(bytes(32), -1)
