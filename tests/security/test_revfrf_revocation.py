"""FRF-Revoc (Protocol 3) and forest epochs: what each revocation level guarantees
(specs/revfrf.md, "Revocation")."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest

from securetrees.dtpkc import Ciphertext, PublicKey, WeakSecretKey, decrypt_weak, encrypt
from securetrees.errors import EncodingOverflowError, InvalidCiphertext, KeyMismatchError, RevokedError
from securetrees.protocols.revfrf import RevFRFClassifier, RevocationRefused, StaleEpochError
from securetrees.protocols.revfrf.messages import NodeRef, ParHDecReply, ParHDecRequest, RevokeReply, RevokeRequest
from securetrees.protocols.revfrf.signing import revocation_message

from ..revfrf.helpers import PARTITION, classifier, make_data


@pytest.fixture
def fitted() -> RevFRFClassifier:
    X, y = make_data()
    return classifier().set_params(partition=PARTITION).fit(X, y)  # type: ignore[no-any-return]


def _old_refs(clf: RevFRFClassifier) -> list[tuple[str, NodeRef]]:
    return [(n.provider or "", clf.cs_._ref(t, n)) for t in clf.cs_.trees for n in t.internal()]


def _dummy_bit(clf: RevFRFClassifier, provider: str) -> Ciphertext:
    joint = clf.cs_.public_key.joint(clf.participants_[provider].public_key)
    return encrypt(joint, 1)


def check_no_node_of(clf: RevFRFClassifier, who: str) -> None:
    columns = PARTITION[int(who[1:]) - 1]
    assert all(n.provider != who for t in clf.cs_.trees for n in t.internal()), f"a node of {who} remains"
    assert all(n.column not in columns for t in clf.cs_.trees for n in t.internal()), f"a column of {who} remains"


@pytest.mark.parametrize("level", [1, 2])
def test_no_node_of_the_revoked_participant_remains(fitted: RevFRFClassifier, level: int) -> None:
    X, _ = make_data(seed=2)
    before = sum(n.provider == "u1" for t in fitted.cs_.trees for n in t.internal())
    assert before > 0
    rec = fitted.revoke("u1", level=level)
    assert rec.destroyed_splits >= before and rec.epoch == 1
    check_no_node_of(fitted, "u1")
    plain = fitted.plaintext_forest()
    np.testing.assert_array_equal(fitted.predict(X), plain.predict(X))
    np.testing.assert_array_equal(fitted.predict(X[:4], method="encrypted"), plain.predict(X[:4]))
    # every live node carries the new epoch
    assert {n.epoch for t in fitted.cs_.trees for n in t.internal()} == {1}


def test_a_revocation_that_keeps_the_nodes_is_caught(fitted: RevFRFClassifier) -> None:
    """Planted leak: the revocation's destroy-and-regrow step skipped (the forest as before it)."""
    with pytest.raises(AssertionError, match="a node of u1 remains"):
        check_no_node_of(fitted, "u1")


def check_revoked_key_opens_none(theta: WeakSecretKey, archived: list[Ciphertext]) -> None:
    assert archived
    for c in archived:
        as_if_old = Ciphertext.from_ints(theta.public, *c.to_ints())
        with contextlib.suppress(InvalidCiphertext, EncodingOverflowError):
            decrypt_weak(theta, as_if_old)
            raise AssertionError("the revoked key opens an archived split")


def test_second_level_refresh_defeats_the_revoked_key(fitted: RevFRFClassifier) -> None:
    theta = fitted.participants_["u2"]._weak  # the revoked participant's own key (it is corrupted)
    own = [n.split for t in fitted.cs_.trees for n in t.internal() if n.provider == "u2"]
    assert own and all(s is not None for s in own)
    for s in own:  # before: its key opens its splits
        assert s is not None
        decrypt_weak(theta, s)
    fitted.revoke("u2", level=2)
    mine = [c for q, c in fitted.cs_.archive if q == "u2"]
    assert len(mine) == len(own)
    check_revoked_key_opens_none(theta, mine)


def test_an_archive_without_the_refresh_is_caught(fitted: RevFRFClassifier) -> None:
    """Planted leak: the splits archived as they were (no HEncRef): the revoked key opens them."""
    theta = fitted.participants_["u2"]._weak
    own = [n.split for t in fitted.cs_.trees for n in t.internal() if n.provider == "u2" and n.split is not None]
    with pytest.raises(AssertionError, match="revoked key opens"):
        check_revoked_key_opens_none(theta, own)


def test_requests_needing_the_revoked_participant_raise(fitted: RevFRFClassifier) -> None:
    fitted.revoke("u2")
    with pytest.raises(RevokedError):
        fitted.revoke("u2")
    with pytest.raises(RevokedError):
        fitted.kgc_.kgc.public_key("u2")
    with pytest.raises(RevokedError):
        fitted.kgc_.kgc.issue_weak_key("u2")
    with pytest.raises(RevokedError):
        fitted.cs_.register_requester("u2", fitted.participants_["u2"].public_key)
    # the CC no longer encrypts anything under the revoked key
    pk = fitted.participants_["u2"].public_key
    with pytest.raises(KeyMismatchError):
        fitted.cs_.holt(encrypt(pk, 1), encrypt(pk, 2))


def old_nodes_served(fitted: RevFRFClassifier, old: list[tuple[str, NodeRef]]) -> int:
    """The replaying CS's attack: how many old-epoch nodes of honest providers still get a ParHDec1."""
    served = 0
    for p, ref in old:
        c = _dummy_bit(fitted, p)
        with contextlib.suppress(StaleEpochError):
            fitted.cs_.call(p, ParHDecRequest("requester", (ref,), (int(c.t1),), (int(c.t2),)), expect=ParHDecReply)
            served += 1
    return served


def test_old_forest_replayed_by_the_cs_is_refused(fitted: RevFRFClassifier) -> None:
    """A CS that kept the old forest (and even u2's key) cannot get honest providers to
    partially decrypt for any old-epoch node."""
    old = _old_refs(fitted)
    fitted.revoke("u2")
    honest = [(p, r) for p, r in old if p != "u2"]
    assert honest
    assert old_nodes_served(fitted, honest) == 0
    # the same provider still serves its live, current-epoch nodes
    p, ref = next((n.provider or "", fitted.cs_._ref(t, n)) for t in fitted.cs_.trees for n in t.internal())
    c = _dummy_bit(fitted, p)
    reply = fitted.cs_.call(p, ParHDecRequest("requester", (ref,), (int(c.t1),), (int(c.t2),)),
                            expect=ParHDecReply)
    assert decrypt_weak(fitted.cs_._weak, Ciphertext.from_ints(fitted.cs_.public_key, reply.t1[0], reply.t2[0])) == 1


def test_a_provider_ignoring_the_epoch_is_caught(fitted: RevFRFClassifier, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: providers accept a node signed in any epoch (the epoch check skipped)."""
    old = _old_refs(fitted)
    fitted.revoke("u2")
    honest = [(p, r) for p, r in old if p != "u2"]
    participant = type(fitted.participants_["u1"])
    real = participant._live

    def any_epoch(self: Any, ref: NodeRef) -> Any:
        saved = self.epoch
        self.epoch = ref.epoch
        try:
            return real(self, ref)
        finally:
            self.epoch = saved

    monkeypatch.setattr(participant, "_live", any_epoch)
    assert old_nodes_served(fitted, honest) > 0


def test_forged_signature_changes_nothing(fitted: RevFRFClassifier) -> None:
    u3 = fitted.participants_["u3"]
    shape = [sorted(t.nodes) for t in fitted.cs_.trees]
    forged = RevokeRequest("u3", 0, 2, b"n" * 16, b"\x00" * 64)
    with pytest.raises(RevocationRefused):
        u3.call("cs", forged, expect=RevokeReply)
    # signed by another participant's key
    sig = fitted.participants_["u1"]._sign.sign(revocation_message(u3._session, "u3", 0, 2, b"n" * 16))
    with pytest.raises(RevocationRefused):
        u3.call("cs", RevokeRequest("u3", 0, 2, b"n" * 16, sig), expect=RevokeReply)
    # someone else asking for u3's revocation, even with u3's valid signature
    sig = u3._sign.sign(revocation_message(u3._session, "u3", 0, 2, b"n" * 16))
    with pytest.raises(RevocationRefused):
        fitted.participants_["u1"].call("cs", RevokeRequest("u3", 0, 2, b"n" * 16, sig), expect=RevokeReply)
    assert fitted.cs_.epoch == 0 and not fitted.cs_.revoked
    assert [sorted(t.nodes) for t in fitted.cs_.trees] == shape


def test_replayed_and_stale_requests_are_refused(fitted: RevFRFClassifier) -> None:
    u3 = fitted.participants_["u3"]
    early = RevokeRequest("u3", 0, 2, b"e" * 16,
                          u3._sign.sign(revocation_message(u3._session, "u3", 0, 2, b"e" * 16)))
    fitted.revoke("u1")
    with pytest.raises(RevocationRefused):  # signed for epoch 0, now epoch 1
        u3.call("cs", early, expect=RevokeReply)
    captured = next(r.payload for r in fitted.transcript_.view("cs") if r.type_name == "revfrf.revoke.request")
    assert isinstance(captured, RevokeRequest)
    with pytest.raises(RevokedError):  # a replay of u1's own request
        fitted.participants_["u1"].call("cs", captured, expect=RevokeReply)
    assert fitted.cs_.epoch == 1


def test_several_participants_revoked_in_turn() -> None:
    X, y = make_data(n=300, seed=4)
    clf = classifier(n_estimators=4).set_params(partition=[[0], [1], [2], [3], [4], [5]]).fit(X, y)
    for k, u in enumerate(["u2", "u5", "u1"], start=1):
        clf.revoke(u)
        assert clf.cs_.epoch == k
        gone = {c for name in ("u2", "u5", "u1")[:k] for c in clf.participants_[name].columns}
        assert all(n.column not in gone for t in clf.cs_.trees for n in t.internal())
        np.testing.assert_array_equal(clf.predict(X[:3], method="encrypted"), clf.plaintext_forest().predict(X[:3]))
    clf.revoke("u3")
    clf.revoke("u4")
    with pytest.raises(RevocationRefused):  # the last participant cannot leave
        clf.revoke("u6")
    assert clf.cs_.epoch == 5


def check_archive_off_every_base_key(fitted: RevFRFClassifier, archive: list[Ciphertext]) -> None:
    keys = {c.pk.key_id for c in archive}
    base = {pk.key_id for pk in [p.public_key for p in fitted.participants_.values()]}
    assert keys, "nothing archived"
    assert keys.isdisjoint(base), "an archived split is still under a participant's key"
    assert all(isinstance(c.pk, PublicKey) for c in archive)


def test_refresh_reaches_joint_key_of_refresher(fitted: RevFRFClassifier) -> None:
    """The archived splits are under h_r·g^ρ_CC·g^ρ_CS: neither the CC's nor the CS's key alone."""
    fitted.revoke("u2", level=2)
    check_archive_off_every_base_key(fitted, [c for _, c in fitted.cs_.archive])


def test_an_archived_split_under_its_providers_key_is_caught(fitted: RevFRFClassifier) -> None:
    """Planted leak: one split archived under u2's own key."""
    own = next(n.split for t in fitted.cs_.trees for n in t.internal() if n.provider == "u2" and n.split is not None)
    fitted.revoke("u2", level=2)
    with pytest.raises(AssertionError, match="still under a participant's key"):
        check_archive_off_every_base_key(fitted, [*(c for _, c in fitted.cs_.archive), own])
