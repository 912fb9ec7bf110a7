"""Candidate splits, computed by a participant on its own column (FLE-Expan lines 8-11).

Two proposers (``specs/revfrf.md``, construction step 3):

* :class:`RandomRange` (the paper): ρ samples of the node drawn uniformly, ``x_min`` and
  ``x_max`` over them, ζ candidates ``s_i = x_min + i·(x_max − x_min)/(ζ+1)``, i = 1..ζ.
  Every sample of the node is placed (erratum 1: D″ only sets the range).
* :class:`QuantileBins`: the quantile-bin edges of the column (``trees.BinMapper``),
  the candidates of the central reference ``securetrees.trees.train_forest``.

Each sample gets its *candidate code* ``c = #{i : s_i < x}``, so candidate ``b`` sends
``x ≤ s_b ⇔ c ≤ b`` to the left: the codes hold exactly the split vectors' information.
A missing value (NaN) gets :data:`~securetrees.protocols.revfrf.missing.MISSING_CODE`; candidates come
from the present values only.
:class:`CoarseCodes` (``code_resolution`` = k) keeps at most k − 1 candidates per (node,
column), near the node's quantiles j/k, so the CS sees at most k codes per node and codes that
are group indices of the node, not the column's global bins (``specs/revfrf.md``, "What the CS
learns from the candidate codes").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.protocols.revfrf.missing import MISSING_CODE
from securetrees.trees import BinMapper

__all__ = ["CandidateSet", "CoarseCodes", "Proposer", "QuantileBins", "RandomRange", "candidate_codes", "coarsen"]

FloatArray = npt.NDArray[np.float64]
CODE_DTYPE = np.uint16


@dataclass(frozen=True)
class CandidateSet:
    """The sorted candidate thresholds of one (node, column) and the codes of its samples."""

    thresholds: FloatArray
    codes: npt.NDArray[np.uint16]

    @property
    def n_codes(self) -> int:
        """Number of distinct codes: ``len(thresholds) + 1``."""
        return int(self.thresholds.size + 1)


def candidate_codes(thresholds: FloatArray, x: FloatArray) -> npt.NDArray[np.uint16]:
    """``#{i : s_i < x}`` per value (``searchsorted(s, x, "left")``); ``MISSING_CODE`` for NaN."""
    missing = np.isnan(x)
    codes = np.searchsorted(thresholds, np.where(missing, 0.0, x), side="left")
    return np.where(missing, MISSING_CODE, codes).astype(CODE_DTYPE)


class Proposer(Protocol):
    """What a participant needs to propose candidates for one (node, column)."""

    def propose(self, column: int, x: FloatArray, rng: np.random.Generator) -> CandidateSet: ...


@dataclass(frozen=True)
class RandomRange:
    """The paper's proposer: ``rho`` random samples set the range, ``n_candidates`` (ζ) splits."""

    rho: int = 64
    n_candidates: int = 16

    def __post_init__(self) -> None:
        if self.rho < 1 or not 1 <= self.n_candidates < 65535:
            raise ParameterError("rho must be >= 1 and n_candidates in [1, 65534]")

    def propose(self, column: int, x: FloatArray, rng: np.random.Generator) -> CandidateSet:
        """FLE-Expan lines 8-11 for one node's values ``x`` of one column."""
        if x.size == 0:
            raise ParameterError("a node without samples has no candidates")
        present = x[~np.isnan(x)]
        if present.size == 0:  # every value missing: no candidate but "missing apart"
            return CandidateSet(np.zeros(0, dtype=np.float64), candidate_codes(np.zeros(0), x))
        pick = present if present.size <= self.rho else present[rng.choice(present.size, size=self.rho,
                                                                           replace=False)]
        lo, hi = float(pick.min()), float(pick.max())
        i = np.arange(1, self.n_candidates + 1, dtype=np.float64)
        s = np.clip(lo + i * (hi - lo) / (self.n_candidates + 1), lo, hi).astype(np.float64)
        return CandidateSet(s, candidate_codes(s, x))


@dataclass(frozen=True)
class QuantileBins:
    """The central reference's candidates: the participant bins its own columns once."""

    mapper: BinMapper
    columns: tuple[int, ...]

    @classmethod
    def fit(cls, X_own: FloatArray, columns: tuple[int, ...], max_bins: int = 255) -> QuantileBins:
        """Quantile bins of the participant's own columns (``trees.BinMapper``)."""
        if max_bins >= 65535:
            raise ParameterError("max_bins must be below 65535")
        return cls(BinMapper.fit(X_own, max_bins=max_bins), columns)

    def propose(self, column: int, x: FloatArray, rng: np.random.Generator) -> CandidateSet:
        """The column's bin edges; the codes are the bins (``BinMapper.transform``)."""
        j = self.columns.index(column)
        edges = np.asarray(self.mapper.edges[j], dtype=np.float64)
        return CandidateSet(edges, candidate_codes(edges, x))




def coarsen(cands: CandidateSet, k: int) -> CandidateSet:
    """At most ``k`` codes for one (node, column): keep k − 1 of the proposed candidates.

    For j = 1..k−1 the kept candidate is the one whose left side holds the number of the
    node's samples nearest to ``j·m/k`` (m samples), among candidates that split them (both
    sides non-empty); candidates giving the same partition are kept once.  So the node's
    samples fall into at most k ordered groups of about m/k samples each, and the codes are
    group indices *of this node*: they are not the column's global bins or grid positions.
    Missing values keep their code and are not counted in m.

    Reveals to the CS (who receives the codes): for each sample of the node, which of at most
    k ordered groups of the node it falls in.  Deterministic in the node's values; no
    randomness beyond the proposer's own.
    """
    if k < 2:
        raise ParameterError("code_resolution must be at least 2")
    missing = cands.codes == MISSING_CODE
    present = cands.codes[~missing]
    m = present.size
    if cands.n_codes <= k or m == 0:
        return cands
    left = np.cumsum(np.bincount(present, minlength=cands.n_codes))[:-1]  # #{x ≤ s_b} per candidate b
    useful = np.flatnonzero((left > 0) & (left < m))
    targets = np.arange(1, k, dtype=np.float64) * m / k
    if useful.size == 0:
        pick = useful
    else:
        pick = np.unique(useful[np.abs(left[useful][None, :] - targets[:, None]).argmin(axis=1)])
    kept = np.zeros(cands.n_codes, dtype=np.int64)
    kept[pick + 1] = 1  # new code = #{kept b : c > b}
    codes = np.where(missing, MISSING_CODE, np.cumsum(kept)[np.where(missing, 0, cands.codes)])
    return CandidateSet(cands.thresholds[pick], codes.astype(CODE_DTYPE))


@dataclass(frozen=True)
class CoarseCodes:
    """A proposer whose codes the CS sees at resolution ``k`` (``code_resolution``):
    ``inner``'s candidates, reduced per (node, column) by :func:`coarsen`."""

    inner: Proposer
    k: int

    def __post_init__(self) -> None:
        if not 2 <= self.k < 65535:
            raise ParameterError("code_resolution must be in [2, 65534]")

    def propose(self, column: int, x: FloatArray, rng: np.random.Generator) -> CandidateSet:
        """FLE-Expan lines 8-11 with the inner proposer, then at most ``k`` codes."""
        return coarsen(self.inner.propose(column, x, rng), self.k)
