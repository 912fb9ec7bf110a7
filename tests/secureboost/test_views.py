"""What each party sees: no passive party's view holds a label or a gradient in any encoding, or an
instance's packed plaintext; no raw feature value or passive threshold leaves its owner.  Every
check has a planted-leak companion showing it fails on a leaky variant."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest

from securetrees.errors import SecureTreesError
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.secureboost import ActiveParty, PackingLayout, PassiveParty, quantize
from securetrees.protocols.secureboost.messages import SplitOrder
from securetrees.rand import DeterministicRandom
from securetrees.runtime import Record
from securetrees.testing.canaries import assert_no_canaries, find_canaries
from tests.secureboost.conftest import PARTITION, make, vertical_data

LABEL = 731.0271849
ACTIVE_VALUE = 9181.726354637
PASSIVE_VALUE = 5127.339041781
FRAC = (24, 32)


def _canary_data() -> tuple[np.ndarray, np.ndarray]:
    X, y = vertical_data()
    y = y.copy()
    X = X.copy()
    y[5] = LABEL
    X[3, 0] = ACTIVE_VALUE
    X[7, 2] = PASSIVE_VALUE
    return X, y


def _fit(keys: tuple[PublicKey, PrivateKey]) -> Any:
    X, y = _canary_data()
    # Every party's secret randomness (encryption, obfuscators) from a fixed stream, so the views are
    # one fixed set of bytes.  The gradient and threshold canaries are small (4-byte fixed-point
    # forms at f = 24): with system randomness, random ciphertext bytes (about 290 kB over the three
    # scans) matched one of them by chance with probability about 8e-4 per run.
    model = make("reg", PARTITION, keys, n_estimators=2, rng=DeterministicRandom("secureboost views"))
    with contextlib.suppress(SecureTreesError):  # a leaky variant may be cut short by validation
        model.fit(X, y)
    return model


def _first_tree_gradients() -> tuple[np.ndarray, np.ndarray]:
    _, y = _canary_data()
    return y.mean() - y, np.ones_like(y)


def _views(model: Any, parties: list[str]) -> list[Record]:
    net = model.network_ if hasattr(model, "network_") else None
    assert net is not None
    return [r for p in parties for r in net.transcript.view(p)]


def _packed_plaintexts(keys: tuple[PublicKey, PrivateKey]) -> set[int]:
    g, h = _first_tree_gradients()
    gq, hq = quantize(g, 24), quantize(h, 24)
    layout = PackingLayout(24, 1 << max(0, -(-int(np.abs(gq).max()) >> 24) - 1).bit_length(), 1, g.size,
                           keys[0].n.bit_length() - 1)
    return set(layout.encode(gq, hq))


def _fixed_width(values: list[int], keys: tuple[PublicKey, PrivateKey]) -> bytes:
    """Integers in the fixed-width (bytes of N²) big-endian form of the gradients message."""
    width = 2 * keys[0].modulus_bytes
    return b"".join(int(v).to_bytes(width, "big", signed=True) for v in values)


def _plaintext_hits(records: list[Record], plain: set[int], keys: tuple[PublicKey, PrivateKey]) -> int:
    width = 2 * keys[0].modulus_bytes
    return sum(int.from_bytes(data[i:i + width], "big") in plain
               for r in records if r.type_name == "secureboost.gradients"
               for data in [r.payload.ciphertexts] for i in range(0, len(data), width))


class _Capture:
    """Keeps the network of a facade even when a leaky fit raises part way."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.net: Any = None
        orig = ActiveParty.__init__

        def init(party: ActiveParty, name: str, network: Any, **kw: Any) -> None:
            self.net = network
            orig(party, name, network, **kw)

        monkeypatch.setattr(ActiveParty, "__init__", init)


def _passive_records(net: Any) -> list[Record]:
    return [r for p in ("passive1", "passive2") for r in net.transcript.view(p)]


def test_passive_views_hold_no_label_gradient_or_active_feature(keypair: tuple[PublicKey, PrivateKey]) -> None:
    model = _fit(keypair)
    records = _views(model, ["passive1", "passive2"])
    g, _ = _first_tree_gradients()
    assert any(r.type_name == "secureboost.gradients" for r in records)
    assert_no_canaries(records, [LABEL, ACTIVE_VALUE, *g[:8].tolist()], frac_bits=FRAC)
    assert _plaintext_hits(records, _packed_plaintexts(keypair), keypair) == 0


def test_planted_leak_plaintext_packed_gradients_are_caught(keypair: tuple[PublicKey, PrivateKey],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Leaky variant: the packed plaintexts are sent instead of their encryptions."""
    monkeypatch.setattr(ActiveParty, "encrypt_gradients",
                        lambda self, layout, g, h: _fixed_width(layout.encode(g, h), keypair))
    cap = _Capture(monkeypatch)
    _fit(keypair)
    assert _plaintext_hits(_passive_records(cap.net), _packed_plaintexts(keypair), keypair) > 0


def test_planted_leak_fixed_point_gradients_are_caught(keypair: tuple[PublicKey, PrivateKey],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Leaky variant: the fixed-point gradients themselves travel (the receiver's ciphertext check
    stops the run, after the message has reached its view)."""
    monkeypatch.setattr(ActiveParty, "encrypt_gradients",
                        lambda self, layout, g, h: _fixed_width([int(v) for v in g], keypair))
    cap = _Capture(monkeypatch)
    _fit(keypair)
    g, _ = _first_tree_gradients()
    assert find_canaries(_passive_records(cap.net), g[:8].tolist(), frac_bits=FRAC)


def _thresholds(model: Any) -> list[float]:
    return [row.threshold for p in model.passives_ for row in p.table if np.isfinite(row.threshold)]


def test_no_passive_feature_or_threshold_leaves_its_owner(keypair: tuple[PublicKey, PrivateKey]) -> None:
    model = _fit(keypair)
    thresholds = _thresholds(model)
    assert thresholds
    assert_no_canaries(_views(model, ["active"]), [PASSIVE_VALUE, *thresholds], frac_bits=FRAC)
    other = [t for t in (row.threshold for row in model.passives_[0].table) if np.isfinite(t)]
    assert_no_canaries(_views(model, ["passive2"]), [PASSIVE_VALUE, *other], frac_bits=FRAC)


def test_planted_leak_threshold_derived_record_ids_are_caught(keypair: tuple[PublicKey, PrivateKey],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Leaky variant: the record id handed to the active party encodes the threshold."""
    honest = PassiveParty.record_for

    def leaky(self: PassiveParty, order: SplitOrder) -> int:
        honest(self, order)
        return round(self.table[-1].threshold * 2**32) if np.isfinite(self.table[-1].threshold) else 0

    monkeypatch.setattr(PassiveParty, "record_for", leaky)
    model = _fit(keypair)
    assert find_canaries(_views(model, ["active"]), _thresholds(model), frac_bits=FRAC)
