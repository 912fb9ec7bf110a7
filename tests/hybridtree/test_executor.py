"""HybridTree's hot loops on an executor (``specs/batch_executors.md``, "Roles").

The host's encryptions and, with ``trusted_workers``, its decryptions, and the guests' sums and
re-randomisations run on the executor given to the roles; every message is the same bytes as a
serial run with the same randomness, and no task carries the host's private key unless the
operator opted in (the planted companion: a host that ships the key is caught).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.errors import ParameterError
from securetrees.protocols.hybridtree import HybridTreeClassifier
from securetrees.protocols.hybridtree.host import Host
from securetrees.protocols.hybridtree.testing import HybridData, fit_layout, with_guest_column
from securetrees.rand import DeterministicRandom
from securetrees.testing.paillier import small_keypair
from tests.pickling_executor import PicklingExecutor, leaks


def _fit(data: HybridData, make: Any, encryption: str = "key-owner", **kw: Any) -> Any:
    model = make("clf", "secure", n_estimators=2, record_payloads=True, encryption=encryption,
                 rng=DeterministicRandom("hybridtree/executor"), **kw)
    return fit_layout(model, data.X, data.y, data.host_features, data.guest_features, data.guest_rows)


def _wire(model: Any) -> list[bytes | None]:
    return [r.data for r in model.network_.transcript.records]


def _key_kept(ex: PicklingExecutor) -> bool:
    """The trust rule's check: tasks were sent, and none carries the host's factors."""
    _, sk = small_keypair(512)
    return bool(ex.payloads) and not leaks(ex, int(sk._p), int(sk._q)) and not ex.shipped_private_key()


class KeyShippingHost(Host):
    """Planted leak: decrypts on the workers although the operator did not opt in."""

    def _aggregate(self, replies: Any, length: int) -> list[int]:
        self.trusted_workers = True
        return super()._aggregate(replies, length)


@pytest.mark.parametrize("encryption", ["key-owner", "djn"])
def test_the_same_messages_with_and_without_an_executor(data: HybridData, make: Any, encryption: str) -> None:
    serial = _fit(data, make, encryption)
    ex = PicklingExecutor()
    parallel = _fit(data, make, encryption, executor=ex)
    assert _wire(parallel) == _wire(serial)
    X = with_guest_column(data.X, data.guest_rows)
    assert np.array_equal(parallel.decision_function(X), serial.decision_function(X))
    assert _key_kept(ex)
    globals_ = ex.globals
    assert "securetrees.executors._scatter" in globals_  # the guests' sums went to the workers
    assert "securetrees.paillier.batch._obfuscator_chunk" in globals_


def test_trusted_workers_receive_the_key_and_give_the_same_model(data: HybridData, make: Any) -> None:
    serial = _fit(data, make)
    ex = PicklingExecutor()
    trusted = _fit(data, make, executor=ex, trusted_workers=True)
    assert _wire(trusted) == _wire(serial)
    assert not _key_kept(ex) and ex.shipped_private_key()


def test_a_host_that_ships_the_key_is_caught(data: HybridData, make: Any) -> None:
    class Leaky(HybridTreeClassifier):
        _host_class = KeyShippingHost

    ex = PicklingExecutor()
    honest = _fit(data, make, executor=PicklingExecutor())
    leaky = Leaky(2, **{k: v for k, v in honest.get_params().items() if k != "n_estimators"})
    leaky.set_params(executor=ex, rng=DeterministicRandom("hybridtree/executor"))
    fit_layout(leaky, data.X, data.y, data.host_features, data.guest_features, data.guest_rows)
    assert _wire(leaky) == _wire(honest)  # the same result: only the check below tells them apart
    assert not _key_kept(ex)


def test_n_jobs_runs_a_process_pool_with_the_same_result(data: HybridData, make: Any) -> None:
    serial = _fit(data, make)
    pooled = _fit(data, make, n_jobs=2)
    assert _wire(pooled) == _wire(serial)
    assert pooled.host_.executor is None  # the pool the fit started is shut down with it
    with pytest.raises(ParameterError, match="not both"):
        _fit(data, make, n_jobs=2, executor=PicklingExecutor())
    with pytest.raises(ParameterError, match="n_jobs"):
        _fit(data, make, n_jobs=0)
    with pytest.raises(ParameterError, match="trusted_workers"):
        _fit(data, make, trusted_workers="false")


def test_the_deployment_keys() -> None:
    from securetrees.protocols.federated_forest.deploy import PARAMETERS as FF
    from securetrees.protocols.hybridtree.deploy import PARAMETERS as HT
    from securetrees.protocols.secureboost.deploy import PARAMETERS as SB

    for keys in (HT, FF, SB):
        assert {"n_jobs", "trusted_workers"} <= keys and "executor" not in keys
