"""The CS's reconstruction of the participants' features from the candidate codes it received
(``specs/revfrf.md``, "What the CS learns from the candidate codes").

Input: the CS's recorded view only (the ``revfrf.expand.request`` messages it sent, giving
each node's sample set μ and the (node, column) tasks, and the ``revfrf.expand.reply``
messages it received, giving each sample's code per task).  Per column the CS runs two
attacks and keeps whatever each yields:

* **label reading**: if every sample's code on a column is the same in every node where it
  appears (the codes are global labels, as the old full-resolution ``bins`` codes, the
  column's quantile bin), the code is taken as the sample's global bin;
* **order composition**: every (node, column) task orders its samples into the code groups
  (a smaller code is a smaller value).  The transitive closure of these strict orders over
  all nodes and trees bounds each sample's rank among the m samples the CS saw on the column
  to ``[below, m − 1 − above]``; given the bin marginal of those samples (the attacker is
  granted the sorted multiset of their global bins, a strong prior), the bin is *held* when
  every rank in that interval falls in one bin.  This is certain knowledge, never a guess.

Figures: ``rank_correlation`` (Spearman's ρ between the attacker's score and the true value,
over the samples it saw; the best of three scores: the mean within-node mid-percentile of the
sample's codes, the midpoint of its rank interval, and its label when labels are global),
``exact_bins`` (samples whose global bin the CS holds) and ``rank_interval`` (the median width
of the rank intervals, as a share of the samples the CS saw on the column).

The CC's naming of the leaf a prediction reached (``specs/revfrf.md``, "What the CC learns
from a prediction request"): :func:`cc_prediction_profile` reads, from the CC's view of one
request, each HoLT batch's size and output keys; :func:`name_leaf` guesses each request's
leaf from known requests with the same profile.  :func:`tie_guess_rate` is its guess of a
path bit from a comparison whose value equals the threshold.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.dtpkc.twoserver import HoLTRequest
from securetrees.encoding import FixedPoint
from securetrees.errors import ParameterError
from securetrees.protocols.revfrf.messages import ExpandReply, ExpandRequest
from securetrees.runtime import Record, Transcript
from securetrees.testing.ranks import spearman
from securetrees.trees import BinMapper

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class CodeTask:
    """One (node, column) task as the CS saw it: the node's samples and their codes."""

    participant: str
    round: int
    tree: int
    column: int
    samples: IntArray
    codes: IntArray
    n_codes: int


def winning_partitions(transcript: Transcript, tasks: list[CodeTask], cs: str = "cs") -> list[CodeTask]:
    """The floor: only the partitions of the splits the forest uses (two codes per internal
    node), which the CS must know to place the samples whatever the codes' resolution."""
    by_key: dict[tuple[str, int], list[CodeTask]] = defaultdict(list)
    for t in tasks:
        by_key[(t.participant, t.round)].append(t)
    out = []
    for r in transcript.records:
        if r.sender != cs or r.type_name != "revfrf.split.request" or r.payload is None:
            continue
        req = r.payload
        mine = by_key[(r.receiver, req.round)]  # type: ignore[attr-defined]
        for ti, b in zip(np.asarray(req.task).tolist(), np.asarray(req.candidate).tolist(),  # type: ignore[attr-defined]
                         strict=True):
            t = mine[ti]
            out.append(CodeTask(t.participant, t.round, t.tree, t.column, t.samples,
                                (t.codes > b).astype(np.int64), 2))
    return out


def cs_code_view(transcript: Transcript, cs: str = "cs") -> list[CodeTask]:
    """Every (node, column) task of the construction, from the CS's own view (its requests
    and the replies it received), paired by receiver and round."""
    sent = {(r.receiver, r.payload.round): r.payload
            for r in transcript.records
            if r.sender == cs and isinstance(r.payload, ExpandRequest)}
    out: list[CodeTask] = []
    for r in transcript.view(cs):
        if not isinstance(r.payload, ExpandReply):
            continue
        rep = r.payload
        req = sent[(r.sender, rep.round)]
        offsets = np.asarray(req.offsets, dtype=np.int64)
        samples = np.asarray(req.samples, dtype=np.int64)
        trees = np.asarray(req.tree, dtype=np.int64)
        codes = np.asarray(rep.codes, dtype=np.int64)
        at = 0
        for k, c, nc in zip(np.asarray(req.task_node).tolist(), np.asarray(req.task_column).tolist(),
                            np.asarray(rep.n_codes).tolist(), strict=True):
            mu = samples[offsets[k]:offsets[k + 1]]
            out.append(CodeTask(r.sender, int(rep.round), int(trees[k]), int(c), mu,
                                codes[at:at + mu.size], int(nc)))
            at += mu.size
    return out


@dataclass(frozen=True)
class ColumnLeak:
    """What the CS reconstructs of one column."""

    column: int
    observed: int  # samples in at least one task on this column
    rank_correlation: float  # Spearman ρ(score, x) over the observed samples
    exact_bins: int  # samples whose global bin the CS holds (of all n)
    rank_interval: float  # median over observed samples of the rank interval's width, share of the observed
    max_codes: int  # largest number of codes of one task


def _closure(order: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Transitive closure of a strict order (``order[i, j]``: i < j known), by squaring."""
    r = order.astype(np.float32)
    while True:
        nxt = ((r + r @ r) > 0).astype(np.float32)
        if np.array_equal(nxt, r):
            return nxt > 0
        r = nxt


def column_leak(tasks: list[CodeTask], x: npt.NDArray[np.float64], column: int, max_bins: int = 255) -> ColumnLeak:
    """Both attacks on one column; ``x`` is the true column (for scoring the attack only)."""
    n = x.size
    mine = [t for t in tasks if t.column == column]
    true_bin = BinMapper.fit(x[:, None], max_bins=max_bins).transform(x[:, None])[:, 0].astype(np.int64)
    score_sum = np.zeros(n)
    seen = np.zeros(n, dtype=np.int64)
    labels: dict[int, set[int]] = defaultdict(set)
    order = np.zeros((n, n), dtype=bool)
    for t in mine:
        m = t.samples.size
        counts = np.bincount(t.codes, minlength=t.n_codes)
        below = np.concatenate([[0], np.cumsum(counts)[:-1]])
        score_sum[t.samples] += (below[t.codes] + 0.5 * counts[t.codes]) / m
        seen[t.samples] += 1
        for s, c in zip(t.samples.tolist(), t.codes.tolist(), strict=True):
            labels[s].add(c)
        order[np.ix_(t.samples, t.samples)] |= t.codes[:, None] < t.codes[None, :]
    obs = seen > 0
    closed = _closure(order)[np.ix_(obs, obs)]
    n_obs = int(obs.sum())
    lo = np.zeros(n, dtype=np.int64)
    hi = np.full(n, n_obs - 1, dtype=np.int64)
    lo[obs] = closed.sum(axis=0)  # observed samples known to be smaller
    hi[obs] = n_obs - 1 - closed.sum(axis=1)  # n_obs − 1 − observed samples known to be larger
    scores = [score_sum / np.maximum(seen, 1), (lo + hi) / 2.0]
    held = np.zeros(n, dtype=bool)
    if labels and all(len(v) == 1 for v in labels.values()):  # global labels: read them
        label = np.zeros(n)
        for s, v in labels.items():
            label[s] = next(iter(v))
            held[s] = next(iter(v)) == true_bin[s]
        scores.append(label)
    rho = max(spearman(sc[obs], x[obs]) for sc in scores) if obs.sum() > 2 else 0.0
    sorted_bins = np.sort(true_bin[obs])
    held[obs] |= sorted_bins[lo[obs]] == sorted_bins[hi[obs]]
    width = float(np.median((hi - lo + 1)[obs]) / n_obs) if n_obs else 1.0
    return ColumnLeak(column, int(obs.sum()), rho, int(held.sum()), width,
                      max((t.n_codes for t in mine), default=0))


def forest_leak(transcript: Transcript, X: npt.NDArray[np.float64], max_bins: int = 255, *,
                floor: bool = False) -> list[ColumnLeak]:
    """:func:`column_leak` for every column the CS received codes for (``floor``: from the
    winning partitions only, :func:`winning_partitions`)."""
    tasks = cs_code_view(transcript)
    if floor:
        tasks = winning_partitions(transcript, tasks)
    cols = sorted({t.column for t in tasks})
    return [column_leak(tasks, np.asarray(X[:, c], dtype=np.float64), c, max_bins) for c in cols]


def integer_data(n: int = 240, d: int = 6, n_classes: int = 2, seed: int = 0
                 ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The data the leak figures are measured on: ``d`` integer columns uniform in [0, 60)
    (many ties, so the codes' resolution matters) and ``n_classes`` labels cut at quantiles of
    ``x0 + 0.7·x2 - 0.5·x4 + N(0, 6²)``; seeded, for reproducible figures (not a secret)."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 60, size=(n, d)).astype(np.float64)
    score = X[:, 0] + 0.7 * X[:, 2] - 0.5 * X[:, 4] + rng.normal(0, 6, n)
    cuts = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.searchsorted(cuts, score).astype(np.int64)



# --------------------------------------------------------------------------- the CC's view of prediction


BatchShape = tuple[int, tuple[tuple[bytes, ...], ...]]


def cc_prediction_profile(records: Sequence[Record]) -> tuple[BatchShape, ...]:
    """What the CC's view of one prediction shows besides HoLT's blurred magnitudes: per HoLT
    batch, in order, its size and the output keys it names."""
    return tuple((len(r.payload.beta), tuple(r.payload.out_keys)) for r in records
                 if isinstance(r.payload, HoLTRequest))


def _most_common(items: Sequence[Hashable]) -> Hashable:
    """The most frequent item; ties go to the one seen first."""
    counts = Counter(items)
    return max(counts, key=lambda k: (counts[k], -items.index(k)))


def name_leaf(known: Sequence[tuple[Hashable, Hashable]], targets: Sequence[tuple[Hashable, Hashable]]
              ) -> tuple[int, int]:
    """The CC names the leaf (or the tuple of leaves, one per tree) each target request
    reached from its profile (:func:`cc_prediction_profile`), granted the (profile, leaf) pairs
    of ``known`` requests: it guesses the leaf most frequent among the known requests with
    the target's profile, or among all of them when none shares it.  Returns ``(hits, prior)``
    over the targets: its correct guesses, and those of the most frequent known leaf guessed
    for every target (no profile).  With a profile the same for every request they are equal."""
    if not known:
        raise ParameterError("the attack needs known requests")
    every = [leaf for _, leaf in known]
    by_profile: dict[Hashable, list[Hashable]] = defaultdict(list)
    for prof, leaf in known:
        by_profile[prof].append(leaf)
    base = _most_common(every)
    hits = sum(_most_common(by_profile.get(prof) or every) == leaf for prof, leaf in targets)
    prior = sum(base == leaf for _, leaf in targets)
    return hits, prior


def leaf_naming_experiment(clf: Any, X: npt.NDArray[np.float64], n: int) -> tuple[int, int, int]:
    """Rows ``n .. 2n-1`` as known requests and rows ``0 .. n-1`` as targets: one-row encrypted
    requests to the fitted one-tree facade ``clf``; the CC's profile of each
    (:func:`cc_prediction_profile`, from the transcript), the true leaf from the plaintext
    forest (tests and experiments only), then :func:`name_leaf`.  Returns ``(hits, prior,
    distinct profiles)``."""
    (tree,) = clf.plaintext_forest().trees
    seen = []
    for i in range(2 * n):
        before = len(clf.transcript_.view("cc"))
        clf.predict(X[i:i + 1], method="encrypted", requester="req")
        seen.append((cc_prediction_profile(clf.transcript_.view("cc")[before:]), int(tree.apply(X[i:i + 1])[0])))
    hits, prior = name_leaf(seen[n:], seen[:n])
    return hits, prior, len({p for p, _ in seen})


def neighbour_comparisons(forest: Any, rows: npt.NDArray[np.float64], codec: FixedPoint, grid_step: int
                          ) -> list[tuple[int, bool]]:
    """``(M, left)`` of every comparison the rows' paths through the plaintext ``forest`` make
    (what HoLT blurs for the CC; ``M = |2(X − S) − 1|`` on the codes) whose value is the
    threshold's grid neighbour or the threshold itself (``M ≤ 2g + 1``): the ones a tie
    concerns.  Rows without missing values."""
    out = []
    for tree in forest.trees:
        for x in rows:
            k = 0
            while tree.feature[k] >= 0:
                v, s = float(x[tree.feature[k]]), float(tree.threshold[k])
                m = abs(2 * (codec.encode_scalar(v) - codec.encode_scalar(s)) - 1)
                if m <= 2 * grid_step + 1:
                    out.append((m, v <= s))
                k = int(tree.left[k] if v <= s else tree.right[k])
    return out


def tie_guess_rate(comparisons: Sequence[tuple[int, bool]], grid_step: int, spread: int) -> float:
    """The CC's success rate guessing the path bit of HoLT comparisons from their magnitudes by
    spotting ties, exact in expectation (no sampling).

    Each comparison is ``(M, left)`` with ``M = |2(X − S) − 1|`` (fixed-point codes; HoLT
    compares ``X < S + 1``).  The CC knows the values sit on a grid of ``grid_step`` = g units,
    so a value that is not the threshold itself has ``M ≥ g − 1`` wherever the threshold sits;
    it sees ``log2 M + e`` with e uniform over ``spread`` octaves (HoLT's blur, the κ term
    aside).  It guesses *left* when the view lies below ``log2(g − 1)``, which only a tie
    (``x = s``, hence left) can give, and tosses a coin otherwise.  With no tie the rate is
    exactly 1/2."""
    if not comparisons or grid_step < 3:
        raise ParameterError("no comparisons, or a grid too fine for ties to show")
    cut = math.log2(grid_step - 1)
    total = 0.0
    for m, left in comparisons:
        below = min(1.0, max(0.0, (cut - math.log2(m)) / spread))  # P(view < cut)
        total += below * float(left) + (1.0 - below) * 0.5
    return total / len(comparisons)
