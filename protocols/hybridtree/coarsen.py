"""Coarsened guest bins: the groups of adjacent bins the host sees in the guest layers.

``specs/hybridtree.md``, "Coarsened guest bins".  Feature ``f`` with ``n`` agreed
bins is cut into *base groups*: runs of ``width`` (``min_group_width``) adjacent
bins starting at bin 0, the remainder merged into the last run.  The base groups
are fixed for the whole run and known to every party.  For one node the host
merges runs of adjacent base groups (or, below a parent, of the parent's groups)
into *node groups* until each holds an expected ``min_bin_size`` instances, the
expectation being the node's count of instances of guests holding ``f`` spread
evenly over the bins: the host chooses them from what it already knows (node
sizes), never from a guest count.  Guests build one accumulator per node group
and refuse a group that is not a union of base groups, so every aggregate and
every routing the host ever sees depends on an instance's base group only (and
on whether its value is missing).

A grouping is written as the tuple of its groups' last bins (``ends``), strictly
increasing and ending at ``n - 1``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError

__all__ = ["base_ends", "check_grouping", "coarsen_hist", "group_bounds", "node_groups"]

Ends = tuple[int, ...]


def base_ends(n_bins: int, width: int) -> Ends:
    """Last bins of the base groups: ``width`` bins each from bin 0, the remainder (fewer than
    ``width`` bins) joining the last group; a single group when ``n_bins < 2·width``."""
    if n_bins < 1 or width < 1:
        raise ParameterError("a feature has at least one bin and groups at least one bin each")
    k = max(1, n_bins // width)
    return (*((j + 1) * width - 1 for j in range(k - 1)), n_bins - 1)


def node_groups(units: Ends, n_bins: int, expected: float, min_size: float) -> Ends:
    """Merge runs of consecutive ``units`` (a grouping of the feature's ``n_bins`` bins) left to
    right until each group's expected count, ``expected·(bins in the group)/n_bins``, reaches
    ``min_size``; a last group short of it joins the one before.  The result coarsens ``units``
    (its ends are a subset of theirs)."""
    out: list[int] = []
    start = 0
    for end in units:
        if expected * (end + 1 - start) / n_bins >= min_size:
            out.append(end)
            start = end + 1
    if not out or out[-1] != units[-1]:
        if out:
            out.pop()
        out.append(units[-1])
    return tuple(out)


def check_grouping(ends: Sequence[int], n_bins: int, width: int) -> Ends:
    """``ends`` as a validated grouping of ``n_bins`` bins into unions of base groups of
    ``width``; :class:`ParameterError` otherwise (the guests' check of a request)."""
    out = tuple(int(e) for e in ends)
    if not out or out[-1] != n_bins - 1 or any(b <= a for a, b in itertools.pairwise(out)):
        raise ParameterError("a grouping lists increasing group ends and ends at the last bin")
    if not set(out) <= set(base_ends(n_bins, width)):
        raise ParameterError(f"a group is not a union of base groups of {width} bins")
    return out


def group_bounds(ends: Ends, index: int) -> tuple[int, int]:
    """First and last bin of group ``index``."""
    return (ends[index - 1] + 1 if index else 0), ends[index]


def coarsen_hist(hist: npt.NDArray[np.int64], ends: Ends) -> npt.NDArray[np.int64]:
    """A histogram ``(bins + 1, stats)`` (last row: missing) with each group's sum moved to the
    group's last bin and zeros elsewhere; the missing row is kept."""
    out = np.zeros_like(hist)
    cum = np.cumsum(hist[:-1], axis=0)
    idx = np.asarray(ends, dtype=np.int64)
    sums = cum[idx]
    sums[1:] -= cum[idx[:-1]]
    out[idx] = sums
    out[-1] = hist[-1]
    return out
