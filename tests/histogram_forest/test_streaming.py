"""Algorithms 2-3: bin construction and merging (spec "Client per layer", "Server per layer")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from securetrees.errors import ParameterError
from securetrees.protocols.histogram_forest.streaming import build_bins, combine_bins, merge_groups, merge_nearest


def direct(values: np.ndarray, labels: np.ndarray, weights: np.ndarray, n_classes: int):
    """Per distinct value, the weighted class counts, by a plain loop."""
    table: dict[float, np.ndarray] = {}
    for v, lab, w in zip(values, labels, weights, strict=True):
        if w > 0 and not np.isnan(v):
            table.setdefault(float(v), np.zeros(n_classes, dtype=np.int64))[lab] += w
    keys = sorted(table)
    return np.array(keys), np.array([table[k] for k in keys]).reshape(-1, n_classes)


VALUES = [0.0, 0.5, 1.0, 2.5, 3.0, 7.25, 9.0, np.nan]
values_st = arrays(np.float64, st.integers(1, 60), elements=st.sampled_from(VALUES))


@given(values_st, st.integers(0, 2**32 - 1))
def test_client_bins_match_direct_count_without_merging(values: np.ndarray, seed: int) -> None:
    gen = np.random.default_rng(seed)
    labels = gen.integers(0, 3, values.size)
    weights = gen.integers(0, 3, values.size)
    centres, counts = build_bins(values, labels, weights, 3, max_bins=64)
    exp_c, exp_k = direct(values, labels, weights, 3)
    np.testing.assert_array_equal(centres, exp_c)
    np.testing.assert_array_equal(counts, exp_k)


@given(st.lists(values_st, min_size=1, max_size=4), st.integers(0, 2**32 - 1))
def test_server_union_equals_joined_data_without_merging(parts: list[np.ndarray], seed: int) -> None:
    """Algorithm 3 on the clients' bins equals Algorithm 2 on the joined data when b is never exceeded."""
    gen = np.random.default_rng(seed)
    labels = [gen.integers(0, 2, v.size) for v in parts]
    weights = [gen.integers(0, 3, v.size) for v in parts]
    client_bins = [build_bins(v, lab, w, 2, max_bins=64) for v, lab, w in zip(parts, labels, weights, strict=True)]
    merged = combine_bins(client_bins, 2, max_bins=64)
    joined = build_bins(np.concatenate(parts), np.concatenate(labels), np.concatenate(weights), 2, max_bins=64)
    np.testing.assert_array_equal(merged[0], joined[0])
    np.testing.assert_array_equal(merged[1], joined[1])


@given(
    arrays(np.float64, st.integers(2, 400), elements=st.floats(-1e6, 1e6), unique=True),
    st.integers(1, 40),
    st.integers(0, 2**32 - 1),
)
def test_merging_keeps_totals_exact_and_order(values: np.ndarray, max_bins: int, seed: int) -> None:
    centres = np.sort(values)
    counts = np.random.default_rng(seed).integers(1, 50, (centres.size, 2))
    c, k = merge_nearest(centres, counts, max_bins)
    assert c.size == min(max_bins, centres.size)
    np.testing.assert_array_equal(k.sum(axis=0), counts.sum(axis=0))
    assert np.all(np.diff(c) >= 0)
    span = 1e-12 * max(1.0, float(np.abs(centres).max()))
    assert c[0] >= centres[0] - span and c[-1] <= centres[-1] + span
    # Eq. 5: the count-weighted mean of the centres is preserved by every merge.
    w, w2 = counts.sum(axis=1), k.sum(axis=1)
    np.testing.assert_allclose((c * w2).sum(), (centres * w).sum(), rtol=1e-9, atol=1e-6)


def test_merge_nearest_known_answer() -> None:
    """Eq. 4 picks the nearest pair (1.0, 1.5); Eq. 5 weights the centres by the bins' counts."""
    centres = np.array([0.0, 1.0, 1.5, 5.0])
    counts = np.array([[1, 0], [2, 1], [0, 1], [4, 4]])
    c, k = merge_nearest(centres, counts, 3)
    np.testing.assert_allclose(c, [0.0, (3 * 1.0 + 1 * 1.5) / 4, 5.0])
    np.testing.assert_array_equal(k, [[1, 0], [2, 2], [4, 4]])
    c2, k2 = merge_nearest(c, k, 2)  # now 0.0 and 1.125 are nearest
    np.testing.assert_allclose(c2, [(0.0 + 4 * 1.125) / 5, 5.0])
    np.testing.assert_array_equal(k2, [[3, 2], [4, 4]])


def test_merge_nearest_rejects_zero_bins() -> None:
    with pytest.raises(ParameterError):
        merge_nearest(np.array([1.0, 2.0]), np.array([[1], [1]]), 0)


def one_at_a_time(centres: np.ndarray, counts: np.ndarray, max_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 4-5 by a plain loop: merge the single nearest pair (ties: the leftmost) until max_bins remain."""
    c, k = centres.tolist(), counts.tolist()
    w = [float(sum(r)) for r in k]
    while len(c) > max_bins:
        gaps = [c[i + 1] - c[i] for i in range(len(c) - 1)]
        i = gaps.index(min(gaps))
        total = w[i] + w[i + 1]
        c[i] = (w[i] * c[i] + w[i + 1] * c[i + 1]) / total if total > 0 else (c[i] + c[i + 1]) / 2.0
        k[i] = [a + b for a, b in zip(k[i], k[i + 1], strict=True)]
        w[i] = total
        del c[i + 1], k[i + 1], w[i + 1]
    return np.array(c), np.array(k, dtype=np.int64).reshape(len(c), counts.shape[1])


@pytest.mark.parametrize("seed", range(30))
def test_last_merges_follow_eq4_bit_for_bit(seed: int) -> None:
    """Up to 2·b bins (no batched pass) the merges are exactly Eq. 4's, ties and zero weights included."""
    gen = np.random.default_rng(seed)
    max_bins = int(gen.integers(1, 16))
    size = int(gen.integers(1, 2 * max_bins + 1))
    centres = np.unique(gen.integers(0, 3 * size, size) * 0.5)  # a grid: many equal gaps
    counts = gen.integers(0, 3, (centres.size, 2))
    c, k = merge_nearest(centres, counts, max_bins)
    exp_c, exp_k = one_at_a_time(centres, counts, max_bins)
    assert c.tobytes() == exp_c.tobytes()
    np.testing.assert_array_equal(k, exp_k)


@pytest.mark.parametrize("seed", range(30))
def test_groups_merge_as_each_group_alone(seed: int) -> None:
    """merge_groups (every node of a layer at once) gives each group merge_nearest's bins, bit for bit."""
    gen = np.random.default_rng(seed)
    max_bins = int(gen.integers(1, 12))
    sizes = gen.integers(0, 8 * max_bins, int(gen.integers(1, 8)))
    parts = [np.unique(gen.integers(0, 4 * int(s) + 1, int(s)) * 0.25) if seed % 2 else
             np.unique(gen.standard_normal(int(s))) for s in sizes]
    sizes = np.array([p.size for p in parts], dtype=np.int64)
    counts = gen.integers(0, 4, (int(sizes.sum()), 3))
    c, k = merge_groups(np.concatenate(parts), counts, sizes, max_bins)
    at, out = 0, 0
    for p in parts:
        exp_c, exp_k = merge_nearest(p, counts[at : at + p.size], max_bins)
        assert c[out : out + exp_c.size].tobytes() == exp_c.tobytes()
        np.testing.assert_array_equal(k[out : out + exp_c.size], exp_k)
        at, out = at + p.size, out + exp_c.size
    assert out == c.size
