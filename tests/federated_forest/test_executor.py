"""Federated Forest's hot loops on an executor (``specs/batch_executors.md``, "Roles").

The label holder's encryption (once per fit) and, with ``trusted_workers``, its decryptions,
and the other clients' bin sums, packing shifts and re-randomisations run on the executor;
every message is the same bytes as a serial run with the same randomness, and no task carries
the label holder's private key unless the operator opted in (planted companion: a label holder
that ships it is caught).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import securetrees.protocols.federated_forest.estimators as estimators
from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.protocols.federated_forest.client import Client
from securetrees.protocols.federated_forest.testing import mixed_data, small_key_options
from securetrees.rand import DeterministicRandom
from tests.pickling_executor import PicklingExecutor, leaks

PARTITION = [[0, 3], [1, 2], [4, 5]]


def _fit(**kw: Any) -> FederatedForestClassifier:
    X, y, cat = mixed_data(160, seed=3)
    ff = FederatedForestClassifier(2, max_depth=3, random_state=5, categorical_features=cat, partition=PARTITION,
                                   rng=DeterministicRandom("federated_forest/executor"), **small_key_options(), **kw)
    return ff.fit(X, y)


def _wire(ff: FederatedForestClassifier) -> list[bytes | None]:
    return [r.data for r in ff.network_.transcript.records]


def _key_kept(ex: PicklingExecutor) -> bool:
    sk = small_key_options()["paillier_keys"][1]
    return bool(ex.payloads) and not leaks(ex, int(sk._p), int(sk._q)) and not ex.shipped_private_key()


class KeyShippingClient(Client):
    """Planted leak: the label holder decrypts on the workers although nobody opted in."""

    def on_score_request(self, sender: str, msg: Any) -> Any:
        self.trusted_workers = True
        return super().on_score_request(sender, msg)


def test_the_same_messages_with_and_without_an_executor() -> None:
    serial = _fit()
    ex = PicklingExecutor()
    parallel = _fit(executor=ex)
    assert _wire(parallel) == _wire(serial)
    X, _, _ = mixed_data(160, seed=3)
    assert np.array_equal(parallel.predict_proba(X), serial.predict_proba(X))
    assert [c.counters for c in parallel.clients_] == [c.counters for c in serial.clients_]
    assert _key_kept(ex)
    for task in ("securetrees.executors._scatter", "securetrees.paillier.batch._pack_chunk",
                 "securetrees.paillier.batch._obfuscator_chunk"):
        assert task in ex.globals


def test_trusted_workers_decrypt_with_the_same_result() -> None:
    ex = PicklingExecutor()
    assert _wire(_fit(executor=ex, trusted_workers=True)) == _wire(_fit())
    assert not _key_kept(ex) and ex.shipped_private_key()


def test_a_label_holder_that_ships_the_key_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    honest = PicklingExecutor()
    expected = _wire(_fit(executor=honest))
    monkeypatch.setattr(estimators, "Client", KeyShippingClient)
    ex = PicklingExecutor()
    assert _wire(_fit(executor=ex)) == expected
    assert _key_kept(honest) and not _key_kept(ex)


def test_n_jobs_runs_a_process_pool_with_the_same_result() -> None:
    pooled = _fit(n_jobs=2)
    assert _wire(pooled) == _wire(_fit())
    assert all(c.executor is None for c in pooled.clients_)
