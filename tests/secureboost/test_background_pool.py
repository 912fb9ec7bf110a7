"""SecureBoost's active party with a background randomness pool (``specs/batch_executors.md``,
"Randomness pools in the roles").

The model is the one of a run without the pool (same seeds); every gradient ciphertext the
active party sends has its own obfuscator, recovered here with the private key (planted
companion: a pool that hands one value out twice is caught); on an executor the pool's tasks
carry the public key only.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import numpy as np
import pytest

import securetrees.paillier.prefill as prefill_module
from securetrees.paillier import Ciphertext, PrivateKey, PublicKey
from securetrees.paillier.pool import RandomnessPool
from securetrees.paillier.prefill import BackgroundPool
from securetrees.rand import DeterministicRandom
from tests.pickling_executor import PicklingExecutor, leaks
from tests.secureboost.conftest import PARTITION, make


def _fit(data: tuple[np.ndarray, np.ndarray], keys: tuple[PublicKey, PrivateKey], **kw: Any) -> Any:
    X, y = data
    model = make("reg", PARTITION, keys, n_estimators=3, rng=DeterministicRandom("secureboost/pool"), **kw)
    return model.fit(X, y)


def _gradient_obfuscators(model: Any, sk: PrivateKey) -> list[int]:
    """The obfuscator ``c · (1 + mN)^-1 = c · (1 - mN) mod N²`` of every gradient ciphertext sent
    (each message once: the copy passive1 received)."""
    pk = sk.public_key
    n, n2, width = pk.n, pk.n_square, 2 * pk.modulus_bytes
    out = []
    for r in model.network_.transcript.view("passive1"):
        if r.type_name != "secureboost.gradients":
            continue
        data = r.payload.ciphertexts
        for i in range(0, len(data), width):
            c = int.from_bytes(data[i:i + width], "big")
            m = sk.decrypt_residue(Ciphertext(pk, c))
            out.append(c * (1 - m * n) % n2)
    return out


def _all_distinct(values: list[int]) -> bool:
    return len(set(values)) == len(values)


class ReusingPool(BackgroundPool):
    """Planted leak: hands its first obfuscator out twice."""

    def ready(self, count: int) -> RandomnessPool:
        pool = super().ready(count)
        first = pool.take()
        rest = [pool.take() for _ in range(len(pool))]
        pool.extend([first, first, *rest])
        return pool


@pytest.mark.parametrize("encryption", ["key-owner", "djn"])
def test_the_same_model_with_the_background_pool(
    data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey], encryption: str,
) -> None:
    off = _fit(data, keypair, encryption=encryption)
    on = _fit(data, keypair, encryption=encryption, background_pool=True)
    assert np.array_equal(on.predict(data[0]), off.predict(data[0]))
    for a, b in zip(on.active_.model.trees, off.active_.model.trees, strict=True):
        assert a.records == b.records
        for name in ("left", "feature", "threshold", "provider", "value"):
            assert np.array_equal(getattr(a.tree, name), getattr(b.tree, name), equal_nan=True)
    assert on.active_.counts == off.active_.counts
    assert on.active_.prefill_seconds >= 0.0


def test_no_obfuscator_is_used_twice(
    data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey],
) -> None:
    before = set(multiprocessing.active_children())
    model = _fit(data, keypair, background_pool=True)
    assert set(multiprocessing.active_children()) <= before  # the pool process is stopped with fit
    obfs = _gradient_obfuscators(model, keypair[1])
    assert len(obfs) == 3 * data[0].shape[0]
    assert _all_distinct(obfs)


def test_a_pool_that_reuses_an_obfuscator_is_caught(
    data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prefill_module, "BackgroundPool", ReusingPool)
    obfs = _gradient_obfuscators(_fit(data, keypair, background_pool=True), keypair[1])
    assert len(obfs) == 3 * data[0].shape[0]
    assert not _all_distinct(obfs)


def test_on_an_executor_the_pool_tasks_carry_the_public_key_only(
    data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey],
) -> None:
    ex = PicklingExecutor()
    on = _fit(data, keypair, background_pool=True, executor=ex)
    assert "securetrees.paillier.prefill._timed_chunk" in ex.globals
    assert not leaks(ex, int(keypair[1]._p), int(keypair[1]._q)) and not ex.shipped_private_key()
    assert np.array_equal(on.predict(data[0]), _fit(data, keypair).predict(data[0]))
    assert _all_distinct(_gradient_obfuscators(on, keypair[1]))
