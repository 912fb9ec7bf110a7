"""What each RevFRF party sees (specs/revfrf.md): canaries for feature values, thresholds and
request values in every other party's view, and the message types each role receives."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest

from securetrees._nt import invert
from securetrees.errors import SecureTreesError
from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.revfrf import participant as participant_module
from securetrees.protocols.revfrf.messages import ExpandRequest, PathReply, PathRequest, SplitReply
from securetrees.rand import SYSTEM_RANDOM
from securetrees.runtime import Record, encode
from securetrees.testing.canaries import assert_no_canaries

from ..revfrf.helpers import classifier

PARTITION = [[0, 1], [2], [3]]


def _canary_data() -> tuple[np.ndarray, np.ndarray]:
    """Continuous features with entropy (every value a distinctive canary).  Every value and
    threshold is above 2^16 in magnitude, so its shortest byte form (fixed point, f = 32) is 7
    bytes: a chance match in the random ciphertext bytes of the views (about 350 kB) has
    probability below 1e-8 per run (with values near 50, 5-byte forms made it about 1e-5)."""
    rng = np.random.default_rng(99)
    X = rng.normal(0, 1, size=(120, 4)) * np.array([731.0, 91.0, 5.3, 1234.5]) + np.array([9.1e4, 7.7e4, 6.9e4, -8.3e4])
    y = (X[:, 0] - 9.1e4 + 8 * (X[:, 2] - 6.9e4) > 0).astype(np.int64)
    return X, y


def _fit_predict_revoke() -> tuple[RevFRFClassifier, np.ndarray, np.ndarray]:
    X, y = _canary_data()
    clf = classifier(n_estimators=2, max_depth=3).set_params(partition=PARTITION).fit(X, y)
    request = X[:2] + 0.123456789
    clf.predict(request, method="encrypted", requester="req")
    clf.predict(X[:10], method="test")
    clf.predict(X[:10])
    return clf, X, request


def check_values_stay_with_their_owner(views: dict[str, list[Any]], own: dict[str, list[float]],
                                        request: list[float]) -> None:
    """No participant's feature values or thresholds reach another party; no request value reaches
    anyone but the requester."""
    for u, values in own.items():
        assert values
        for other, view in views.items():
            if other != u:
                assert_no_canaries(view, values)
    for other, view in views.items():
        if other != "req":
            assert_no_canaries(view, request)


def _views_and_values() -> tuple[RevFRFClassifier, dict[str, list[Any]], dict[str, list[float]], list[float]]:
    clf, X, request = _fit_predict_revoke()
    thresholds = {u: [n.threshold for n in p.own_nodes().values()] for u, p in clf.participants_.items()}
    clf.revoke("u3", level=2)
    views = {p: list(clf.transcript_.view(p)) for p in ["cs", "cc", "kgc", "req", *clf.participants_]}
    own = {u: [float(v) for v in X[:40, cols].ravel()] + thresholds[u]
           for u, cols in zip(clf.participants_, PARTITION, strict=True)}
    return clf, views, own, [float(v) for v in request.ravel()]


def test_no_feature_value_threshold_or_request_value_leaves_its_owner() -> None:
    _, views, own, request = _views_and_values()
    check_values_stay_with_their_owner(views, own, request)


def test_a_threshold_uploaded_in_the_clear_is_caught() -> None:
    """Planted leak: u1's split upload carries its threshold's fixed-point code instead of HoEnc."""
    clf, views, own, request = _views_and_values()
    threshold = own["u1"][-1]
    leak = SplitReply((clf.participants_["u1"]._fx.encode_scalar(threshold),), (1,), (b"s" * 64,))
    data = encode(leak)
    views["cs"].append(Record(999, "u1", "cs", leak.wire_type, len(data), data, leak))
    with pytest.raises(AssertionError, match="private values leaked"):
        check_values_stay_with_their_owner(views, own, request)


ALLOWED = {
    "cs": {"revfrf.expand.reply", "revfrf.split.reply", "dtpkc.holt.reply", "revfrf.predict.parhdec.reply",
           "revfrf.predict.request", "revfrf.path.reply", "revfrf.test.reply", "revfrf.revoke.request",
           "revfrf.epoch.ack", "revfrf.revoke.cc.reply", "revfrf.ack"},
    "cc": {"dtpkc.holt.request", "revfrf.revoke.cc"},
    "kgc": {"revfrf.revoke.kgc"},
    "req": {"revfrf.predict.reply"},
}
PARTICIPANT = {"revfrf.expand.request", "revfrf.split.request", "revfrf.predict.parhdec",
               "revfrf.path.request", "revfrf.test.request", "revfrf.epoch.notice", "revfrf.revoke.reply"}


def check_roles_receive_only_their_spec_messages(received: dict[str, set[str]]) -> None:
    for party, got in received.items():
        types = ALLOWED.get(party, PARTICIPANT)
        assert got <= types, f"{party} received {sorted(got - types)}"


def test_each_role_receives_only_its_spec_messages() -> None:
    clf, _, _ = _fit_predict_revoke()
    clf.revoke("u2", level=2)
    tr = clf.transcript_
    check_roles_receive_only_their_spec_messages(
        {p: set(tr.types_received(p)) for p in [*ALLOWED, *clf.participants_]})
    # the CS never receives a plaintext threshold: split uploads are ciphertexts under the provider's key
    for rec in tr.view("cs"):
        if rec.type_name == "revfrf.split.reply":
            assert all(v > int(clf.cs_.params.n) for v in rec.payload.t1)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("party", "extra"), [("cc", "revfrf.test.reply"), ("u1", "revfrf.split.reply"),
                                               ("req", "revfrf.path.reply")])
def test_a_message_outside_a_roles_table_is_caught(party: str, extra: str) -> None:
    """Planted leak: the CC gets encrypted feature values, a participant another's split upload,
    the requester a path bit."""
    received = {p: set(types) for p, types in ALLOWED.items()}
    received["u1"] = set(PARTICIPANT)
    received[party] = received[party] | {extra}
    with pytest.raises(AssertionError, match=f"{party} received"):
        check_roles_receive_only_their_spec_messages(received)


def check_participant_tasks_are_own_columns(view: list[Any], cols: list[int]) -> None:
    for rec in view:
        if rec.type_name == "revfrf.expand.request":
            got = set(np.asarray(rec.payload.task_column).tolist())
            assert got <= set(cols), f"asked about columns {sorted(got - set(cols))}"


def test_participants_see_only_their_own_columns_tasks() -> None:
    clf, _, _ = _fit_predict_revoke()
    for u, cols in zip(clf.participants_, PARTITION, strict=True):
        check_participant_tasks_are_own_columns(clf.transcript_.view(u), cols)


def test_a_task_on_another_participants_column_is_caught() -> None:
    """Planted leak: the CS asks u2 for candidates of u1's column 0."""
    z = np.zeros(1, dtype=np.int64)
    msg = ExpandRequest(1, z, z, np.array([0, 1]), z, z, z)
    data = encode(msg)
    with pytest.raises(AssertionError, match=r"columns \[0\]"):
        check_participant_tasks_are_own_columns([Record(1, "cs", "u2", msg.wire_type, len(data), data, msg)], [2])


def _revoked_then_served(clf: RevFRFClassifier, X: np.ndarray) -> int:
    """How many messages u2 receives after its revocation while the forest keeps serving."""
    clf.revoke("u2")
    mark = len(clf.transcript_.view("u2"))
    clf.predict(X[:5])
    clf.predict(X[:1], method="encrypted", requester="req")
    return len(clf.transcript_.view("u2")) - mark


def test_revoked_participant_receives_nothing_after_revocation() -> None:
    clf, X, _ = _fit_predict_revoke()
    assert _revoked_then_served(clf, X) == 0


def test_a_cs_that_still_asks_the_revoked_participant_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: after revocation the CS keeps sending u2 path requests (with every prediction)."""
    clf, X, _ = _fit_predict_revoke()
    real = type(clf.cs_).call_many

    def leaky_call_many(self: Any, requests: dict[str, Any], **kw: Any) -> Any:
        first = next(iter(requests.values()), None)
        if isinstance(first, PathRequest) and "u2" in self.revoked:
            with contextlib.suppress(SecureTreesError):
                self.call("u2", first, expect=PathReply)
        return real(self, requests, **kw)

    monkeypatch.setattr(type(clf.cs_), "call_many", leaky_call_many)
    assert _revoked_then_served(clf, X) > 0


# -- fresh randomness: the CS cannot relate two ciphertexts it receives ------------------------------
#
# HoEnc is (T1, T2) = ((1 + mN)·h^r, g^r) mod N².  Two encryptions under one key with the same r share
# T2, and T1·T1'^-1 = (1 + (m - m')N) mod N²: the CS reads off m - m' exactly (and with one known
# plaintext, every value).  The CS's test: look for a repeated T2 among the ciphertexts from one sender.


def reused_randomness(records: Any, n: int) -> list[tuple[str, int]]:
    """The CS's attack: for every pair of ciphertexts from one sender with the same T2, the
    plaintext difference m - m' it reveals (signed)."""
    n2 = n * n
    by_t2: dict[tuple[str, int], int] = {}
    found: list[tuple[str, int]] = []
    for rec in records:
        t1s, t2s = getattr(rec.payload, "t1", None), getattr(rec.payload, "t2", None)
        if not isinstance(t1s, tuple) or not isinstance(t2s, tuple):
            continue
        for t1, t2 in zip(t1s, t2s, strict=True):
            first = by_t2.setdefault((rec.sender, t2), t1)
            if first != t1:  # an identical resend relates nothing new
                ratio = int(first * invert(t1, n2) % n2)
                if ratio % n == 1:  # (1 + dN): the plaintext difference is exposed
                    d = (ratio - 1) // n
                    found.append((rec.sender, d if d <= n // 2 else d - n))
    return found


def check_cs_sees_fresh_ciphertexts(clf: RevFRFClassifier) -> None:
    pairs = reused_randomness(clf.transcript_.view("cs"), int(clf.cs_.params.n))
    assert not pairs, f"the CS relates {len(pairs)} pairs of ciphertexts (reused randomness): {pairs[:3]}"


def test_every_ciphertext_the_cs_receives_has_fresh_randomness() -> None:
    clf, _, _ = _fit_predict_revoke()
    check_cs_sees_fresh_ciphertexts(clf)


class _FixedExponent:
    """A RandomSource whose ``randbelow`` is always the same: HoEnc's r fixed."""

    def randbelow(self, n: int, /) -> int:
        return 0xC0FFEE % n

    def randbits(self, k: int, /) -> int:
        return SYSTEM_RANDOM.randbits(k)

    def token_bytes(self, k: int, /) -> bytes:
        return SYSTEM_RANDOM.token_bytes(k)


def test_a_threshold_encrypted_with_fixed_randomness_is_recovered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: participants encrypt (thresholds and FT-Test values) with a fixed r.  The check
    fails, and the differences the CS reads off are exact differences of one participant's thresholds."""
    real = participant_module.encrypt_many
    monkeypatch.setattr(participant_module, "encrypt_many",
                        lambda pk, values, *, rng, signed, executor: real(pk, values, rng=_FixedExponent(),
                                                                          signed=signed, executor=executor))
    clf, _, _ = _fit_predict_revoke()
    with pytest.raises(AssertionError, match="reused randomness"):
        check_cs_sees_fresh_ciphertexts(clf)
    split_view = [r for r in clf.transcript_.view("cs") if r.type_name == "revfrf.split.reply"]
    recovered = reused_randomness(split_view, int(clf.cs_.params.n))
    assert recovered
    for sender, d in recovered:
        p = clf.participants_[sender]
        encoded = [p._fx.encode_scalar(n.threshold) for n in p.own_nodes().values()]
        assert d in {a - b for a in encoded for b in encoded}
