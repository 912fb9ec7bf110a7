"""Candidate splits, computed by a participant on its own column (FLE-Expan lines 8-11).

Two proposers (``specs/revfrf.md``, construction step 3):

* :class:`RandomRange` (the paper): ρ samples of the node drawn uniformly, ``x_min`` and
  ``x_max`` over them, ζ candidates ``s_i = x_min + i·(x_max − x_min)/(ζ+1)``, i = 1..ζ.
  Every sample of the node is placed (erratum 1: D″ only sets the range).
* :class:`QuantileBins`: the quantile-bin edges of the column (``trees.BinMapper``),
  the candidates of the central reference ``securetrees.trees.train_forest``.

Each sample gets its *candidate code* ``c = #{i : s_i < x}``, so candidate ``b`` sends
``x ≤ s_b ⇔ c ≤ b`` to the left: the codes hold exactly the split vectors' information.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.trees import BinMapper

__all__ = ["CandidateSet", "Proposer", "QuantileBins", "RandomRange", "candidate_codes"]

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
    """``#{i : s_i < x}`` per value (``searchsorted(s, x, "left")``)."""
    return np.searchsorted(thresholds, x, side="left").astype(CODE_DTYPE)


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
        pick = x if x.size <= self.rho else x[rng.choice(x.size, size=self.rho, replace=False)]
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
