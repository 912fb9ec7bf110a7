"""Model parts saved after a fit, and a predict-only run that loads them (``securetrees.net.models``).

Multi-process: a fit run writes ``models/NAME.model`` at every party; a fresh run with
``[run] job = "predict"``, whose training data files are gone, scores new rows (aligned by PSI as
in training) with the fitted facade's predictions.  Negative: a missing, tampered, wrong-version
file, a part of another party, and parts of two different fits are refused with typed errors.
HybridTree's fit-then-predict-only run on its parties' own tables is in ``test_hybridtree_deploy.py``.
Keys are 1024-bit (the size is not the point), hence the insecure-key warnings are allowed.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("grpc")

from securetrees.datasets import load_adult
from securetrees.errors import DecodeError, KeyMismatchError, ParameterError, ProtocolError, TableError
from securetrees.net import models
from securetrees.net.config import load_config, read_passphrase
from securetrees.net.service import launch, start_role
from securetrees.net.tables import party_tables
from securetrees.net.trial import table_frame
from securetrees.paillier import PublicKey, generate_keypair
from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.protocols.federated_forest import deploy as ff_deploy
from securetrees.protocols.federated_forest.model import MasterModel
from securetrees.rand import DeterministicRandom
from securetrees.runtime import codec
from securetrees.testing.alignment import joined_view
from securetrees.testing.runs import ModelIdReplies, joined_new_rows, predict_only

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")

CLIENTS = ["client0", "client1", "client2"]


def _insecure_loader(b: bytes) -> PublicKey:
    return PublicKey.from_bytes(b, allow_insecure=True)


@pytest.fixture(scope="module")
def ff_fitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A PSI-aligned Federated Forest fit (three clients, the label holder client1, string categories,
    empty cells, string labels, each client's rows in its own order with a few ids the others lack),
    the one-process facade fitted on the same aligned rows, and new rows for each client."""
    adult = load_adult()
    tmp = tmp_path_factory.mktemp("ff")
    X, y = adult.X_train[:120], adult.y_train[:120]
    d = X.shape[1]
    part = [list(range(i, d, 3)) for i in range(3)]
    keys = generate_keypair(1024, allow_insecure=True)
    params = {"n_estimators": 2, "max_depth": 3, "random_state": 0, "n_classes": 2, "allow_insecure": True,
              "key_bits": 1024, "release_predictions": "operator"}
    cfg = ff_deploy.prepare(tmp, X, np.where(y == 1, ">50K", "<=50K"), part, X_test=adult.X_test[:10],
                            params=params, paillier_keys=keys, label_holder=1, names=adult.feature_names,
                            categories=adult.categories, lacking=2, rng=DeterministicRandom("ff trial"),
                            id_key=DeterministicRandom("ff ids").token_bytes(32))
    fitted = launch(cfg, tmp / "pki", log_dir=tmp / "logs")
    config = load_config(cfg)
    data = joined_view(config, CLIENTS, part, d)
    ff = FederatedForestClassifier(2, max_depth=3, random_state=0, paillier_keys=keys, allow_insecure=True,
                                   key_bits=1024, rng=DeterministicRandom("ff ids"), public_key_loader=_insecure_loader,
                                   categorical_features=data.categorical, label_holder=1)
    ff.set_params(partition=part).fit(data.X, data.y)
    # new rows: ids no training row had, each client lacking one the others hold
    Xn = adult.X_test[100:130]
    new_ids = [f"new-{i}" for i in range(Xn.shape[0])]
    schemas = {c: party_tables(config.party(c))[0].schema for c in CLIENTS}
    new_tests: dict[str, str] = {}
    for i, (name, cols) in enumerate(zip(CLIENTS, part, strict=True)):
        keep = [k for k in range(Xn.shape[0]) if k != i][::-1]  # own order, one row missing
        mine = [adult.feature_names[j] for j in cols]
        cats = {n: v for n, v in adult.categories.items() if n in mine}
        path = f"new/{name}.csv"
        (tmp / "new").mkdir(exist_ok=True)
        table_frame([new_ids[k] for k in keep], Xn[keep][:, cols], mine, categories=cats).to_csv(tmp / path,
                                                                                                index=False)
        new_tests[name] = path
    return {"cfg": cfg, "config": config, "part": part, "facade": ff, "fitted": fitted, "schemas": schemas,
            "new_tests": new_tests, "tmp": tmp, "d": d, "fit_ref": data}


def _aligned_new_rows(fx: dict[str, Any], config_path: Path) -> tuple[np.ndarray, tuple[str, ...]]:
    """The new rows joined over the clients in the agreed order of the predict-only run."""
    return joined_new_rows(config_path, CLIENTS, fx["part"], fx["schemas"], fx["d"])


def test_fit_writes_every_partys_model_and_a_predict_only_run_scores_new_rows(ff_fitted: dict[str, Any]) -> None:
    fx = ff_fitted
    np.testing.assert_array_equal(fx["fitted"]["output"], fx["facade"].predict_proba(fx["fit_ref"].X_test))
    for name in ["master", *CLIENTS]:
        assert models.model_path(fx["config"], name).stat().st_mode & 0o777 == 0o600
    cfg = predict_only(fx["cfg"], fx["new_tests"])
    got = launch(cfg, fx["tmp"] / "pki", log_dir=fx["tmp"] / "logs-predict")
    Xn, ids = _aligned_new_rows(fx, cfg)
    assert len(ids) == 30 - len(CLIENTS)
    want = fx["facade"].predict_proba(Xn)
    np.testing.assert_array_equal(got["output"], want)
    # the label holder's own file: the same output beside its own ids, its class names
    out = fx["tmp"] / "out"
    own_ids = np.load(out / "client1.test_ids.npy").tolist()
    proba = np.load(out / "client1.proba.npy")
    order = [ids.index(i) for i in own_ids]
    np.testing.assert_array_equal(proba, want[order])
    np.testing.assert_array_equal(proba, got["output"])  # in the operator's order: its file's row r is row r here
    with open(out / "client1.predictions.csv", newline="", encoding="utf-8") as f:
        kept = list(csv.DictReader(f))
    assert [r["id"] for r in kept] == own_ids and [int(r["row"]) for r in kept] == list(range(len(own_ids)))
    assert set(np.load(out / "client1.predictions.npy").tolist()) <= {">50K", "<=50K"}
    for kept in out.glob("client1.*"):  # the label holder's predictions are its own: mode 0600
        assert kept.stat().st_mode & 0o077 == 0, kept


def test_hmac_trusted_predict_only_run_matches_the_facade(tmp_path: Path) -> None:
    """The trusted setting (``alignment = "hmac-trusted"``: every client holds the same ids and a
    shared HMAC key): a predict-only run scores new rows, in the clients' own (reversed) order,
    from the saved parts as the facade does, with no PSI and no training file."""
    adult = load_adult()
    X, y = adult.X_train[:120], adult.y_train[:120]
    d = X.shape[1]
    part = [list(range(i, d, 3)) for i in range(3)]
    keys = generate_keypair(1024, allow_insecure=True)
    params = {"n_estimators": 2, "max_depth": 3, "random_state": 0, "n_classes": 2, "allow_insecure": True,
              "key_bits": 1024, "alignment": "hmac-trusted", "release_predictions": "operator"}
    cfg = ff_deploy.prepare(tmp_path, X, y, part, X_test=adult.X_test[:10], params=params, paillier_keys=keys,
                            id_key=DeterministicRandom("ff ids").token_bytes(32), shuffle=False)
    launch(cfg, tmp_path / "pki", log_dir=tmp_path / "logs")
    ff = FederatedForestClassifier(2, max_depth=3, random_state=0, paillier_keys=keys, allow_insecure=True,
                                   key_bits=1024, rng=DeterministicRandom("ff ids"), public_key_loader=_insecure_loader)
    ff.set_params(partition=part).fit(X, y)
    Xn = adult.X_test[200:215][::-1]
    new_ids = [f"new-{i}" for i in range(Xn.shape[0])][::-1]
    (tmp_path / "new").mkdir()
    new_tests = {}
    for name, cols in zip(CLIENTS, part, strict=True):
        path = f"new/{name}.csv"
        table_frame(new_ids, Xn[:, cols], [f"x{j}" for j in cols]).to_csv(tmp_path / path, index=False)
        new_tests[name] = path
    got = launch(predict_only(cfg, new_tests), tmp_path / "pki", log_dir=tmp_path / "logs-predict")
    assert not (tmp_path / "out" / "client0.rows.npz").exists()  # nothing was aligned by PSI
    np.testing.assert_array_equal(got["output"], ff.predict_proba(Xn))


def _part(fx: dict[str, Any], name: str) -> models.ModelFile:
    config = fx["config"]
    pw = read_passphrase(name, fx["tmp"] / "pki" / f"{name}.pass")
    return models.open_model(models.model_path(config, name).read_bytes(), pw)


def test_missing_tampered_other_version_and_other_partys_files_are_refused(ff_fitted: dict[str, Any]) -> None:
    fx = ff_fitted
    config = fx["config"]
    pki = fx["tmp"] / "pki"
    pw = {n: read_passphrase(n, pki / f"{n}.pass") for n in ["master", *CLIENTS]}
    saved = models.model_path(config, "master").read_bytes()
    master = models.load_model(config, "master", "master", pw["master"], MasterModel)
    assert master.body.trees and master.model_id == _part(fx, "client0").model_id
    with pytest.raises(ParameterError, match="no model file"):
        models.load_model(config, "client9", "client", pw["master"], MasterModel)
    for i in (len(saved) // 2, len(saved) - 1, 30):  # the body, the tag, the header's salt
        bad = bytearray(saved)
        bad[i] ^= 0x01
        with pytest.raises(DecodeError):
            models.open_model(bytes(bad), pw["master"])
    with pytest.raises(DecodeError, match="unsupported model file version"):
        models.open_model(models.seal_model(master, pw["master"], version=2), pw["master"])
    with pytest.raises(DecodeError, match="wrong passphrase"):  # client0's file at client1
        models.open_model(models.model_path(config, "client0").read_bytes(), pw["client1"])
    # client0's part sealed under client1's passphrase in client1's place: not client1's
    moved = fx["tmp"] / "moved"
    shutil.copytree(config.model_dir, moved)
    (moved / "client1.model").write_bytes(models.seal_model(_part(fx, "client0"), pw["client1"]))
    other = config.__class__(**{**config.__dict__, "models": moved})
    with pytest.raises(KeyMismatchError, match="client0"):
        models.load_model(other, "client1", "client", pw["client1"], ff_deploy.ClientPart)
    with pytest.raises(DecodeError, match="expected"):
        models.load_model(config, "master", "master", pw["master"], ff_deploy.ClientPart)


def test_an_unauthenticated_decoder_would_take_a_tampered_threshold(ff_fitted: dict[str, Any]) -> None:
    """Planted leak for the tamper check: the same flip in the plaintext, decoded without the
    envelope, goes through silently (a changed threshold), so it is the seal that refuses it."""
    part = _part(ff_fitted, "client0")
    plain = bytearray(codec.encode(part))
    float_at = bytes(plain).index(part.body.client.trees[0].threshold.tobytes()[:8])  # type: ignore[attr-defined]
    plain[float_at + 3] ^= 0x10
    changed = codec.decode(bytes(plain))
    assert isinstance(changed, models.ModelFile)
    assert not np.array_equal(changed.body.client.trees[0].threshold,  # type: ignore[attr-defined]
                              part.body.client.trees[0].threshold)  # type: ignore[attr-defined]


def test_parts_of_two_fits_are_refused_before_predicting(ff_fitted: dict[str, Any]) -> None:
    """client0's part re-sealed with another fit's model id: the file opens, and the operator's
    check of the parties' model ids refuses the mix (ProtocolError naming them); the same check
    passes on the fit's own parts (and in every predict-only launch of this module)."""
    fx = ff_fitted
    pw = read_passphrase("client0", fx["tmp"] / "pki" / "client0.pass")
    part = _part(fx, "client0")
    other = models.open_model(models.seal_model(models.ModelFile(part.version, part.protocol, part.party, part.role,
                                                                 bytes(16), part.body), pw), pw)
    ids = {n: _part(fx, n).model_id for n in ["master", *CLIENTS]}
    assert models.check_models(ModelIdReplies(ids), list(ids)) == part.model_id.hex()  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="different fits"):
        models.check_models(ModelIdReplies({**ids, "client0": other.model_id}), list(ids))  # type: ignore[arg-type]


def test_a_predict_only_run_refuses_to_train_and_a_fit_run_reads_its_training_data(
        ff_fitted: dict[str, Any]) -> None:
    """The predict-only run does not touch the (absent) training files; the companion: the same
    absent file stops a fit run's client at start-up, so a predict-only role that read it would fail."""
    fx = ff_fitted
    cfg = fx["cfg"].parent / "predict.toml"
    if not cfg.exists():
        cfg = predict_only(fx["cfg"], fx["new_tests"])
    assert not (fx["tmp"] / "data" / "client0.csv").exists()
    with pytest.raises(ParameterError, match="predict-only"):
        ff_deploy.fit(None, load_config(cfg))  # type: ignore[arg-type]
    pw = read_passphrase("client0", fx["tmp"] / "pki" / "client0.pass")
    with pytest.raises(TableError, match="cannot read"):
        start_role(load_config(fx["cfg"]), "client0", pw)


def test_job_and_model_dir_are_checked(tmp_path: Path, ff_fitted: dict[str, Any]) -> None:
    text = ff_fitted["cfg"].read_text(encoding="utf-8")
    bad = tmp_path / "run.toml"
    bad.write_text(text.replace("[run]\n", '[run]\njob = "refit"\n', 1), encoding="utf-8")
    with pytest.raises(ParameterError, match="job is one of"):
        load_config(bad)
    bad.write_text(text.replace("[run]\n", '[run]\nmodel_dir = "elsewhere"\n', 1), encoding="utf-8")
    assert models.model_path(load_config(bad), "master") == tmp_path / "elsewhere" / "master.model"


def test_histogram_forest_predict_only_run_matches_the_facade(tmp_path: Path, checkout_deployments: Path) -> None:
    """The histogram forest: after a fit, new rows at each client (``test_data``, its own CSV file) are
    scored by a predict-only run whose training files are gone, as the facade scores them."""
    from securetrees.protocols.histogram_forest import deploy as hf_deploy
    from securetrees.protocols.histogram_forest.experiment import stratified_clients
    from securetrees.protocols.histogram_forest.testing import fit_tables, pooled_tables

    adult = load_adult()
    splits = stratified_clients(adult.X_train[:300], adult.y_train[:300], 3, seed=0)
    params = {"n_estimators": 2, "max_depth": 3, "random_state": 5, "secure_aggregation": True,
              "histogram": "fixed"}
    cfg = hf_deploy.prepare(tmp_path, [(s.X_train, s.y_train) for s in splits],
                            tests=[(s.X_test, s.y_test) for s in splits], params=params,
                            names=adult.feature_names, categories=adult.categories)
    fitted = launch(cfg, tmp_path / "pki", log_dir=tmp_path / "logs")
    facade, pooled = fit_tables(cfg)
    labels = {c: pd.read_csv(tmp_path / "data" / f"{c}-test.csv")["label"].to_numpy() for c in pooled.tests}
    np.testing.assert_array_equal([fitted[f"{c}_score"] for c in pooled.tests],
                                  [facade.score(pooled.tests[c], labels[c]) for c in pooled.tests])
    new = {}
    for i in range(3):
        rows = slice(50 * i, 50 * i + 20)
        frame = table_frame([f"new-{r}" for r in range(20)], adult.X_test[rows], adult.feature_names,
                            categories=adult.categories, label=("label", adult.y_test[:20].tolist()))
        frame.to_csv(tmp_path / f"client{i}-new.csv", index=False)
        new[f"client{i}"] = f"client{i}-new.csv"
    predict_cfg = predict_only(cfg, new)
    got = launch(predict_cfg, tmp_path / "pki", log_dir=tmp_path / "logs-predict")
    rows_now = pooled_tables(predict_cfg)
    np.testing.assert_array_equal([got[f"{c}_score"] for c in new],
                                  [facade.score(rows_now.tests[c], adult.y_test[:20]) for c in new])
    for name in new:
        np.testing.assert_array_equal(np.load(tmp_path / "out" / f"{name}.proba.npy"),
                                      facade.predict_proba(rows_now.tests[name]))
    with pytest.raises(ParameterError, match="predict-only"):
        hf_deploy.fit(None, load_config(predict_cfg))  # type: ignore[arg-type]


def test_a_protocol_without_model_parts_refuses_a_predict_only_run(tmp_path: Path) -> None:
    """The standalone PSI deployment keeps no model: its predict-only run stops at start-up."""
    from securetrees.errors import UnsupportedActionError
    from securetrees.psi import deploy as psi_deploy

    cfg = psi_deploy.prepare(tmp_path, {"a": np.arange(10), "b": np.arange(5, 15)})
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("[run]\n", '[run]\njob = "predict"\n', 1),
                   encoding="utf-8")
    config = load_config(cfg)
    with pytest.raises(UnsupportedActionError, match="no predict-only job"):
        start_role(config, "a", read_passphrase("a", tmp_path / "pki" / "a.pass"))
    with pytest.raises(UnsupportedActionError, match="no predict-only job"):
        launch(cfg, tmp_path / "pki")
