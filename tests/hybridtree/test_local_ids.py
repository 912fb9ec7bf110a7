"""Guest-local instance numbering (``Host(local_ids=True)``, what the deployment uses): every
instance ID a guest receives, in training (``hybridtree.gradients``) and at inference
(``hybridtree.predict``), is its own row number ``0 .. m-1``, never a host row position, and
the model is the one the host's row positions give.  Planted leak: with the positions on the wire
(``local_ids=False``, the one-process numbering) the same check fails.
"""

from __future__ import annotations

import numpy as np

from securetrees.protocols.hybridtree import Guest, Host, HybridTreeParams
from securetrees.protocols.hybridtree.guest import agree_bins, guest_matrix
from securetrees.protocols.hybridtree.host import owners
from securetrees.protocols.hybridtree.messages import Gradients, PredictRequest
from securetrees.protocols.hybridtree.testing import HybridData
from securetrees.runtime import InProcessNetwork
from securetrees.testing.paillier import small_keypair

PARAMS = HybridTreeParams(host_depth=1, guest_depth=1, max_bins=8, min_node_size=0, min_bin_size=0)


def _run(data: HybridData, local_ids: bool) -> tuple[dict[str, list[np.ndarray]], np.ndarray]:
    """Fit one tree and predict the training rows; returns the IDs each guest received and the
    predictions."""
    net = InProcessNetwork()
    keys = small_keypair(512)
    names = [f"guest{u}" for u in range(len(data.guest_rows))]
    gX = [guest_matrix(data.X[r], data.guest_features, data.guest_features) for r in data.guest_rows]
    bins = agree_bins(gX, max_bins=PARAMS.max_bins, categorical=[False, False, True])
    guests = [Guest(n, net, params=PARAMS, ids=np.arange(r.size) if local_ids else r, X=x, mapper=bins,
                    host_key=keys[0]) for n, r, x in zip(names, data.guest_rows, gX, strict=True)]
    owner = owners(len(data.y), data.guest_rows)
    host = Host("host", net, params=PARAMS, guests=names, X=data.X[:, data.host_features], owner=owner,
                keypair=keys, local_ids=local_ids)
    host.fit(data.y, n_estimators=1)
    for g, r, x in zip(guests, data.guest_rows, gX, strict=True):
        g.load_test(np.arange(r.size) if local_ids else r, x)
    proba = host.predict_proba(data.X[:, data.host_features], owner)
    seen: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for rec in net.transcript:
        if isinstance(rec.payload, Gradients):
            seen[rec.receiver] += [b.ids for b in rec.payload.blocks]
        elif isinstance(rec.payload, PredictRequest):
            seen[rec.receiver].append(rec.payload.ids)
    return seen, proba


def _only_own_numbers(seen: dict[str, list[np.ndarray]], data: HybridData) -> bool:
    """Every ID guest ``u`` received is one of its own numbers ``0 .. m_u - 1``."""
    return all(all(ids.size == 0 or (ids.min() >= 0 and ids.max() < r.size) for ids in seen[f"guest{u}"])
               for u, r in enumerate(data.guest_rows))


def test_guests_receive_their_own_numbers_and_the_model_is_unchanged(data: HybridData) -> None:
    seen, proba = _run(data, local_ids=True)
    assert all(seen[g] for g in seen)  # every guest received gradients and a prediction request
    assert _only_own_numbers(seen, data)
    _, reference = _run(data, local_ids=False)
    np.testing.assert_array_equal(proba, reference)


def test_planted_leak_host_positions_on_the_wire_fail_the_check(data: HybridData) -> None:
    seen, _ = _run(data, local_ids=False)
    assert not _only_own_numbers(seen, data)
