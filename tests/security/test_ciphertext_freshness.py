"""Every ciphertext a party sends carries fresh randomness: HybridTree, Federated Forest's
``encrypted`` mode and RevFRF (SecureBoost: ``test_secureboost_freshness.py``).

One check for all, :func:`securetrees.testing.freshness.assert_fresh` on the run's transcript:
no ciphertext without randomness, none whose randomness the sender used before, none that
carries the randomness of a ciphertext the sender received.  Each protocol has planted
companions, one per place that draws or refreshes randomness (monkeypatching that one step),
on which the check fails.  Fresh randomness collides with probability below 2^-400 here
(the module's bound for 512-bit test keys), so no check can fail by chance.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import securetrees.paillier.prefill as prefill_module
import securetrees.protocols.federated_forest.encrypted_stats as ff_stats
import securetrees.protocols.federated_forest.label_holder as ff_label_holder
import securetrees.protocols.hybridtree.guest as ht_guest
import securetrees.protocols.hybridtree.host as ht_host
import securetrees.protocols.revfrf.participant as revfrf_participant
import securetrees.protocols.revfrf.requester as revfrf_requester
from securetrees.dtpkc import Ciphertext
from securetrees.protocols.federated_forest.attacks import attack_fit
from securetrees.protocols.hybridtree import HybridTreeClassifier
from securetrees.protocols.hybridtree.testing import fit_layout, hybrid_data
from securetrees.rand import DeterministicRandom
from securetrees.testing.freshness import (
    Fingerprints,
    FixedRandom,
    assert_fresh,
    dtpkc_fingerprints,
    paillier_fingerprints,
    repeating_pool,
)
from securetrees.testing.paillier import small_keypair

from ..revfrf.helpers import PARTITION, classifier, integer_data

KEY = small_keypair(512)
N = KEY[0].n


def _without_rng(fn: Any) -> Any:
    """``fn`` with its ``rng`` keyword replaced by :class:`FixedRandom` (a planted leak)."""
    return lambda *args, **kw: fn(*args, **{**kw, "rng": FixedRandom()})


# -- HybridTree: the host's gradient ciphertexts, the guests' masked histograms -----------------------
HYBRID: dict[str, Fingerprints] = {
    "hybridtree.gradients": lambda p: paillier_fingerprints((v for b in p.blocks for v in b.values), N),
    "hybridtree.masked_histogram": lambda p: paillier_fingerprints(p.values, N),
}


def _hybrid(pool: bool = False, encryption: str = "key-owner") -> Any:
    data = hybrid_data()
    m = HybridTreeClassifier(2, host_depth=2, guest_depth=2, max_bins=8, keypair=KEY, mode="secure", min_node_size=0,
                             min_bin_size=0, record_payloads=True, rng=DeterministicRandom("freshness/hybridtree"),
                             background_pool=pool, encryption=encryption)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_layout(m, data.X, data.y, data.host_features, data.guest_features, data.guest_rows)


def check_hybrid_fresh(m: Any) -> None:
    assert_fresh(m.network_.transcript, ["host", *(g.name for g in m.guests_)], HYBRID)


@pytest.mark.parametrize(("pool", "encryption"), [(False, "key-owner"), (False, "djn"), (False, "djn-short"),
                                                  (True, "key-owner")])
def test_hybridtree_ciphertexts_are_fresh(pool: bool, encryption: str) -> None:
    check_hybrid_fresh(_hybrid(pool, encryption))


@pytest.mark.parametrize(("where", "kind"), [("host encryption", "repeated"), ("host pool", "repeated"),
                                             ("guest re-randomisation", "trivial")])
def test_hybridtree_planted_stale_ciphertexts_are_caught(where: str, kind: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if where == "host encryption":  # every tree's gradients under the same obfuscators
        monkeypatch.setattr(ht_host, "owner_encrypt_many", _without_rng(ht_host.owner_encrypt_many))
        monkeypatch.setattr(ht_host, "encrypt_many", _without_rng(ht_host.encrypt_many))
    elif where == "host pool":  # the background pool serves its first batch again
        monkeypatch.setattr(prefill_module, "BackgroundPool", repeating_pool())
    else:  # the guests' fresh factor r^N is 1
        monkeypatch.setattr(ht_guest, "obfuscators", lambda pk, mode, count, **kw: [1] * count)
    with pytest.raises(AssertionError, match=f"'{kind}'"):
        check_hybrid_fresh(_hybrid(where == "host pool"))


# -- Federated Forest, encrypted labels: the label holder's ciphertexts, the clients' packed bins -------
FOREST: dict[str, Fingerprints] = {
    "federated_forest.encrypted_labels": lambda p: paillier_fingerprints(p.ciphertexts, N),
    "federated_forest.score_request": lambda p: paillier_fingerprints(p.ciphertexts, N),
}


def _forest(mode: str = "djn") -> Any:
    ff, _ = attack_fit(3, n=120, n_estimators=2, paillier_mode=mode,
                       rng=DeterministicRandom("freshness/federated forest"))
    return ff


def check_forest_fresh(ff: Any) -> None:
    assert_fresh(ff.transcript_, [c.name for c in ff.clients_], FOREST)


@pytest.mark.parametrize("mode", ["djn", "djn-short", "classic"])
def test_federated_forest_ciphertexts_are_fresh(mode: str) -> None:
    check_forest_fresh(_forest(mode))


@pytest.mark.parametrize(("where", "kind"), [("label encryption", "repeated"), ("bin re-randomisation", "trivial")])
def test_federated_forest_planted_stale_ciphertexts_are_caught(where: str, kind: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    if where == "label encryption":  # one obfuscator for every sample's labels
        monkeypatch.setattr(ff_label_holder, "encrypt_many", _without_rng(ff_label_holder.encrypt_many))
    else:  # the client's packed bin sums leave without a fresh factor
        monkeypatch.setattr(ff_stats, "obfuscators", lambda pk, mode, count, **kw: [1] * count)
    with pytest.raises(AssertionError, match=f"'{kind}'"):
        check_forest_fresh(_forest())


# -- RevFRF: every (T1, T2) a party sends (thresholds, FT-Test values, requests, partial decryptions) -----
def _t2(payload: Any) -> list[int]:
    return dtpkc_fingerprints([*payload.t2, *getattr(payload, "low_t2", ())])


REVFRF: dict[str, Fingerprints] = dict.fromkeys(
    ["revfrf.split.reply", "revfrf.test.reply", "revfrf.predict.request", "revfrf.predict.parhdec",
     "revfrf.predict.parhdec.reply", "revfrf.revoke.cc", "revfrf.revoke.cc.reply", "dtpkc.hoadd.reply",
     "dtpkc.holt.reply"], _t2)
"""Every message type that carries whole ciphertexts ``(T1, T2)`` (HoLT's and HoAdd's blinded
requests carry partial values, checked in ``test_dtpkc_views``)."""


def _revfrf() -> Any:
    data = integer_data(n=120)
    clf = classifier(n_estimators=2, max_depth=3).set_params(partition=PARTITION).fit(*data)
    clf.predict(data[0][:2], method="encrypted", requester="req")
    clf.predict(data[0][:10], method="test")
    clf.revoke("u2", level=2)  # the CS's refresh request to the CC and the CC's refreshed splits
    return clf


def check_revfrf_fresh(clf: Any) -> None:
    assert_fresh(clf.transcript_, sorted({r.sender for r in clf.transcript_.records}), REVFRF)


def test_revfrf_ciphertexts_are_fresh() -> None:
    check_revfrf_fresh(_revfrf())


@pytest.mark.parametrize(("where", "kind"), [("participant encryption", "repeated"),
                                             ("requester encryption", "repeated"),
                                             ("partial decryption", "echoed")])
def test_revfrf_planted_stale_ciphertexts_are_caught(where: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if where == "participant encryption":  # thresholds and FT-Test values under one r
        monkeypatch.setattr(revfrf_participant, "encrypt_many", _without_rng(revfrf_participant.encrypt_many))
    elif where == "requester encryption":  # a request's values under one r
        monkeypatch.setattr(revfrf_requester, "encrypt_many", _without_rng(revfrf_requester.encrypt_many))
    else:  # ParHDec1's output leaves without re-randomisation
        monkeypatch.setattr(Ciphertext, "rerandomize", lambda self, **_: self)
    with pytest.raises(AssertionError, match=f"'{kind}'"):
        check_revfrf_fresh(_revfrf())
