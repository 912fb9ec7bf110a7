"""The arithmetic of encrypted label statistics (``specs/federated_forest.md``,
"Encrypted label statistics"): a client's bin sums and their packing, the label
holder's unpacking into the histogram layout of ``securetrees.trees.best_splits``.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees._nt import mpz
from securetrees.errors import ProtocolError
from securetrees.executors import scatter_products
from securetrees.paillier import Ciphertext, Mode, PublicKey
from securetrees.paillier.batch import obfuscators, pack_slots
from securetrees.paillier.ciphertext import _make
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


def bin_sums(weighted: Sequence[Ciphertext | None], samples: Sequence[IntArray], bins: Sequence[IntArray],
             n_bins: Sequence[Sequence[int]], counters: CryptoCounters, executor: Executor | None = None,
             ) -> list[list[Ciphertext | None]]:
    """Homomorphic sums of the weighted unit ciphertexts per bin of every candidate of a layer:
    node ``k``'s instances ``samples[k]`` have the bins ``bins[k]`` (one column per candidate
    feature of the node, ``n_bins[k][j]`` bins plus the missing bin ``n_bins[k][j]``).  One list
    of ``n_bins[k][j] + 1`` sums per candidate (node by node, its features in column order),
    ``None`` for an empty bin.  One addition per instance beyond the first of each bin; the
    multiplications run on ``executor`` if given (:func:`~securetrees.executors.scatter_products`:
    it receives N² and ciphertext values)."""
    values: list[mpz] = []
    targets: list[list[int]] = []
    every: list[npt.NDArray[np.int64]] = [np.zeros(0, dtype=np.int64)]
    widths: list[int] = []
    base = 0
    for idx, b, nbs in zip(samples, bins, n_bins, strict=True):
        w = np.asarray(nbs, dtype=np.int64) + 1
        for i in idx.tolist():
            c = weighted[i]
            if c is None:
                raise ProtocolError("a node holds an instance outside the tree's sample")
            values.append(mpz(c.value))
        node = b + (base + np.concatenate([[0], np.cumsum(w)[:-1]]))[None, :]
        targets += node.tolist()
        every.append(node.ravel())
        widths += w.tolist()
        base += int(w.sum())
    counts = np.bincount(np.concatenate(every), minlength=base)
    counters.additions += int((counts - 1)[counts > 0].sum())
    zero = next((c for c in weighted if c is not None), None)
    products = ([mpz(1)] * base if zero is None or base == 0
                else scatter_products(values, targets, base, mpz(zero.public_key.n_square), executor))
    out: list[Ciphertext | None] = [None if n == 0 or zero is None else _make(zero.public_key, v, False)
                                    for v, n in zip(products, counts.tolist(), strict=True)]
    starts = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64).tolist()
    return [out[starts[j]:starts[j + 1]] for j in range(len(widths))]


def pack_bins(sums: Sequence[Sequence[Ciphertext | None]], per_plaintext: int, layout: SlotLayout,
              pk: PublicKey, counters: CryptoCounters, *, mode: Mode, rng: RandomSource,
              executor: Executor | None = None) -> list[list[int]]:
    """Horner packing, ``acc ← acc·2^(bin bits) + bin``, of ``per_plaintext`` bins per
    ciphertext (low bin first) of every candidate; each result re-randomised before it leaves
    the party (an all-empty chunk is an encryption of 0).  The shifts and the obfuscators run
    on ``executor`` if given.  Returns each candidate's packed ciphertext values."""
    chunks = [list(c[start:start + per_plaintext]) for c in sums for start in range(0, len(c), per_plaintext)]
    packed, shifts = pack_slots(chunks, layout.bin_bits, executor=executor)
    counters.shifts += shifts
    noise = obfuscators(pk, mode, len(packed), executor=executor, rng=rng)
    counters.rerandomizations += len(packed)
    n2 = mpz(pk.n_square)
    flat = [int((mpz(1) if c is None else mpz(c.value)) * r % n2) for c, r in zip(packed, noise, strict=True)]
    out: list[list[int]] = []
    at = 0
    for c in sums:
        n = -(-len(c) // per_plaintext)
        out.append(flat[at:at + n])
        at += n
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
