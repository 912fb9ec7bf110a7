"""What the HybridTree host learns from the aggregates (specs/hybridtree.md, "Too few guests" and
"Subset-sum inference").

* contributing guests are counted per (node, guest feature): a feature only one guest holds
  (Appendix C.4) is never built, so the host never receives that guest's histogram; the planted
  leak (the former per-node rule) shows the aggregate then equals the guest's own histogram;
* with the defaults the host's subset-sum solver (``securetrees.protocols.hybridtree.attack``) recovers the
  exact bin of at most 5% of the guests' cells; with the minimum node size off (0) it recovers
  more than 30% (the companion).  Data, model and solver are deterministic (seeded test data, no
  randomness in training or in the solver), so these rates are fixed numbers, never flaky.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.protocols.hybridtree import Host
from securetrees.protocols.hybridtree.attack import (
    RecordingHost,
    Task,
    attack,
    fit_recorded,
    regression_task,
)
from securetrees.protocols.hybridtree.messages import HistogramRequest
from securetrees.protocols.hybridtree.params import MIN_NODE_SIZE
from securetrees.protocols.hybridtree.testing import hybrid_data

ONLY_GUEST = 3  # the one guest holding column 5 (guest-space feature 2)


def _one_guest_feature_task() -> Task:
    d = hybrid_data(n=400, n_guests=4, seed=3)
    X = np.nan_to_num(d.X)  # no missing values: every guest holding a feature contributes to it
    return Task("one-guest-feature", True, X, d.y.astype(np.float64), X, d.y.astype(np.float64),
                d.host_features, [[3, 4], [3, 4], [3, 4], [3, 4, 5]], d.guest_rows, d.guest_rows,
                [5], 8)


def _fit_heterogeneous(**kw: Any) -> Any:
    task = _one_guest_feature_task()
    return task, fit_recorded(task, 3, host_depth=2, guest_depth=2, min_node_size=0,
                              record_payloads=True, **kw)


def _single_guest_aggregates(task: Task, model: Any) -> list[bool]:
    """For every aggregate of guest feature 2 the host holds: whether it equals the one holding
    guest's own histogram (bin counts and gradient sums of its instances of the node)."""
    host: RecordingHost = model.host_
    owner = host._owner
    rows = task.train_rows[ONLY_GUEST]
    guest_bins = model.guests_[ONLY_GUEST]._binned[:, 2]
    out = []
    for obs in host.observations:
        if not obs.features[2]:
            continue
        g_fix = host.stats[obs.tree][0]
        mine = obs.ids[owner[obs.ids] == ONLY_GUEST]
        own = np.zeros((model.params_.max_bins, 2), dtype=np.int64)
        for i in mine.tolist():
            b = int(guest_bins[np.searchsorted(rows, i)])
            own[b] += (1, g_fix[i])
        out.append(bool(np.array_equal(obs.hist[2, :-1, :2], own)))
    return out


def test_a_feature_one_guest_holds_is_withheld() -> None:
    task, model = _fit_heterogeneous()
    assert sum(r.n_guest_splits for r in model.host_.records) > 0  # the other features are used
    assert _single_guest_aggregates(task, model) == []  # the host holds no aggregate of feature 2
    for rec in model.network_.transcript.view(model.guests_[ONLY_GUEST].name):
        if isinstance(rec.payload, HistogramRequest):
            assert all(2 not in b.features for b in rec.payload.build)  # never even built


def test_planted_leak_per_node_rule_shows_one_guests_histogram(monkeypatch: pytest.MonkeyPatch) -> None:
    """The former rule (contributors counted per node, every feature built) fails the check."""

    def per_node(self: Host, ids: Any, owner: Any) -> tuple[Any, Any]:
        o = owner[ids]
        enough = np.unique(o[o >= 0]).size >= self.params.min_guests
        n_feat = self._guest_n_bins.size
        return np.full(n_feat, enough), np.ones(n_feat, dtype=bool)

    monkeypatch.setattr(Host, "_feature_rules", per_node)
    task, model = _fit_heterogeneous()
    exposed = _single_guest_aggregates(task, model)
    assert exposed and all(exposed)  # every aggregate of feature 2 is guest 3's own histogram


def _small_regression() -> Task:
    return regression_task(n_train=6000, n_test=10, seed=1)  # 8 host leaves of ~750 instances


def _recovery(min_node_size: int) -> float:
    model = fit_recorded(_small_regression(), 10, host_depth=3, min_node_size=min_node_size)
    assert sum(r.n_guest_splits for r in model.host_.records) > 0  # guest layers do grow
    return attack(model).rate


def test_subset_sum_recovery_is_at_most_5_percent_with_the_defaults() -> None:
    assert _recovery(MIN_NODE_SIZE) <= 0.05


def test_planted_leak_no_minimum_node_size_lets_the_solver_recover_most_cells() -> None:
    assert _recovery(0) > 0.30
