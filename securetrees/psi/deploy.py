"""PSI as a networked run of its own: the alignment step before a vertical protocol's run.

Roles: the party named ``leader`` in ``[protocol]`` (role ``psi_leader``) and every other
party (role ``psi_member``), one process each over gRPC with mutual TLS; each party's ids are
the ``ids`` array of its own data file.  The operator (``securetrees.net.control``) sends:

* ``run`` (the leader): the PSI with every member; the reply holds the intersection's size only;
* ``save`` (every party): write its row permutation to ``out/NAME.rows.npy`` beside ``run.toml``
  (on its own machine; the operator never receives anyone's rows).

The operator's ``fit`` step (``securetrees operator fit``) is that alignment.  A new batch of
rows at prediction time is aligned by a new run of the same kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import NotFittedError, ParameterError
from securetrees.net.config import RunConfig
from securetrees.net.control import Controllable, ControlReply, Operator
from securetrees.net.deployment import output_path, save_output
from securetrees.net.trial import TrialPlan, write_trial
from securetrees.psi.messages import LEADER_ROLE, MEMBER_ROLE
from securetrees.psi.roles import DEFAULT_CHUNK_SIZE, DEFAULT_MAX_SET_SIZE, PsiLeader, PsiMember, PsiResult
from securetrees.runtime import Party
from securetrees.runtime.network import Network

__all__ = ["PARAMETERS", "ROLES", "DeployedLeader", "DeployedMember", "fit", "make_role", "prepare", "rows_path",
           "run_job", "trial"]

PARAMETERS = frozenset({"leader", "max_set_size", "chunk_size"})
"""The ``[protocol]`` keys of a PSI run."""

ROLES: Mapping[str, str | None] = {LEADER_ROLE: None, MEMBER_ROLE: None}
"""The roles of a PSI run (the leader, named in ``[protocol] leader``, and the members), each under
any name (``securetrees.net.config.check_roles``)."""


def rows_path(config: RunConfig, name: str) -> Path:
    """Where party ``name`` writes its row permutation (its own machine's copy of the run folder)."""
    return output_path(config, name, "rows.npy")


def _save(config: RunConfig, name: str, result: PsiResult | None) -> ControlReply:
    if result is None:
        raise NotFittedError(f"{name} has no PSI result yet")
    save_output(config, name, "rows", result.rows)
    return ControlReply(info={"rows": str(len(result.rows))})


class DeployedLeader(Controllable, PsiLeader):
    config: RunConfig
    result: PsiResult | None = None

    def control_run(self, args: dict[str, str]) -> ControlReply:
        self.result = self.run()
        return ControlReply(info={"size": str(len(self.result.rows))})

    def control_save(self, args: dict[str, str]) -> ControlReply:
        return _save(self.config, self.name, self.result)


class DeployedMember(Controllable, PsiMember):
    config: RunConfig

    def control_save(self, args: dict[str, str]) -> ControlReply:
        return _save(self.config, self.name, self.result)


def _ids(data: dict[str, npt.NDArray[Any]], role: str) -> list[Any]:
    if "ids" not in data:
        raise ParameterError(f"{role}'s data file has no 'ids' array")
    ids: list[Any] = np.asarray(data["ids"]).tolist()
    return ids


def make_role(role: str, config: RunConfig, network: Network, secrets: dict[str, bytes],
              data: dict[str, npt.NDArray[Any]], passphrase: bytes) -> Party:
    p = config.params
    leader = str(p["leader"])
    cap = int(p.get("max_set_size", DEFAULT_MAX_SET_SIZE))
    party: DeployedLeader | DeployedMember
    if role == leader:
        members = [n for n in config.roles if n != leader]
        party = DeployedLeader(role, network, _ids(data, role), members, max_set_size=cap,
                               chunk_size=int(p.get("chunk_size", DEFAULT_CHUNK_SIZE)))
    else:
        party = DeployedMember(role, network, _ids(data, role), max_set_size=cap)
    party.config = config
    return party


def fit(operator: Operator, config: RunConfig) -> dict[str, str]:
    """Run the PSI, then have every party save its rows; returns the intersection's size."""
    with operator.step("align"):
        size = operator.control(str(config.params["leader"]), "run").info["size"]
        operator.control_many(config.roles, "save")
    return {"size": size}


def run_job(operator: Operator, config: RunConfig) -> dict[str, npt.NDArray[Any]]:
    """:func:`fit`; returns the intersection's size."""
    return {"size": np.asarray(int(fit(operator, config)["size"]))}


def prepare(out_dir: str | Path, sets: dict[str, npt.ArrayLike], *, leader: str | None = None,
            params: dict[str, Any] | None = None, base_port: int = 0) -> Path:
    """A local trial: certificates, each party's ids in its own data file, ``run.toml``."""
    if len(sets) < 2:
        raise ParameterError("a private set intersection needs two or more parties")
    lead = leader if leader is not None else next(iter(sets))
    plan = TrialPlan(protocol="psi", params={**(params or {}), "leader": lead})
    for name, ids in sets.items():
        plan.add(name, role=LEADER_ROLE if name == lead else MEMBER_ROLE, data={"ids": np.asarray(ids)})
    return write_trial(out_dir, plan, base_port=base_port)


def trial(out_dir: str | Path, *, rows: int, trees: int, insecure: bool) -> Path:
    """``securetrees federation init psi``: three parties holding overlapping ranges of ``rows``
    integer ids (``trees`` and ``insecure`` do not apply)."""
    half = rows // 2
    return prepare(out_dir, {"p0": np.arange(0, rows), "p1": np.arange(half, half + rows),
                             "p2": np.arange(rows // 4, rows // 4 + rows)})
