"""A party's files are its own: everything ``securetrees federation init`` writes, and every log,
output and prediction file a run writes, is mode 0600 in folders of mode 0700, except the public
files (``run.toml``, the CA and the certificates), whatever the umask (specs/deployment.md,
"File modes").  The planted companion writes the tables as before (the default mode), and the
same check fails on it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from securetrees import cli, plugins
from securetrees.errors import ParameterError
from securetrees.files import open_private, private_dir, write_private
from securetrees.log import configure, reset
from securetrees.net import trial as trial_module
from securetrees.net.operate import write_csv

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")  # 1024-bit trial keys

PUBLIC = ("run.toml", "pki/ca.pem", "pki/*.crt")
"""What a trial may leave readable by others: the shared configuration, the CA and the certificates."""


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """The usual umask (022): files not made private would be 0644, folders 0755."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def exposed(folder: Path) -> list[str]:
    """Every file below ``folder`` other than the public ones whose mode is not 0600, and every
    folder (``folder`` included) whose mode is not 0700, as ``"path mode"``."""
    found = [] if mode(folder) == 0o700 else [f". {mode(folder):o}"]
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_dir():
            want = 0o700
        elif any(rel.match(p) for p in PUBLIC):
            continue
        else:
            want = 0o600
        if mode(path) != want:
            found.append(f"{rel} {mode(path):o}")
    return found


def init(protocol: str, out: Path) -> Path:
    assert cli.main(["federation", "init", protocol, "--out", str(out), "--rows", "20", "--trees", "1",
                     "--insecure-1024"]) == 0
    return out


@pytest.mark.parametrize("protocol", sorted(plugins.registered(plugins.DEPLOYMENTS)))
def test_federation_init_writes_every_private_file_0600(protocol: str, tmp_path: Path) -> None:
    out = init(protocol, tmp_path / "trial")
    assert any((out / "data").iterdir())  # PSI and HybridTree keep no key file
    assert exposed(out) == []
    assert mode(out / "run.toml") == 0o644  # public files keep the default mode, as the spec says


def test_planted_tables_written_with_the_default_mode_are_found(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def as_before(path: str | Path, mode: str = "w", **kwargs: object) -> object:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return open(path, mode, **kwargs)  # the writer closes it

    monkeypatch.setattr(trial_module, "open_private", as_before)
    out = init("federated-forest", tmp_path / "trial")
    leaks = exposed(out)
    assert leaks and all(p.startswith("data/") and p.endswith(" 644") for p in leaks)


def test_helpers_make_private_files_and_folders(tmp_path: Path) -> None:
    os.umask(0)  # the modes are set explicitly, not left to the umask
    folder = private_dir(tmp_path / "a" / "b")
    assert (mode(tmp_path / "a"), mode(folder)) == (0o700, 0o700)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    write_private(shared / "new" / "x.bin", b"1")
    assert (mode(shared), mode(shared / "new"), mode(shared / "new" / "x.bin")) == (0o755, 0o700, 0o600)
    old = tmp_path / "old.log"
    old.write_text("before\n")
    old.chmod(0o644)
    with open_private(old, "a") as f:
        f.write("after\n")
    assert mode(old) == 0o600 and old.read_text() == "before\nafter\n"
    private_dir(shared)
    assert mode(shared) == 0o700  # the folder named private is narrowed
    with pytest.raises(ParameterError):
        open_private(tmp_path / "r", "r")


def test_logs_outputs_and_predictions_are_private(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "u1.log"
    try:
        configure("INFO", file=log)
    finally:
        reset()
    assert (mode(log.parent), mode(log)) == (0o700, 0o600)
    csv = write_csv(tmp_path / "preds" / "p.csv", {"proba": np.zeros((2, 2))})
    assert (mode(csv.parent), mode(csv)) == (0o700, 0o600)
    args = cli.build_parser().parse_args(["party", "--config", str(tmp_path / "run" / "run.toml"), "--role", "u1",
                                          "--passphrase-file", "x"])
    assert cli._log_file(args) == str(tmp_path / "run" / "logs" / "u1.log")
    assert mode(tmp_path / "run" / "logs") == 0o700  # the command line's default log folder
