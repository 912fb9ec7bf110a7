"""Rings, fixed-point bounds and the reusable pairwise masker (specs/secagg.md, "Masking API")."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import EncodingOverflowError, ParameterError, ProtocolError
from securetrees.secagg import ZN, FixedPointVectors, PairwiseMasker, Z2k
from securetrees.secagg.keyagree import AgreementKey

PRIME_127 = (1 << 127) - 1


def maskers(count: int) -> dict[str, PairwiseMasker]:
    names = [f"g{i}" for i in range(count)]
    keys = {n: AgreementKey.generate() for n in names}
    session = os.urandom(32)
    return {
        n: PairwiseMasker(n, keys[n], {p: keys[p].public for p in names if p != n}, session=session)
        for n in names
    }


MASKERS = maskers(5)


@given(
    st.integers(1, 64),
    st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=20),
    st.integers(1, 1 << 40),
)
def test_z2k_masks_cancel(bits: int, base: list[int], round_: int) -> None:
    ring = Z2k(bits)
    modulus = 1 << bits
    inputs = {n: [(v * (i + 1)) % modulus for v in base] for i, n in enumerate(MASKERS)}
    masked = [m.mask(inputs[n], ring=ring, round=round_, purpose="t") for n, m in MASKERS.items()]
    expected = [sum(col) % modulus for col in zip(*inputs.values(), strict=True)]
    assert ring.sum(masked, len(base)).tolist() == expected


@given(st.lists(st.integers(0, PRIME_127 - 1), min_size=1, max_size=8), st.integers(1, 99))
def test_zn_masks_cancel(base: list[int], round_: int) -> None:
    ring = ZN(PRIME_127)
    masked = [m.mask(base, ring=ring, round=round_, purpose="t") for m in MASKERS.values()]
    assert ring.sum(masked, len(base)) == [5 * v % PRIME_127 for v in base]


def test_masks_differ_per_round_purpose_and_ring() -> None:
    m = MASKERS["g0"]
    a = m.net_mask(8, ring=Z2k(), round=1, purpose="a")
    assert not (a == m.net_mask(8, ring=Z2k(), round=2, purpose="a")).any()
    assert not (a == m.net_mask(8, ring=Z2k(), round=1, purpose="b")).any()
    assert not (a % (1 << 32) == m.net_mask(8, ring=Z2k(32), round=1, purpose="a")).all()


def test_masked_vector_hides_input_and_subset_masks_cancel() -> None:
    ring = Z2k()
    chosen = ["g0", "g2", "g4"]
    x = np.full(16, 7, dtype=np.uint64)
    masked = {n: MASKERS[n].mask(x, ring=ring, round=5, purpose="s", peers=chosen) for n in chosen}
    assert not (masked["g0"] == x).any()
    assert (ring.sum(list(masked.values()), 16) == 21).all()


def test_paillier_style_net_masks_sum_to_zero_mod_n() -> None:
    """HybridTree line 20: masks added to ciphertexts as plaintext constants cancel mod N."""
    n = PRIME_127 * ((1 << 89) - 1)
    ring = ZN(n)
    nets = [m.net_mask(6, ring=ring, round=3, purpose="leaves") for m in MASKERS.values()]
    assert ring.sum(nets, 6) == [0] * 6
    values = [[11 * i + j for j in range(6)] for i in range(5)]
    # (v + m) summed mod N is the plain sum: what the host decrypts from the sum of ciphertexts.
    totals = [sum((v[j] + m[j]) for v, m in zip(values, nets, strict=True)) % n for j in range(6)]
    assert totals == [sum(v[j] for v in values) for j in range(6)]


def test_masker_refuses_two_parties() -> None:
    a, b = AgreementKey.generate(), AgreementKey.generate()
    with pytest.raises(ParameterError, match=r"at least 3 parties.*other.s input"):
        PairwiseMasker("a", a, {"b": b.public}, session=os.urandom(32))
    with pytest.raises(ParameterError, match="at least 3"):
        MASKERS["g0"].net_mask(4, ring=Z2k(), round=1, purpose="x", peers=["g1"])
    with pytest.raises(ParameterError, match="not a peer"):
        MASKERS["g0"].pair_key("zz", round=1, purpose="x")


# --- fixed point -------------------------------------------------------------------------


def test_fixed_point_sum_is_exact_at_the_bound_edges() -> None:
    codec = FixedPointVectors(bound=1000.0, parties=4, frac_bits=20)
    x = np.array([1000.0, -1000.0, 0.0, 2**-20, -(2**-20)])
    total = codec.ring.sum([codec.encode(x) for _ in range(4)], 5)
    assert codec.decode(total).tolist() == (4 * x).tolist()


@given(
    st.integers(3, 12),
    st.lists(st.floats(-50.0, 50.0, allow_nan=False), min_size=1, max_size=10),
)
def test_fixed_point_rounding_error_is_bounded(parties: int, xs: list[float]) -> None:
    codec = FixedPointVectors(bound=50.0, parties=parties, frac_bits=32)
    total = codec.ring.sum([codec.encode(xs) for _ in range(parties)], len(xs))
    err = np.abs(codec.decode(total) - parties * np.array(xs))
    assert (err <= parties * 2.0**-33 + 1e-9).all()


def test_fixed_point_refuses_overflow_prone_configurations() -> None:
    FixedPointVectors(bound=2.0**30 - 1, parties=2, frac_bits=1, bits=33)  # 2 * (2^31 - 2) < 2^32 fits
    with pytest.raises(ParameterError, match="could overflow"):
        FixedPointVectors(bound=2.0**30, parties=2, frac_bits=1, bits=33)
    with pytest.raises(ParameterError, match="could overflow"):
        FixedPointVectors(bound=1.0, parties=3, frac_bits=62)
    with pytest.raises(ParameterError):
        FixedPointVectors(bound=float("inf"), parties=3)
    codec = FixedPointVectors(bound=1.0, parties=3)
    with pytest.raises(EncodingOverflowError, match="declared bound"):
        codec.encode([1.0000001])
    with pytest.raises(ParameterError, match="NaN"):
        codec.encode([float("nan")])
    with pytest.raises(EncodingOverflowError, match="range"):
        codec.decode(np.array([1 << 62], dtype=np.uint64))


def test_ring_input_and_wire_validation() -> None:
    with pytest.raises(ParameterError):
        Z2k(65)
    with pytest.raises(ParameterError):
        Z2k(8).check(np.array([256]))
    with pytest.raises(ParameterError):
        Z2k().check(np.array([-1]))
    with pytest.raises(ParameterError):
        Z2k().check(np.array([0.5]))
    with pytest.raises(ParameterError):
        ZN(101).check([101])
    with pytest.raises(ProtocolError):
        Z2k().from_wire(np.zeros(3, np.int64), 3)
    with pytest.raises(ProtocolError):
        Z2k(8).from_wire(np.array([300], np.uint64), 1)
    ring = ZN(1000)
    wire = ring.to_wire([999, 0, 5])
    assert ring.from_wire(wire, 3) == [999, 0, 5]
    with pytest.raises(ProtocolError):
        ring.from_wire(np.full((1, 2), 255, np.uint8), 1)


def test_zn_masks_on_paillier_ciphertexts_cancel_in_the_decrypted_sum() -> None:
    """HybridTree lines 15 and 20: guests add Z_N masks to ciphertexts; the host decrypts only the sum."""
    from securetrees.testing.paillier import small_keypair

    pk, sk = small_keypair(512)
    ring = ZN(pk.n)
    leaves = {n: [3 * i + 1, 10**6 + i, -5 * i] for i, n in enumerate(MASKERS)}
    sent = []
    for name, masker in MASKERS.items():
        nets = masker.net_mask(3, ring=ring, round=9, purpose="hybridtree/leaves")
        cts = [pk.encrypt(v) + int(m) for v, m in zip(leaves[name], nets, strict=True)]
        sent.append([c.rerandomize() for c in cts])
        # A single guest's masked ciphertext decrypts to noise, not its value.
        assert sk.decrypt_residue(sent[-1][0]) != leaves[name][0]
    totals = [sk.decrypt(sum(col[1:], col[0])) for col in zip(*sent, strict=True)]
    assert totals == [sum(v[j] for v in leaves.values()) for j in range(3)]


def test_z2k_accepts_python_residues_across_2_to_the_63() -> None:
    """Regression (hypothesis): a list mixing residues below and above 2^63 was turned into
    float64 by numpy and refused; lists are now converted exactly."""
    values = [0, 1 << 63, (1 << 64) - 1, 5]
    assert Z2k(64).check(values).tolist() == values
    with pytest.raises(ParameterError):
        Z2k(64).check([1 << 64])
    with pytest.raises(ParameterError):
        Z2k(64).check([1.5])
