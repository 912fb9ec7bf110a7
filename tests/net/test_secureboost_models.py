"""SecureBoost's model parts and predict-only runs (issue 16, part 5; issue 17).

Multi-process over mutual TLS: the active party and two passive parties, each with its own CSV
files (shuffled orders, partly overlapping ids, string categories, empty cells, string labels),
fit and save their parts; every role stops; the same parties start again predict-only with their
training files deleted, align new rows by PSI and score them through ``securetrees operator
predict``: the active party's predictions equal the one-process facade's on the same joined new
rows.  Negative: a missing, tampered, other party's part, a part naming other passive parties,
parts of two different fits, an inconsistent part behind a valid seal.
Keys are 1024-bit (the size is not the point), hence the insecure-key warnings are allowed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees import cli
from securetrees.datasets import load_adult
from securetrees.errors import DecodeError, KeyMismatchError, ParameterError, ProtocolError, TableError
from securetrees.net import models
from securetrees.net.config import load_config, read_passphrase
from securetrees.net.service import launch, spawn_role, start_role
from securetrees.net.trial import table_frame
from securetrees.protocols.secureboost import SecureBoostClassifier, deploy
from securetrees.protocols.secureboost.demo import MAX_BINS, adult_partition
from securetrees.protocols.secureboost.model import ActiveModel, PassiveModel
from securetrees.rand import DeterministicRandom
from securetrees.runtime import codec
from securetrees.testing.alignment import joined_view
from securetrees.testing.paillier import small_keypair
from securetrees.testing.runs import ModelIdReplies, joined_new_rows, predict_only

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")

PARTIES = ["active", "passive0", "passive1"]
SETTINGS: dict[str, Any] = {"n_estimators": 2, "max_depth": 4, "learning_rate": 0.3, "max_bins": MAX_BINS,
                            "key_bits": 1024, "allow_insecure": True}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A fit run (every role a process; it saves its part and stops), the facade fitted on the same
    joined rows, and each party's new rows: ids no training row had, its own order, one row lacking."""
    adult = load_adult()
    tmp = tmp_path_factory.mktemp("sb")
    keys = small_keypair(1024)
    part = adult_partition(2)
    labels = np.where(adult.y_train[:120] == 1, ">50K", "<=50K")
    cfg = deploy.prepare(tmp, adult.X_train[:120], labels, part, X_test=adult.X_test[:12], params=SETTINGS,
                         keypair=keys, names=adult.feature_names, categories=adult.categories, lacking=2,
                         rng=DeterministicRandom("sb trial"))
    fit_out = launch(cfg, tmp / "pki", log_dir=tmp / "logs")
    config = load_config(cfg)
    data = joined_view(config, PARTIES, part, adult.X_train.shape[1])
    clf = SecureBoostClassifier(part, **SETTINGS, keypair=keys,
                                categorical_features=[int(c) for c in np.flatnonzero(data.categorical)])
    clf.fit(data.X, data.y)
    Xn = adult.X_test[200:240]
    assert np.isnan(Xn).any()  # empty cells in the new rows too
    order = np.argsort([DeterministicRandom(f"new {i}").token_bytes(8) for i in range(Xn.shape[0])])
    (tmp / "new").mkdir()
    for u, (name, cols) in enumerate(zip(PARTIES, part, strict=True)):
        keep = [int(k) for k in np.roll(order, 7 * u) if k != u]  # its own order, row u lacking
        mine = [adult.feature_names[j] for j in cols]
        cats = {n: v for n, v in adult.categories.items() if n in mine}
        table_frame([f"new-{k}" for k in keep], Xn[keep][:, cols], mine, categories=cats).to_csv(
            tmp / "new" / f"{name}.csv", index=False)
    return {"cfg": cfg, "config": config, "part": part, "facade": clf, "fit_out": fit_out, "fit_view": data,
            "tmp": tmp, "d": adult.X_train.shape[1], "Xn": Xn}


def _predict_only(fx: dict[str, Any]) -> Path:
    """``run.toml`` turned predict-only on the new rows; every training file deleted."""
    tmp = fx["tmp"]
    out = tmp / "predict.toml"
    if out.exists():
        return out
    return predict_only(fx["cfg"], {name: f"new/{name}.csv" for name in PARTIES})


def _joined_new_rows(fx: dict[str, Any], cfg: Path) -> tuple[np.ndarray, tuple[str, ...]]:
    """The new rows joined over the parties in the agreed order of the predict-only run (read
    with each party's saved schema: its training file is gone)."""
    config = load_config(cfg)
    schemas = {}
    for name in PARTIES:
        pw = read_passphrase(name, fx["tmp"] / "pki" / f"{name}.pass")
        part = models.open_model(models.model_path(config, name).read_bytes(), pw)
        schemas[name] = part.body.schema.schema()  # type: ignore[attr-defined]
    return joined_new_rows(cfg, PARTIES, fx["part"], schemas, fx["d"])


def _operator(cfg: Path, *args: str) -> int:
    """``securetrees operator ...`` (in this process, to save a start-up; it connects afresh all the same)."""
    return cli.main(["operator", *args, "--config", str(cfg), "--passphrase-file",
                     str(cfg.parent / "pki" / "operator.pass")])


def test_fit_saves_every_part_and_restarted_parties_predict_new_rows_as_the_facade(
        fitted: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    fx = fitted
    config, tmp, clf = fx["config"], fx["tmp"], fx["facade"]
    out = tmp / "out"
    np.testing.assert_array_equal(np.load(out / "active.proba.npy"), clf.predict_proba(fx["fit_view"].X_test))
    for name in PARTIES:
        assert models.model_path(config, name).stat().st_mode & 0o777 == 0o600
    cfg = _predict_only(fx)
    pconfig = load_config(cfg)
    procs = {r: spawn_role(pconfig, r, tmp / "pki" / f"{r}.pass", tmp / f"{r}.predict.log") for r in pconfig.roles}
    try:
        assert _operator(cfg, "fit") == 1 and "predict-only" in capsys.readouterr().err
        assert _operator(cfg, "predict", "--out", str(tmp / "first.csv")) == 0  # aligns the new rows (PSI) first
        said = capsys.readouterr().out
        proba_first = np.load(out / "active.proba.npy")
        assert _operator(cfg, "predict") == 0  # the rows stay aligned
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
    Xn, ids = _joined_new_rows(fx, cfg)
    assert len(ids) == 40 - 3 and np.isnan(Xn).any()
    np.testing.assert_array_equal(proba_first, clf.predict_proba(Xn))
    np.testing.assert_array_equal(np.load(out / "active.proba.npy"), proba_first)
    np.testing.assert_array_equal(np.load(out / "active.predictions.npy"), clf.predict(Xn))
    assert set(np.load(out / "active.predictions.npy").tolist()) <= {">50K", "<=50K"}
    assert tuple(np.load(out / "active.test_ids.npy").tolist()) == ids  # the predictions beside its own ids
    # the operator receives a count and is told where the predictions are; it writes no predictions file
    assert f"predict: test_rows [{len(ids)}]" in said and "active party keeps the predictions" in said
    assert "first.csv is not written" in said and not (tmp / "first.csv").exists()


def _part(fx: dict[str, Any], name: str) -> models.ModelFile:
    pw = read_passphrase(name, fx["tmp"] / "pki" / f"{name}.pass")
    return models.open_model(models.model_path(fx["config"], name).read_bytes(), pw)


def _key_material(fx: dict[str, Any]) -> list[bytes]:
    """The active party's private key as it could be laid out in a file: each prime, big-endian."""
    sk = small_keypair(1024)[1]
    return [int(v).to_bytes((int(v).bit_length() + 7) // 8, "big") for v in (sk._p, sk._q)]


def holds_any(blob: bytes, secrets: list[bytes]) -> bool:
    """Whether any of ``secrets`` is in ``blob``, raw, reversed (little-endian) or as hex."""
    return any(s in blob or s[::-1] in blob or s.hex().encode() in blob for s in secrets)


def test_each_part_holds_its_own_share_and_no_key(fitted: dict[str, Any]) -> None:
    """The active part: trees with every passive split withheld, leaf weights, class names, no
    Paillier key (it stays in the key file); a passive part: a lookup table and its schema."""
    fx = fitted
    active = _part(fx, "active").body
    assert isinstance(active, deploy.ActivePart) and active.classes == ("<=50K", ">50K")
    assert active.passives == ("passive0", "passive1")
    records = sum(r.size for r in active.model.records)
    assert records > 0
    for name in ("passive0", "passive1"):
        body = _part(fx, name).body
        assert isinstance(body, deploy.PassivePart) and body.model.feature.size > 0
        records -= body.model.feature.size
    assert records == 0  # every passive split has its record at its owner
    assert not holds_any(codec.encode(_part(fx, "active")), _key_material(fx))


def test_planted_key_in_a_part_would_be_found(fitted: dict[str, Any]) -> None:
    """Planted leak for the check above: the same part with the private key's prime in its forest
    document is caught."""
    part = _part(fitted, "active")
    body = part.body
    assert isinstance(body, deploy.ActivePart)
    leaky = deploy.ActivePart(ActiveModel(body.model.forest + _key_material(fitted)[0].hex(), body.model.nodes,
                                          body.model.records, body.model.n_own), body.passives, body.classes,
                              body.schema)
    plain = codec.encode(models.ModelFile(part.version, part.protocol, part.party, part.role, part.model_id, leaky))
    assert holds_any(plain, _key_material(fitted)[:1])


def test_missing_tampered_and_other_partys_parts_are_refused(fitted: dict[str, Any], tmp_path: Path) -> None:
    """A predict-only role refuses at start-up (before any alignment): no part, a modified byte, a
    passive party's part in another's place, an active part naming other passive parties, an
    inconsistent table behind a valid seal."""
    fx = fitted
    cfg = _predict_only(fx)
    config = load_config(cfg)
    pw = {n: read_passphrase(n, fx["tmp"] / "pki" / f"{n}.pass") for n in PARTIES}
    moved = tmp_path / "models"
    shutil.copytree(config.model_dir, moved)
    other = config.__class__(**{**config.__dict__, "models": moved})
    assert other.model_dir == moved

    (moved / "passive1.model").unlink()
    with pytest.raises(ParameterError, match="no model file"):
        start_role(other, "passive1", pw["passive1"])
    saved = models.model_path(config, "active").read_bytes()
    for i in (len(saved) // 2, len(saved) - 1):
        bad = bytearray(saved)
        bad[i] ^= 0x01
        (moved / "active.model").write_bytes(bytes(bad))
        with pytest.raises(DecodeError):
            start_role(other, "active", pw["active"])
    # passive0's part sealed under passive1's passphrase in passive1's place
    (moved / "passive1.model").write_bytes(models.seal_model(_part(fx, "passive0"), pw["passive1"]))
    with pytest.raises(KeyMismatchError, match="passive0"):
        start_role(other, "passive1", pw["passive1"])
    active = _part(fx, "active")
    body = active.body
    assert isinstance(body, deploy.ActivePart)
    swapped = deploy.ActivePart(body.model, ("passive1", "passive0"), body.classes, body.schema)
    (moved / "active.model").write_bytes(models.seal_model(
        models.ModelFile(active.version, active.protocol, active.party, active.role, active.model_id, swapped),
        pw["active"]))
    with pytest.raises(KeyMismatchError, match="passive parties"):
        start_role(other, "active", pw["active"])
    passive = _part(fx, "passive0")
    pbody = passive.body
    assert isinstance(pbody, deploy.PassivePart)
    wide = PassiveModel(pbody.model.n_features, pbody.model.feature + pbody.model.n_features, pbody.model.threshold,
                        pbody.model.categorical, pbody.model.missing_left)
    (moved / "passive0.model").write_bytes(models.seal_model(
        models.ModelFile(passive.version, passive.protocol, passive.party, passive.role, passive.model_id,
                         deploy.PassivePart(wide, pbody.schema)), pw["passive0"]))
    with pytest.raises(DecodeError, match="lookup table"):
        start_role(other, "passive0", pw["passive0"])


def test_parts_of_different_fits_are_refused(fitted: dict[str, Any]) -> None:
    """passive1's part re-sealed with another fit's id opens, and the operator's model-id check
    refuses the mix, in processes (a predict-only run on a model folder holding it) and on the ids
    alone; the same check passes on the fit's own parts (as in the predict-only run above)."""
    fx = fitted
    ids = {n: _part(fx, n).model_id for n in PARTIES}
    assert len(set(ids.values())) == 1
    assert models.check_models(ModelIdReplies(ids), PARTIES) == ids["active"].hex()  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="different fits"):
        models.check_models(ModelIdReplies({**ids, "passive1": bytes(16)}), PARTIES)  # type: ignore[arg-type]
    tmp = fx["tmp"]
    shutil.copytree(fx["config"].model_dir, tmp / "mixed")
    pw = read_passphrase("passive1", tmp / "pki" / "passive1.pass")
    part = _part(fx, "passive1")
    (tmp / "mixed" / "passive1.model").write_bytes(models.seal_model(
        models.ModelFile(part.version, part.protocol, part.party, part.role, bytes(16), part.body), pw))
    mixed = tmp / "mixed.toml"
    mixed.write_text(_predict_only(fx).read_text(encoding="utf-8").replace(
        "[run]\n", '[run]\nmodel_dir = "mixed"\n', 1), encoding="utf-8")
    with pytest.raises(ProtocolError, match="different fits"):
        launch(mixed, tmp / "pki", log_dir=tmp / "logs-mixed")


def test_a_predict_only_party_never_opens_training_data_and_a_fit_party_does(fitted: dict[str, Any]) -> None:
    """The predict-only run above ran with every training file gone; the companion: the same absent
    file stops a fit run's party at start-up, so a predict-only role that read it would fail."""
    fx = fitted
    cfg = _predict_only(fx)
    assert not (fx["tmp"] / "data" / "passive0.csv").exists()
    with pytest.raises(ParameterError, match="predict-only"):
        deploy.fit(None, load_config(cfg))  # type: ignore[arg-type]
    with pytest.raises(TableError, match="cannot read"):
        start_role(fx["config"], "passive0", read_passphrase("passive0", fx["tmp"] / "pki" / "passive0.pass"))
