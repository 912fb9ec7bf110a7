"""Secure mode equals plaintext mode (specs/hybridtree.md, "Modes"); the facade and inference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.protocols.hybridtree.testing import HybridData, fit_layout, with_guest_column


@pytest.fixture
def fit(make: Any, fit_quiet: Any, data: HybridData) -> Any:
    def run(kind: str, mode: str, y: np.ndarray, **kw: object) -> Any:
        return fit_quiet(make(kind, mode, **kw), data.X, y, data.host_features,
                         data.guest_features, data.guest_rows)

    return run


def _records(m: object) -> list[tuple[object, ...]]:
    out = []
    for r in m.host_.records:  # type: ignore[attr-defined]
        out.append((r.left, r.right, r.guest_feature, r.guest_bin, r.missing_left, r.value,
                    r.host_tree.feature.tolist(),
                    np.nan_to_num(r.host_tree.threshold, nan=-7.0).tolist()))
    return out


@pytest.mark.parametrize(("kind", "target"), [("clf", "y"), ("reg", "y_reg"), ("clf", "y_multi")])
def test_secure_equals_plaintext(data: HybridData, fit: Any, kind: str, target: str) -> None:
    y = getattr(data, target)
    sec = fit(kind, "secure", y)
    plain = fit(kind, "plaintext", y)
    assert _records(sec) == _records(plain)  # same splits, same leaf values (exactly)
    assert sum(r.n_guest_splits for r in sec.host_.records) > 0  # type: ignore[attr-defined]
    np.testing.assert_array_equal(sec.decision_function(with_guest_column(data.X, data.guest_rows)),
                                  plain.decision_function(with_guest_column(data.X, data.guest_rows)))


def test_guest_layers_help_and_guests_share_splits(data: HybridData, fit: Any) -> None:
    m = fit("clf", "secure", data.y, n_estimators=6)
    solo = fit("clf", "secure", data.y, n_estimators=6, guest_depth=1)
    X = with_guest_column(data.X, data.guest_rows)
    assert m.score(X, data.y) >= 0.85  # type: ignore[attr-defined]
    assert m.score(X, data.y) >= solo.score(X, data.y)  # type: ignore[attr-defined]
    tables = [g.splits for g in m.guests_]  # type: ignore[attr-defined]
    assert all(t == tables[0] for t in tables)  # guests grow the layers jointly
    # Inference agrees with the training-time leaf assignment of the host.
    proba = m.predict_proba(with_guest_column(data.X, data.guest_rows))  # type: ignore[attr-defined]
    assert proba.shape == (data.X.shape[0], 2) and np.allclose(proba.sum(axis=1), 1.0)


def test_inference_rounds_and_unheld_instances(data: HybridData, fit: Any) -> None:
    m = fit("clf", "secure", data.y)
    net = m.network_  # type: ignore[attr-defined]
    mark = net.transcript.mark()
    m.predict(with_guest_column(data.X, data.guest_rows))  # type: ignore[attr-defined]
    assert net.transcript.since(mark).rounds == 1  # one call_many: request + reply
    # Rows no guest holds follow missing_left and still get a prediction.
    rows = [r[r % 2 == 0] for r in data.guest_rows]
    p = m.predict_proba(with_guest_column(data.X, rows))  # type: ignore[attr-defined]
    assert np.all(np.isfinite(p))


def test_paper_mode_runs_and_differs(data: HybridData, fit: Any) -> None:
    paper = fit("clf", "paper", data.y, n_estimators=4)
    joint = fit("clf", "plaintext", data.y, n_estimators=4)
    assert paper.score(with_guest_column(data.X, data.guest_rows), data.y) > 0.7  # type: ignore[attr-defined]
    assert not np.array_equal(paper.decision_function(with_guest_column(data.X, data.guest_rows)),  # type: ignore[attr-defined]
                              joint.decision_function(with_guest_column(data.X, data.guest_rows)))  # type: ignore[attr-defined]


def test_heterogeneous_and_overlapping_guests(data: HybridData, make: Any, fit_quiet: Any) -> None:
    """Appendix C.4: guests with different feature sets and shared rows (owner = lowest index)."""
    rows = [np.union1d(data.guest_rows[0], data.guest_rows[1][:10]), *data.guest_rows[1:]]
    feats = [[3, 4, 5], [3, 5], [4, 5], [3, 4]]
    m = make("clf", "secure")
    fit_layout(m, data.X, data.y, data.host_features, feats, rows)
    plain = fit_quiet(make("clf", "plaintext"), data.X, data.y, data.host_features, feats, rows)
    Xg = with_guest_column(data.X, rows)
    np.testing.assert_array_equal(m.decision_function(Xg), plain.decision_function(Xg))


def test_few_guests_fall_back_or_raise(data: HybridData, make: Any) -> None:
    # Guest 3 holds 2 rows: host leaves keep >= 3 owners, but many children do not.
    rows = [np.concatenate([data.guest_rows[0], data.guest_rows[3][2:]]), data.guest_rows[1],
            data.guest_rows[2], data.guest_rows[3][:2]]
    m = make("clf", "secure", host_depth=3)
    fit_layout(m, data.X, data.y, data.host_features, data.guest_features, rows)
    assert m.fallback_nodes_ > 0
    from securetrees.errors import ProtocolError

    with pytest.raises(ProtocolError):
        fit_layout(make("clf", "secure", host_depth=3, few_guests="raise"), data.X, data.y,
                   data.host_features, data.guest_features, rows)


def test_get_set_params(make: Any) -> None:
    m = make("clf")
    assert m.get_params()["host_depth"] == 2
    assert m.set_params(host_depth=3).host_depth == 3


@pytest.mark.parametrize("encryption", ["djn-short", "key-owner"])
def test_encryption_modes_give_the_same_model(data: HybridData, fit: Any, encryption: str) -> None:
    ref = fit("clf", "plaintext", data.y, n_estimators=2)
    sec = fit("clf", "secure", data.y, n_estimators=2, encryption=encryption)
    np.testing.assert_array_equal(sec.decision_function(with_guest_column(data.X, data.guest_rows)),
                                  ref.decision_function(with_guest_column(data.X, data.guest_rows)))


def test_secure_equals_plaintext_with_merged_groups(data: HybridData, fit: Any) -> None:
    """Node groups merged to a minimum expected size (and coarsened below a parent) give the same
    model in both modes; with this size some groups span more than one base group."""
    from securetrees.protocols.hybridtree.messages import HistogramRequest

    kw: dict[str, object] = {"min_bin_size": 12, "categorical_features": [5]}
    sec = fit("reg", "secure", data.y_reg, record_payloads=True, **kw)
    plain = fit("reg", "plaintext", data.y_reg, **kw)
    assert _records(sec) == _records(plain)
    widths = {int(s.threshold - s.low + 1) for t in sec.guests_[0].splits.values()
              for s in t.values() if s.categorical}
    bins = {r.guest_bin[k] for r in sec.host_.records for k in range(len(r.guest_bin))
            if r.guest_feature[k] in (0, 1)}
    assert sum(r.n_guest_splits for r in sec.host_.records) > 0
    assert bins and all(b % 2 == 1 for b in bins)  # numeric splits at base-group ends only
    assert widths <= {2, 4}
    spans = [np.diff((-1, *ends)).max() for rec in sec.network_.transcript.view(sec.guests_[0].name)
             if isinstance(rec.payload, HistogramRequest) for b in rec.payload.build for ends in b.groups]
    assert spans and max(spans) > 2  # some groups merge several base groups
