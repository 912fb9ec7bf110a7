"""The roles' model parts (``securetrees.protocols.secureboost.model``): exported after a fit,
through the strict codec, restored into fresh roles that never saw a training row, they predict
as the fitted roles do; an inconsistent part is refused (DecodeError)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.errors import DecodeError
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.secureboost import ActiveParty, PassiveParty
from securetrees.protocols.secureboost.model import ActiveModel, PassiveModel
from securetrees.runtime import InProcessNetwork, codec
from tests.secureboost.conftest import PARTITION, make

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")


def _restored(fitted: Any, active: ActiveModel, passives: list[PassiveModel]
              ) -> tuple[ActiveParty, list[PassiveParty]]:
    """Fresh roles on rows of zeros (no training data), their parts restored."""
    net = InProcessNetwork()
    names = [p.name for p in fitted.passives_]
    roles = []
    for name, part, cols in zip(names, passives, PARTITION[1:], strict=True):
        roles.append(PassiveParty(name, net, X=np.zeros((1, len(cols)))))
        roles[-1].restore_model(part)
    role = ActiveParty("active", net, X=np.zeros((2, len(PARTITION[0]))), y=np.zeros(2), passives=names,
                       params=fitted.params_, keypair=fitted.keypair)
    role.restore_model(active)
    return role, roles


def _roundtrip(m: Any) -> Any:
    return codec.decode(codec.encode(m))


@pytest.mark.parametrize("kind", ["reg", "clf"])
def test_restored_roles_predict_as_the_fitted_ones(data: tuple[np.ndarray, np.ndarray],
                                                   keypair: tuple[PublicKey, PrivateKey], kind: str) -> None:
    X, y = data
    target = y if kind == "reg" else np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))  # three classes
    fitted = make(kind, PARTITION, keypair, n_estimators=2).fit(X, target)
    assert sum(len(r.records) for r in fitted.active_.model.trees) > 0
    active = _roundtrip(fitted.active_.model_state())
    passives = [_roundtrip(p.model_state()) for p in fitted.passives_]
    role, roles = _restored(fitted, active, passives)
    Xq = X[::-1][:50]
    for party, cols in zip(roles, PARTITION[1:], strict=True):
        party.load_queries(Xq[:, cols])
    np.testing.assert_array_equal(role.decision_function(Xq[:, PARTITION[0]]), fitted.decision_function(Xq))


def test_inconsistent_parts_are_refused(data: tuple[np.ndarray, np.ndarray],
                                        keypair: tuple[PublicKey, PrivateKey]) -> None:
    X, y = data
    fitted = make("reg", PARTITION, keypair, n_estimators=1).fit(X, y)
    active = fitted.active_.model_state()
    passives = [p.model_state() for p in fitted.passives_]
    _restored(fitted, active, passives)  # the fit's own parts are taken
    t = next(i for i, n in enumerate(active.nodes) if n.size)
    dropped = ActiveModel(active.forest, tuple(n[1:] if i == t else n for i, n in enumerate(active.nodes)),
                          tuple(r[1:] if i == t else r for i, r in enumerate(active.records)), active.n_own)
    wider = ActiveModel(active.forest, active.nodes, active.records, active.n_own + 1)
    for bad in (dropped, wider):
        with pytest.raises(DecodeError, match="does not fit"):
            _restored(fitted, bad, passives)
    p = passives[0]
    outside = PassiveModel(p.n_features, p.feature + p.n_features, p.threshold, p.categorical, p.missing_left)
    with pytest.raises(DecodeError, match="lookup table"):
        _restored(fitted, active, [outside, *passives[1:]])
