"""The CS's checks on what participants and the CC send back (specs/revfrf.md, FLE-Expan split
upload and FRF-Revoc lines 9-12): a forged upload signature and a malformed refresh reply each
raise their typed error."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from securetrees.errors import ProtocolError, UnexpectedMessage
from securetrees.protocols.revfrf.messages import RefreshReply, RefreshRequest
from securetrees.protocols.revfrf.participant import Participant
from securetrees.protocols.revfrf.server import ComputationServer

from .helpers import PARTITION, classifier


def test_forged_split_upload_signature_is_refused(
    data: tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A participant whose upload signature does not verify stops the build (FLE-Expan upload)."""
    X, y = data
    monkeypatch.setattr(Participant, "_sign_node", lambda self, tree, node, epoch, c: bytes(64))
    with pytest.raises(ProtocolError, match="uploaded split"):
        classifier().set_params(partition=PARTITION).fit(X, y)


def test_malformed_refresh_reply_is_refused(
    data: tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CC that returns fewer refreshed splits than it was sent is caught (FRF-Revoc line 11)."""
    X, y = data
    model = classifier().set_params(partition=PARTITION).fit(X, y)
    honest = ComputationServer.on_refresh

    def short(self: ComputationServer, sender: str, msg: RefreshRequest) -> RefreshReply:
        reply = honest(self, sender, msg)
        return RefreshReply(reply.t1[:-1], reply.t2, reply.h)

    monkeypatch.setattr(ComputationServer, "on_refresh", short)
    victim = next(n.provider for t in model.cs_.trees for n in t.internal())
    with pytest.raises(UnexpectedMessage, match="malformed refresh reply"):
        model.revoke(victim, level=2)
