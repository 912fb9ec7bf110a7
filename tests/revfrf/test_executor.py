"""RevFRF participants' HoEnc on an executor (``specs/batch_executors.md``, "Roles"): the same
forest and predictions, the encryptions went to the workers, and no task carries a
participant's weak secret key θ (the detector's companion: a payload holding θ is found)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tests.pickling_executor import PicklingExecutor, leaks

from .helpers import PARTITION, classifier


def test_hoenc_on_an_executor_gives_the_same_forest(
    data: tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]],
) -> None:
    X, y = data
    ex = PicklingExecutor()
    serial = classifier(n_estimators=2, max_depth=3).set_params(partition=PARTITION).fit(X, y)
    parallel = classifier(n_estimators=2, max_depth=3, executor=ex).set_params(partition=PARTITION).fit(X, y)
    assert "securetrees.dtpkc.batch._obfuscator_chunk" in ex.globals
    thetas = [int(p._weak.theta) for p in parallel.participants_.values()]
    assert not leaks(ex, *thetas)
    assert leaks(PicklingExecutor().record(parallel.participants_["u1"]._weak.theta), *thetas)
    proba = parallel.predict_proba(X)
    assert np.array_equal(proba, serial.predict_proba(X))
    assert all(p.executor is ex for p in parallel.participants_.values())
