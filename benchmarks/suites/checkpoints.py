"""Checkpoints (issue 28): the time a fit spends on its checkpoints, and their size.

* SecureBoost: the demo's vertical split of Adult (an active party with 5 columns, two passive
  parties with the other 9), the cached 1024-bit test key, a checkpoint per boosting round.
* Histogram forest: three clients of 10 × (SecureBoost's rows) synthetic rows each (four numeric
  features in [0, 10], two classes), fixed bins, secure aggregation, a checkpoint after the setup and
  after each tree.
* HybridTree: the synthetic hybrid rows of its tests (three host columns, three guest columns, as many
  rows as SecureBoost's, spread over three guests), host depth 2, guest depth 2, the cached
  1024-bit test key, a checkpoint per boosting round.
* RevFRF: the same Adult rows split over three participants, 512-bit test DT-PKC keys, the
  facade's ``checkpoint_dir`` (the CS after every layer, each participant before each reply).
* Federated Forest: the same Adult rows and split (three clients, the first holding the labels),
  ``encrypted`` labels under the cached 1024-bit test key, the facade's ``checkpoint_dir`` (every
  party after every tree; the clients' score-request journals).

Every party runs in this process on the in-process network; a fit with a checkpoint store per
party (sealed files in a temporary folder, ``specs/secureboost.md``, ``specs/histogram_forest.md``,
``specs/hybridtree.md`` and ``specs/revfrf.md``, "Checkpoints") and one without are interleaved so the
machine's load hits both alike.  Reported: the median wall-clock and CPU time of each (CPU time: this
process's, so not the encryption workers SecureBoost's key-owner mode may start), their ratios, and each
party's files after the fit.

``--quick``: 1000 rows, 3 rounds or trees, 3 repeats; else 4000 rows, 5 rounds or trees, 5 repeats.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from harness import Report, measure_interleaved

from securetrees.datasets import load_adult
from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.protocols.histogram_forest import checkpoint as hf_checkpoint
from securetrees.protocols.histogram_forest.client import Client
from securetrees.protocols.histogram_forest.server import ForestConfig, Server
from securetrees.protocols.hybridtree import Guest, Host, HybridTreeParams
from securetrees.protocols.hybridtree import checkpoint as ht_checkpoint
from securetrees.protocols.hybridtree.guest import agree_bins, guest_matrix
from securetrees.protocols.hybridtree.host import owners
from securetrees.protocols.hybridtree.testing import HybridData, hybrid_data
from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.protocols.secureboost import ActiveParty, PassiveParty, SecureBoostParams
from securetrees.protocols.secureboost.checkpoint import FORMAT
from securetrees.protocols.secureboost.demo import MAX_BINS, adult_partition
from securetrees.runtime import InProcessNetwork
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.testing.dtpkc import dtpkc_test_kgc
from securetrees.testing.paillier import small_keypair


def _fit(X: np.ndarray, y: np.ndarray, part: list[list[int]], params: SecureBoostParams, keys: Any,
         folder: Path | None) -> None:
    net = InProcessNetwork()
    names = [f"passive{u}" for u in range(len(part) - 1)]

    def store(name: str) -> CheckpointStore | None:
        return None if folder is None else CheckpointStore(folder, name, bytes(32), FORMAT)

    for name, cols in zip(names, part[1:], strict=True):
        PassiveParty(name, net, X=X[:, cols], allow_insecure=True, checkpoint=store(name))
    ActiveParty("active", net, X=X[:, part[0]], y=y, passives=names, params=params, keypair=keys,
                checkpoint=store("active")).fit()


def _hf_fit(parts: list[tuple[np.ndarray, np.ndarray]], config: ForestConfig, folder: Path | None) -> None:
    net = InProcessNetwork()
    names = [f"client{i}" for i in range(len(parts))]

    def store(name: str) -> CheckpointStore | None:
        return None if folder is None else CheckpointStore(folder, name, bytes(32), hf_checkpoint.FORMAT)

    for i, (name, (X, y)) in enumerate(zip(names, parts, strict=True)):
        Client(name, net, X, y, seed=i, checkpoint=store(name))
    Server("server", net, names, config, random_state=0, checkpoint=store("server")).train()


def _ht_fit(data: HybridData, params: HybridTreeParams, rounds: int, keys: Any, folder: Path | None) -> None:
    net = InProcessNetwork()
    names = [f"guest{u}" for u in range(len(data.guest_rows))]

    def store(name: str) -> CheckpointStore | None:
        return None if folder is None else CheckpointStore(folder, name, bytes(32), ht_checkpoint.FORMAT)

    gX = [guest_matrix(data.X[r], data.guest_features, data.guest_features) for r in data.guest_rows]
    bins = agree_bins(gX, max_bins=params.max_bins, categorical=[False, False, True])
    for name, rows, X in zip(names, data.guest_rows, gX, strict=True):
        Guest(name, net, params=params, ids=rows, X=X, mapper=bins, host_key=keys[0], checkpoint=store(name))
    Host("host", net, params=params, guests=names, X=data.X[:, data.host_features],
         owner=owners(len(data.y), data.guest_rows), keypair=keys, checkpoint=store("host")).fit(
        data.y, n_estimators=rounds)


def _table(report: Report, title: str, times: dict[str, Any], sizes: dict[str, int], key: str) -> None:
    table = report.table(title, ["run", "wall s", "CPU s"])
    for name, (wall, cpu) in times.items():
        table.add(f"{name} checkpoints", round(wall.median, 3), round(cpu.median, 3))
    ratio = times["with"][1].median / times["without"][1].median
    wall_ratio = times["with"][0].median / times["without"][0].median
    table.add("ratio with / without", round(wall_ratio, 4), round(ratio, 4))
    files = report.table(f"{key}: checkpoint files after the fit", ["file", "bytes"])
    for name, size in sizes.items():
        files.add(name, size)
    report.data[key] = {"cpu_ratio": ratio, "wall_ratio": wall_ratio, "bytes": sizes}


def _interleaved(fit: Any, repeats: int) -> tuple[dict[str, Any], dict[str, int]]:
    """Fits with and without checkpoints, interleaved, each fit with them in an emptied folder (a
    checkpoint folder holds one fit: a new fit over an earlier one's is refused); the files the last
    fit with them left."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        def with_checkpoints() -> None:
            for old in folder.iterdir():
                old.unlink()
            fit(folder)

        times = measure_interleaved({"without": lambda: fit(None), "with": with_checkpoints}, repeats=repeats)
        sizes = {p.name: p.stat().st_size for p in sorted(folder.iterdir())}
    return times, sizes


def run(report: Report, quick: bool) -> None:
    import warnings

    warnings.simplefilter("ignore")  # the 1024-bit test key
    rows, rounds, repeats = (1000, 3, 3) if quick else (4000, 5, 5)
    gen = np.random.default_rng(0)
    parts = []
    for _ in range(3):
        Xh = np.round(gen.uniform(0, 10, (10 * rows, 4)), 2)
        parts.append((Xh, ((Xh[:, 0] > 4) ^ (Xh[:, 1] > 6)).astype(np.int64)))
    config = ForestConfig(n_features=4, categories=(0, 0, 0, 0), n_classes=2, n_trees=rounds, max_depth=4, n_bins=16,
                          histogram="fixed", features_per_node=2, secure=True, low=np.zeros(4), high=np.full(4, 10.0))
    times, sizes = _interleaved(lambda folder: _hf_fit(parts, config, folder), repeats)
    _table(report, f"histogram forest fit with and without checkpoints ({30 * rows} rows, 3 clients, "
           f"{rounds} trees of depth 4, secure aggregation, median of {repeats})", times, sizes, "histogram_forest")
    data = load_adult()
    X, y = data.X_train[:rows], data.y_train[:rows].astype(np.float64)
    part = adult_partition(2, X.shape[1])
    params = SecureBoostParams(loss="logistic", n_classes=2, n_estimators=rounds, max_depth=3, learning_rate=0.3,
                               max_bins=MAX_BINS)
    keys = small_keypair(1024)
    times, sizes = _interleaved(lambda folder: _fit(X, y, part, params, keys, folder), repeats)
    _table(report, f"SecureBoost fit with and without checkpoints ({rows} rows, {rounds} rounds, 1024-bit key, "
           f"median of {repeats})", times, sizes, "secureboost")
    hybrid = hybrid_data(rows, 3, seed=0)
    ht_params = HybridTreeParams(host_depth=2, guest_depth=2, max_bins=16)
    times, sizes = _interleaved(lambda folder: _ht_fit(hybrid, ht_params, rounds, keys, folder), repeats)
    _table(report, f"HybridTree fit with and without checkpoints ({rows} rows, 3 guests, {rounds} rounds, "
           f"1024-bit key, median of {repeats})", times, sizes, "hybridtree")
    clf = RevFRFClassifier(n_estimators=rounds, max_depth=4, random_state=0, kgc_factory=lambda: dtpkc_test_kgc(512),
                           partition=[[0, 3, 6, 9, 12], [1, 4, 7, 10, 13], [2, 5, 8, 11]])

    def rev_fit(folder: Path | None) -> None:
        clf.set_params(checkpoint_dir=None if folder is None else str(folder)).fit(X, y)

    times, sizes = _interleaved(rev_fit, repeats)
    _table(report, f"RevFRF fit with and without checkpoints ({rows} rows, 3 participants, {rounds} trees of "
           f"depth 4, 512-bit test keys, median of {repeats})", times, sizes, "revfrf")
    forest = FederatedForestClassifier(n_estimators=rounds, max_depth=4, random_state=0, partition=part,
                                       label_protection="encrypted", paillier_keys=keys, allow_insecure=True,
                                       checkpoint_key=bytes(32))

    def ff_fit(folder: Path | None) -> None:
        forest.set_params(checkpoint_dir=None if folder is None else str(folder)).fit(X, y)

    times, sizes = _interleaved(ff_fit, repeats)
    _table(report, f"Federated Forest fit with and without checkpoints ({rows} rows, 3 clients, encrypted labels, "
           f"{rounds} trees of depth 4, a checkpoint per tree, 1024-bit key, median of {repeats})", times, sizes,
           "federated_forest")
