"""Resume after a private-set-intersection alignment (``securetrees.net.alignment``).

A party that keeps checkpoints seals its aligned rows and its data files' SHA-256 into its store's
``alignment`` slot; restarted, it takes its rows from there without serving the alignment phase,
and a data file that changed since is refused with :class:`DataChangedError` naming the file.
The planted companion is a record without digests: the changed file then passes.

HybridTree aligns one id set per guest (``aligned_rows``): its host and guests take their rows from
their records as well, are refused on a changed table, and a restarted guest is built on its store,
so it keeps refusing another request for a tree, layer and attempt it answered before the restart
(planted companion: a deployment that builds the guest without its store answers it).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from securetrees.errors import DataChangedError, DecodeError, ProtocolError
from securetrees.net import alignment
from securetrees.net.alignment import AlignmentPlan, AlignmentRecord, align_party, record_alignment, resumed_alignment
from securetrees.net.config import RunConfig, load_config
from securetrees.net.deployment import checkpoint_store
from securetrees.net.tables import party_tables
from securetrees.protocols.federated_forest import deploy as ff_deploy
from securetrees.protocols.federated_forest.checkpoint import CheckpointStore
from securetrees.protocols.federated_forest.client import Client
from securetrees.protocols.hybridtree import deploy as ht_deploy
from securetrees.protocols.hybridtree import messages as ht_messages
from securetrees.protocols.hybridtree.checkpoint import FORMAT as HT_FORMAT
from securetrees.protocols.hybridtree.testing import hybrid_data
from securetrees.runtime import InProcessNetwork
from securetrees.runtime.checkpoint import CheckpointStore as SealedStore

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


# ---------------------------------------------------------------------------- HybridTree
# One PSI per guest and id set (``train:guestU``, ``test:guestU``): the host records every set, a
# guest its own two; both take them from ``aligned_rows`` when restarted.
HT_GUESTS = ("guest0", "guest1", "guest2")
PLAINTEXT = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")
"""The HybridTree trial runs in plaintext mode (no key pair to make: the keys are not the point)."""


def _ht_trial(tmp: Path) -> RunConfig:
    d = hybrid_data(60, 3, seed=1)
    path = ht_deploy.prepare(tmp, d.X, d.y, d.host_features, d.guest_features, d.guest_rows, X_test=d.X[:30],
                             test_rows=[r[r < 30] for r in d.guest_rows], lacking=2,
                             params={"mode": "plaintext", "allow_insecure": True, "min_node_size": 0,
                                     "checkpoint_dir": "ckpt"})
    return load_config(path)


def _ht_store(config: RunConfig, role: str) -> SealedStore:
    """The store the deployment opens for ``role`` (``[protocol] checkpoint_dir``, its key file's key)."""
    store = checkpoint_store(config, role, {"checkpoint_key": KEY}, HT_FORMAT)
    assert store is not None
    return store


def _ht_rows(config: RunConfig, role: str) -> dict[str, np.ndarray]:
    """Rows as the phase would give them: the host's split disjointly among the guests."""
    train, test = party_tables(config.party(role))
    assert test is not None
    if role != ht_deploy.HOST:
        return {f"train:{role}": np.arange(len(train))[::-1].copy(), f"test:{role}": np.arange(len(test))}
    rows = {}
    for kind, n in (("train", len(train)), ("test", len(test))):
        for g, r in zip(HT_GUESTS, np.array_split(np.arange(n)[::-1], 3), strict=True):
            rows[f"{kind}:{g}"] = r.copy()
    return rows


def _ht_role(config: RunConfig, role: str) -> Any:
    """``make_role`` of a restarted HybridTree party: an in-process network, on which the phase
    would be refused (it runs over gRPC), so the role comes from its record or not at all."""
    return ht_deploy.make_role(role, config, NoNetwork(), {"checkpoint_key": KEY}, {}, b"")


@PLAINTEXT
def test_a_restarted_hybridtree_party_takes_its_recorded_rows(tmp_path: Path) -> None:
    config = _ht_trial(tmp_path)
    for role in (ht_deploy.HOST, "guest1"):
        record_alignment(_ht_store(config, role), config, role, _ht_rows(config, role))
    host = _ht_role(config, ht_deploy.HOST)
    rows = _ht_rows(config, ht_deploy.HOST)
    train, _ = party_tables(config.party(ht_deploy.HOST))
    order, _ = ht_deploy.arrange(len(train), [rows[f"train:{g}"] for g in HT_GUESTS])
    np.testing.assert_array_equal(host.y, np.asarray(train.labels).astype(str)[order])
    guest = _ht_role(config, "guest1")
    mine, theirs = party_tables(config.party("guest1"))
    space = ht_deploy.guest_space(config.params, host.params.max_bins)
    np.testing.assert_array_equal(guest._X, ht_deploy._in_space(mine.take(_ht_rows(config, "guest1")["train:guest1"]),
                                                                space))
    assert theirs is not None and guest.test is not None and guest.test[0].size == len(theirs)


def _tree0(guest: Any) -> None:
    """The host's set-up and tree 0's (empty) gradients, as a resumed host sends them again."""
    guest.on_setup(ht_deploy.HOST, ht_messages.Setup(b"\x01" * 16, b"", HT_GUESTS, "plaintext"))
    guest.on_gradients(ht_deploy.HOST, ht_messages.Gradients(0, ()))


def _request(n_sets: int) -> Any:
    return ht_messages.HistogramRequest(0, 1, 0, HT_GUESTS, n_sets, ())


def _restarted_guest(tmp_path: Path) -> Any:
    """A deployed guest that answered tree 0's first request, built again from its store (restarted)
    and at tree 0 again."""
    config = _ht_trial(tmp_path)
    record_alignment(_ht_store(config, "guest0"), config, "guest0", _ht_rows(config, "guest0"))
    guest = _ht_role(config, "guest0")
    _tree0(guest)
    guest.on_histogram(ht_deploy.HOST, _request(1))
    restarted = _ht_role(config, "guest0")
    _tree0(restarted)
    return restarted


@PLAINTEXT
def test_a_restarted_hybridtree_guest_keeps_its_journal(tmp_path: Path) -> None:
    guest = _restarted_guest(tmp_path)
    with pytest.raises(ProtocolError, match="answered once"):  # another request for an answered layer
        guest.on_histogram(ht_deploy.HOST, _request(2))
    guest.on_histogram(ht_deploy.HOST, _request(1))  # a resumed host repeats it byte for byte


@PLAINTEXT
def test_planted_a_deployment_that_builds_the_guest_without_its_store_answers_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Storeless(ht_deploy.DeployedGuest):
        """The leaky variant: its aligned rows are recorded, but the guest gets no store."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "checkpoint": None})

    monkeypatch.setattr(ht_deploy, "DeployedGuest", Storeless)
    guest = _restarted_guest(tmp_path)
    guest.on_histogram(ht_deploy.HOST, _request(2))  # answered: the check fails here


@PLAINTEXT
@pytest.mark.parametrize(("role", "which"), [("host", "data"), ("guest2", "test_data")])
def test_a_changed_hybridtree_table_is_refused_naming_it(tmp_path: Path, role: str, which: str) -> None:
    config = _ht_trial(tmp_path)
    record_alignment(_ht_store(config, role), config, role, _ht_rows(config, role))
    path = getattr(config.party(role), which)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n", 1))
    with pytest.raises(DataChangedError, match=str(path).replace("\\", "\\\\")):
        _ht_role(config, role)
