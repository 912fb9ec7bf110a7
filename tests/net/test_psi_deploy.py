"""PSI as a networked run of its own (``securetrees.psi.deploy``): every role on its own gRPC
network with mutual TLS, built from the trial's files, driven by the operator's job."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees.errors import NotFittedError, ParameterError
from securetrees.net.config import load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.service import load_data, network_for
from securetrees.psi import deploy


def test_three_parties_align_over_mutual_tls(tmp_path: Path) -> None:
    sets = {"p0": [f"id{i}" for i in range(0, 60)], "p1": [f"id{i}" for i in range(80, 20, -1)],
            "p2": [f"id{i}" for i in range(10, 50)] + ["zz"]}
    cfg = load_config(deploy.prepare(tmp_path, sets, params={"chunk_size": 8}))
    nets = []
    try:
        for role in cfg.roles:
            net = network_for(cfg, role, read_passphrase(role, tmp_path / "pki" / f"{role}.pass"))
            deploy.make_role(role, cfg, net, {}, load_data(cfg.party(role).data), b"")
            net.start()
            nets.append(net)
        with network_for(cfg, cfg.operator, read_passphrase("operator", tmp_path / "pki" / "operator.pass")) as on:
            op = Operator(cfg.operator, on)
            with pytest.raises(NotFittedError):  # nothing to save before the run
                op.control("p1", "save")
            out = deploy.run_job(op, cfg)
    finally:
        for net in nets:
            net.close()
    assert int(out["size"]) == 29  # id21 .. id49
    seen = {n: [sets[n][i] for i in np.load(deploy.rows_path(cfg, n), allow_pickle=False)] for n in sets}
    assert seen["p0"] == seen["p1"] == seen["p2"]
    assert set(seen["p0"]) == {f"id{i}" for i in range(21, 50)} and len(seen["p0"]) == 29


def test_a_party_without_ids_is_refused(tmp_path: Path) -> None:
    cfg = load_config(deploy.prepare(tmp_path, {"a": [1, 2], "b": [2, 3]}))
    with pytest.raises(ParameterError):
        deploy.make_role("b", cfg, None, {}, {}, b"")  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        deploy.prepare(tmp_path / "x", {"a": [1]})
