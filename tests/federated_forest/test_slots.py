"""Slot packing: sums of weighted units never carry between slots, and decode is exact."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from securetrees.paillier.batch import encrypt_many
from securetrees.protocols.federated_forest.slots import classification_units, regression_units


@given(st.lists(st.integers(0, 4), min_size=1, max_size=40), st.data())
def test_classification_sums_stay_in_their_slots(codes: list[int], data: st.DataObject) -> None:
    n = len(codes)
    layout, units = classification_units(np.asarray(codes, dtype=np.int64), 5)
    weights = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    total = sum(w * u for w, u in zip(weights, units, strict=True))
    if sum(weights) > n:  # the protocol's bound: bootstrap weights sum to n
        return
    counts = layout.decode(layout.unpack(total, 1))[0]
    want = np.bincount(codes, weights=weights, minlength=5)
    assert np.array_equal(counts, want)


@given(st.lists(st.integers(-4000, 4000), min_size=1, max_size=30), st.data())
def test_regression_bins_decode_exactly(ys: list[int], data: st.DataObject) -> None:
    y = np.asarray(ys, dtype=np.float64) / 16  # dyadic: exact at frac_bits >= 4
    layout, units = regression_units(y, 8)
    n = y.size
    bins = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    packed = sum(u << (b * layout.bin_bits) for u, b in zip(units, bins, strict=True))
    stats = layout.decode(layout.unpack(packed, 3))
    for b in range(3):
        sel = np.asarray(bins) == b
        assert stats[b, 0] == sel.sum()
        assert stats[b, 1] == y[sel].sum()
        assert stats[b, 2] == (y[sel] ** 2).sum()


def test_known_answer_layout() -> None:
    layout, units = classification_units(np.array([0, 1, 1, 2]), 3)
    assert layout.slot_bits == 8
    assert units == [1, 1 << 8, 1 << 8, 1 << 16]
    layout, units = regression_units(np.array([0.5, -1.0]), 4)
    assert (layout.bias, layout.slot_bits) == (16, 16)
    assert units[0] == 1 | (8 + 16) << 16 | 64 << 32


@given(st.lists(st.integers(0, 3), min_size=1, max_size=25), st.integers(1, 12))
def test_encrypted_bins_pack_and_unpack(codes: list[int], n_bins: int) -> None:
    """Client side (bin sums, Horner packing, re-randomisation) then label-holder side
    (decryption, unpacking) give the plaintext per-bin class counts."""
    from securetrees.paillier import Ciphertext
    from securetrees.protocols.federated_forest.encrypted_stats import (
        CryptoCounters,
        bin_sums,
        candidate_histograms,
        pack_bins,
    )
    from securetrees.rand import DeterministicRandom
    from securetrees.testing.paillier import small_keypair

    pk, sk = small_keypair(256)
    rng = DeterministicRandom("ff-pack")
    layout, units = classification_units(np.asarray(codes, dtype=np.int64), 4)
    cts: list[Ciphertext | None] = list(encrypt_many(pk, units, rng=rng))
    n = len(codes)
    bins = np.arange(n, dtype=np.int64) % (n_bins + 1)
    counters = CryptoCounters()
    per = layout.bins_per_plaintext(pk.bits)
    sums = bin_sums(cts, [np.arange(n, dtype=np.int64)], [bins[:, None]], [[n_bins]], counters)
    [packed] = pack_bins(sums, per, layout, pk, counters, mode="djn", rng=rng)
    assert len(packed) == -(-(n_bins + 1) // per) == counters.rerandomizations
    plain = [sk.decrypt_residue(Ciphertext(pk, v)) for v in packed]
    positions, hist, table = candidate_histograms(plain, layout, np.array([0]), np.array([n_bins]),
                                                  np.array([len(packed)]), per, max_bins=16)
    want = np.zeros((17, 4))
    for c, b in zip(codes, bins.tolist(), strict=True):
        want[b if b < n_bins else 16, c] += 1
    assert positions.tolist() == [0] and table.tolist() == [[0]]
    assert np.array_equal(hist[0, 0], want)
    assert counters.additions == n - int(np.count_nonzero(np.bincount(bins)))
