"""Each party says which of its columns take part (``features``: the columns it uses, or ``drop``:
the columns it ignores), in its section of ``run.toml`` and in ``setup run --party``; a column named
like the run's label column is refused unless kept explicitly; ``setup run`` checks every table it
can see (header, test table) and prints each party's feature columns (specs/deployment.md, "Your
own data")."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from securetrees.cli import main
from securetrees.dtpkc import KGC
from securetrees.errors import ParameterError, TableError
from securetrees.net.config import PartyConfig, dump_toml, load_config
from securetrees.net.runfile import parse_party
from securetrees.net.tables import TableOptions, feature_columns, party_tables, read_table
from securetrees.protocols.histogram_forest.deploy import _table_options, declared_schema
from securetrees.protocols.hybridtree.deploy import GuestSpace, _guest_options
from securetrees.testing.dtpkc import dtpkc_test_kgc

PASS = "columns test passphrase"  # noqa: S105 - a test's throwaway passphrase
HEADER = ["customer", "age", "income", "zip", "outcome"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- --party and the section's keys ------------------------------------------------------------------


def test_party_spec_takes_features_and_drop_separated_by_colons() -> None:
    spec = parse_party("name=shop,role=client,address=h:1,organisation=shop,data=s.csv,drop=zip: notes")
    assert spec.options == {"data": "s.csv", "drop": ["zip", "notes"]}
    spec = parse_party("name=bank,role=client,address=h:2,organisation=bank,features=age:income")
    assert spec.options["features"] == ["age", "income"]


@pytest.mark.parametrize(("tail", "words"), [
    ("features=age,drop=zip", "features .* or drop .*not both"),
    ("drop=zip::notes", "one of them empty"),
    ("features=age:age", "names 'age' twice"),
    ("columns=age", "unknown key 'columns'"),
])
def test_party_spec_refusals(tail: str, words: str) -> None:
    with pytest.raises(ParameterError, match=words):
        parse_party(f"name=shop,role=client,address=h:1,organisation=shop,{tail}")


@pytest.mark.parametrize(("section", "words"), [
    ({"features": ["a"], "drop": ["b"]}, "not features and drop"),
    ({"columns": ["a"], "features": ["a"]}, "not columns and features"),
    ({"drop": "zip"}, "drop must be a list of column names"),
    ({"features": ["a", ""]}, "features must be a list of column names"),
    ({"features": ["a", "a"]}, "features names a column twice"),
])
def test_section_refuses_conflicting_or_malformed_lists(section: dict[str, object], words: str) -> None:
    with pytest.raises(ParameterError, match=words):
        TableOptions.from_config(section, "[parties.shop]")


# -- which columns are features ----------------------------------------------------------------------


def test_features_select_drop_ignores_and_the_default_is_every_other_column() -> None:
    base = TableOptions(id_column="customer", label="outcome")
    assert feature_columns(HEADER, base, "t") == ["age", "income", "zip"]
    assert feature_columns(HEADER, TableOptions("customer", "outcome", drop=("zip",)), "t") == ["age", "income"]
    assert feature_columns(HEADER, TableOptions("customer", "outcome", features=("zip", "age")), "t") == ["zip", "age"]


@pytest.mark.parametrize(("options", "words"), [
    (TableOptions("customer", features=("age", "height")), r"features names columns not in the table: \['height'\]"),
    (TableOptions("customer", drop=("hieght",)), r"drop names columns not in the table: \['hieght'\]"),
    (TableOptions("customer", "outcome", features=("age", "outcome")), "names the id or label column 'outcome'"),
    (TableOptions("customer", drop=("customer",)), "names the id or label column 'customer'"),
    (TableOptions("customer", columns=("age",), drop=("age",)), "'age' is both a feature column and dropped"),
    (TableOptions("id"), "no id column 'id'"),
    (TableOptions("customer", "label"), "no label column 'label'"),
])
def test_listed_columns_are_checked_against_the_header(options: TableOptions, words: str) -> None:
    with pytest.raises(TableError, match=words):
        feature_columns(HEADER, options, "shop's data")


def test_a_column_named_like_the_label_is_refused_unless_kept_or_dropped() -> None:
    """A non-label party whose file holds a column named like the run's label column: before, it
    became a feature without a word; now it is refused naming it, kept when listed, gone when dropped.
    The label holder's own label column is no feature of its own."""
    other = TableOptions("customer", reserved=("outcome",))
    with pytest.raises(TableError, match="the column 'outcome' has the name of the run's label column"):
        feature_columns(HEADER, other, "shop's data")
    assert feature_columns(HEADER, TableOptions("customer", reserved=()), "t") == ["age", "income", "zip", "outcome"]
    kept = TableOptions("customer", features=("age", "outcome"), reserved=("outcome",))
    assert feature_columns(HEADER, kept, "t") == ["age", "outcome"]
    dropped = TableOptions("customer", drop=("outcome",), reserved=("outcome",))
    assert feature_columns(HEADER, dropped, "t") == ["age", "income", "zip"]
    assert feature_columns(HEADER, TableOptions("customer", "outcome", reserved=("outcome",)), "t") == [
        "age", "income", "zip"]


def test_read_table_uses_the_selected_columns_and_infers_their_kinds(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.csv", "id,age,work,zip\nr1,30,Private,8000\nr2,,State-gov,8001\n")
    full = read_table(path)
    picked = read_table(path, TableOptions(features=("work", "age")))
    assert picked.schema.names == ["work", "age"] and picked.schema.categorical_mask() == [True, False]
    np.testing.assert_array_equal(picked.X, full.X[:, [1, 0]])
    dropped = read_table(path, TableOptions(drop=("zip",)))
    assert dropped.schema.names == ["age", "work"]
    np.testing.assert_array_equal(dropped.X, full.X[:, :2])
    test = read_table(_write(tmp_path / "u.csv", "id,work,age\nt1,Private,50\n"), schema=dropped.schema)
    np.testing.assert_array_equal(test.X, [[50.0, 0.0]])  # the test table needs no dropped column


def test_load_config_reserves_the_runs_label_names(tmp_path: Path) -> None:
    """``party_tables`` reads a roster entry with the other parties' label names reserved."""
    _write(tmp_path / "bank.csv", "id,age,outcome\nr1,30,repaid\nr2,40,defaulted\n")
    _write(tmp_path / "shop.csv", "id,spend,outcome\nr1,3.5,x\nr2,4.5,y\n")
    parties = {n: {"role": "client", "address": f"127.0.0.1:{i + 1}", "cert": "c", "key": "k", "data": f"{n}.csv"}
               for i, n in enumerate(("bank", "shop"))}
    parties["bank"]["label"] = "outcome"
    parties["operator"] = {"address": "127.0.0.1:9", "cert": "c", "key": "k"}
    parties["master"] = {"role": "master", "address": "127.0.0.1:8", "cert": "c", "key": "k"}
    doc = {"run": {"protocol": "federated-forest", "operator": "operator"}, "tls": {"ca": "ca.pem"},
           "parties": parties}
    cfg = tmp_path / "run.toml"
    cfg.write_text(dump_toml(doc), encoding="utf-8")
    config = load_config(cfg)
    assert config.party("shop").run_labels == ("outcome",)
    assert party_tables(config.party("bank"))[0].schema.names == ["age"]
    with pytest.raises(TableError, match=r"shop's data .*the column 'outcome' has the name of the run's label"):
        party_tables(config.party("shop"))
    for key, value in (("drop", ["outcome"]), ("features", ["spend"])):
        parties["shop"][key] = value
        cfg.write_text(dump_toml(doc), encoding="utf-8")
        assert party_tables(load_config(cfg).party("shop"))[0].schema.names == ["spend"]
        del parties["shop"][key]


# -- the deployments that build their own table options -------------------------------------------


def test_histogram_forest_client_drops_undeclared_columns(tmp_path: Path) -> None:
    """The histogram forest reads every client's table by the declared columns (strict): a column it
    adds is refused, unless the client drops it or lists its features (the declared ones only)."""
    schema = declared_schema({"columns": ["age", "work"], "categories": {"work": ["Private", "State-gov"]}})
    path = _write(tmp_path / "c.csv", "id,work,price,age,y\nr1,Private,9.5,30,no\nr2,State-gov,1,41,yes\n")
    config_party = client_entry(tmp_path, {"label": "y"})
    with pytest.raises(TableError, match=r"columns: \['price'\] \(its section's drop = \['price'\] ignores them"):
        read_table(path, _table_options(config_party, schema), strict=True)
    kept = read_table(path, _table_options(client_entry(tmp_path, {"label": "y", "drop": ["price"]}), schema),
                      strict=True)
    assert kept.schema.names == ["age", "work"]
    np.testing.assert_array_equal(kept.X, [[30.0, 0.0], [41.0, 1.0]])
    listed = read_table(path, _table_options(client_entry(tmp_path, {"label": "y", "features": ["work", "age"]}),
                                             schema), strict=True)  # the declared columns listed: others ignored
    np.testing.assert_array_equal(listed.X, kept.X)
    with pytest.raises(TableError, match=r"features \['price'\] differ from \[protocol\] columns"):
        _table_options(client_entry(tmp_path, {"label": "y", "features": ["age", "work", "price"]}), schema)


def client_entry(tmp_path: Path, table: dict[str, object]) -> PartyConfig:
    """A histogram-forest client's roster entry with ``table`` in its section."""
    return PartyConfig("client0", "client", "127.0.0.1:1", tmp_path / "c", tmp_path / "k",
                       data=tmp_path / "c.csv", table=dict(table), run_labels=("y",))


def test_hybridtree_guest_features_and_drop(tmp_path: Path) -> None:
    """A guest's columns are every column but the id and the dropped ones (or its ``features``),
    each in the guest space; a column named like the host's label is refused unless dropped."""
    space = GuestSpace(("spend", "loyalty"), {"loyalty": ("gold", "silver")}, mapper=None)  # type: ignore[arg-type]
    path = _write(tmp_path / "g.csv", "id,spend,loyalty,outcome,notes\nr1,3,gold,x,y\n")

    def guest(**table: object) -> PartyConfig:
        return PartyConfig("guest0", "guest", "127.0.0.1:1", tmp_path / "c", tmp_path / "k", data=path,
                           table=dict(table), run_labels=("outcome",))

    with pytest.raises(TableError, match="the column 'outcome' has the name of the run's label column"):
        _guest_options(guest(), space, path)
    assert _guest_options(guest(drop=["outcome", "notes"]), space, path).columns == ("spend", "loyalty")
    assert _guest_options(guest(features=["loyalty"]), space, path).columns == ("loyalty",)
    with pytest.raises(TableError, match=r"not in \[protocol\] guest_features: \['notes'\]"):
        _guest_options(guest(drop=["outcome"]), space, path)


# -- setup run ---------------------------------------------------------------------------------------


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The README's three organisations' example tables, with extra columns: the bank's ``branch``,
    the shop's ``outcome`` (named like the bank's label) and ``notes``; a CA and certificates."""
    monkeypatch.setenv("SECURETREES_PASSPHRASE", PASS)
    monkeypatch.chdir(tmp_path)
    assert main(["setup", "ca", "--out", "pki"]) == 0
    assert main(["setup", "issue", "--name", "master", "bank", "shop", "operator", "--ca-cert", "pki/ca.pem",
                 "--ca-key", "pki/ca.key", "--out", "pki"]) == 0
    assert main(["setup", "example", "--out", "data"]) == 0
    for name, extra in (("bank", ("branch", "north")), ("shop", ("outcome", "repaid")), ("shop", ("notes", "n"))):
        for f in (tmp_path / "data" / f"{name}.csv", tmp_path / "data" / f"{name}-new.csv"):
            lines = f.read_text(encoding="utf-8").splitlines()
            f.write_text("\n".join([f"{lines[0]},{extra[0]}", *(f"{x},{extra[1]}" for x in lines[1:])]) + "\n",
                         encoding="utf-8")
    return tmp_path


def _parties(bank: str = "", shop: str = "") -> list[str]:
    return ["--party", "name=master,role=master,address=127.0.0.1:1,organisation=hub",
            "--party", "name=bank,role=client,address=127.0.0.1:2,organisation=bank,data=data/bank.csv,"
                       f"test_data=data/bank-new.csv,id_column=customer,label=outcome{bank}",
            "--party", "name=shop,role=client,address=127.0.0.1:3,organisation=shop,data=data/shop.csv,"
                       f"test_data=data/shop-new.csv,id_column=customer{shop}",
            "--party", "name=operator,address=127.0.0.1:4,organisation=hub"]


def _setup_run(*parties: str, protocol: str = "federated-forest", params: tuple[str, ...] = ("n_classes=2",)
               ) -> list[str]:
    return ["setup", "run", protocol, "--out", "run.toml", "--ca", "pki/ca.pem",
            *(a for p in params for a in ("--param", p)), *parties]


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The message of the typed error a command ends with (exit status 1)."""
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert re.match(r"securetrees: \w+Error: ", err), err
    return err


def test_setup_run_prints_each_partys_features_and_writes_them(run_dir: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(_setup_run(*_parties(",drop=branch", ",features=monthly_spend:loyalty:online_share"))) == 0
    out = capsys.readouterr().out
    assert "  bank uses 3 feature columns: age, income, account\n" in out
    assert "  shop uses 3 feature columns: monthly_spend, loyalty, online_share\n" in out
    config = load_config("run.toml")
    assert config.party("bank").table["drop"] == ["branch"]
    assert config.party("shop").table["features"] == ["monthly_spend", "loyalty", "online_share"]
    assert config.params["feature_ids"] == [[0, 1, 2], [3, 4, 5]]  # as without the extra columns


def test_setup_run_refuses_a_column_named_like_the_label(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(_setup_run(*_parties(",drop=branch", ",drop=notes")), capsys)
    assert "TableError" in err and "'outcome' has the name of the run's label column" in err and "shop" in err
    assert not (run_dir / "run.toml").exists()
    assert main(_setup_run(*_parties(",drop=branch", ",features=monthly_spend:outcome"), )) == 0  # kept explicitly
    assert load_config("run.toml").params["feature_ids"] == [[0, 1, 2], [3, 4]]


def test_setup_run_without_lists_counts_the_extra_columns(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The planted companion of the refusal: a run without a label name to reserve (the bank names
    none and drops its outcome column) counts the shop's ``outcome`` as a feature, as before: the
    check is what refuses it."""
    parties = [a.replace(",label=outcome", "") for a in _parties(",drop=branch:outcome", ",drop=notes")]
    capsys.readouterr()
    assert main(_setup_run(*parties)) == 0
    assert "shop uses 4 feature columns: monthly_spend, loyalty, online_share, outcome" in capsys.readouterr().out


@pytest.mark.parametrize(("bank", "shop", "words"), [
    (",drop=brnach", ",drop=notes:outcome", r"bank's data .*drop names columns not in the table: \['brnach'\]"),
    (",features=age:salary", ",drop=notes:outcome", r"features names columns not in the table: \['salary'\]"),
    (",drop=branch,test_data=data/bank-nwe.csv", ",drop=notes:outcome", "bank's test data .*bank-nwe.csv does not"),
])
def test_setup_run_checks_each_header_and_test_table(run_dir: Path, capsys: pytest.CaptureFixture[str], bank: str,
                                                      shop: str, words: str) -> None:
    parties = _parties(bank, shop)
    if "test_data=data/bank-nwe.csv" in bank:
        parties = [a.replace("test_data=data/bank-new.csv,", "") for a in parties]
    assert re.search(words, _refused(_setup_run(*parties), capsys))
    assert not (run_dir / "run.toml").exists()


def test_setup_run_refuses_a_test_table_without_a_training_column(run_dir: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Before, a test table without a training feature column was found out at predict time."""
    new = run_dir / "data" / "shop-new.csv"
    new.write_text(new.read_text().replace("loyalty", "loyality"), encoding="utf-8")
    err = _refused(_setup_run(*_parties(",drop=branch", ",drop=notes:outcome")), capsys)
    assert "shop's test data" in err and "lacks the columns ['loyalty']" in err


def test_setup_run_accepts_a_data_file_of_another_machine(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Across machines another organisation's file is not at hand: setup run says so (its role checks
    it when it starts), except where the run's layout needs its header (Federated Forest's feature_ids)."""
    parties = [a.replace("data/shop.csv", "elsewhere/shop.csv") for a in _parties(",drop=branch", ",drop=notes")]
    err = _refused(_setup_run(*parties), capsys)
    assert "elsewhere/shop.csv is not on this machine" in err and "feature_ids=[[0, 1], [2, 3, 4]]" in err
    capsys.readouterr()
    assert main(_setup_run(*parties, params=("n_classes=2", "feature_ids=[[0, 1, 2], [3, 4, 5]]"))) == 0
    assert "  shop: its data file is not on this machine" in capsys.readouterr().out


def test_setup_run_histogram_forest_needs_extra_columns_dropped(run_dir: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["setup", "issue", "--name", "server", "client0", "--ca-cert", "pki/ca.pem", "--ca-key", "pki/ca.key",
                 "--out", "pki"]) == 0
    _write(run_dir / "data" / "c0.csv", "id,a,price,y\nr1,0.5,3,no\n")
    params = ('columns=["a"]', 'classes=["no", "yes"]', "feature_ranges=[[0, 1]]")

    def parties(tail: str) -> list[str]:
        return ["--party", "name=server,role=server,address=127.0.0.1:9,organisation=hub",
                "--party", "name=client0,role=client,address=127.0.0.1:10,organisation=c0,data=data/c0.csv,"
                           f"label=y{tail}",
                "--party", "name=operator,address=127.0.0.1:8,organisation=hub"]

    err = _refused(_setup_run(*parties(""), protocol="histogram-forest", params=params), capsys)
    assert "columns not in [protocol] columns: ['price']; drop them (drop=price)" in err
    for tail in (",drop=price", ",features=a"):
        capsys.readouterr()
        assert main([*_setup_run(*parties(tail), protocol="histogram-forest", params=params), "--force"]) == 0
        assert "client0 uses 1 feature column: a" in capsys.readouterr().out
    err = _refused(_setup_run(*parties(",features=a:price"), protocol="histogram-forest", params=params), capsys)
    assert "features ['price'] differ from [protocol] columns" in err
    _write(run_dir / "data" / "c0-test.csv", "id,a,price,colour,y\nt1,0.5,3,red,no\n")  # its role reads it strictly
    err = _refused([*_setup_run(*parties(",drop=price,test_data=data/c0-test.csv"), protocol="histogram-forest",
                                params=params), "--force"], capsys)
    assert "client0's test data" in err and "columns not in [protocol] columns: ['colour']" in err


# -- RevFRF's set-up ----------------------------------------------------------------------------------


@pytest.fixture
def kgc_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    def small(cls: type[KGC], bits: int, **_: object) -> KGC:
        return dtpkc_test_kgc(512)

    monkeypatch.setattr(KGC, "setup", classmethod(small))
    monkeypatch.chdir(tmp_path)
    for n in ("cs", "cc", "kgc", "u1", "u2"):  # no requester.pass
        _write(tmp_path / "pass" / f"{n}.pass", f"passphrase of {n}\n")
    monkeypatch.setenv("SECURETREES_PASSPHRASE", PASS)
    assert main(["setup", "ca", "--out", "pki"]) == 0
    assert main(["setup", "issue", "--name", "cs", "cc", "kgc", "u1", "u2", "operator", "--ca-cert", "pki/ca.pem",
                 "--ca-key", "pki/ca.key", "--out", "pki"]) == 0
    return tmp_path


def test_kgc_without_requesters_and_revfrf_layout_from_the_tables(kgc_dir: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``setup kgc`` without ``--requesters`` makes no requester key (it failed reading
    pass/requester.pass); ``setup run revfrf`` derives ``columns`` and ``n_features`` from the
    participants' headers, as Federated Forest's ``feature_ids`` (it failed with ``lacks ['columns',
    'n_features']``)."""
    assert main(["setup", "kgc", "--participants", "u1", "u2", "--passphrase-dir", "pass", "--out", "keys"]) == 0
    assert not (kgc_dir / "keys" / "requester.keys").exists()
    _write(kgc_dir / "data" / "cs.csv", "id,label\nr1,yes\nr2,no\n")
    _write(kgc_dir / "data" / "u1.csv", "id,a,b,label\nr1,1,2,x\nr2,3,4,y\n")
    _write(kgc_dir / "data" / "u2.csv", "id,c,d,e\nr1,1,2,3\nr2,3,4,5\n")
    orgs = {"cs": "org-cs", "cc": "org-cc", "kgc": "trusted", "u1": "org-u1", "u2": "org-u2", "operator": "org-cs"}
    roles = {"u1": "participant", "u2": "participant"}
    data = {"cs": ",data=data/cs.csv,label=label", "u1": ",data=data/u1.csv,drop=label", "u2": ",data=data/u2.csv"}
    parties = [a for i, (n, org) in enumerate(orgs.items()) for a in (
        "--party", f"name={n},role={roles.get(n, n)},address=127.0.0.1:{9000 + i},organisation={org}"
                   + (f",secrets=keys/{n}.keys" if n != "operator" else "") + data.get(n, ""))]
    capsys.readouterr()
    assert main(["setup", "run", "revfrf", "--out", "run.toml", "--ca", "pki/ca.pem", "--params",
                 "keys/revfrf.public.toml", "--param", "n_classes=2", *parties]) == 0
    out = capsys.readouterr().out
    assert "  u1 uses 2 feature columns: a, b\n" in out and "  cs uses 0 feature columns: (none)\n" in out
    params = load_config("run.toml").params
    assert params["columns"] == [[0, 1], [2, 3, 4]] and params["n_features"] == 5
    assert params.get("requesters", []) == []
    _write(kgc_dir / "data" / "req.csv", "id,a,b,c,d\nq1,1,2,3,4\n")
    assert main(["setup", "kgc", "--participants", "u1", "u2", "--requesters", "requester", "--passphrase-dir",
                 "pass", "--out", "keys", "--force"]) == 1  # no pass/requester.pass: named, so needed
    assert "4 feature columns, the participants 5" in _refused(
        ["setup", "run", "revfrf", "--out", "run2.toml", "--ca", "pki/ca.pem", "--params", "keys/revfrf.public.toml",
         "--param", "n_classes=2", *parties, "--party", "name=requester,role=requester,address=127.0.0.1:9100,"
         "organisation=org-r,data=data/req.csv"], capsys)
    no_data = [a.replace(",data=data/u1.csv,drop=label", "") for a in parties]
    err = _refused(["setup", "run", "revfrf", "--out", "run3.toml", "--ca", "pki/ca.pem", "--params",
                    "keys/revfrf.public.toml", "--param", "n_classes=2", *no_data], capsys)
    assert "u1's data (none named): its header gives its feature count, else [protocol] columns must be" in err
    assert "--param 'columns=[[0, 1], [2, 3, 4]]'" in err
    parties = [a.replace(",drop=label", "") for a in parties]
    assert "the column 'label' has the name of the run's label column" in _refused(
        ["setup", "run", "revfrf", "--out", "run2.toml", "--ca", "pki/ca.pem", "--params",
         "keys/revfrf.public.toml", "--param", "n_classes=2", *parties], capsys)
