"""The active party's interval attack on the passive parties' features (``specs/secureboost.md``,
"What the active party learns").

Input: the active party's recorded view only.  For every passive split it chose, it knows the
owner, the owner's feature ``k`` and bucket ``v`` (it picked them from the decrypted bucket
sums), the node's instances (it sent them in the histogram request) and which of them went left
(the split reply).  On a numeric feature an instance that went left has bucket ``<= v``, one
that went right has bucket ``> v`` (an instance with a missing value follows the split's
missing direction instead, so the attack assumes values are present).  Intersecting these
half-lines over every split on the feature places each instance in an interval
``[lo, hi]`` of buckets: certain knowledge for every instance whose value is present.

Figures (:func:`interval_leak`, scored against the true column, which only the test holds):
``rank_correlation`` (Spearman's ρ between the interval's midpoint and the true value, over
the rows whose value is present), ``within_one`` (the share of those rows whose interval spans
at most three buckets: the attacker knows the bucket to ±1) and ``median_width`` (buckets).
Categorical features are left out: a categorical split tells "equal to category v or not".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.protocols.secureboost.messages import (
    HistogramRequest,
    Setup,
    SetupReply,
    SplitReply,
    SplitRequest,
)
from securetrees.runtime import Transcript
from securetrees.testing.ranks import spearman

__all__ = ["FeatureIntervals", "IntervalLeak", "active_view_intervals", "interval_leak"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class FeatureIntervals:
    """What the active party holds on one numeric passive feature: each instance's bucket
    interval ``[lo[i], hi[i]]`` and the number of splits it came from."""

    passive: str
    feature: int
    n_bins: int
    splits: int
    lo: IntArray
    hi: IntArray

    @property
    def midpoint(self) -> FloatArray:
        return np.asarray((self.lo + self.hi) / 2.0, dtype=np.float64)


@dataclass(frozen=True)
class IntervalLeak:
    """The attack's figures on one feature (module docstring)."""

    passive: str
    feature: int
    n_bins: int
    splits: int
    rank_correlation: float
    within_one: float
    median_width: float


def _schemas_and_size(transcript: Transcript, active: str) -> tuple[dict[str, SetupReply], int]:
    schemas = {r.sender: r.payload for r in transcript.view(active) if isinstance(r.payload, SetupReply)}
    sizes = {r.payload.n_instances for r in transcript.sent(active) if isinstance(r.payload, Setup)}
    if len(sizes) != 1:
        raise ParameterError("the view holds no setup, or setups of different sizes")
    return schemas, sizes.pop()


def active_view_intervals(transcript: Transcript, active: str = "active") -> list[FeatureIntervals]:
    """Every numeric passive feature the active party split on, with each instance's interval,
    from the active party's view (its requests and the replies it received)."""
    schemas, n = _schemas_and_size(transcript, active)
    members: dict[tuple[str, int, int], IntArray] = {}
    pending: dict[str, list[SplitRequest]] = defaultdict(list)
    lo: dict[tuple[str, int], IntArray] = {}
    hi: dict[tuple[str, int], IntArray] = {}
    splits: dict[tuple[str, int], int] = defaultdict(int)
    for r in transcript.records:
        p = r.payload
        if r.sender == active and isinstance(p, HistogramRequest):
            for job in p.jobs:
                members[(r.receiver, p.tree, job.node)] = job.ids
        elif r.sender == active and isinstance(p, SplitRequest):
            pending[r.receiver].append(p)
        elif r.receiver == active and isinstance(p, SplitReply):
            req = pending[r.sender].pop(0)
            schema = schemas[r.sender]
            for order, left in zip(req.orders, p.left, strict=True):
                if schema.categorical[order.feature]:
                    continue
                key = (r.sender, order.feature)
                if key not in lo:
                    lo[key] = np.zeros(n, dtype=np.int64)
                    hi[key] = np.full(n, schema.n_bins[order.feature] - 1, dtype=np.int64)
                ids = members[(r.sender, req.tree, order.node)]
                went_left = np.isin(ids, left)
                hi[key][ids[went_left]] = np.minimum(hi[key][ids[went_left]], order.bin)
                lo[key][ids[~went_left]] = np.maximum(lo[key][ids[~went_left]], order.bin + 1)
                splits[key] += 1
    return [FeatureIntervals(p, f, schemas[p].n_bins[f], splits[(p, f)], lo[(p, f)],
                             np.maximum(hi[(p, f)], lo[(p, f)]))  # a missing value may contradict
            for p, f in sorted(lo)]


def interval_leak(intervals: FeatureIntervals, x: FloatArray) -> IntervalLeak:
    """Score one feature's intervals against the true column ``x`` (rows with a value only)."""
    present = ~np.isnan(np.asarray(x, dtype=np.float64))
    width = (intervals.hi - intervals.lo + 1)[present]
    return IntervalLeak(intervals.passive, intervals.feature, intervals.n_bins, intervals.splits,
                        spearman(intervals.midpoint[present], np.asarray(x)[present]),
                        float(np.mean(width <= 3)), float(np.median(width)))
