"""What a checkpoint decodes to is checked before it is used: a state that opens (the right key, an
unmodified file) but does not fit the run, or holds arrays of another shape or kind, raises a typed
error (``DecodeError`` or ``ProtocolError``), never another exception."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from securetrees.errors import DecodeError, ProtocolError, SecureTreesError
from securetrees.net.alignment import AlignmentRecord
from securetrees.protocols.histogram_forest.checkpoint import Ledger
from securetrees.protocols.secureboost.model import PassiveModel
from securetrees.protocols.secureboost.passive import PassiveParty
from securetrees.runtime import InProcessNetwork


def typed(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except SecureTreesError:
        pass
    except Exception as exc:  # the point: any other type is a finding
        pytest.fail(f"untyped {type(exc).__name__}: {exc!r}")


arrays = hnp.arrays(st.sampled_from([np.int64, np.float64, np.bool_, np.uint8]),
                    hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))


@settings(max_examples=60)
@given(arrays, arrays)
def test_a_privacy_ledger_of_any_arrays(shape: np.ndarray, epsilon: np.ndarray) -> None:
    typed(Ledger(shape, epsilon).releases)


@settings(max_examples=60)
@given(arrays, arrays, arrays, arrays, st.integers(-2, 5))
def test_a_passive_lookup_table_of_any_arrays(f: np.ndarray, t: np.ndarray, c: np.ndarray, m: np.ndarray,
                                             width: int) -> None:
    party = PassiveParty("p", InProcessNetwork(), X=np.zeros((3, 2)))
    typed(party.restore_model, PassiveModel(width, f, t, c, m))


def test_a_record_that_does_not_fit_is_refused(tmp_path: Any) -> None:
    from securetrees.net.alignment import record_alignment, resumed_alignment
    from tests.net.test_resume_alignment import _store, _trial

    config = _trial(tmp_path)
    record_alignment(_store(config, "client1"), config, "client1", {"train": np.zeros((2, 2), dtype=np.int64)})
    with pytest.raises(DecodeError):
        resumed_alignment(_store(config, "client1"), config, "client1")
    store = _store(config, "client1")
    store.save_side("alignment", AlignmentRecord(("train",), (), (), ()))
    with pytest.raises(DecodeError):
        resumed_alignment(store, config, "client1")


@pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")
def test_a_secureboost_checkpoint_of_another_shape_is_refused() -> None:
    from securetrees.protocols.secureboost import ActiveParty, SecureBoostParams
    from securetrees.protocols.secureboost.checkpoint import ActiveState
    from securetrees.protocols.secureboost.model import ActiveModel
    from securetrees.testing.paillier import small_keypair

    keys = small_keypair(1024)
    active = ActiveParty("a", InProcessNetwork(), X=np.zeros((4, 1)), y=np.arange(4.0), passives=["p"],
                         params=SecureBoostParams(n_estimators=2), keypair=keys)
    with pytest.raises((DecodeError, ProtocolError)):
        active._restore_state(ActiveState(1, ActiveModel("{}", (), (), 1), np.zeros((4, 1))), np.zeros(1))
