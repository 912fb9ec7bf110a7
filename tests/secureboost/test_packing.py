"""The packing layout: round trips of sums of packed (1, g, h), slot packing of ciphertexts, and
every rejection."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees.errors import EncodingOverflowError, ParameterError
from securetrees.paillier import Ciphertext, encrypt_many
from securetrees.protocols.secureboost import PackingLayout, pack_ciphertexts, quantize
from securetrees.testing.paillier import small_keypair

F = 16


def _layout(n: int, g_bound: int = 2, h_bound: int = 1, capacity: int = 1023) -> PackingLayout:
    return PackingLayout(F, g_bound, h_bound, n, capacity)


@st.composite
def instances(draw: st.DrawFn) -> tuple[PackingLayout, np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 40))
    g_bound = draw(st.sampled_from([1, 2, 4, 64]))
    lim = g_bound << F
    g = np.array(draw(st.lists(st.integers(-lim, lim), min_size=n, max_size=n)), dtype=np.int64)
    h = np.array(draw(st.lists(st.integers(0, 1 << F), min_size=n, max_size=n)), dtype=np.int64)
    return _layout(n, g_bound), g, h


@given(instances(), st.data())
def test_sum_of_packed_plaintexts_unpacks_to_the_sums(case: tuple[PackingLayout, np.ndarray, np.ndarray],
                                                      data: st.DataObject) -> None:
    layout, g, h = case
    subset = np.array(data.draw(st.lists(st.booleans(), min_size=g.size, max_size=g.size)), dtype=bool)
    total = sum(v for v, keep in zip(layout.encode(g, h), subset, strict=True) if keep)
    assert layout.unpack_slot(total) == (int(subset.sum()), int(g[subset].sum()), int(h[subset].sum()))


@settings(max_examples=15, deadline=None)
@given(instances(), st.integers(1, 30))
def test_packed_ciphertexts_decrypt_to_every_bucket(case: tuple[PackingLayout, np.ndarray, np.ndarray],
                                                    n_buckets: int) -> None:
    """Buckets (sums of instances) packed k per ciphertext by scalar shifts decrypt to each sum."""
    pk, sk = small_keypair(1024)
    layout, g, h = case
    layout = PackingLayout(F, layout.g_bound, 1, g.size, pk.n.bit_length() - 1)
    plain = layout.encode(g, h)
    cts = encrypt_many(pk, plain)
    buckets = [[i for i in range(g.size) if i % n_buckets == b] for b in range(n_buckets)]
    sums = []
    for members in buckets:
        acc = Ciphertext(pk, 1)
        for i in members:
            acc = acc + cts[i]
        sums.append(acc)
    packed = pack_ciphertexts(sums, layout)
    assert len(packed) == -(-n_buckets // layout.slots_per_ciphertext)
    out = layout.unpack([sk.decrypt_residue(c) for c in packed], n_buckets)
    for b, members in enumerate(buckets):
        assert out[b].tolist() == [len(members), int(g[members].sum()), int(h[members].sum())]


def test_headroom_widths_follow_the_rule() -> None:
    layout = PackingLayout(24, 1, 1, 1000, 1023)
    assert (layout.w_n, layout.w_g, layout.w_h) == (10, 24 + 1 + 1 + 10, 24 + 1 + 10)
    assert layout.slots_per_ciphertext == 1023 // layout.width


def test_quantize_rounds_to_the_grid() -> None:
    assert quantize(np.array([0.5, -0.25, 1.0]), 4).tolist() == [8, -4, 16]


@pytest.mark.parametrize(("g", "h"), [([(2 << F) + 1], [0]), ([-(2 << F) - 1], [0]), ([0], [-1]),
                                      ([0], [(1 << F) + 1])])
def test_values_beyond_the_declared_bounds_are_refused(g: list[int], h: list[int]) -> None:
    with pytest.raises(EncodingOverflowError):
        _layout(4).encode(np.array(g, dtype=np.int64), np.array(h, dtype=np.int64))


def test_non_finite_gradients_are_refused() -> None:
    with pytest.raises(EncodingOverflowError):
        quantize(np.array([np.nan]), 8)


@pytest.mark.parametrize("kw", [{"frac_bits": -1}, {"frac_bits": 41}, {"g_bound": 0}, {"h_bound": 0},
                                {"n_instances": 0}, {"capacity": 40}])
def test_bad_layouts_are_refused(kw: dict[str, int]) -> None:
    args = {"frac_bits": F, "g_bound": 1, "h_bound": 1, "n_instances": 10, "capacity": 1023} | kw
    with pytest.raises(ParameterError):
        PackingLayout(**args)


def test_unpack_rejects_a_wrong_count_and_stray_bits() -> None:
    layout = _layout(4)
    with pytest.raises(ParameterError):
        layout.unpack([0, 0], 1)
    with pytest.raises(EncodingOverflowError):
        layout.unpack([1 << layout.width], 1)
    with pytest.raises(EncodingOverflowError):
        layout.unpack_slot(-1)
    with pytest.raises(ParameterError):
        layout.encode(np.zeros(5, dtype=np.int64), np.zeros(5, dtype=np.int64))


def test_the_spec_example_layout() -> None:
    """specs/secureboost.md: Adult (n = 32 561), f = 24, logistic: W = 96, k = 10 / 21."""
    small, large = PackingLayout(24, 1, 1, 32561, 1023), PackingLayout(24, 1, 1, 32561, 2047)
    assert (small.w_n, small.w_g, small.w_h, small.width) == (15, 41, 40, 96)
    assert (small.slots_per_ciphertext, large.slots_per_ciphertext) == (10, 21)


@settings(max_examples=50, deadline=None)
@given(instances(), st.data())
def test_unpack_reads_every_slot_as_unpack_slot(case: tuple[PackingLayout, np.ndarray, np.ndarray],
                                                data: st.DataObject) -> None:
    """The batch reading of packed residues agrees with the one-slot reading, slot by slot."""
    layout, g, h = case
    plain = layout.encode(g, h)
    k = layout.slots_per_ciphertext
    n_buckets = data.draw(st.integers(1, 3 * k))
    slots = [sum(plain[i] for i in data.draw(st.sets(st.integers(0, len(plain) - 1))))  # a bucket's sum
             for _ in range(n_buckets)]
    residues = [sum(s << (j * layout.width) for j, s in enumerate(slots[c:c + k])) for c in range(0, n_buckets, k)]
    assert layout.unpack(residues, n_buckets).tolist() == [list(layout.unpack_slot(s)) for s in slots]
