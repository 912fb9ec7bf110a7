"""HybridTree security properties from the transcript (specs/hybridtree.md, "What leaks by design").

* no gradient, hessian or label reaches any guest (canaries; paper mode is the positive control);
* no guest feature value reaches the host (canaries);
* the host's view of each individual guest's histogram is a uniform element of Z_N: decrypting one
  guest's reply gives values indistinguishable from uniform (Kolmogorov-Smirnov, false-alarm rate
  1e-6), while plaintext mode (the control) fails the same test; only the sum over guests is exact;
* every role receives exactly the message types of its table in the spec;
* a guest dropping out of a layer: the host repeats the layer with fresh masks among the survivors.

That every reply is re-randomised (no reply ≡ 1 or ≡ one of the host's ciphertexts mod N) is
checked with the other protocols' ciphertexts in ``test_ciphertext_freshness.py``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from securetrees.errors import ProtocolError
from securetrees.paillier import Ciphertext
from securetrees.protocols.hybridtree import Guest, Host, HybridTreeClassifier, HybridTreeParams, HybridTreeRegressor
from securetrees.protocols.hybridtree.messages import HistogramRequest, MaskedHistogram
from securetrees.protocols.hybridtree.testing import fit_layout, hybrid_data, with_guest_column
from securetrees.rand import DeterministicRandom
from securetrees.runtime import InProcessNetwork, Record, encode
from securetrees.testing.canaries import assert_no_canaries, find_canaries
from securetrees.testing.paillier import small_keypair
from securetrees.trees import BinMapper

# Canaries above 2^16 in magnitude: their shortest fixed-point forms (f = 24) are 6 bytes, so the
# random ciphertext bytes of a view (about 120 kB) match one by chance with probability below 1e-8
# per run (a label near 731 has 5-byte forms: about 5e-7).
LABEL = 73102.71849
FEATURE = 9181726354.637
KEY = small_keypair(512)


def _fit(cls: Any, mode: str, X: np.ndarray, y: np.ndarray, data: Any) -> Any:
    # the guests' masks and obfuscators from a fixed stream: the KS test below and the canary scans
    # run on one fixed set of reply values and bytes (each has a false-alarm rate of at most 1e-6 on
    # fresh randomness; pinned, the outcome is the same on every run)
    m = cls(2, host_depth=2, guest_depth=2, max_bins=8, keypair=KEY, mode=mode, min_node_size=0,
            min_bin_size=0, allow_insecure=mode != "secure", record_payloads=True,
            rng=DeterministicRandom(f"hybridtree views/{cls.__name__}/{mode}"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_layout(m, X, y, data.host_features, data.guest_features, data.guest_rows)


def _guest_views(m: Any) -> list[Any]:
    return [r for g in m.guests_ for r in m.network_.transcript.view(g.name)]


def test_no_label_or_gradient_at_any_guest() -> None:
    data = hybrid_data()
    y = data.y_reg.copy()
    i = int(data.guest_rows[1][3])
    y[i] = LABEL
    # First-tree gradient of instance i (base score = mean of y, squared loss): g = mean - y_i.
    grad = float(y.mean() - LABEL)
    canaries = [LABEL, grad, -grad]
    secure = _fit(HybridTreeRegressor, "secure", data.X, y, data)
    assert_no_canaries(_guest_views(secure), canaries, frac_bits=(24, 32))
    plain = _fit(HybridTreeRegressor, "plaintext", data.X, y, data)
    assert_no_canaries(_guest_views(plain), [LABEL], frac_bits=(24, 32))
    paper = _fit(HybridTreeRegressor, "paper", data.X, y, data)
    assert find_canaries(_guest_views(paper), [grad])  # the control: paper mode leaks it


def check_no_guest_feature_at_the_host(view: list[Any]) -> None:
    assert_no_canaries(view, [FEATURE], frac_bits=(24, 32))


def test_no_guest_feature_value_at_the_host() -> None:
    data = hybrid_data()
    X = data.X.copy()
    X[data.guest_rows[2][5], 4] = FEATURE
    m = _fit(HybridTreeClassifier, "secure", X, data.y, data)
    check_no_guest_feature_at_the_host(m.network_.transcript.view("host"))
    m.predict(with_guest_column(X, data.guest_rows))
    check_no_guest_feature_at_the_host(m.network_.transcript.view("host"))


def test_a_guest_value_in_a_reply_is_caught() -> None:
    """Planted leak: a guest's histogram reply carries the feature value's fixed-point code."""
    leak = MaskedHistogram(0, 1, 0, (7, round(FEATURE * 2**24), 9))
    data = encode(leak)
    with pytest.raises(AssertionError, match="private values leaked"):
        check_no_guest_feature_at_the_host([Record(1, "g2", "host", leak.wire_type, len(data), data, leak)])


def _decrypted_guest_replies(m: Any) -> tuple[list[int], dict[tuple[int, int, int], list[list[int]]]]:
    pk, sk = KEY
    values: list[int] = []
    per_request: dict[tuple[int, int, int], list[list[int]]] = {}
    for rec in m.network_.transcript.view("host"):
        if isinstance(rec.payload, MaskedHistogram):
            p = rec.payload
            dec = [sk.decrypt_residue(Ciphertext(pk, v)) if m.mode == "secure" else v
                   for v in p.values]
            values += dec
            per_request.setdefault((p.tree, p.layer, p.attempt), []).append(dec)
    return values, per_request


def _ks_uniform(u: np.ndarray) -> float:
    """The Kolmogorov-Smirnov statistic of ``u`` against U(0, 1)."""
    u = np.sort(u)
    n = u.size
    i = np.arange(1, n + 1)
    return float(max(np.max(i / n - u), np.max(u - (i - 1) / n)))


@pytest.mark.statistical
def test_individual_guest_histograms_look_uniform_to_the_host() -> None:
    data = hybrid_data()
    n = KEY[0].n
    # Critical value of the KS statistic for a false-alarm rate of 1e-6: sqrt(-ln(1e-6 / 2) / (2n)),
    # the Dvoretzky-Kiefer-Wolfowitz-Massart bound, which holds for independent uniform values.  The
    # replies to one request sum to the small aggregate, so the last reply of each request is left
    # out: the others carry independent pairwise masks (one shared with the left-out guest each).
    for mode, uniform in (("secure", True), ("plaintext", False)):
        m = _fit(HybridTreeClassifier, mode, data.X, data.y, data)
        _, per_request = _decrypted_guest_replies(m)
        u = np.array([v / n for replies in per_request.values() for reply in replies[:-1] for v in reply])
        crit = float(np.sqrt(-np.log(1e-6 / 2) / (2 * u.size)))
        assert (_ks_uniform(u) < crit) == uniform, mode
        if mode == "secure":
            # ...but the masks cancel: the sum over guests is the small packed aggregate.
            for replies in per_request.values():
                total = [sum(col) % n for col in zip(*replies, strict=True)]
                assert max(total) < 1 << (KEY[0].bits - 3)


SPEC_TYPES = {
    "host": {"hybridtree.setup_reply", "hybridtree.ack", "hybridtree.masked_histogram",
             "hybridtree.routing", "hybridtree.predict_leaves"},
    "guest": {"hybridtree.setup", "hybridtree.directory", "hybridtree.gradients",
              "hybridtree.histogram_request", "hybridtree.split", "hybridtree.predict_request"},
}


def check_views_match_the_spec_tables(received: dict[str, set[str]], senders: dict[str, set[str]]) -> None:
    for party, types in received.items():
        expected = SPEC_TYPES["host" if party == "host" else "guest"]
        assert types == expected, f"{party} received {sorted(types ^ expected)}"
    for guest, who in senders.items():
        assert who == {"host"}, f"{guest} heard from {sorted(who)}"  # guests talk only to the host


def _spec_views() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    data = hybrid_data()
    m = _fit(HybridTreeClassifier, "secure", data.X, data.y, data)
    m.predict(with_guest_column(data.X, data.guest_rows))
    t = m.network_.transcript
    received = {p: {r.type_name for r in t.view(p)} for p in ["host", *(g.name for g in m.guests_)]}
    senders = {g.name: {r.sender for r in t.view(g.name)} for g in m.guests_}
    return received, senders


def test_views_match_the_spec_tables() -> None:
    check_views_match_the_spec_tables(*_spec_views())


def test_a_view_outside_the_spec_tables_is_caught() -> None:
    """Planted leaks: a guest receives another guest's masked histogram; a guest hears from a peer."""
    received, senders = _spec_views()
    guest = next(p for p in received if p != "host")
    leaky = {**received, guest: received[guest] | {"hybridtree.masked_histogram"}}
    with pytest.raises(AssertionError, match=f"{guest} received"):
        check_views_match_the_spec_tables(leaky, senders)
    with pytest.raises(AssertionError, match="heard from"):
        check_views_match_the_spec_tables(received, {**senders, guest: {"host", "g3"}})


class DroppingGuest(Guest):
    """Drops out of the network while answering the histogram request of ``drop_at``."""

    drop_at: tuple[int, int] = (-1, -1)

    def on_histogram(self, sender: str, msg: HistogramRequest) -> MaskedHistogram:
        reply = super().on_histogram(sender, msg)
        if (msg.tree, msg.layer) == self.drop_at:
            self.network.disconnect(self.name)  # type: ignore[attr-defined]
        return reply


def _parties(mode: str, n_guests: int, drop_at: tuple[int, int]) -> tuple[Host, list[Guest], Any]:
    data = hybrid_data(n_guests=n_guests)
    params = HybridTreeParams(host_depth=2, guest_depth=2, max_bins=8, mode=mode,  # type: ignore[arg-type]
                              min_node_size=0, min_bin_size=0)
    net = InProcessNetwork()
    names = [f"g{u}" for u in range(n_guests)]
    owner = np.full(len(data.y), -1)
    for u, r in enumerate(data.guest_rows):
        owner[r] = u
    gX = [data.X[r][:, data.guest_features] for r in data.guest_rows]
    gmap = BinMapper.fit(np.vstack(gX), max_bins=8, categorical=[False, False, True])
    host = Host("host", net, params=params, guests=names, X=data.X[:, data.host_features],
                owner=owner, mapper=BinMapper.fit(data.X[:, data.host_features], max_bins=8),
                keypair=KEY if mode == "secure" else None)
    guests = []
    for u, (name, r, x) in enumerate(zip(names, data.guest_rows, gX, strict=True)):
        cls = DroppingGuest if u == 1 else Guest
        g = cls(name, net, params=params, ids=r, X=x, mapper=gmap, host_key=KEY[0])
        if isinstance(g, DroppingGuest):
            g.drop_at = drop_at
        guests.append(g)
    host.setup()
    return host, guests, data


def _train(host: Host, data: Any, trees: int) -> np.ndarray:
    raw = np.zeros(len(data.y))
    for t in range(trees):
        p = 1.0 / (1.0 + np.exp(-raw))
        rec, values = host.grow(t, p - data.y, p * (1 - p))
        host.records.append(rec)
        raw += 0.1 * values
    return raw


def test_guest_dropout_repeats_the_layer_with_fresh_masks() -> None:
    host, guests, data = _parties("secure", 4, drop_at=(1, 1))
    raw = _train(host, data, 3)
    assert host.dropped == ["g1"]
    attempts = {(r.payload.tree, r.payload.layer, r.payload.attempt)
                for g in guests for r in host.network.transcript.view(g.name)
                if isinstance(r.payload, HistogramRequest)}
    assert (1, 1, 0) in attempts and (1, 1, 1) in attempts
    # The same dropout in plaintext mode gives the same model: the retry is exact.
    p_host, _, _ = _parties("plaintext", 4, drop_at=(1, 1))
    np.testing.assert_array_equal(raw, _train(p_host, data, 3))
    assert np.all(np.isfinite(host.predict_values(data.X[:, data.host_features],
                                                  np.full(len(data.y), -1))))


def test_dropout_below_three_guests_is_refused() -> None:
    host, _, data = _parties("secure", 3, drop_at=(0, 1))
    with pytest.raises(ProtocolError):
        _train(host, data, 1)


def test_guest_refuses_to_mask_the_same_request_twice() -> None:
    host, guests, data = _parties("secure", 4, drop_at=(-1, -1))
    _train(host, data, 1)
    req = HistogramRequest(0, 1, 0, tuple(g.name for g in guests), 1, ())
    with pytest.raises(ProtocolError):
        guests[0].on_histogram("host", req)
