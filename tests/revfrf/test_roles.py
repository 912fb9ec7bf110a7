"""Each role's rejections of malformed or out-of-step messages (one typed error each)."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.dtpkc import encrypt
from securetrees.errors import InvalidCiphertext, KeyMismatchError, UnauthorizedSender, UnexpectedMessage
from securetrees.protocols.revfrf import RevFRFClassifier, RevocationRefused, StaleEpochError
from securetrees.protocols.revfrf.messages import (
    EpochAck,
    EpochNotice,
    ExpandReply,
    ExpandRequest,
    PathReply,
    PathRequest,
    PredictReply,
    PredictRequest,
    RevokeRequest,
    SplitReply,
    SplitRequest,
)
from securetrees.protocols.revfrf.requester import Requester

from .helpers import PARTITION


def _i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def test_participant_refuses_tasks_for_columns_it_does_not_own(fitted: RevFRFClassifier) -> None:
    req = ExpandRequest(99, _i64(0), _i64(0), _i64(0, 3), _i64(0, 1, 2), _i64(0), _i64(PARTITION[1][0]))
    with pytest.raises(UnexpectedMessage):
        fitted.cs_.call("u1", req, expect=ExpandReply)
    bad_offsets = ExpandRequest(99, _i64(0), _i64(0), _i64(0, 5), _i64(0, 1, 2), _i64(0), _i64(0))
    with pytest.raises(UnexpectedMessage):
        fitted.cs_.call("u1", bad_offsets, expect=ExpandReply)
    out_of_range = ExpandRequest(99, _i64(0), _i64(0), _i64(0, 1), _i64(10**6), _i64(0), _i64(0))
    with pytest.raises(UnexpectedMessage):
        fitted.cs_.call("u1", out_of_range, expect=ExpandReply)
    with pytest.raises(UnexpectedMessage):  # only the CS drives the expansion
        fitted.participants_["u2"].call("u1", ExpandRequest(99, _i64(0), _i64(0), _i64(0, 1), _i64(0), _i64(0),
                                                            _i64(0)), expect=ExpandReply)


def test_split_requests_out_of_step(fitted: RevFRFClassifier) -> None:
    with pytest.raises(StaleEpochError):
        fitted.cs_.call("u1", SplitRequest(0, 5, _i64(0), _i64(0), _i64(0), _i64(0)), expect=SplitReply)
    with pytest.raises(UnexpectedMessage):
        fitted.cs_.call("u1", SplitRequest(12345, 0, _i64(0), _i64(0), _i64(0), _i64(0)), expect=SplitReply)


def test_path_request_for_a_node_that_is_not_the_providers(fitted: RevFRFClassifier) -> None:
    foreign = next((t.index, n.id) for t in fitted.cs_.trees for n in t.internal() if n.provider != "u1")
    fitted.participants_["u1"].load_rows("x", np.zeros((2, len(PARTITION[0]))))
    with pytest.raises(StaleEpochError):
        fitted.cs_.call("u1", PathRequest("x", _i64(0), _i64(foreign[0]), _i64(foreign[1])), expect=PathReply)
    with pytest.raises(UnexpectedMessage):
        fitted.cs_.call("u1", PathRequest("nope", _i64(0), _i64(foreign[0]), _i64(foreign[1])), expect=PathReply)


def test_cs_refuses_bad_prediction_requests(fitted: RevFRFClassifier) -> None:
    req = fitted.requester("alice")
    pk = req._weak.public
    good = [encrypt(pk, 1) for _ in range(5)]
    with pytest.raises(UnexpectedMessage):  # 5 of 6 features
        req.call("cs", PredictRequest(tuple(int(c.t1) for c in good), tuple(int(c.t2) for c in good)),
                 expect=PredictReply)
    with pytest.raises(InvalidCiphertext):
        req.call("cs", PredictRequest((0,) * 6, (1,) * 6), expect=PredictReply)
    with pytest.raises(UnauthorizedSender):  # a participant is not a requester: refused by its role
        fitted.participants_["u1"].call("cs", PredictRequest((1,) * 6, (1,) * 6), expect=PredictReply)
    stranger = Requester("mallory", fitted.network_, weak_key=req._weak)
    with pytest.raises(KeyMismatchError):  # a requester the CS never registered
        stranger.call("cs", PredictRequest((1,) * 6, (1,) * 6), expect=PredictReply)


def test_epoch_notice_with_a_forged_revocation(fitted: RevFRFClassifier) -> None:
    forged = RevokeRequest("u2", 0, 2, b"x" * 16, b"\x01" * 64)
    with pytest.raises(RevocationRefused):
        fitted.cs_.call("u1", EpochNotice(1, forged, ()), expect=EpochAck)
    assert fitted.participants_["u1"].epoch == 0
