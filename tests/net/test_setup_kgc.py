"""``securetrees setup kgc``: RevFRF's key set-up for every party at once, then ``setup run revfrf``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from securetrees.cli import main
from securetrees.dtpkc import KGC
from securetrees.net.config import load_config
from securetrees.net.keyfile import open_key_file
from securetrees.testing.dtpkc import dtpkc_test_kgc

NAMES = ("cs", "cc", "kgc", "u1", "u2", "requester")


@pytest.fixture
def kgc_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Passphrase files for every party and a CA with each party's certificate; the KGC's system is
    the cached small test system (key generation is not under test here)."""
    def small(cls: type[KGC], bits: int, **_: Any) -> KGC:
        return dtpkc_test_kgc(512)

    monkeypatch.setattr(KGC, "setup", classmethod(small))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pass").mkdir()
    for n in (*NAMES, "operator"):
        (tmp_path / "pass" / f"{n}.pass").write_text(f"passphrase of {n}\n")
    monkeypatch.setenv("SECURETREES_PASSPHRASE", "the CA's")
    assert main(["setup", "ca", "--out", "pki"]) == 0
    assert main(["setup", "issue", "--name", *NAMES, "operator", "--ca-cert", "pki/ca.pem", "--ca-key", "pki/ca.key",
                 "--out", "pki"]) == 0
    return tmp_path


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 1
    found = re.search(r"securetrees: (\w+): ", capsys.readouterr().err)
    assert found
    return found.group(1)


def _parties(cc_org: str = "org-cc") -> list[str]:
    orgs = {"cs": "org-cs", "cc": cc_org, "kgc": "trusted", "u1": "org-u1", "u2": "org-u2", "requester": "org-r",
            "operator": "org-cs"}
    roles = {"u1": "participant", "u2": "participant"}
    out = []
    for i, (n, org) in enumerate(orgs.items()):
        out += ["--party", f"name={n},role={roles.get(n, n)},address=127.0.0.1:{9000 + i},organisation={org}"
                           + (f",secrets=keys/{n}.keys" if n != "operator" else "")]
    return out


def test_kgc_seals_every_partys_keys_and_run_accepts_its_public_output(kgc_dir: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["setup", "kgc", "--participants", "u1", "u2", "--requesters", "requester", "--passphrase-dir", "pass",
                 "--out", "keys"]) == 0
    items = {n: open_key_file(f"keys/{n}.keys", n, f"passphrase of {n}".encode()) for n in NAMES}
    assert sorted(items["cs"]) == sorted(items["cc"]) == ["session", "share", "weak"]
    assert sorted(items["u1"]) == ["session", "signing_seed", "weak"]
    assert sorted(items["requester"]) == ["weak"] and sorted(items["kgc"]) == ["session"]
    assert items["cs"]["share"] != items["cc"]["share"]
    public = (kgc_dir / "keys" / "revfrf.public.toml").read_text()
    assert all(v.hex() not in public for it in items.values() for v in it.values())  # no secret is public
    assert main(["setup", "run", "revfrf", "--out", "run.toml", "--ca", "pki/ca.pem", "--params",
                 "keys/revfrf.public.toml", "--param", "n_classes=2", "--param", "columns=[[0], [1]]",
                 *_parties()]) == 0  # n_features follows from columns
    config = load_config("run.toml")
    assert config.params["n_features"] == 2
    assert config.params["participants"] == ["u1", "u2"] and set(config.params["directory"]) == {
        "cs", "cc", "u1", "u2", "requester"}
    assert "the CS and the CC do not collude" in (kgc_dir / "run.toml").read_text()
    assert _refused(["setup", "run", "revfrf", "--out", "run2.toml", "--ca", "pki/ca.pem", "--params",
                     "keys/revfrf.public.toml", *_parties(cc_org="org-cs")], capsys) == "CollusionError"


def test_kgc_refuses_missing_passphrases_reserved_names_and_overwrites(kgc_dir: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    base = ["setup", "kgc", "--passphrase-dir", "pass", "--out", "keys"]
    assert _refused([*base, "--participants", "u1", "u9"], capsys) == "ParameterError"  # no pass/u9.pass
    assert _refused([*base, "--participants", "u1", "cs"], capsys) == "ParameterError"
    assert _refused([*base, "--participants", "u1", "u1"], capsys) == "ParameterError"
    assert not (kgc_dir / "keys" / "cs.keys").exists()
    assert main([*base, "--participants", "u1", "u2"]) == 0
    before = (kgc_dir / "keys" / "cs.keys").read_bytes()
    assert _refused([*base, "--participants", "u1", "u2"], capsys) == "OutputExistsError"
    assert (kgc_dir / "keys" / "cs.keys").read_bytes() == before
