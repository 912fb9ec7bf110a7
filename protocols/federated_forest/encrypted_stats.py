"""The arithmetic of encrypted label statistics (``specs/federated_forest.md``,
"Encrypted label statistics"): a client's bin sums and their packing, the label
holder's unpacking into the histogram layout of ``securetrees.trees.best_splits``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.paillier import Ciphertext, Mode, sum_ciphertexts
from securetrees.protocols.federated_forest.slots import SlotLayout
from securetrees.rand import RandomSource

__all__ = ["CryptoCounters", "bin_sums", "candidate_histograms", "pack_bins"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass
class CryptoCounters:
    """Counts of the cryptographic operations a party performed (the benchmark's floor)."""

    encryptions: int = 0
    weightings: int = 0
    additions: int = 0
    shifts: int = 0
    rerandomizations: int = 0
    decryptions: int = 0


def bin_sums(weighted: list[Ciphertext | None], samples: IntArray, bins: IntArray, n_bins: int,
             counters: CryptoCounters) -> list[Ciphertext | None]:
    """Homomorphic sum of the weighted unit ciphertexts of ``samples`` per bin ``0..n_bins``
    (``n_bins`` = missing); ``None`` for an empty bin.  One addition per sample beyond the
    first of each bin."""
    sums: list[Ciphertext | None] = [None] * (n_bins + 1)
    order = np.argsort(bins, kind="stable")
    edges = np.searchsorted(bins[order], np.arange(n_bins + 2))
    for b in range(n_bins + 1):
        idx = samples[order[edges[b]:edges[b + 1]]]
        if idx.size:
            sums[b] = sum_ciphertexts([weighted[i] for i in idx.tolist()])
            counters.additions += idx.size - 1
    return sums


def pack_bins(sums: list[Ciphertext | None], per_plaintext: int, layout: SlotLayout, zero: Ciphertext,
              counters: CryptoCounters, *, mode: Mode, rng: RandomSource) -> list[int]:
    """Horner packing, ``acc ← acc·2^(bin bits) + bin``, of ``per_plaintext`` bins per
    ciphertext (low bin first); each result re-randomised before it leaves the party."""
    shift = 1 << layout.bin_bits
    out: list[int] = []
    for start in range(0, len(sums), per_plaintext):
        acc: Ciphertext | None = None
        for c in reversed(sums[start:start + per_plaintext]):
            if acc is not None:
                acc = acc * shift
                counters.shifts += 1
            if c is not None:
                acc = c if acc is None else acc + c
        out.append((acc if acc is not None else zero).rerandomize(mode=mode, rng=rng).value)
        counters.rerandomizations += 1
    return out


def candidate_histograms(plain: list[int], layout: SlotLayout, entry_node: IntArray, entry_bins: IntArray,
                         chunks: IntArray, per_plaintext: int, max_bins: int
                         ) -> tuple[IntArray, FloatArray, IntArray]:
    """Unpack decrypted plaintexts into ``(positions, hist, table)`` for ``best_splits``:
    ``hist[k, j]`` is the histogram of the ``j``-th entry of node ``positions[k]`` (missing
    values in the last bin), ``table[k, j]`` its entry index; shorter nodes repeat their
    last entry (a duplicate never wins a tie against the original)."""
    n_entries = entry_node.size
    positions, first = np.unique(entry_node, return_index=True)
    counts = np.diff(np.append(first, n_entries))
    width = int(counts.max())
    n_stats = 3 if layout.regression else layout.n_slots
    hist = np.zeros((positions.size, width, max_bins + 1, n_stats), dtype=np.float64)
    table = np.zeros((positions.size, width), dtype=np.int64)
    cursor = 0
    for e in range(n_entries):
        sums: list[list[int]] = []
        nb = int(entry_bins[e])
        for c in range(int(chunks[e])):
            sums += layout.unpack(plain[cursor + c], min(per_plaintext, nb + 1 - c * per_plaintext))
        cursor += int(chunks[e])
        stats = layout.decode(sums)
        k = int(np.searchsorted(positions, entry_node[e]))
        j = e - int(first[k])
        hist[k, j, :nb] = stats[:-1]
        hist[k, j, max_bins] = stats[-1]
        table[k, j] = e
    for k in range(positions.size):
        table[k, counts[k]:] = table[k, counts[k] - 1]
        hist[k, counts[k]:] = hist[k, counts[k] - 1]
    return positions.astype(np.int64), hist, table
