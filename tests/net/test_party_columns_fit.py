"""Extra columns in every party's file leave every deployed model unchanged (issue: a bank's
outcome-derived column and a participant's ``label`` column had silently become features).

For each protocol a local trial is made, then every data holder's files (training and test) get
extra columns in front: ``zip`` (numbers) and, at a party that holds no label, a column named like
the run's label column holding the label of the same id where the label holder has it (a leak
that would change the model); the label holder gets ``zip`` and ``notes``.  Each party's section
then drops them (``drop``), except the first data holder without labels, which lists its
``features`` instead (the histogram forest's clients all drop: they read the declared columns).  Every role runs in
its own process (fit and predict through the deployment path), and its predictions equal the
one-process facade's on the original files, read through a copy of ``run.toml`` (``orig.toml``)
that names them: the model without the extra columns.

Keys are 1024-bit (the size is not the point here), hence the insecure-key warnings are allowed.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("grpc")

from securetrees.datasets import load_adult
from securetrees.dtpkc import KGC
from securetrees.errors import TableError
from securetrees.net.config import dump_toml, load_config
from securetrees.net.service import launch
from securetrees.net.tables import party_tables
from securetrees.paillier import PublicKey, generate_keypair
from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.protocols.federated_forest import deploy as ff_deploy
from securetrees.protocols.histogram_forest import deploy as hf_deploy
from securetrees.protocols.histogram_forest.experiment import stratified_clients
from securetrees.protocols.histogram_forest.testing import fit_tables
from securetrees.protocols.hybridtree import deploy as ht_deploy
from securetrees.protocols.hybridtree.demo import MAX_BINS as HT_BINS
from securetrees.protocols.hybridtree.demo import adult_hybrid
from securetrees.protocols.hybridtree.estimators import HybridTreeClassifier
from securetrees.protocols.hybridtree.testing import joined_view as hybrid_view
from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.revfrf import deploy as rev_deploy
from securetrees.protocols.secureboost import SecureBoostClassifier
from securetrees.protocols.secureboost import deploy as sb_deploy
from securetrees.protocols.secureboost.demo import MAX_BINS as SB_BINS
from securetrees.protocols.secureboost.demo import adult_partition
from securetrees.rand import DeterministicRandom
from securetrees.testing.alignment import joined_view
from securetrees.testing.paillier import small_keypair

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")


@pytest.fixture(scope="module")
def adult() -> Any:
    return load_adult()


def with_extra_columns(cfg: Path, *, drop_only: bool = False) -> Path:
    """Give every data holder's files the extra columns (module docstring) and its section the
    ``drop`` / ``features`` that ignore them; the original files are kept under ``data/orig/`` and
    ``orig.toml`` (beside ``cfg``, so it reads the same alignment) names them.  Returns ``orig.toml``."""
    folder = cfg.parent
    doc: dict[str, Any] = tomllib.loads(cfg.read_text(encoding="utf-8"))
    original: dict[str, Any] = tomllib.loads(cfg.read_text(encoding="utf-8"))
    parties: dict[str, dict[str, Any]] = doc["parties"]
    holders = [n for n, p in parties.items() if "label" in p and "data" in p]
    label = str(parties[holders[0]]["label"])
    first = parties[holders[0]]
    known = pd.read_csv(folder / first["data"], dtype=str, keep_default_na=False)
    outcome = dict(zip(known[first.get("id_column", "id")], known[label], strict=True))
    listed_once = drop_only
    for name, party in parties.items():
        if "data" not in party:
            continue
        id_column = party.get("id_column", "id")
        extra = ["zip", "notes"] if "label" in party else ["zip", label]
        features: list[str] = []
        for key in ("data", "test_data"):
            if key not in party:
                continue
            path = folder / party[key]
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
            kept = Path("data") / "orig" / Path(party[key]).name
            (folder / kept).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, folder / kept)
            original["parties"][name][key] = kept.as_posix()
            if key == "data":
                features = [c for c in frame.columns if c not in (id_column, party.get("label"))]
            ids = frame[id_column].tolist()
            frame.insert(1, "zip", [str(8000 + 7 * i % 97) for i in range(len(ids))])
            frame.insert(2, extra[1], [outcome.get(i, "") if extra[1] == label else f"note {k % 3}"
                                       for k, i in enumerate(ids)])
            frame.to_csv(path, index=False)
        if listed_once or "label" in party:
            party["drop"] = extra
        else:
            party["features"] = features
            listed_once = True
    cfg.write_text(dump_toml(doc), encoding="utf-8")
    orig = folder / "orig.toml"
    orig.write_text(dump_toml(original), encoding="utf-8")
    return orig


def _check_the_leak_is_refused(cfg: Path, party: str) -> None:
    """The planted companion: without its ``drop``, a party that holds no label refuses the
    column named like the label (it would have become a feature)."""
    doc: dict[str, Any] = tomllib.loads(cfg.read_text(encoding="utf-8"))
    del doc["parties"][party]["drop"]
    leaky = cfg.parent / "leaky.toml"
    leaky.write_text(dump_toml(doc), encoding="utf-8")
    with pytest.raises(TableError, match=f"{party}'s data .*has the name of the run's label column"):
        party_tables(load_config(leaky).party(party))


def _insecure_loader(b: bytes) -> PublicKey:
    return PublicKey.from_bytes(b, allow_insecure=True)


def test_federated_forest(adult: Any, tmp_path: Path, checkout_deployments: Path) -> None:
    X, y, Xt = adult.X_train[:120], adult.y_train[:120], adult.X_test[:20]
    d = X.shape[1]
    part = [list(range(i, d, 3)) for i in range(3)]
    keys = generate_keypair(1024, allow_insecure=True)
    params = {"n_estimators": 2, "max_depth": 3, "random_state": 0, "n_classes": 2, "allow_insecure": True,
              "key_bits": 1024, "release_predictions": "operator"}
    cfg = ff_deploy.prepare(tmp_path, X, y, part, X_test=Xt, params=params, paillier_keys=keys, label_holder=1,
                            id_key=DeterministicRandom("ff ids").token_bytes(32), names=adult.feature_names,
                            categories=adult.categories, lacking=3)
    orig = with_extra_columns(cfg)
    _check_the_leak_is_refused(cfg, "client2")
    got = launch(cfg, tmp_path / "pki", log_dir=tmp_path)
    data = joined_view(load_config(orig), ["client0", "client1", "client2"], part, d)
    ff = FederatedForestClassifier(2, max_depth=3, random_state=0, paillier_keys=keys, allow_insecure=True,
                                   key_bits=1024, rng=DeterministicRandom("ff ids"), public_key_loader=_insecure_loader,
                                   categorical_features=data.categorical)
    ff.set_params(partition=part).fit(data.X, data.y)
    np.testing.assert_array_equal(got["output"], ff.predict_proba(data.X_test))


def test_revfrf(adult: Any, tmp_path: Path, checkout_deployments: Path) -> None:
    X, y, Xt = adult.X_train[:100], adult.y_train[:100], adult.X_test[:10]
    part = [list(range(i, X.shape[1], 3)) for i in range(3)]
    settings = {"n_estimators": 2, "max_depth": 3, "random_state": 3, "n_classes": 2}
    cfg = rev_deploy.prepare(tmp_path, X, y, part, X_test=Xt, settings=settings,
                             kgc=KGC.setup(1024, allow_insecure=True), names=adult.feature_names,
                             categories=adult.categories, lacking=2)
    orig = with_extra_columns(cfg)
    _check_the_leak_is_refused(cfg, "requester")
    got = launch(cfg, tmp_path / "pki", log_dir=tmp_path)
    config = load_config(orig)
    data = joined_view(config, ["u1", "u2", "u3", "cs"], part, X.shape[1])
    requester, _ = party_tables(config.party("requester"))
    clf = RevFRFClassifier(n_estimators=2, max_depth=3, random_state=3, key_bits=1024, allow_insecure=True)
    clf.set_params(partition=part).fit(data.X, data.y)
    want = {"vertical": clf.predict_proba(data.X_test), "test": clf.predict_proba(data.X_test, method="test"),
            "encrypted": clf.predict_proba(requester.X, method="encrypted")}
    clf.revoke("u3", level=2)
    want["after_revocation"] = clf.predict_proba(data.X_test)
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_secureboost(adult: Any, tmp_path: Path, checkout_deployments: Path) -> None:
    settings: dict[str, Any] = {"n_estimators": 2, "max_depth": 3, "learning_rate": 0.3, "max_bins": SB_BINS,
                                "key_bits": 1024, "allow_insecure": True}
    keys = small_keypair(1024)
    part = adult_partition(2)
    cfg = sb_deploy.prepare(tmp_path, adult.X_train[:120], adult.y_train[:120], part, X_test=adult.X_test[:20],
                            params=settings, keypair=keys, names=adult.feature_names, categories=adult.categories,
                            lacking=3, rng=DeterministicRandom("secureboost trial"))
    orig = with_extra_columns(cfg)
    _check_the_leak_is_refused(cfg, "passive1")
    launch(cfg, tmp_path / "pki", log_dir=tmp_path)
    data = joined_view(load_config(orig), ["active", "passive0", "passive1"], part, adult.X_train.shape[1])
    clf = SecureBoostClassifier(part, **settings, keypair=keys,
                                categorical_features=[int(c) for c in np.flatnonzero(data.categorical)])
    clf.fit(data.X, data.y)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "active.proba.npy"), clf.predict_proba(data.X_test))


def test_hybridtree(tmp_path: Path, checkout_deployments: Path) -> None:
    settings: dict[str, Any] = {"n_estimators": 2, "learning_rate": 0.5, "host_depth": 2, "max_bins": HT_BINS,
                                "min_node_size": 20, "key_bits": 1024, "allow_insecure": True}
    data = adult_hybrid(n_guests=3, rows=240)
    keys = generate_keypair(1024, allow_insecure=True)
    s = data.split
    cfg = ht_deploy.prepare(tmp_path, data.X_train, np.where(data.y_train == 1, ">50K", "<=50K"), s.host_features,
                            s.guest_features, s.train_rows, X_test=data.X_test, test_rows=s.test_rows, keypair=keys,
                            params=settings, names=data.names, categories=load_adult().categories, lacking=4,
                            rng=DeterministicRandom("hybridtree trial"))
    orig = with_extra_columns(cfg)
    _check_the_leak_is_refused(cfg, "guest1")
    launch(cfg, tmp_path / "pki", log_dir=tmp_path / "logs")
    config = load_config(orig)
    view = hybrid_view(config)
    clf = HybridTreeClassifier(**settings, **view.settings(), keypair=keys)  # type: ignore[arg-type]
    clf.fit(view.X, view.y)
    test_view = hybrid_view(config, test=True, host_schema=view.host_schema)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "host.proba.npy"), clf.predict_proba(test_view.X))


def test_histogram_forest(adult: Any, tmp_path: Path, checkout_deployments: Path) -> None:
    X, y = adult.X_train[:450], np.where(adult.y_train[:450] == 1, ">50K", "<=50K")
    splits = stratified_clients(X, y, 3, seed=0)
    settings = {"n_estimators": 2, "max_depth": 3, "random_state": 5, "secure_aggregation": True,
                "histogram": "fixed"}
    cfg = hf_deploy.prepare(tmp_path, [(s.X_train, s.y_train) for s in splits],
                            tests=[(s.X_test, s.y_test) for s in splits], params=settings,
                            names=adult.feature_names, categories=adult.categories, rng=DeterministicRandom(b"hf-cols"))
    orig = with_extra_columns(cfg, drop_only=True)
    launch(cfg, tmp_path / "pki", log_dir=tmp_path)
    clf, pooled = fit_tables(orig)
    for c in ("client0", "client1", "client2"):
        np.testing.assert_array_equal(np.load(tmp_path / "out" / f"{c}.proba.npy"), clf.predict_proba(pooled.tests[c]))
