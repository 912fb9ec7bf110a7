"""What the histogram forest's server sees in each mode (specs/histogram_forest.md, "Modes", "Message flow").

- Secure aggregation: the server receives only masked vectors that look uniform, none equal to a
  client's own counts, whose sum equals the plain mode's sum; no planted raw value reaches it.
- Streaming (the paper's bins): the planted raw value *does* reach the server (positive control for
  the scanner, and the reason DP and secure aggregation refuse this mode).
- DP: every cell the server receives carries geometric noise, including empty bins.
- Regression with secure aggregation (default quantile edges): every vector the server receives, in
  the grid round and in every layer, is masked; the grid round's sum is exactly the pooled grid
  marginal of each numeric feature (what the spec says the server learns) and the layers' sums are the
  plain (Σw, Σw·t1, Σw·t2).  The planted companion (a client that skips its mask) fails the check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import securetrees.protocols.histogram_forest.client as client_mod
from securetrees.protocols.histogram_forest import HistogramForestClassifier, HistogramForestRegressor
from securetrees.protocols.histogram_forest.mechanisms import geometric_pmf
from securetrees.protocols.histogram_forest.messages import CountsReply
from securetrees.protocols.histogram_forest.schema import fixed_mapper
from securetrees.protocols.histogram_forest.testing import fit_parts
from securetrees.rand import DeterministicRandom
from securetrees.runtime import Transcript
from securetrees.testing.canaries import assert_no_canaries, find_canaries

CANARY = 731.0271849
CATEGORICAL = [False, False, True]
RANGES = [(0.0, 1000.0), (0.0, 20.0), None]

# Chi-square over 256 byte values (255 degrees of freedom), false-alarm rate 1e-6 per test:
# Wilson-Hilferty critical value with z = 4.753.
CHI2_255 = 255 * (1 - 2 / (9 * 255) + 4.753 * math.sqrt(2 / (9 * 255))) ** 3


def parts(n_clients: int = 4, rows: int = 150) -> list[tuple[np.ndarray, np.ndarray]]:
    gen = np.random.default_rng(42)
    out = []
    for i in range(n_clients):
        a = np.round(gen.uniform(0, 10, rows), 2)
        b = gen.integers(0, 21, rows).astype(np.float64)
        c = gen.integers(0, 4, rows).astype(np.float64)
        y = ((a > 5) ^ (c == 1)).astype(np.int64)
        X = np.column_stack([a, b, c])
        if i == 1:
            X[7, 0] = CANARY  # far from every other value: stays a bin of its own in streaming mode
        out.append((X, y))
    return out


def server_counts(transcript: Transcript) -> dict[int, dict[str, np.ndarray]]:
    """The CountsReply vectors the server received, by round and client."""
    rounds: dict[int, dict[str, np.ndarray]] = {}
    for rec in transcript.view("server"):
        if isinstance(rec.payload, CountsReply):
            rounds.setdefault(rec.round, {})[rec.sender] = rec.payload.counts
    return rounds


def fit(**kw: object) -> HistogramForestClassifier:
    common: dict[str, object] = dict(
        n_estimators=2, max_depth=3, n_bins=8, random_state=3, categorical_features=CATEGORICAL, feature_ranges=RANGES,
        categories=[0, 0, 4], classes=[0, 1], bin_edges="uniform",
    )
    common.update(kw)
    return fit_parts(HistogramForestClassifier(**common), parts(), rng=DeterministicRandom("hf/views"))  # type: ignore[arg-type]


def test_secure_server_view_holds_only_masked_vectors_with_the_plain_sum() -> None:
    plain = fit(histogram="fixed")
    secure = fit(secure_aggregation=True)
    types = secure.transcript_.types_received("server")
    assert set(types) == {
        "histogram_forest.setup_reply", "histogram_forest.ack", "histogram_forest.counts",
    }
    for i in range(4):
        assert set(secure.transcript_.types_received(f"client{i}")) == {
            "histogram_forest.setup", "histogram_forest.keys", "histogram_forest.layer",
        }
    received = server_counts(secure.transcript_)
    assert all(v.dtype == np.uint64 for r in received.values() for v in r.values())
    check_server_sees_only_masked_counts(server_counts(plain.transcript_), received)


def check_server_sees_only_masked_counts(plain: dict[int, dict[str, np.ndarray]],
                                         received: dict[int, dict[str, np.ndarray]]) -> None:
    """Round by round: no received vector shares more than one entry with the client's true counts
    (chance 2^-64 per entry), the vectors sum to the true total, and their bytes look uniform."""
    plain_rounds, secure_rounds = list(plain.values()), list(received.values())
    assert len(plain_rounds) == len(secure_rounds) > 2
    masked_all = []
    for own, masked in zip(plain_rounds, secure_rounds, strict=True):
        assert set(own) == set(masked) == {f"client{i}" for i in range(4)}
        total = sum(v.astype(np.int64) for v in own.values())
        masked_sum = np.zeros_like(total).view(np.uint64)
        for name, vec in masked.items():
            vec = np.asarray(vec).astype(np.int64).view(np.uint64)
            same = int(np.count_nonzero(vec.view(np.int64) == own[name]))
            assert same <= 1, f"{name}'s vector shows {same} of its true counts"
            masked_sum = masked_sum + vec
            masked_all.append(vec)
        np.testing.assert_array_equal(masked_sum.view(np.int64), total)
    stacked = np.concatenate(masked_all)
    counts = np.bincount(stacked.view(np.uint8), minlength=256).astype(np.float64)
    expected = counts.sum() / 256
    assert float(((counts - expected) ** 2 / expected).sum()) < CHI2_255, "masked bytes are not uniform"


def test_unmasked_counts_at_the_server_are_caught() -> None:
    """Planted leak: the clients send their counts without masks (the sum is still right)."""
    plain = server_counts(fit(histogram="fixed").transcript_)
    with pytest.raises(AssertionError, match="true counts"):
        check_server_sees_only_masked_counts(plain, plain)


@pytest.mark.parametrize("mode", [dict(secure_aggregation=True), dict(histogram="fixed"),
                                  dict(epsilon=5.0, sampling="subsample")])
def test_planted_raw_value_never_reaches_the_server_with_fixed_bins(mode: dict[str, object]) -> None:
    model = fit(**mode)
    assert_no_canaries(model.transcript_.view("server"), [CANARY])
    for i in range(4):
        assert_no_canaries(model.transcript_.view(f"client{i}"), [CANARY])


def test_streaming_mode_sends_raw_bin_centres_positive_control() -> None:
    """The paper's centres are means of raw values: the planted value reaches the server."""
    model = fit(histogram="streaming", sampling="none", max_features=None)
    hits = find_canaries(model.transcript_.view("server"), [CANARY])
    assert hits and all(h.record.sender == "client1" for h in hits)
    # ... but never another client: the server does not forward bins.
    for name in ("client0", "client2", "client3"):
        assert_no_canaries(model.transcript_.view(name), [CANARY])


def test_dp_noise_is_on_every_cell_the_server_receives() -> None:
    """With histogram noise, a received cell equals the true count with probability P[Z = 0] only,
    also where the true count is zero (empty bins are noised too)."""
    # sampling="none": the same rows in both runs (under DP the sample is drawn from the cryptographic source)
    truth = server_counts(fit(histogram="fixed", sampling="none").transcript_)
    eps = 3.0
    noisy = server_counts(fit(epsilon=eps, sampling="none").transcript_)
    first_truth, first_noisy = next(iter(truth.values())), next(iter(noisy.values()))  # the root layer
    alpha = math.exp(-(eps / (2 * 3)) / 1)  # ε per release = ε / (trees · depth); Δ = 1 · sqrt(3) -> 1
    p_zero = float(geometric_pmf(0, alpha))
    same, zero_cells, total = 0, 0, 0
    for name, own in first_truth.items():
        same += int(np.count_nonzero(first_noisy[name] == own))
        zero_cells += int(np.count_nonzero((own == 0) & (first_noisy[name] != 0)))
        total += own.size
    assert abs(same / total - p_zero) < 0.1
    assert zero_cells > 0


def fit_regressor(**kw: object) -> HistogramForestRegressor:
    data = [(X, X[:, 0] / 100.0 + X[:, 2] + y) for X, y in parts()]
    return fit_parts(HistogramForestRegressor(
        n_estimators=2, max_depth=3, n_bins=8, random_state=3, categorical_features=CATEGORICAL, feature_ranges=RANGES,
        categories=[0, 0, 4], y_range=(0.0, 15.0), grid_cells=64, **kw,  # type: ignore[arg-type]
    ), data, rng=DeterministicRandom("hfr/views"))


def unmasked_cells(plain: Transcript, secure: Transcript) -> int:
    """The most cells of one client's secure reply equal to its plain reply (a masked cell matches with
    chance 2^-64, so any honest run gives 0 or, at worst, 1)."""
    worst = 0
    for own, masked in zip(server_counts(plain).values(), server_counts(secure).values(), strict=True):
        for name, vec in masked.items():
            worst = max(worst, int(np.count_nonzero(vec.view(np.int64) == own[name])))
    return worst


def check_secure_regression_view() -> int:
    plain, secure = fit_regressor(), fit_regressor(secure_aggregation=True)
    plain_rounds = list(server_counts(plain.transcript_).values())
    secure_rounds = list(server_counts(secure.transcript_).values())
    assert len(plain_rounds) == len(secure_rounds) > 2
    for own, masked in zip(plain_rounds, secure_rounds, strict=True):
        total = sum(v.astype(np.int64) for v in own.values())
        masked_sum = sum((v.view(np.uint64) for v in masked.values()), np.zeros(total.size, np.uint64))
        np.testing.assert_array_equal(masked_sum.view(np.int64), total)
    # The grid round (the first counts): the sum is the pooled marginal over 64 equal cells per numeric feature.
    X = np.vstack([p[0] for p in parts()])
    grid = fixed_mapper((0, 0, 4), np.array([0.0, 0.0, np.nan]), np.array([1000.0, 20.0, np.nan]), 64)
    codes = grid.transform(X).astype(np.int64)
    pooled = np.concatenate([np.bincount(codes[:, f], minlength=64)[:64] for f in (0, 1)])
    grid_sum = sum(v.astype(np.int64) for v in secure_rounds[0].values()).view(np.int64)  # uint64 wraps back
    np.testing.assert_array_equal(grid_sum, pooled)
    assert secure.transcript_.types_received("client0")["histogram_forest.grid"] == 1
    return unmasked_cells(plain.transcript_, secure.transcript_)


def test_secure_regression_server_sees_masked_vectors_and_the_pooled_grid_marginal() -> None:
    assert check_secure_regression_view() <= 1


def test_planted_unmasked_regression_reply_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Companion: a client whose seal skips the mask sends its own sums; the check sees them."""

    def leaky_seal(self: client_mod.Client, flat: np.ndarray, *, round: int, purpose: str) -> CountsReply:
        return CountsReply(counts=flat.view(np.uint64) if self._setup and self._setup.secure else flat)

    monkeypatch.setattr(client_mod.Client, "_seal", leaky_seal)
    assert check_secure_regression_view() > 1
