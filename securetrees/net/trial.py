"""A local trial federation on loopback: every file a networked run needs, in one folder.

``run.toml`` (the shared configuration), ``pki/`` (a test CA, each party's
certificate and passphrase-encrypted TLS key, and — for the trial only — each
party's passphrase in ``NAME.pass``), ``keys/NAME.keys`` (each party's sealed
secrets) and ``data/NAME.npz`` (each party's own data).  Protocols fill a
:class:`TrialPlan`; :func:`write_trial` writes it.  A real federation makes the
same files on each organisation's own machine (``specs/deployment.md``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.net.config import dump_toml
from securetrees.net.control import OPERATOR_ROLE
from securetrees.net.keyfile import write_key_file
from securetrees.net.tls import check_name, fingerprint, make_test_pki
from securetrees.rand import SYSTEM_RANDOM
from securetrees.runtime.messages import check_role

__all__ = ["Secret", "TrialPlan", "free_ports", "write_trial"]

Secret = bytes | Callable[[bytes], bytes]
"""A key-file item: bytes, or a function of the party's passphrase (for a key sealed in its own format)."""


@dataclass
class TrialPlan:
    protocol: str
    params: dict[str, Any]
    operator: str = "operator"
    data: dict[str, Mapping[str, npt.NDArray[Any]]] = field(default_factory=dict)
    secrets: dict[str, Mapping[str, Secret]] = field(default_factory=dict)
    roles: list[str] = field(default_factory=list)
    """The parties' names, in the order added."""
    role_of: dict[str, str] = field(default_factory=dict)
    """Each party's protocol role (``run.toml``'s ``role``)."""

    def add(self, name: str, *, role: str, data: Mapping[str, npt.NDArray[Any]] | None = None,
            secrets: Mapping[str, Secret] | None = None) -> None:
        check_name(name)
        if name in self.roles or name == self.operator:
            raise ParameterError(f"party {name!r} added twice")
        if check_role(role) == OPERATOR_ROLE:
            raise ParameterError(f"the role {OPERATOR_ROLE!r} belongs to the run's operator")
        self.roles.append(name)
        self.role_of[name] = role
        if data:
            self.data[name] = data
        if secrets:
            self.secrets[name] = secrets


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` ports the OS reports free on ``host`` now (a trial's addresses)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_trial(out_dir: str | Path, plan: TrialPlan, *, base_port: int = 0, host: str = "127.0.0.1",
                deadline: float = 600.0) -> Path:
    """Write the trial's files into ``out_dir``; returns the path of ``run.toml``."""
    out = Path(out_dir)
    for sub in ("pki", "keys", "data"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    names = [*plan.roles, plan.operator]
    passphrases = {n: SYSTEM_RANDOM.token_bytes(24).hex().encode() for n in names}
    for n, pw in passphrases.items():
        f = out / "pki" / f"{n}.pass"
        f.write_bytes(pw + b"\n")
        f.chmod(0o600)
    make_test_pki(names, out / "pki", passphrases)
    issuer = fingerprint((out / "pki" / "ca.pem").read_bytes())  # one CA issues every name of a trial
    ports = [base_port + i for i in range(len(names))] if base_port else free_ports(len(names), host)
    parties: dict[str, Any] = {}
    for n, port in zip(names, ports, strict=True):
        entry: dict[str, Any] = {"role": plan.role_of.get(n, OPERATOR_ROLE), "address": f"{host}:{port}",
                                 "cert": f"pki/{n}.crt", "key": f"pki/{n}.key", "issuer": issuer}
        items = plan.secrets.get(n)
        if items:
            opened = {k: (v(passphrases[n]) if callable(v) else v) for k, v in items.items()}
            write_key_file(out / "keys" / f"{n}.keys", n, opened, passphrases[n])
            entry["secrets"] = f"keys/{n}.keys"
        arrays = plan.data.get(n)
        if arrays:
            np.savez(out / "data" / f"{n}.npz", **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
            entry["data"] = f"data/{n}.npz"
        parties[n] = entry
    run = {"protocol": plan.protocol, "operator": plan.operator, "deadline": deadline}
    doc: dict[str, dict[str, Any]] = {"run": run, "tls": {"ca": "pki/ca.pem"}, "protocol": plan.params,
                                      "parties": parties}
    path = out / "run.toml"
    path.write_text(dump_toml(doc), encoding="utf-8")
    return path
