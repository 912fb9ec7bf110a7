"""The passive party's encrypted bucket sums on raw ciphertext values (``specs/secureboost.md``,
step S2, "How a passive party sums").

A bucket sum is the product modulo N² of the bucket's ciphertexts.  Per directly built node the
passive party multiplies the members of every bucket of one feature (the one whose most populous
bucket is smallest), whose product is the node total; per other feature it multiplies the members
of every bucket but the most populous one, whose sum it derives as the total minus the other
buckets.  A sibling whose parent was built in the previous layer is the parent minus
the directly built child, bucket by bucket.  Every division of a request is a quotient
``numerator · denominator⁻¹``; the quotients of one stage share a single inversion
(:func:`~securetrees._nt.batch_invert`).

The results are the same ciphertext values, up to the order of the multiplications, as adding
every instance into its bucket: the same encrypted sums, which the passive party re-randomises
before they leave.  Nothing here is decrypted and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees._nt import batch_invert, mpz
from securetrees.errors import ProtocolError
from securetrees.executors import chunk_size, run_chunked
from securetrees.protocols.secureboost.messages import BUCKET_EMPTY, BUCKET_REST, BUCKET_SENT

__all__ = ["Quotients", "bucket_codes", "bucket_counts", "bucket_kinds", "direct_sums", "expand_buckets",
           "most_populous", "sibling_sums"]

IntArray = npt.NDArray[np.int64]
ONE = mpz(1)


@dataclass
class Quotients:
    """Deferred divisions ``out[index] = numerator / denominator`` (homomorphically: a
    subtraction), resolved together with one inversion by :meth:`resolve`."""

    modulus: mpz
    targets: list[tuple[list[mpz], int]] = field(default_factory=list)
    numerators: list[mpz] = field(default_factory=list)
    denominators: list[mpz] = field(default_factory=list)

    def add(self, out: list[mpz], index: int, numerator: mpz, denominator: mpz) -> None:
        if denominator == ONE:
            out[index] = numerator
            return
        self.targets.append((out, index))
        self.numerators.append(numerator)
        self.denominators.append(denominator)

    def resolve(self) -> int:
        """Write every quotient into its target; returns how many needed the inversion."""
        m = self.modulus
        for (out, index), num, inv in zip(self.targets, self.numerators,
                                          batch_invert(self.denominators, m), strict=True):
            out[index] = num * inv % m
        count = len(self.targets)
        self.targets, self.numerators, self.denominators = [], [], []
        return count


def bucket_codes(binned: npt.NDArray[np.integer[Any]], n_bins: Sequence[int], missing_bin: int
                 ) -> npt.NDArray[np.int16]:
    """Each (instance, feature)'s bucket: its bin, or ``n_bins[f]`` (the last bucket) if missing;
    16-bit (a bin budget is at most 255), so that a node's rows are cheap to gather."""
    nb = np.asarray(n_bins, dtype=np.int16)[None, :]
    return np.where(binned == missing_bin, nb, binned.astype(np.int16))


def bucket_counts(codes: npt.NDArray[np.integer[Any]], widths: Sequence[int]) -> IntArray:
    """The instance count of every (feature, bucket) of one node from its rows of bucket codes."""
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    return np.bincount((codes + starts[None, :]).ravel(), minlength=int(sum(widths))).astype(np.int64)


def most_populous(counts: IntArray, widths: Sequence[int]) -> IntArray:
    """Per feature, the first of its buckets with the largest count (an index within the feature)."""
    w = np.asarray(widths, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(w)[:-1]])
    top = np.repeat(np.maximum.reduceat(counts, starts), w)
    at_top = np.flatnonzero(counts == top)
    feature = np.searchsorted(starts, at_top, side="right") - 1
    _, first = np.unique(feature, return_index=True)
    out: IntArray = at_top[first] - starts
    return out


def bucket_kinds(counts: IntArray, widths: Sequence[int]) -> npt.NDArray[np.uint8]:
    """Each bucket's kind from the node's bucket counts alone: empty if its count is 0, rest for
    the first most populous bucket of each feature (a feature of a non-empty node), sent otherwise."""
    kinds = np.where(counts == 0, BUCKET_EMPTY, BUCKET_SENT).astype(np.uint8)
    if not len(widths):
        return kinds
    starts = np.concatenate([[0], np.cumsum(np.asarray(widths, dtype=np.int64))[:-1]])
    rest = starts + most_populous(counts, widths)
    kinds[rest[counts[rest] > 0]] = BUCKET_REST
    return kinds


def expand_buckets(sent: IntArray, kinds: npt.NDArray[np.uint8], totals: IntArray,
                   widths: Sequence[int]) -> IntArray:
    """The active party's side: the ``(count, G·2^f, H·2^f)`` of every bucket of every node from
    the decrypted sums of the sent buckets, zeros for the empty ones, and for each rest bucket the
    node's total (``totals``, one row per node, known to the active party) minus the feature's
    other buckets.  Raises :class:`ProtocolError` if the kinds are not those the counts imply
    (:func:`bucket_kinds`), so that the kinds carry nothing beyond the counts."""
    per_node = int(sum(widths))
    n_nodes = totals.shape[0]
    if kinds.shape != (n_nodes * per_node,) or sent.shape != (int((kinds == BUCKET_SENT).sum()), 3):
        raise ProtocolError("a histogram reply has the wrong number of buckets")
    full = np.zeros((kinds.size, 3), dtype=np.int64)
    full[kinds == BUCKET_SENT] = sent
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    for k in range(n_nodes):
        base = k * per_node
        node_kinds = kinds[base:base + per_node]
        block = full[base:base + per_node]
        rest = np.flatnonzero(node_kinds == BUCKET_REST)
        owner = np.searchsorted(starts, rest, side="right") - 1
        if np.unique(owner).size != owner.size:
            raise ProtocolError("a feature has two rest buckets")
        group = np.add.reduceat(block, starts, axis=0)
        block[rest] = totals[k][None, :] - group[owner]
        if (block[:, 0] < 0).any() or not np.array_equal(bucket_kinds(block[:, 0], widths), node_kinds):
            raise ProtocolError("the bucket kinds of a histogram reply do not follow from its counts")
    return full


def _partial_sums(
    modulus: mpz, widths: list[int], skip: list[int], values: list[mpz], codes: npt.NDArray[np.integer[Any]],
) -> tuple[list[mpz], int]:
    """A run of a node's rows (ciphertext values, one row of bucket codes each): per (feature,
    bucket) the product of its members, bucket ``skip[f]`` of each feature left out (``-1``: none;
    1 there and in empty buckets); with the number of members.  A worker task: N², ciphertext
    values and bucket codes only."""
    n_rows, n_features = codes.shape
    out: list[mpz] = []
    mults = 0
    step = max(1, _PAIRS_AT_ONCE // max(n_rows, 1))  # features per pass: bounded index arrays
    for f0 in range(0, n_features, step):
        sums, members = _group_sums(modulus, widths[f0:f0 + step], skip[f0:f0 + step], values,
                                    codes[:, f0:f0 + step])
        out += sums
        mults += members
    return out, mults


_PAIRS_AT_ONCE = 1 << 21
"""(row, feature) pairs one pass of :func:`_group_sums` sorts (a few tens of MiB of index arrays)."""


def _group_sums(modulus: mpz, widths: list[int], big: list[int], values: list[mpz],
                codes: npt.NDArray[np.integer[Any]]) -> tuple[list[mpz], int]:
    """The bucket products of a group of features (every bucket but each feature's ``big`` one),
    from one sort of the group's (row, feature) pairs by bucket; with the number of members."""
    n_features = codes.shape[1]
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    keys = (codes + starts[None, :]).ravel()  # (row, feature) -> its bucket over the group
    kept = np.flatnonzero((codes != np.asarray(big, dtype=np.int64)[None, :]).ravel())
    order = kept[np.argsort(keys[kept], kind="stable")]  # grouped by bucket, in row order
    bounds = np.searchsorted(keys[order], np.arange(int(sum(widths)) + 1)).tolist()
    members = [values[i] for i in (order // max(n_features, 1)).tolist()]
    out = [ONE] * (len(bounds) - 1)
    for b, (lo, hi) in enumerate(pairwise(bounds)):
        if lo == hi:
            continue
        acc = members[lo]
        for v in members[lo + 1:hi]:
            acc = acc * v % modulus
        out[b] = acc
    return out, len(members)


def _partials(
    modulus: mpz, widths: list[int], skip: list[int], runs: list[tuple[list[mpz], npt.NDArray[np.integer[Any]]]],
) -> list[tuple[list[mpz], int]]:
    return [_partial_sums(modulus, widths, skip, values, codes) for values, codes in runs]


def direct_sums(
    values: Sequence[mpz], codes: npt.NDArray[np.integer[Any]], widths: Sequence[int], modulus: mpz,
    pending: Quotients, executor: Executor | None = None, counts: IntArray | None = None,
) -> tuple[list[mpz], int]:
    """The bucket sums of one node from its instances' ciphertext values ``values`` and bucket
    codes ``codes`` (one row per instance, one column per feature with ``widths[f]`` buckets).

    One feature is summed in full: the one whose most populous bucket is the smallest (the
    first such).  The product of its buckets is the node total; every other feature's most
    populous bucket is left to ``pending`` (total / the feature's other buckets).  With
    ``executor``, runs of rows go to its workers and their partial products are multiplied
    here (the same values).  Returns the sums (the derived ones filled when ``pending`` is
    resolved) and the number of multiplications by a row's value plus those joining the full
    feature's buckets (the same with any executor; joining the partials is not counted)."""
    w = [int(x) for x in widths]
    if not w:
        return [], 0
    counts = bucket_counts(codes, w) if counts is None else counts
    starts = np.concatenate([[0], np.cumsum(w)[:-1]]).astype(np.int64)
    big = most_populous(counts, w)
    full = int(np.argmin(counts[starts + big]))
    skip = big.tolist()
    skip[full] = -1
    vals = list(values)
    step = chunk_size(len(vals), executor)
    runs = [(vals[i:i + step], codes[i:i + step]) for i in range(0, len(vals), step)]
    if executor is None or len(runs) < 2:
        parts = _partials(modulus, w, skip, runs or [(vals, codes)])
    else:
        parts = run_chunked(_partials, runs, executor, 1, modulus, w, skip)
    out, mults = parts[0]
    for sums, m in parts[1:]:
        out = [b if a is ONE else a if b is ONE else a * b % modulus for a, b in zip(out, sums, strict=True)]
        mults += m
    total, joined = _product(out[starts[full]:starts[full] + w[full]], modulus)
    mults += joined
    for f, width in enumerate(w):
        if f == full:
            continue
        start = int(starts[f])
        rest, _ = _product([out[start + b] for b in range(width) if b != skip[f]], modulus)
        pending.add(out, start + skip[f], total, rest)
    return out, mults


def _product(factors: Sequence[mpz], modulus: mpz) -> tuple[mpz, int]:
    """The product of the factors other than 1 (1 if none), with the multiplications it took."""
    acc, mults = ONE, -1
    for v in factors:
        if v is ONE:
            continue
        acc = v if acc is ONE else acc * v % modulus
        mults += 1
    return acc, max(mults, 0)


def sibling_sums(parent: Sequence[mpz], child: Sequence[mpz], pending: Quotients) -> list[mpz]:
    """The other child's bucket sums, parent − child bucket by bucket (left to ``pending``)."""
    out = [ONE] * len(parent)
    for b, (p, c) in enumerate(zip(parent, child, strict=True)):
        pending.add(out, b, p, c)
    return out
