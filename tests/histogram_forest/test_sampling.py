"""Per-row sampling under DP (protocols/histogram_forest/sampling.py; spec "Differential privacy and its
accounting"): the laws, the sampler against its law, and that the weights come from the cryptographic
source rather than the public ML seed."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy.stats import chi2

import securetrees.protocols.histogram_forest.client as client_mod
from securetrees.errors import ParameterError
from securetrees.protocols.histogram_forest import Client
from securetrees.protocols.histogram_forest.messages import LayerRequest, SetupRequest
from securetrees.protocols.histogram_forest.sampling import RowLaw, dp_row_law
from securetrees.rand import DeterministicRandom, RandomSource
from securetrees.runtime import InProcessNetwork


def test_laws_of_the_three_modes() -> None:
    none = dp_row_law("none", 0.3, 3)
    assert none.max_weight == 1 and none.pmf().tolist() == [0.0, 1.0]
    sub = dp_row_law("subsample", 0.3, 3)
    assert sub.max_weight == 1 and sub.pmf()[1] == pytest.approx(0.3, abs=2**-52)
    boot = dp_row_law("bootstrap", 0.3, 3)
    poisson = [math.exp(-1) / math.factorial(j) for j in range(3)]
    assert boot.max_weight == 3
    np.testing.assert_allclose(boot.pmf(), [*poisson, 1 - sum(poisson)], atol=2**-52)
    assert dp_row_law("bootstrap", 0.3, 1).pmf()[1] == pytest.approx(1 - math.exp(-1))
    for law in (none, sub, boot):
        assert sum(p for _, p in law.outcomes(3)) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.statistical
@pytest.mark.parametrize(("sampling", "fraction", "m"), [("subsample", 0.3, 3), ("bootstrap", 0.5, 3)])
def test_drawn_weights_follow_the_law(sampling: str, fraction: float, m: int) -> None:
    """Chi-square of 20 000 weights against ``pmf`` (false-alarm rate 1e-3, fixed seed: never flaky)."""
    law = dp_row_law(sampling, fraction, m)
    w = law.draw(20_000, DeterministicRandom(f"hf/rows/{sampling}"))
    expected = law.pmf() * w.size
    observed = np.bincount(w, minlength=law.max_weight + 1).astype(np.float64)
    stat = float(((observed - expected) ** 2 / expected).sum())
    assert stat < float(chi2.ppf(0.999, law.max_weight))


def test_bad_laws_are_refused() -> None:
    for cuts in ((), (1 << 53,), (5, 3, 1 << 53), (0, 1 << 52), (-1, 1 << 53)):
        with pytest.raises(ParameterError):
            RowLaw(cuts)
    for args in (("poisson", 0.5, 3), ("subsample", 0.0, 3), ("subsample", 1.5, 3), ("bootstrap", 0.5, 0)):
        with pytest.raises(ParameterError):
            dp_row_law(*args)
    with pytest.raises(ParameterError):
        dp_row_law("none", 1.0, 1).draw(-1, DeterministicRandom("x"))


# -- the client draws its DP sample from the cryptographic source -----------------------------------


def _root_counts(seed: int, rng_label: str, monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    """The noiseless root counts of a DP client (noise silenced) with ML ``seed`` and CSPRNG ``rng_label``."""
    gen = np.random.default_rng(0)
    X = np.column_stack([gen.uniform(0, 1, 200), gen.uniform(0, 1, 200)])
    y = gen.integers(0, 2, 200)
    with monkeypatch.context() as mp:
        mp.setattr(client_mod, "geometric_noise", lambda shape, eps, delta, *, rng: np.zeros(shape, np.int64))
        client = Client("c", InProcessNetwork(), X, y, seed=seed, rng=DeterministicRandom(rng_label))
        client.on_setup("server", SetupRequest(
            session=bytes(16), n_features=2, categories=(0, 0), n_classes=2, n_trees=1, histogram="fixed", n_bins=4,
            low=np.zeros(2), high=np.ones(2), sampling="subsample", subsample_fraction=0.5, max_multiplicity=1,
            features_per_node=2, max_depth=1, grid_cells=0, epsilon=1.0, input_epsilon=None, secure=False,
        ))
        e_i, e_f, e_b = np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, bool)
        reply = client.on_layer("server", LayerRequest(
            step=0, tree=0, layer=0, split_feature=e_i, split_threshold=e_f, split_categorical=e_b,
            split_missing_left=e_b, keep=np.zeros(1, np.int64), features=np.ones((1, 2), dtype=bool),
        ))
    return np.asarray(reply.counts)


def _sample_is_cryptographic(monkeypatch: pytest.MonkeyPatch) -> bool:
    """The sample changes with the cryptographic source and not with the public ML seed (a server
    that knows ``random_state`` must not know which rows were drawn)."""
    same_seed = _root_counts(1, "hf/a", monkeypatch), _root_counts(1, "hf/b", monkeypatch)
    same_rng = _root_counts(1, "hf/a", monkeypatch), _root_counts(2, "hf/a", monkeypatch)
    return not np.array_equal(*same_seed) and np.array_equal(*same_rng)


def test_dp_sample_comes_from_the_cryptographic_source(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _sample_is_cryptographic(monkeypatch)


def test_planted_seeded_sample_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: the DP weights drawn from the ML generator (numpy, seeded) instead of ``rng``."""

    class SeededLaw:
        max_weight = 1

        def draw(self, n: int, rng: RandomSource) -> Any:
            return np.random.default_rng(7).integers(0, 2, n).astype(np.int64)

    monkeypatch.setattr(client_mod, "dp_row_law", lambda *args: SeededLaw())
    assert not _sample_is_cryptographic(monkeypatch)
