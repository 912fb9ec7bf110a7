"""SecureBoost's hot loops on an executor (``specs/batch_executors.md``, "Roles").

The active party's encryptions (and, with ``trusted_workers``, its decryptions) and the passive
parties' bucket sums, slot shifts and re-randomisations run on the executor; every message is
the same bytes as a serial run with the same randomness, and no task carries the active
party's private key unless the operator opted in (planted companion: a party that ships it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import securetrees.protocols.secureboost.estimators as estimators
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.secureboost.active import ActiveParty
from securetrees.rand import DeterministicRandom
from tests.pickling_executor import PicklingExecutor, leaks
from tests.secureboost.conftest import PARTITION, make


def _fit(data: tuple[np.ndarray, np.ndarray], keys: tuple[PublicKey, PrivateKey], **kw: Any) -> Any:
    X, y = data
    model = make("reg", PARTITION, keys, n_estimators=2, rng=DeterministicRandom("secureboost/executor"), **kw)
    return model.fit(X, y)


def _wire(model: Any) -> list[bytes | None]:
    return [r.data for r in model.network_.transcript.records]


def _key_kept(ex: PicklingExecutor, sk: PrivateKey) -> bool:
    return bool(ex.payloads) and not leaks(ex, int(sk._p), int(sk._q)) and not ex.shipped_private_key()


class KeyShippingActive(ActiveParty):
    """Planted leak: decrypts on the workers although the operator did not opt in."""

    def decrypt_buckets(self, *args: Any) -> Any:
        self.trusted_workers = True
        return super().decrypt_buckets(*args)


@pytest.mark.parametrize("encryption", ["key-owner", "djn"])
def test_the_same_messages_with_and_without_an_executor(
    data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey], encryption: str,
) -> None:
    serial = _fit(data, keypair, encryption=encryption)
    ex = PicklingExecutor()
    parallel = _fit(data, keypair, encryption=encryption, executor=ex)
    assert _wire(parallel) == _wire(serial)
    assert np.array_equal(parallel.predict(data[0]), serial.predict(data[0]))
    assert parallel.passives_[0].op_counts == serial.passives_[0].op_counts
    assert _key_kept(ex, keypair[1])
    for task in ("securetrees.protocols.secureboost.buckets._partials",
                 "securetrees.paillier.batch._pack_chunk",
                 "securetrees.paillier.batch._obfuscator_chunk"):
        assert task in ex.globals


def test_trusted_workers_decrypt_with_the_same_result(
    data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey],
) -> None:
    ex = PicklingExecutor()
    assert _wire(_fit(data, keypair, executor=ex, trusted_workers=True)) == _wire(_fit(data, keypair))
    assert not _key_kept(ex, keypair[1]) and ex.shipped_private_key()


def test_an_active_party_that_ships_the_key_is_caught(
    data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey], monkeypatch: pytest.MonkeyPatch,
) -> None:
    honest = PicklingExecutor()
    expected = _wire(_fit(data, keypair, executor=honest))
    monkeypatch.setattr(estimators, "ActiveParty", KeyShippingActive)
    ex = PicklingExecutor()
    assert _wire(_fit(data, keypair, executor=ex)) == expected
    assert _key_kept(honest, keypair[1]) and not _key_kept(ex, keypair[1])


def test_n_jobs_runs_a_process_pool_with_the_same_result(
    data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey],
) -> None:
    pooled = _fit(data, keypair, n_jobs=2)
    assert _wire(pooled) == _wire(_fit(data, keypair))
    assert pooled.active_.executor is None
