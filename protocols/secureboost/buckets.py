"""The passive party's encrypted bucket sums on raw ciphertext values (``specs/secureboost.md``,
step S2, "How a passive party sums").

A bucket sum is the product modulo N² of the bucket's ciphertexts.  Per directly built node the
passive party multiplies the node's ciphertexts once (the node total); per feature it multiplies
the members of every bucket but the most populous one, whose sum it derives as the total minus
the other buckets.  A sibling whose parent was built in the previous layer is the parent minus
the directly built child, bucket by bucket.  Every division of a request is a quotient
``numerator · denominator⁻¹``; the quotients of one stage share a single inversion
(:func:`~securetrees._nt.batch_invert`).

The results are the same ciphertext values, up to the order of the multiplications, as adding
every instance into its bucket: the same encrypted sums, which the passive party re-randomises
before they leave.  Nothing here is decrypted and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from securetrees._nt import batch_invert, mpz
from securetrees.errors import ProtocolError
from securetrees.protocols.secureboost.messages import BUCKET_EMPTY, BUCKET_REST, BUCKET_SENT

__all__ = ["Quotients", "bucket_codes", "bucket_counts", "bucket_kinds", "direct_sums", "expand_buckets",
           "sibling_sums"]

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


def bucket_codes(binned: IntArray, n_bins: Sequence[int], missing_bin: int) -> IntArray:
    """Each (instance, feature)'s bucket: its bin, or ``n_bins[f]`` (the last bucket) if missing."""
    nb = np.asarray(n_bins, dtype=np.int64)[None, :]
    return np.where(binned == missing_bin, nb, binned).astype(np.int64)


def bucket_counts(codes: IntArray, widths: Sequence[int]) -> IntArray:
    """The instance count of every (feature, bucket) of one node from its rows of bucket codes."""
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    return np.bincount((codes + starts[None, :]).ravel(), minlength=int(sum(widths))).astype(np.int64)


def bucket_kinds(counts: IntArray, widths: Sequence[int]) -> npt.NDArray[np.uint8]:
    """Each bucket's kind from the node's bucket counts alone: empty if its count is 0, rest for
    the first most populous bucket of each feature (a feature of a non-empty node), sent otherwise."""
    kinds = np.where(counts == 0, BUCKET_EMPTY, BUCKET_SENT).astype(np.uint8)
    if not len(widths):
        return kinds
    w = np.asarray(widths, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(w)[:-1]])
    top = np.maximum.reduceat(counts, starts)
    at_top = np.flatnonzero(counts == np.repeat(top, w))
    feature = np.searchsorted(starts, at_top, side="right") - 1
    _, first = np.unique(feature, return_index=True)  # the first bucket at the maximum, per feature
    rest = at_top[first]
    kinds[rest[top[feature[first]] > 0]] = BUCKET_REST
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


def direct_sums(
    values: Sequence[mpz], codes: IntArray, widths: Sequence[int], modulus: mpz, pending: Quotients
) -> tuple[list[mpz], int]:
    """The bucket sums of one node from its instances' ciphertext values ``values`` and bucket
    codes ``codes`` (one row per instance, one column per feature with ``widths[f]`` buckets),
    feature by feature and bucket by bucket.  The most populous bucket of each feature is left
    to ``pending`` (total / the others).  Returns the sums (the derived ones filled when
    ``pending`` is resolved) and the number of multiplications done."""
    total = ONE
    for v in values:
        total = total * v % modulus
    mults = len(values)
    out: list[mpz] = []
    for f, width in enumerate(widths):
        col = codes[:, f]
        big = int(np.argmax(np.bincount(col, minlength=width)))
        sel = np.flatnonzero(col != big)
        order = sel[np.argsort(col[sel], kind="stable")]
        bounds = np.searchsorted(col[order], np.arange(width + 1)).tolist()
        sums = [ONE] * width
        rest, any_other = ONE, False
        for b in range(width):
            lo, hi = bounds[b], bounds[b + 1]
            if b == big or lo == hi:
                continue
            members = order[lo:hi].tolist()
            acc = values[members[0]]
            for i in members[1:]:
                acc = acc * values[i] % modulus
            sums[b] = acc
            rest = rest * acc % modulus if any_other else acc
            any_other = True
            mults += len(members)
        base = len(out)
        out.extend(sums)
        pending.add(out, base + big, total, rest)
    return out, mults


def sibling_sums(parent: Sequence[mpz], child: Sequence[mpz], pending: Quotients) -> list[mpz]:
    """The other child's bucket sums, parent − child bucket by bucket (left to ``pending``)."""
    out = [ONE] * len(parent)
    for b, (p, c) in enumerate(zip(parent, child, strict=True)):
        pending.add(out, b, p, c)
    return out
