"""Resume after a private-set-intersection alignment (``securetrees.net.alignment``).

A party that keeps checkpoints seals its aligned rows and its data files' SHA-256 into its store's
``alignment`` slot; restarted, it takes its rows from there without serving the alignment phase,
and a data file that changed since is refused with :class:`DataChangedError` naming the file.
The planted companion is a record without digests: the changed file then passes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from securetrees.errors import DataChangedError, DecodeError
from securetrees.net import alignment
from securetrees.net.alignment import AlignmentPlan, AlignmentRecord, align_party, record_alignment, resumed_alignment
from securetrees.net.config import RunConfig, load_config
from securetrees.net.tables import party_tables
from securetrees.protocols.federated_forest import deploy as ff_deploy
from securetrees.protocols.federated_forest.checkpoint import CheckpointStore
from securetrees.protocols.federated_forest.client import Client
from securetrees.runtime import InProcessNetwork

KEY = b"\x09" * 32


def _trial(tmp: Path) -> RunConfig:
    X = np.arange(80, dtype=np.float64).reshape(20, 4)
    path = ff_deploy.prepare(tmp, X, np.arange(20) % 2, [[0, 1], [2, 3]], X_test=X[:6],
                             params={"n_classes": 2, "checkpoint_dir": "ckpt", "label_protection": "shared"},
                             lacking=2)
    return load_config(path)


def _store(config: RunConfig, role: str) -> CheckpointStore:
    return CheckpointStore(config.path.parent / "ckpt", role, KEY)


def _rows(config: RunConfig, role: str) -> dict[str, np.ndarray]:
    train, test = party_tables(config.party(role))
    assert test is not None
    return {"train": np.arange(len(train))[::-1].copy(), "test": np.arange(len(test))}


class NoNetwork(InProcessNetwork):
    """A restarted party with a record must not serve the alignment phase."""


def test_a_restarted_party_takes_its_recorded_rows_without_the_phase(tmp_path: Path) -> None:
    config = _trial(tmp_path)
    rows = _rows(config, "client1")
    record_alignment(_store(config, "client1"), config, "client1", rows)
    got = resumed_alignment(_store(config, "client1"), config, "client1")
    assert got is not None and all(np.array_equal(got[k], rows[k]) for k in rows)
    train, test = party_tables(config.party("client1"))
    plan = AlignmentPlan("client0", {"train": ("client0", "client1"), "test": ("client0", "client1")})
    # an in-process network: serve_alignment would refuse it ("runs over gRPC"), so no phase ran
    a, b = align_party(config, "client1", NoNetwork(), plan, train, test, _store(config, "client1"))
    assert a.ids == tuple(train.ids[i] for i in rows["train"]) and b is not None and b.ids == test.ids
    assert resumed_alignment(None, config, "client1") is None
    assert resumed_alignment(_store(config, "client0"), config, "client0") is None  # never aligned


def test_the_deployed_client_resumes_on_its_record(tmp_path: Path) -> None:
    """``make_role`` of a restarted Federated Forest client (``psi``) builds its role from the record."""
    config = _trial(tmp_path)
    rows = _rows(config, "client1")
    record_alignment(_store(config, "client1"), config, "client1", rows)
    role = ff_deploy.make_role("client1", config, InProcessNetwork(), {"checkpoint_key": KEY}, {}, b"")
    assert isinstance(role, Client)
    train, _ = party_tables(config.party("client1"))
    np.testing.assert_array_equal(role._X_raw, train.X[rows["train"]])


@pytest.mark.parametrize("which", ["data", "test_data"])
def test_a_changed_data_file_is_refused_naming_it(tmp_path: Path, which: str) -> None:
    config = _trial(tmp_path)
    record_alignment(_store(config, "client1"), config, "client1", _rows(config, "client1"))
    path = getattr(config.party("client1"), which)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n", 1))
    with pytest.raises(DataChangedError, match=str(path).replace("\\", "\\\\")):
        resumed_alignment(_store(config, "client1"), config, "client1")
    with pytest.raises(DataChangedError):
        ff_deploy.make_role("client1", config, InProcessNetwork(), {"checkpoint_key": KEY}, {}, b"")


def test_another_data_file_or_a_bad_record_is_refused(tmp_path: Path) -> None:
    config = _trial(tmp_path)
    record_alignment(_store(config, "client1"), config, "client1", _rows(config, "client1"))
    party = config.party("client1")
    moved = replace(config, parties={**config.parties, "client1": replace(party, test_data=None)})
    with pytest.raises(DataChangedError, match="other data files"):
        resumed_alignment(_store(config, "client1"), moved, "client1")
    train, test = party_tables(party)
    huge = {"train": np.array([len(train) + 5]), "test": np.arange(1)}
    record_alignment(_store(config, "client1"), config, "client1", huge)
    plan = AlignmentPlan("client0", {"train": ("client0", "client1")})
    with pytest.raises(DecodeError, match="do not fit"):
        align_party(config, "client1", NoNetwork(), plan, train, test, _store(config, "client1"))
    with pytest.raises(DecodeError):  # another party's key
        resumed_alignment(CheckpointStore(config.path.parent / "ckpt", "client1", b"\x01" * 32), config, "client1")


# ---------------------------------------------------------------------------- planted companion
def test_planted_a_record_without_digests_lets_a_changed_file_through(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    config = _trial(tmp_path)
    monkeypatch.setattr(alignment, "_digest", lambda path: b"")  # the leaky variant: nothing is hashed
    record_alignment(_store(config, "client1"), config, "client1", _rows(config, "client1"))
    data = config.party("client1").data
    assert data is not None
    data.write_bytes(data.read_bytes().replace(b"\n", b"\r\n", 1))
    assert resumed_alignment(_store(config, "client1"), config, "client1") is not None  # the check fails here


def test_the_record_is_a_stored_message_never_sent() -> None:
    assert not AlignmentRecord.sent_by
