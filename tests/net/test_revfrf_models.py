"""RevFRF's model parts and its predict-only run, one process per role over mutual TLS.

Four organisations with their own CSV files (the CS's string labels, three participants' columns
with string categories and empty cells, ids only partly overlapping, rows in their own orders):
the fit run trains, predicts, revokes ``u3`` at level 2 and saves every part (again after the
revocation); every role stops.  A predict-only run, whose training files are deleted, loads the
parts, aligns the participants' new rows by PSI and predicts them the three ways: the outputs
equal the in-process facade's (fitted on the same joined rows, ``u3`` revoked) on the same
joined new rows.  Negative: missing, tampered, other-party and malformed parts, parts of two
fits, revocation and training in a predict-only run.  1024-bit keys: insecure-key warnings allowed.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("grpc")

from securetrees.datasets import load_adult
from securetrees.dtpkc import KGC
from securetrees.errors import (
    DecodeError,
    KeyMismatchError,
    ParameterError,
    ProtocolError,
    TableError,
    UnsupportedActionError,
)
from securetrees.net import models
from securetrees.net.config import load_config, read_passphrase
from securetrees.net.operate import run_step
from securetrees.net.service import launch, spawn_role, start_role
from securetrees.net.tables import TableOptions, party_tables, read_table
from securetrees.net.trial import table_frame
from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.revfrf import deploy as rev_deploy
from securetrees.protocols.revfrf.model import CSPart, ParticipantPart, RevokedPart, restore_forest
from securetrees.rand import DeterministicRandom
from securetrees.testing.alignment import joined_view
from securetrees.testing.runs import ModelIdReplies, joined_new_rows, predict_only

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")

PARTICIPANTS = ["u1", "u2", "u3"]
ROLES = ["cs", "cc", "kgc", *PARTICIPANTS]
SETTINGS = {"n_estimators": 2, "max_depth": 3, "random_state": 3, "n_classes": 2}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    adult = load_adult()
    tmp = tmp_path_factory.mktemp("revfrf")
    X, y = adult.X_train[:100], np.where(adult.y_train[:100] == 1, ">50K", "<=50K")
    d = X.shape[1]
    part = [list(range(i, d, 3)) for i in range(3)]
    cfg = rev_deploy.prepare(tmp, X, y, part, X_test=adult.X_test[:5], settings=SETTINGS,
                             kgc=KGC.setup(1024, allow_insecure=True), names=adult.feature_names,
                             categories=adult.categories, lacking=2, rng=DeterministicRandom("rev trial"))
    fit_out = launch(cfg, tmp / "pki", log_dir=tmp / "logs")
    config = load_config(cfg)
    data = joined_view(config, [*PARTICIPANTS, "cs"], part, d)
    clf = RevFRFClassifier(n_estimators=2, max_depth=3, random_state=3, key_bits=1024, allow_insecure=True)
    clf.set_params(partition=part).fit(data.X, data.y)
    schemas = {u: party_tables(config.party(u))[0].schema for u in PARTICIPANTS}
    # new rows: ids no training row had, each participant lacking one, in its own order
    Xn = adult.X_test[200:210]
    new_ids = [f"new-{i}" for i in range(Xn.shape[0])]
    (tmp / "new").mkdir()
    new_tests: dict[str, str] = {}
    for i, (name, cols) in enumerate(zip(PARTICIPANTS, part, strict=True)):
        keep = [k for k in range(Xn.shape[0]) if k != i][::-1 if i % 2 else 1]
        mine = [adult.feature_names[j] for j in cols]
        cats = {n: v for n, v in adult.categories.items() if n in mine}
        table_frame([new_ids[k] for k in keep], Xn[keep][:, cols], mine, categories=cats).to_csv(
            tmp / f"new/{name}.csv", index=False)
        new_tests[name] = f"new/{name}.csv"
    table_frame(new_ids[:2], Xn[:2], adult.feature_names, categories=adult.categories).to_csv(
        tmp / "new/requester.csv", index=False)
    new_tests["requester"] = "new/requester.csv"
    clf.revoke("u3", level=2)  # the fit run's job revoked u3 before its last save
    return {"cfg": cfg, "config": config, "part": part, "facade": clf, "fit_out": fit_out, "schemas": schemas,
            "new_tests": new_tests, "tmp": tmp, "d": d}


def _joined_new_rows(fx: dict[str, Any], config_path: Path) -> np.ndarray:
    """The participants' new rows joined in the agreed order of the predict-only run."""
    Xj, ids = joined_new_rows(config_path, PARTICIPANTS, fx["part"], fx["schemas"], fx["d"])
    assert len(ids) == 10 - 3
    return Xj


def _pw(fx: dict[str, Any], name: str) -> bytes:
    return read_passphrase(name, fx["tmp"] / "pki" / f"{name}.pass")


def test_fit_saves_parts_and_a_predict_only_run_matches_the_facade(fitted: dict[str, Any]) -> None:
    """Every role restarted predict-only as a ``securetrees party`` process; the operator's steps
    (``securetrees operator predict``, one connection each) score the new rows the three ways."""
    fx = fitted
    assert set(fx["fit_out"]) == {"vertical", "test", "encrypted", "after_revocation"}
    for name in ROLES:
        assert models.model_path(fx["config"], name).stat().st_mode & 0o777 == 0o600
    assert not models.model_path(fx["config"], "requester").exists()  # it keeps no model state
    cfg = predict_only(fx["cfg"], fx["new_tests"], keep=("requester",))
    assert not (fx["tmp"] / "data" / "u1.csv").exists() and not (fx["tmp"] / "data" / "cs.csv").exists()
    pconfig, pki = load_config(cfg), fx["tmp"] / "pki"
    procs = {r: spawn_role(pconfig, r, pki / f"{r}.pass", fx["tmp"] / "logs-predict" / f"{r}.log")
             for r in pconfig.roles}
    try:
        got = {m: run_step(pconfig, "predict", pki / "operator.pass", method=m, timeout=60)[m]
               for m in ("vertical", "test", "encrypted")}  # the first one aligns the new rows (PSI)
        with pytest.raises(UnsupportedActionError, match="cannot revoke"):
            run_step(pconfig, "revoke", pki / "operator.pass", party="u1", level=1)
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait(timeout=10)
    Xn = _joined_new_rows(fx, cfg)
    clf = fx["facade"]
    requester = read_table(fx["tmp"] / fx["new_tests"]["requester"],
                           TableOptions.from_config(pconfig.party("requester").table, "requester"))
    want = {"vertical": clf.predict_proba(Xn), "test": clf.predict_proba(Xn, method="test"),
            "encrypted": clf.predict_proba(requester.X, method="encrypted")}
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)
    out = fx["tmp"] / "out"  # each output at the party that learns it
    np.testing.assert_array_equal(np.load(out / "cs.vertical.proba.npy"), want["vertical"])
    np.testing.assert_array_equal(np.load(out / "cs.test.predictions.npy"), clf.predict(Xn, method="test"))
    np.testing.assert_array_equal(np.load(out / "requester.encrypted.proba.npy"), want["encrypted"])
    # readable: the CS's last output (test) by row, each participant's own ids of those rows, the requester's by id
    cs = pd.read_csv(out / "cs.predictions.csv")
    assert list(cs.columns) == ["row", "prediction", "proba_<=50K", "proba_>50K"]
    np.testing.assert_array_equal(cs[["proba_<=50K", "proba_>50K"]].to_numpy(), want["test"])
    ids = {u: pd.read_csv(out / f"{u}.test_rows.csv", dtype=str) for u in PARTICIPANTS}
    assert all(list(t.columns) == ["id", "row"] and t["row"].astype(int).tolist() == cs["row"].tolist()
               for t in ids.values())
    assert ids["u1"]["id"].tolist() == ids["u2"]["id"].tolist() == ids["u3"]["id"].tolist()  # one row, one id
    req = pd.read_csv(out / "requester.predictions.csv", dtype={"id": str})
    assert req["id"].tolist() == ["new-0", "new-1"] and list(req.columns) == ["id", "prediction", "proba_0", "proba_1"]
    np.testing.assert_array_equal(req[["proba_0", "proba_1"]].to_numpy(), want["encrypted"])


def test_a_predict_only_run_neither_trains_nor_revokes(fitted: dict[str, Any]) -> None:
    """Refused steps; the companion of "no training file is read": the same deleted file stops a
    fit run's participant at start-up, so a predict-only role that opened it would fail."""
    config = load_config(predict_only(fitted["cfg"], fitted["new_tests"], keep=("requester",)))
    with pytest.raises(ParameterError, match="predict-only"):
        rev_deploy.fit(None, config)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedActionError, match="cannot revoke"):
        rev_deploy.revoke(None, config, "u1", 1)  # type: ignore[arg-type]
    assert not (fitted["tmp"] / "data" / "u1.csv").exists()
    with pytest.raises(TableError, match="cannot read"):
        start_role(fitted["config"], "u1", _pw(fitted, "u1"))


def _part(fx: dict[str, Any], name: str) -> models.ModelFile:
    return models.open_model(models.model_path(fx["config"], name).read_bytes(), _pw(fx, name))


def test_each_part_holds_its_partys_state(fitted: dict[str, Any]) -> None:
    fx = fitted
    cs, u1, u3 = (_part(fx, n).body for n in ("cs", "u1", "u3"))
    assert isinstance(cs, CSPart) and isinstance(u1, ParticipantPart) and isinstance(u3, ParticipantPart)
    assert cs.epoch == 1 and cs.revoked == ("u3",) and cs.classes == ("<=50K", ">50K")
    assert "u3" not in {p for t in cs.trees for p in t.provider}  # its nodes were destroyed
    assert u3.revoked and u3.tree.size == 0 and not u1.revoked and u1.epoch == 1 and u1.tree.size > 0
    for name in ("kgc", "cc"):
        body = _part(fx, name).body
        assert isinstance(body, RevokedPart) and body.revoked == ("u3",)
    assert len({_part(fx, n).model_id for n in ROLES}) == 1


def test_missing_tampered_and_other_partys_parts_are_refused(fitted: dict[str, Any], tmp_path: Path) -> None:
    fx = fitted
    config = load_config(predict_only(fx["cfg"], fx["new_tests"], keep=("requester",)))
    moved = tmp_path / "models"
    shutil.copytree(config.model_dir, moved)
    other = replace(config, models=moved)
    (moved / "kgc.model").unlink()
    with pytest.raises(ParameterError, match="no model file"):
        start_role(other, "kgc", _pw(fx, "kgc"))
    saved = (moved / "cc.model").read_bytes()
    for i in (len(saved) // 2, len(saved) - 1):
        bad = bytearray(saved)
        bad[i] ^= 0x01
        (moved / "cc.model").write_bytes(bytes(bad))
        with pytest.raises(DecodeError):
            start_role(other, "cc", _pw(fx, "cc"))
    # u1's part sealed under u2's passphrase in u2's place: not u2's
    (moved / "u2.model").write_bytes(models.seal_model(_part(fx, "u1"), _pw(fx, "u2")))
    with pytest.raises(KeyMismatchError, match="u1"):
        models.load_model(other, "u2", "participant", _pw(fx, "u2"), ParticipantPart)
    with pytest.raises(DecodeError, match="expected"):
        models.load_model(config, "cs", "cs", _pw(fx, "cs"), ParticipantPart)


def test_a_malformed_forest_is_refused_and_the_check_can_fail(fitted: dict[str, Any]) -> None:
    """A part that opens but whose forest is not a tree (a child pointing back at the root) or
    names an unknown provider is refused; the companion: the saved forest itself goes through."""
    cs = _part(fitted, "cs").body
    assert isinstance(cs, CSPart)
    keys = rev_deploy._directory(fitted["config"])
    d = fitted["d"]
    assert len(restore_forest(cs.trees, keys, d)) == 2  # the companion: a well-formed forest passes
    t = cs.trees[0]
    assert t.left.size > 1
    looped = t.left.copy()
    looped[int(np.flatnonzero(t.left >= 0)[0])] = t.root
    with pytest.raises(DecodeError):
        restore_forest((replace(t, left=looped), *cs.trees[1:]), keys, d)
    with pytest.raises(DecodeError, match="provider"):
        restore_forest(cs.trees, {k: v for k, v in keys.items() if k != "u1"}, d)


def test_parts_of_two_fits_are_refused(fitted: dict[str, Any]) -> None:
    ids = {n: _part(fitted, n).model_id for n in ROLES}
    assert models.check_models(ModelIdReplies(ids), ROLES) == ids["cs"].hex()  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="different fits"):
        models.check_models(ModelIdReplies({**ids, "u2": bytes(16)}), ROLES)  # type: ignore[arg-type]


def test_a_requester_without_declared_categories_is_refused(fitted: dict[str, Any]) -> None:
    """A requester's text cells become the participants' codes only through declared category lists: its
    own inferred ones (the sorted distinct values of its few rows) number them differently, and FRF-Predict
    then scored other rows than the requester's without a word.  The trial's requester, which declares
    them, is built (the companion)."""
    from dataclasses import replace

    from securetrees.net.keyfile import open_key_file
    from securetrees.runtime import InProcessNetwork

    config = fitted["config"]
    party = config.party("requester")
    assert party.table.get("categories")  # the trial's requester declares its categories
    pw = _pw(fitted, "requester")
    secrets = open_key_file(party.secrets, "requester", pw)
    rev_deploy.make_role("requester", config, InProcessNetwork(), secrets, {}, pw)
    bare = {k: v for k, v in party.table.items() if k != "categories"}
    undeclared = replace(config, parties={**config.parties, "requester": replace(party, table=bare)})
    with pytest.raises(TableError, match=r"requester.*categories"):
        rev_deploy.make_role("requester", undeclared, InProcessNetwork(), secrets, {}, pw)
