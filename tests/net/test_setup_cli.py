"""``securetrees setup``: each step run through the command, and every refusal with its typed error."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from securetrees.cli import main
from securetrees.errors import CollusionError, InsecureParameterWarning, KeyMismatchError, ParameterError
from securetrees.net.collusion import ASSUMPTIONS, check_layout
from securetrees.net.config import load_config
from securetrees.net.keyfile import open_key_file
from securetrees.net.tls import fingerprint, load_identity
from securetrees.paillier import PrivateKey
from securetrees.testing.example_tables import EXAMPLE_FILES, make_example

PASS = "setup test passphrase"  # noqa: S105 - a test's throwaway passphrase
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def made_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's CA, the certificates of the Federated Forest example's parties and the example
    tables, made once for the module (each key is sealed under the passphrase: scrypt per file)."""
    folder = tmp_path_factory.mktemp("setup-template")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SECURETREES_PASSPHRASE", PASS)
        mp.chdir(folder)
        assert main(["setup", "ca", "--out", "pki"]) == 0
        assert main(["setup", "issue", "--name", "master", "bank", "shop", "operator", "--ca-cert", "pki/ca.pem",
                     "--ca-key", "pki/ca.key", "--out", "pki"]) == 0
        assert main(["setup", "example", "--out", "data"]) == 0
    return folder


@pytest.fixture
def run_dir(made_once: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A test's own copy of :func:`made_once` (modes kept), as the working folder."""
    monkeypatch.setenv("SECURETREES_PASSPHRASE", PASS)
    run = tmp_path / "run"
    shutil.copytree(made_once, run)
    monkeypatch.chdir(run)
    return run


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The typed error a command ends with (exit status 1)."""
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    found = re.search(r"securetrees: (\w+): ", err)
    assert found, err
    return found.group(1)


def _ff_parties(bank_org: str = "bank", master_org: str = "hub") -> list[str]:
    return ["--party", f"name=master,role=master,address=127.0.0.1:1,organisation={master_org}",
            "--party", f"name=bank,role=client,address=127.0.0.1:2,organisation={bank_org},data=data/bank.csv,"
                       "id_column=customer,label=outcome",
            "--party", "name=shop,role=client,address=127.0.0.1:3,organisation=shop,data=data/shop.csv,"
                       "id_column=customer",
            "--party", "name=operator,address=127.0.0.1:4,organisation=hub"]


# -- certificates ---------------------------------------------------------------------------------------


def test_issued_certificates_load_as_identities(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("master", "bank", "operator"):
        ident = load_identity(name, "pki/ca.pem", f"pki/{name}.crt", f"pki/{name}.key", PASS.encode())
        assert ident.name == name
    assert (run_dir / "pki" / "ca.key").stat().st_mode & 0o077 == 0
    assert b"ENCRYPTED" in (run_dir / "pki" / "ca.key").read_bytes()


def test_request_and_sign(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["setup", "request", "--name", "telco", "--out", "telco"]) == 0
    capsys.readouterr()
    assert main([*_sign("telco"), "--csr", "telco/telco.csr", "--ca-cert", "pki/ca.pem", "--ca-key", "pki/ca.key"]
                ) == 0
    out = capsys.readouterr().out
    assert f'issuer = "{fingerprint((run_dir / "pki/ca.pem").read_bytes())}"' in out
    load_identity("telco", "pki/ca.pem", "telco/telco.crt", "telco/telco.key", PASS.encode())
    assert _refused([*_sign("telco"), "--csr", "telco/telco.csr", "--ca-cert", "pki/ca.pem", "--ca-key",
                     "pki/ca.key"], capsys) == "OutputExistsError"


def _csr(path: Path, cn: str, sans: list[str]) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(s) for s in sans]), critical=False)
    path.write_bytes(builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    return str(path)


@pytest.mark.parametrize(("cn", "sans"), [("bank", ["shop"]), ("bank", []), ("bank", ["bank", "shop"]),
                                          ("Bank_1", ["Bank_1"]), ("operator", ["bank"])])
def test_sign_refuses_a_request_whose_names_differ_or_are_invalid(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                                                  cn: str, sans: list[str]) -> None:
    csr = _csr(run_dir / "bad.csr", cn, sans)
    assert _refused([*_sign("bank"), "--csr", csr, "--ca-cert", "pki/ca.pem", "--ca-key", "pki/ca.key",
                     "--out", "bad.crt"], capsys) == "CertificateRequestError"
    assert not (run_dir / "bad.crt").exists()


def _sign(name: str) -> list[str]:
    return ["setup", "sign", "--name", name]


def _request(path: Path, builder: x509.CertificateSigningRequestBuilder,
             key: ec.EllipticCurvePrivateKey | None = None) -> str:
    path.write_bytes(builder.sign(key or ec.generate_private_key(ec.SECP256R1()), hashes.SHA256())
                     .public_bytes(serialization.Encoding.PEM))
    return str(path)


def _bank() -> x509.CertificateSigningRequestBuilder:
    return x509.CertificateSigningRequestBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                                                              "bank")]))


@pytest.mark.parametrize("kind", ["ip-san", "uri-san", "ca-flag", "key-usage", "p192", "other-name"])
def test_sign_refuses_extra_names_extensions_weak_curves_and_another_party(
        run_dir: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    """What a request may carry: its one DNS name and a P-256/P-384 key; a request for a name other
    than the one the CA signs for (a party asking for ``operator``) is refused too.  The companion:
    the same builder with only the DNS name is signed."""
    import ipaddress

    dns = x509.SubjectAlternativeName([x509.DNSName("bank")])
    builders = {
        "ip-san": (_bank().add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("bank"), x509.IPAddress(ipaddress.ip_address("10.0.0.1"))]), critical=False), None),
        "uri-san": (_bank().add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("bank"), x509.UniformResourceIdentifier("https://x")]), critical=False), None),
        "ca-flag": (_bank().add_extension(dns, critical=False)
                    .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True), None),
        "key-usage": (_bank().add_extension(dns, critical=False).add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CODE_SIGNING]), critical=False), None),
        "p192": (_bank().add_extension(dns, critical=False), ec.generate_private_key(ec.SECP192R1())),
        "other-name": (x509.CertificateSigningRequestBuilder().subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "operator")])).add_extension(
            x509.SubjectAlternativeName([x509.DNSName("operator")]), critical=False), None),
    }
    builder, key = builders[kind]
    sign = ["setup", "sign", "--name", "bank", "--ca-cert", "pki/ca.pem", "--ca-key", "pki/ca.key"]
    assert _refused([*sign, "--csr", _request(run_dir / "bad.csr", builder, key), "--out", "bad.crt"],
                    capsys) == "CertificateRequestError"
    assert not (run_dir / "bad.crt").exists()
    assert main([*sign, "--csr", _request(run_dir / "good.csr", _bank().add_extension(dns, critical=False)),
                 "--out", "good.crt"]) == 0


def test_a_certificate_ends_no_later_than_its_ca(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csr = _request(run_dir / "long.csr", _bank().add_extension(x509.SubjectAlternativeName([x509.DNSName("bank")]),
                                                               critical=False))
    assert main([*_sign("bank"), "--csr", csr, "--ca-cert", "pki/ca.pem", "--ca-key",
                 "pki/ca.key", "--out", "long.crt", "--days", "3650"]) == 0
    ca = x509.load_pem_x509_certificate((run_dir / "pki" / "ca.pem").read_bytes())
    cert = x509.load_pem_x509_certificate((run_dir / "long.crt").read_bytes())
    assert cert.not_valid_after_utc <= ca.not_valid_after_utc


def test_sign_refuses_a_request_whose_signature_fails(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = x509.load_pem_x509_csr(Path(_csr(run_dir / "good.csr", "bank", ["bank"])).read_bytes())
    der = bytearray(good.public_bytes(serialization.Encoding.DER))
    der[-1] ^= 1  # the last byte of the signature
    tampered = x509.load_der_x509_csr(bytes(der))
    (run_dir / "bad.csr").write_bytes(tampered.public_bytes(serialization.Encoding.PEM))
    assert _refused([*_sign("bank"), "--csr", "bad.csr", "--ca-cert", "pki/ca.pem", "--ca-key", "pki/ca.key",
                     "--out", "bad.crt"], capsys) == "CertificateRequestError"


def test_sign_refuses_garbage_a_wrong_passphrase_and_a_non_ca(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (run_dir / "junk.csr").write_text("not a request")
    assert _refused([*_sign("telco"), "--csr", "junk.csr", "--ca-cert", "pki/ca.pem", "--ca-key", "pki/ca.key"],
                    capsys) == "CertificateRequestError"
    csr = _csr(run_dir / "ok.csr", "telco", ["telco"])
    assert _refused([*_sign("telco"), "--csr", csr, "--ca-cert", "pki/bank.crt", "--ca-key", "pki/bank.key"],
                    capsys) == "ParameterError"  # a party's certificate is no CA
    assert _refused([*_sign("telco"), "--csr", csr, "--ca-cert", "pki/ca.pem", "--ca-key", "pki/bank.key"],
                    capsys) == "ParameterError"  # another key than the CA's
    monkeypatch.setenv("SECURETREES_PASSPHRASE", "wrong")
    assert _refused([*_sign("telco"), "--csr", csr, "--ca-cert", "pki/ca.pem", "--ca-key", "pki/ca.key"],
                    capsys) == "ParameterError"
    assert not (run_dir / "telco.crt").exists()


def test_certificate_steps_refuse_bad_names_overwrites_and_empty_passphrases(
        run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert _refused(["setup", "request", "--name", "Not_A_Label", "--out", "x"], capsys) == "ParameterError"
    assert _refused(["setup", "issue", "--name", "a.b", "--ca-cert", "pki/ca.pem", "--ca-key", "pki/ca.key",
                     "--out", "pki"], capsys) == "ParameterError"
    assert _refused(["setup", "ca", "--out", "pki"], capsys) == "OutputExistsError"
    assert _refused(["setup", "issue", "--name", "bank", "--ca-cert", "pki/ca.pem", "--ca-key", "pki/ca.key",
                     "--out", "pki"], capsys) == "OutputExistsError"
    for names in (["telco", "bank"], ["telco", "Bad_Name"]):  # all or nothing: telco is not issued either
        assert _refused(["setup", "issue", "--name", *names, "--ca-cert", "pki/ca.pem", "--ca-key", "pki/ca.key",
                         "--out", "pki"], capsys) in ("OutputExistsError", "ParameterError")
        assert not (run_dir / "pki" / "telco.key").exists()
    assert _refused(["setup", "ca", "--out", "other", "--name", "x" * 65], capsys) == "ParameterError"
    assert _refused(["setup", "ca", "--out", "other", "--days", "0"], capsys) == "ParameterError"
    (run_dir / "empty.pass").write_text("\n")
    assert _refused(["setup", "ca", "--out", "other", "--passphrase-file", "empty.pass"], capsys) == "ParameterError"
    monkeypatch.delenv("SECURETREES_PASSPHRASE")
    assert _refused(["setup", "ca", "--out", "other"], capsys) == "ParameterError"  # no passphrase, no terminal
    assert not (run_dir / "other").exists()


# -- protocol keys --------------------------------------------------------------------------------------


def test_keys_seal_the_active_partys_key_and_publish_its_public_key(run_dir: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.warns(InsecureParameterWarning, match="1024"):
        assert main(["setup", "keys", "secureboost", "--party", "active", "--out", "keys/active.keys",
                     "--insecure-1024"]) == 0
    items = open_key_file("keys/active.keys", "active", PASS.encode())
    with pytest.warns(InsecureParameterWarning, match="1024"):
        sk = PrivateKey.from_encrypted_bytes(items["paillier_key"], PASS.encode(), allow_insecure=True)
    public = (run_dir / "keys" / "active.public.toml").read_text()
    assert f'active_public_key = "{sk.public_key.to_bytes().hex()}"' in public
    assert "allow_insecure = true" in public and "key_bits = 1024" in public
    assert "paillier_key" not in public


def test_keys_write_hybridtree_checkpoint_keys_for_the_host_and_the_guests(run_dir: Path) -> None:
    """``--checkpoint-key`` beside the host's key pair, and alone (``--no-paillier``) for a guest, which
    holds no Paillier key: the items ``checkpoint_store`` reads when ``[protocol] checkpoint_dir`` is set."""
    with pytest.warns(InsecureParameterWarning, match="1024"):
        assert main(["setup", "keys", "hybridtree", "--party", "host", "--out", "keys/host.keys", "--insecure-1024",
                     "--checkpoint-key"]) == 0
    for guest in ("guest0", "guest1"):
        assert main(["setup", "keys", "hybridtree", "--party", guest, "--out", f"keys/{guest}.keys", "--no-paillier",
                     "--checkpoint-key"]) == 0
    items = {n: open_key_file(f"keys/{n}.keys", n, PASS.encode()) for n in ("host", "guest0", "guest1")}
    assert set(items["host"]) == {"paillier_key", "checkpoint_key"}
    assert set(items["guest0"]) == set(items["guest1"]) == {"checkpoint_key"}
    keys = {items[n]["checkpoint_key"] for n in items}
    assert len(keys) == 3 and all(len(k) == 32 for k in keys)  # each party its own
    assert "host_public_key" in (run_dir / "keys" / "host.public.toml").read_text()
    assert "host_public_key" not in (run_dir / "keys" / "guest0.public.toml").read_text()


def test_keys_refuse_unknown_protocols_weak_keys_and_overwrites(run_dir: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert _refused(["setup", "keys", "revfrf", "--party", "cs", "--out", "k.keys"], capsys) == "ParameterError"
    assert _refused(["setup", "keys", "hybridtree", "--party", "host", "--out", "k.keys", "--key-bits", "1024"],
                    capsys) == "ParameterError"
    (run_dir / "k.keys").write_bytes(b"existing")
    assert _refused(["setup", "keys", "federated-forest", "--party", "master", "--out", "k.keys", "--no-paillier",
                     "--checkpoint-key"], capsys) == "OutputExistsError"
    assert (run_dir / "k.keys").read_bytes() == b"existing"


def test_federated_forest_clients_pin_the_published_label_key() -> None:
    """With ``label_public_key`` (what ``setup keys federated-forest`` publishes) a client takes its
    encrypted labels only under that key; the planted leak: without the pin, a substituted key is taken."""
    from securetrees.protocols.federated_forest.deploy import public_key_loader
    from securetrees.testing.paillier import small_keypair

    pk, other = small_keypair(1024)[0], small_keypair(1026)[0]
    pinned = {"label_public_key": pk.to_bytes().hex()}
    with pytest.warns(InsecureParameterWarning):
        assert public_key_loader(pinned, True)(pk.to_bytes()).n == pk.n
    with pytest.raises(KeyMismatchError, match="label_public_key"):
        public_key_loader(pinned, True)(other.to_bytes())
    with pytest.warns(InsecureParameterWarning):
        assert public_key_loader({}, True)(other.to_bytes()).n == other.n  # unpinned: any key passes
    with pytest.raises(ParameterError, match="hex"):
        public_key_loader({"label_public_key": "not hex"}, True)


# -- run.toml ------------------------------------------------------------------------------------------


def test_run_writes_a_checked_configuration(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["setup", "run", "federated-forest", "--out", "run.toml", "--ca", "pki/ca.pem",
                 "--param", "n_estimators=3", "--param", "n_classes=2", "--deadline", "120", *_ff_parties()]) == 0
    config = load_config("run.toml")
    assert config.transport.deadline == 120.0 and "[transport]\ndeadline = 120.0" in Path("run.toml").read_text()
    ca = fingerprint((run_dir / "pki/ca.pem").read_bytes())
    assert {p.issuer for p in config.parties.values()} == {ca}
    assert config.params["clients"] == ["bank", "shop"]
    assert config.params["feature_ids"] == [[0, 1, 2], [3, 4, 5]]  # bank: age, income, account; shop: three
    assert config.party("bank").organisation == "bank"
    text = (run_dir / "run.toml").read_text()
    assert text.startswith("# securetrees run configuration") and "Non-collusion assumption" in text
    assert _refused(["setup", "run", "federated-forest", "--out", "run.toml", "--ca", "pki/ca.pem",
                     *_ff_parties()], capsys) == "OutputExistsError"


def test_run_reads_feature_ids_from_a_parquet_header(run_dir: Path) -> None:
    """A client's table may be Parquet ("Your own data"): its feature count comes from its schema, as a
    CSV's from its header (before, ``setup run`` refused it and asked for ``feature_ids``)."""
    import pandas as pd

    pd.read_csv(run_dir / "data/shop.csv", dtype=str).to_parquet(run_dir / "data/shop.parquet", index=False)
    parties = [a.replace("data/shop.csv", "data/shop.parquet") for a in _ff_parties()]
    assert main(["setup", "run", "federated-forest", "--out", "run.toml", "--ca", "pki/ca.pem",
                 "--param", "n_classes=2", *parties]) == 0
    assert load_config("run.toml").params["feature_ids"] == [[0, 1, 2], [3, 4, 5]]


def test_run_names_a_missing_data_file(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parties = [a.replace("data/shop.csv", "data/shpo.csv") for a in _ff_parties()]
    assert _refused(["setup", "run", "federated-forest", "--out", "run.toml", "--ca", "pki/ca.pem",
                     "--param", "n_classes=2", *parties], capsys) == "TableError"
    assert not (run_dir / "run.toml").exists()


def test_run_lists_the_histogram_forest_clients(run_dir: Path) -> None:
    """``clients`` comes from the roster as Federated Forest's does (it was refused as missing)."""
    assert main(["setup", "issue", "--name", "server", "client0", "client1", "client2", "--ca-cert", "pki/ca.pem",
                 "--ca-key", "pki/ca.key", "--out", "pki"]) == 0
    clients = [a for i in range(3) for a in
               ("--party", f"name=client{i},role=client,address=127.0.0.1:{10 + i},organisation=c{i},"
                           f"data=data/c{i}.csv,label=y")]
    assert main(["setup", "run", "histogram-forest", "--out", "run.toml", "--ca", "pki/ca.pem",
                 "--param", 'columns=["a"]', "--param", 'classes=["no", "yes"]', "--param", "feature_ranges=[[0, 1]]",
                 "--party", "name=server,role=server,address=127.0.0.1:9,organisation=hub", *clients,
                 "--party", "name=operator,address=127.0.0.1:8,organisation=hub"]) == 0
    assert load_config("run.toml").params["clients"] == ["client0", "client1", "client2"]


@pytest.mark.parametrize(("old", "new", "error", "named"), [
    ("label=outcome", "label=outcom", "TableError", "outcom"),          # a label column the table lacks
    ("id_column=customer,label", "id_column=custmer,label", "TableError", "custmer"),
])
def test_run_refuses_a_column_a_client_table_lacks(run_dir: Path, capsys: pytest.CaptureFixture[str], old: str,
                                                   new: str, error: str, named: str) -> None:
    """Federated Forest's feature_ids come from the clients' headers: a label or id column the header
    lacks would have been counted as features and the run written (the client failing only at start)."""
    parties = [a.replace(old, new) for a in _ff_parties()]
    capsys.readouterr()
    assert main(["setup", "run", "federated-forest", "--out", "run.toml", "--ca", "pki/ca.pem",
                 "--param", "n_classes=2", *parties]) == 1
    err = capsys.readouterr().err
    assert f"securetrees: {error}: " in err and repr(named) in err, err
    assert not (run_dir / "run.toml").exists()


@pytest.mark.parametrize("param", ["n_classes=\"two\"", "n_classes=1", "label_protection=\"none\"",
                                   "n_estimators=0", "max_bins=\"many\""])
def test_run_checks_federated_forest_parameters(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                                param: str) -> None:
    assert _refused(["setup", "run", "federated-forest", "--out", "run.toml", "--ca", "pki/ca.pem",
                     "--param", param, *_ff_parties()], capsys) == "ParameterError"
    assert not (run_dir / "run.toml").exists()


@pytest.mark.parametrize(("protocol", "parties"), [
    ("federated-forest", _ff_parties(master_org="bank")),       # the master hosted by a client's organisation
    ("federated-forest", _ff_parties(bank_org="shop")),         # two clients in one organisation
    ("revfrf", ["--party", "name=cs,role=cs,address=h:1,organisation=acme",
                "--party", "name=cc,role=cc,address=h:2,organisation=acme",
                "--party", "name=operator,address=h:3,organisation=acme"]),
    ("secureboost", ["--party", "name=active,role=active,address=h:1,org=acme",
                     "--party", "name=passive0,role=passive,address=h:2,org=acme",
                     "--party", "name=operator,address=h:3,org=x"]),
])
def test_run_refuses_a_layout_that_breaks_the_non_collusion_assumption(
        run_dir: Path, capsys: pytest.CaptureFixture[str], protocol: str, parties: list[str]) -> None:
    assert _refused(["setup", "run", protocol, "--out", "run.toml", "--ca", "pki/ca.pem", *parties],
                    capsys) == "CollusionError"
    assert not (run_dir / "run.toml").exists()


def test_load_config_refuses_a_colluding_layout_edited_in_later(run_dir: Path) -> None:
    assert main(["setup", "run", "federated-forest", "--out", "run.toml", "--ca", "pki/ca.pem",
                 "--param", "n_classes=2", *_ff_parties()]) == 0
    path = run_dir / "run.toml"
    path.write_text(path.read_text().replace('organisation = "hub"', 'organisation = "bank"', 1))
    with pytest.raises(CollusionError, match="master"):
        load_config(path)


def test_collusion_check_catches_every_pair_it_names() -> None:
    """The check is not vacuous: for every protocol and every pair of roles it holds apart, one
    organisation hosting both is refused, and two organisations are accepted."""
    for protocol, rule in ASSUMPTIONS.items():
        for a, b in rule.apart:
            roles = {"p1": a, "p2": b}
            with pytest.raises(CollusionError):
                check_layout(protocol, roles, {"p1": "org", "p2": "org"})
            check_layout(protocol, roles, {"p1": "org", "p2": "other"})


@pytest.mark.parametrize(("spec", "error"), [
    ("name=x,role=client,address=h:1", "ParameterError"),                       # no organisation
    ("name=x,role=client,address=h:1,organisation=o,colour=red", "ParameterError"),  # unknown key
    ("name=x,role=client,address=h:1,organisation=o,address=h:2", "ParameterError"),  # twice
    ("name=x,address=h:1,organisation=o", "ParameterError"),                   # no role
    ("name=X_1,role=client,address=h:1,organisation=o", "ParameterError"),     # not a DNS label
    ("name=x,role=client,address=h:1,organisation", "ParameterError"),         # not key=value
])
def test_run_refuses_malformed_party_specs(run_dir: Path, capsys: pytest.CaptureFixture[str], spec: str,
                                           error: str) -> None:
    assert _refused(["setup", "run", "federated-forest", "--out", "run.toml", "--ca", "pki/ca.pem", "--party", spec,
                     "--party", "name=operator,address=h:9,organisation=o"], capsys) == error


def test_run_refuses_unknown_parameters_missing_operator_and_duplicates(
        run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["setup", "run", "federated-forest", "--out", "run.toml", "--ca", "pki/ca.pem"]
    assert _refused([*base, "--param", "n_estimator=3", *_ff_parties()], capsys) == "UnknownKeyError"
    assert _refused([*base, *_ff_parties()[:-2]], capsys) == "ParameterError"  # no operator entry
    assert _refused([*base, *_ff_parties(), "--party", "name=shop,role=client,address=h:5,organisation=z"],
                    capsys) == "ParameterError"
    assert _refused([*base, "--param", "=3", *_ff_parties()], capsys) == "ParameterError"
    assert not (run_dir / "run.toml").exists()


def test_run_messages_name_the_users_file_not_the_temporary_one(run_dir: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The configuration is checked as the file it will be: a refusal names ``run.toml`` (the planted
    fault: the check on a temporary file beside it named ``.run.toml.PID.tmp``)."""
    capsys.readouterr()
    assert main(["setup", "run", "federated-forest", "--out", "run.toml", "--ca", "pki/ca.pem",
                 "--param", "n_estimator=3", *_ff_parties()]) == 1
    err = capsys.readouterr().err
    assert "UnknownKeyError" in err and str((run_dir / "run.toml").resolve()) in err
    assert ".tmp" not in err
    assert not list(run_dir.glob(".run.toml*")) and not (run_dir / "run.toml").exists()


def _sb_parties() -> list[str]:
    return ["--party", "name=active,role=active,address=h:1,org=bank", "--party",
            "name=passive0,role=passive,address=h:2,org=shop", "--party", "name=operator,address=h:3,org=hub"]


def _hybrid_parties() -> list[str]:
    guests = [a for g in range(3) for a in ("--party", f"name=guest{g},role=guest,address=h:{g + 2},org=g{g}")]
    return ["--party", "name=host,role=host,address=h:1,org=bank", *guests,
            "--party", "name=operator,address=h:9,org=hub"]


def _revfrf_parties() -> list[str]:
    orgs = {"cs": "org-cs", "cc": "org-cc", "kgc": "trusted", "u1": "org-u1", "u2": "org-u2", "operator": "org-cs"}
    roles = {"u1": "participant", "u2": "participant"}
    return [a for i, (n, o) in enumerate(orgs.items())
            for a in ("--party", f"name={n},role={roles.get(n, n)},address=h:{i + 1},organisation={o}")]


@pytest.mark.parametrize(("protocol", "parties", "params", "key", "command"), [
    ("secureboost", _sb_parties(), [], "active_public_key", "securetrees setup keys secureboost --party active"),
    ("hybridtree", _hybrid_parties(), ["--param", 'guest_features=["a", "b"]'], "host_public_key",
     "securetrees setup keys hybridtree --party host"),
    ("revfrf", _revfrf_parties(), ["--param", "n_features=2", "--param", "columns=[[0], [1]]"], "directory",
     "securetrees setup kgc"),
])
def test_run_refuses_a_run_without_the_key_material_its_roles_need(
        run_dir: Path, capsys: pytest.CaptureFixture[str], protocol: str, parties: list[str], params: list[str],
        key: str, command: str) -> None:
    """Before the check, each of these was written and failed only when its roles started."""
    capsys.readouterr()
    assert main(["setup", "run", protocol, "--out", "run.toml", "--ca", "pki/ca.pem", *params, *parties]) == 1
    err = capsys.readouterr().err
    assert f"securetrees: MissingKeyMaterialError: [protocol] {key} is missing" in err
    assert command in err
    assert not (run_dir / "run.toml").exists()


def test_run_accepts_the_key_material_setup_keys_publishes(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The check passes once the key is there (and an unknown key is still refused as such)."""
    with pytest.warns(InsecureParameterWarning):
        assert main(["setup", "keys", "secureboost", "--party", "active", "--out", "keys/active.keys",
                     "--insecure-1024"]) == 0
    base = ["setup", "run", "secureboost", "--out", "run.toml", "--ca", "pki/ca.pem", *_sb_parties()]
    assert _refused([*base, "--param", "n_estimatorz=3"], capsys) == "UnknownKeyError"
    assert main([*base, "--params", "keys/active.public.toml"]) == 0
    assert load_config("run.toml").params["active_public_key"]


def test_hybridtree_needs_the_host_key_in_secure_mode_only(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from securetrees.protocols.hybridtree.deploy import check_parameters
    from securetrees.testing.paillier import small_keypair

    params = {"guests": ["guest0", "guest1", "guest2"], "guest_features": ["a", "b"]}
    with pytest.raises(ParameterError, match="host_public_key"):
        check_parameters(params)
    with pytest.warns(InsecureParameterWarning):
        check_parameters({**params, "host_public_key": small_keypair(1024)[0].to_bytes().hex(),
                          "allow_insecure": True, "key_bits": 1024})
    with pytest.warns(InsecureParameterWarning):
        check_parameters({**params, "mode": "plaintext", "allow_insecure": True})  # encrypts nothing: no key


def test_run_binds_each_name_to_the_ca_that_issued_it(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two organisations' CAs: each entry's issuer is the CA that signed its certificate; a name
    whose certificate neither signed, or whose CA cannot be determined, is refused."""
    assert main(["setup", "ca", "--out", "org2", "--name", "shop CA"]) == 0
    (run_dir / "pki" / "shop.crt").unlink()
    (run_dir / "pki" / "shop.key").unlink()
    assert main(["setup", "issue", "--name", "shop", "--ca-cert", "org2/ca.pem", "--ca-key", "org2/ca.key",
                 "--out", "pki"]) == 0
    assert main(["setup", "run", "federated-forest", "--out", "run.toml", "--ca", "pki/ca.pem", "org2/ca.pem",
                 "--param", "n_classes=2", *_ff_parties()]) == 0
    config = load_config("run.toml")
    assert config.party("shop").issuer == fingerprint((run_dir / "org2/ca.pem").read_bytes())
    assert config.party("bank").issuer == fingerprint((run_dir / "pki/ca.pem").read_bytes())
    wrong = [a.replace("organisation=shop,", "organisation=shop,ca=pki/ca.pem,") for a in _ff_parties()]
    assert _refused(["setup", "run", "federated-forest", "--out", "run2.toml", "--ca", "pki/ca.pem", "org2/ca.pem",
                     "--force", *wrong], capsys) == "ParameterError"
    (run_dir / "pki" / "shop.crt").unlink()  # no certificate at hand and no ca=: which CA issues shop?
    assert _refused(["setup", "run", "federated-forest", "--out", "run2.toml", "--ca", "pki/ca.pem", "org2/ca.pem",
                     "--force", *_ff_parties()], capsys) == "ParameterError"
    stranger = [a.replace("organisation=shop,", "organisation=shop,ca=org2/ca.pem,") for a in _ff_parties()]
    shutil.copy(run_dir / "pki" / "bank.crt", run_dir / "pki" / "shop.crt")  # signed by the other CA
    assert _refused(["setup", "run", "federated-forest", "--out", "run2.toml", "--ca", "pki/ca.pem", "org2/ca.pem",
                     "--force", *stranger], capsys) == "ParameterError"
    assert not (run_dir / "run2.toml").exists()


# -- the example ---------------------------------------------------------------------------------------


def test_example_files_are_the_generators_output_and_are_not_overwritten(
        run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, frame in make_example().items():
        shipped = (ROOT / "securetrees" / "data" / "example" / name).read_text(encoding="utf-8")
        assert frame.to_csv(index=False, lineterminator="\n") == shipped, name
        assert (run_dir / "data" / name).read_text(encoding="utf-8") == shipped
    assert _refused(["setup", "example", "--out", "data"], capsys) == "OutputExistsError"
    assert len(EXAMPLE_FILES) == 6


def test_example_files_go_into_the_wheel() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "data/example/*" in data["tool"]["setuptools"]["package-data"]["securetrees"]
    assert any(d.startswith("tomli-w") for d in data["project"]["optional-dependencies"]["net"])


def test_example_tables_overlap_in_part_with_missing_values_and_text() -> None:
    tables = make_example()
    ids = [set(tables[f"{o}.csv"]["customer"]) for o in ("bank", "shop", "telco")]
    common = set.intersection(*ids)
    assert all(len(common) < len(s) for s in ids)  # every organisation has customers another lacks
    assert all(tables[f"{o}.csv"].isna().to_numpy().any() for o in ("bank", "shop", "telco"))
    assert set(tables["bank.csv"]["outcome"]) == {"repaid", "defaulted"}
    assert list(tables["bank.csv"]["customer"]) != sorted(tables["bank.csv"]["customer"])
