"""SecureBoost's ciphertexts are fresh (``specs/secureboost.md``, steps S1 and S2).

* The active party encrypts each tree's gradients with randomness of their own: no obfuscator
  repeats across the run, with the background randomness pool off (the encryption draws from
  the role's random source) and on (the pool's workers draw them), under both encryption modes.
  Planted companions: the encryption with a fixed random stream, or with randomness derived
  from each plaintext (pool off; caught where plaintexts repeat, as in a classification's
  first tree), a pool that serves the first tree's obfuscators again for every tree (pool on).
* The passive party re-randomises every packed bucket sum: handed the same histogram request
  twice, it answers with ciphertexts that share no obfuscator.  Without that the sums are the
  products of the active party's own ciphertexts, whose obfuscators the active party knows, so
  it could test which instances a bucket holds.  Planted companion: the re-randomisation factor
  is 1.

The checks are :mod:`securetrees.testing.freshness`; fresh obfuscators collide with
probability below 2^-900 per test (its docstring), so no check can fail by chance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import securetrees.paillier.prefill as prefill_module
import securetrees.protocols.secureboost.active as active_module
import securetrees.protocols.secureboost.passive as passive_module
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.secureboost import PassiveParty
from securetrees.protocols.secureboost.messages import HistogramReply, HistogramRequest
from securetrees.rand import DeterministicRandom
from securetrees.testing.freshness import (
    Fingerprints,
    assert_fresh,
    assert_replay_fresh,
    paillier_fingerprints,
    repeating_pool,
)
from securetrees.testing.paillier import small_keypair
from tests.secureboost.conftest import PARTITION, make, vertical_data

PASSIVES = ("passive1", "passive2")
KEY: tuple[PublicKey, PrivateKey] = small_keypair(1024)


def fingerprints(pk: PublicKey) -> dict[str, Fingerprints]:
    """The randomness fingerprint of every ciphertext of the two message types that carry them."""
    width = 2 * pk.modulus_bytes

    def gradients(payload: Any) -> list[int]:
        data = payload.ciphertexts
        return paillier_fingerprints((int.from_bytes(data[i:i + width], "big") for i in range(0, len(data), width)),
                                     pk.n)

    return {"secureboost.gradients": gradients,
            "secureboost.histogram_reply": lambda payload: paillier_fingerprints(payload.packed, pk.n)}


class Replays:
    """Every histogram request handled twice by its passive party, from the same state (the
    second run finds the layer's sums already cached, so it builds them all directly: the same
    ciphertext values before re-randomisation).  The first answer is the one sent."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pairs: list[tuple[HistogramReply, HistogramReply]] = []
        handle = PassiveParty.on_histogram

        def twice(party: PassiveParty, sender: str, msg: HistogramRequest) -> HistogramReply:
            first = handle(party, sender, msg)
            self.pairs.append((first, handle(party, sender, msg)))
            return first

        monkeypatch.setattr(PassiveParty, "on_histogram", twice)

    def check(self, pk: PublicKey) -> None:
        assert self.pairs
        for first, second in self.pairs:
            assert_replay_fresh(paillier_fingerprints(first.packed, pk.n), paillier_fingerprints(second.packed, pk.n),
                                pk.n)


def _fit(keys: tuple[PublicKey, PrivateKey], pool: bool, encryption: str = "key-owner", task: str = "reg") -> Any:
    """A fit on the SecureBoost tests' data; ``clf``: labels above the median target, so that in
    the first tree every instance of a class has the same gradient (the same plaintext)."""
    X, y = vertical_data()
    if task == "clf":
        y = (y > np.median(y)).astype(np.int64)
    model = make(task, PARTITION, keys, n_estimators=3, rng=DeterministicRandom("secureboost/freshness"),
                 background_pool=pool, encryption=encryption)
    return model.fit(X, y)


def check_active_fresh(model: Any, pk: PublicKey) -> None:
    assert_fresh(model.network_.transcript, ["active"], fingerprints(pk))


def check_passives_fresh(model: Any, pk: PublicKey) -> None:
    assert_fresh(model.network_.transcript, PASSIVES, fingerprints(pk))


@pytest.mark.parametrize(("pool", "encryption", "task"), [(False, "key-owner", "reg"), (False, "djn", "reg"),
                                                          (True, "key-owner", "reg"), (True, "djn", "reg"),
                                                          (False, "key-owner", "clf")])
def test_every_ciphertext_is_fresh(pool: bool, encryption: str, task: str, monkeypatch: pytest.MonkeyPatch) -> None:
    replays = Replays(monkeypatch)
    model = _fit(KEY, pool, encryption, task)
    check_active_fresh(model, KEY[0])
    check_passives_fresh(model, KEY[0])
    replays.check(KEY[0])


@pytest.mark.parametrize("encryption", ["key-owner", "djn"])
def test_planted_fixed_encryption_randomness_is_caught(encryption: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pool off: every tree's gradients encrypted from the same fixed stream."""
    honest = active_module.encrypt_to_bytes

    def fixed(*args: Any, **kw: Any) -> bytes:
        return honest(*args, **{**kw, "rng": DeterministicRandom("fixed")})

    monkeypatch.setattr(active_module, "encrypt_to_bytes", fixed)
    model = _fit(KEY, pool=False, encryption=encryption)
    check_passives_fresh(model, KEY[0])  # the leak is the active party's only
    with pytest.raises(AssertionError, match="repeated"):
        check_active_fresh(model, KEY[0])


def test_planted_encryption_randomness_from_the_plaintext_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pool off: each ciphertext's randomness derived from its plaintext (deterministic
    encryption); in the first tree of a classification every instance of a class repeats."""
    honest = active_module.encrypt_to_bytes

    def deterministic(key: Any, values: Any, **kw: Any) -> bytes:
        return b"".join(honest(key, [v], **{**kw, "rng": DeterministicRandom(f"plaintext {v}")}) for v in values)

    monkeypatch.setattr(active_module, "encrypt_to_bytes", deterministic)
    with pytest.raises(AssertionError, match="repeated"):
        check_active_fresh(_fit(KEY, pool=False, task="clf"), KEY[0])


def test_planted_repeating_pool_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefill_module, "BackgroundPool", repeating_pool())
    model = _fit(KEY, pool=True)
    with pytest.raises(AssertionError, match="repeated"):
        check_active_fresh(model, KEY[0])


def _one_factor(pk: PublicKey, mode: Any, count: int, **kw: Any) -> list[Any]:
    """The passive party's obfuscators as a leaky variant draws them: one fresh factor per reply."""
    return HONEST_OBFUSCATORS(pk, mode, 1, **kw) * count


HONEST_OBFUSCATORS = passive_module.obfuscators


@pytest.mark.parametrize("leak", ["factor 1", "one factor per reply"])
def test_planted_bucket_sums_not_rerandomised_are_caught(leak: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The passive party's re-randomisation factor is 1, or one factor for a whole reply: the
    model is unchanged and the transcript check finds nothing, but the replayed request shows it."""
    X = vertical_data()[0]
    honest = _fit(KEY, pool=False).predict(X)
    planted = (lambda pk, mode, count, **kw: [1] * count) if leak == "factor 1" else _one_factor
    monkeypatch.setattr(passive_module, "obfuscators", planted)
    replays = Replays(monkeypatch)
    model = _fit(KEY, pool=False)
    assert np.array_equal(model.predict(X), honest)
    check_passives_fresh(model, KEY[0])
    with pytest.raises(AssertionError, match="not re-randomised"):
        replays.check(KEY[0])
