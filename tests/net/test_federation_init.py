"""``securetrees federation init`` never overwrites a previous trial (its keys, certificates and
passphrases) unless told to with ``--force``; the refusal is typed and comes before anything is
generated or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from securetrees import cli
from securetrees.errors import OutputExistsError, SecureTreesError
from securetrees.net.service import init_trial

ARGS = ["federation", "init", "federated-forest", "--rows", "20", "--trees", "1", "--insecure-1024"]


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file below ``folder``: its bytes and modification time."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def changed(before: dict[str, tuple[bytes, int]], after: dict[str, tuple[bytes, int]]) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


@pytest.fixture(scope="module")
def trial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fed") / "trial"
    assert cli.main([*ARGS, "--out", str(out)]) == 0
    assert (out / "run.toml").is_file() and any((out / "keys").iterdir())
    return out


def test_init_refuses_an_existing_trial(trial: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(trial)
    assert cli.main([*ARGS, "--out", str(trial)]) == 1
    err = capsys.readouterr().err
    assert "OutputExistsError" in err and "--force" in err
    assert changed(before, snapshot(trial)) == set()


def test_refusal_is_typed_and_comes_first(trial: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import securetrees.net.service as service

    def must_not_run(name: str) -> None:
        raise AssertionError("the protocol's trial was started")

    monkeypatch.setattr(service, "protocol_module", must_not_run)
    with pytest.raises(OutputExistsError) as exc:
        init_trial("federated-forest", trial, rows=20, trees=1, insecure=True)
    assert isinstance(exc.value, SecureTreesError) and isinstance(exc.value, FileExistsError)


def test_any_non_empty_folder_or_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError):
        init_trial("federated-forest", tmp_path, rows=20, trees=1, insecure=True)
    with pytest.raises(OutputExistsError):
        init_trial("federated-forest", tmp_path / "notes.txt", rows=20, trees=1, insecure=True)
    assert (tmp_path / "notes.txt").read_text() == "mine" and len(list(tmp_path.iterdir())) == 1


def test_an_empty_existing_folder_is_used(tmp_path: Path) -> None:
    assert cli.main([*ARGS, "--out", str(tmp_path)]) == 0
    assert (tmp_path / "run.toml").is_file()


def test_force_overwrites_and_the_check_sees_it(trial: Path) -> None:
    """With ``--force`` the keys and passphrases are new: the snapshot comparison used above
    to show that nothing was touched does see an overwrite (it can fail)."""
    before = snapshot(trial)
    assert cli.main([*ARGS, "--out", str(trial), "--force"]) == 0
    diff = changed(before, snapshot(trial))
    assert {"run.toml", "keys/client0.keys", "pki/client0.pass", "pki/ca.pem"} <= diff
