"""HybridTree's host with a background randomness pool (``specs/batch_executors.md``,
"Randomness pools in the roles"): the same model as without it (same seeds), and every H3
ciphertext has its own obfuscator (recovered with the host's key; planted companion: a pool
that hands one value out twice is caught)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import securetrees.paillier.prefill as prefill_module
from securetrees.paillier import Ciphertext
from securetrees.protocols.hybridtree.testing import HybridData, fit_layout, with_guest_column
from securetrees.rand import DeterministicRandom
from securetrees.testing.paillier import small_keypair
from tests.secureboost.test_background_pool import ReusingPool


def _fit(data: HybridData, make: Any, **kw: Any) -> Any:
    model = make("clf", "secure", n_estimators=2, record_payloads=True,
                 rng=DeterministicRandom("hybridtree/pool"), **kw)
    return fit_layout(model, data.X, data.y, data.host_features, data.guest_features, data.guest_rows)


def _obfuscators(model: Any) -> list[int]:
    """``c · (1 - mN) mod N²`` of every H3 ciphertext the host sent (each once)."""
    pk, sk = small_keypair(512)
    n, n2 = pk.n, pk.n_square
    out = []
    for r in model.network_.transcript.records:
        if r.type_name == "hybridtree.gradients":
            for block in r.payload.blocks:
                for c in block.values:
                    out.append(c * (1 - sk.decrypt_residue(Ciphertext(pk, c)) * n) % n2)
    return out


@pytest.mark.parametrize("encryption", ["key-owner", "djn"])
def test_the_same_model_and_fresh_obfuscators_with_the_pool(data: HybridData, make: Any, encryption: str) -> None:
    off = _fit(data, make, encryption=encryption)
    on = _fit(data, make, encryption=encryption, background_pool=True)
    X = with_guest_column(data.X, data.guest_rows)
    assert np.array_equal(on.decision_function(X), off.decision_function(X))
    obfs = _obfuscators(on)
    assert len(obfs) == len(_obfuscators(off)) > 0
    assert len(set(obfs)) == len(obfs)


def test_a_pool_that_reuses_an_obfuscator_is_caught(
    data: HybridData, make: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prefill_module, "BackgroundPool", ReusingPool)
    obfs = _obfuscators(_fit(data, make, background_pool=True))
    assert len(set(obfs)) < len(obfs)
