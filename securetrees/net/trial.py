"""A local trial federation on loopback: every file a networked run needs, in one folder.

``run.toml`` (the shared configuration), ``pki/`` (a test CA, each party's
certificate and passphrase-encrypted TLS key, and — for the trial only — each
party's passphrase in ``NAME.pass``), ``keys/NAME.keys`` (each party's sealed
secrets) and ``data/NAME.csv`` (each party's own table, and ``data/NAME-test.csv`` its rows to
predict; or ``data/NAME.npz``, arrays).  Protocols fill a
:class:`TrialPlan`; :func:`write_trial` writes it.  A real federation makes the
same files on each organisation's own machine (``specs/deployment.md``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.files import open_private, private_dir, write_private
from securetrees.net.config import dump_toml
from securetrees.net.control import OPERATOR_ROLE
from securetrees.net.keyfile import write_key_file
from securetrees.net.tls import check_name, fingerprint, make_test_pki
from securetrees.psi.roles import random_permutation
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime.messages import check_role

__all__ = ["Secret", "TrialPlan", "deal_rows", "free_ports", "table_frame", "vertical_tables", "write_trial"]

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
    tables: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """Each party's tables (DataFrames) by configuration key: ``data``, ``test_data``."""
    options: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """Each party's further configuration keys (``id_column``, ``label``, ``categories`` ...)."""

    def add(self, name: str, *, role: str, data: Mapping[str, npt.NDArray[Any]] | None = None,
            secrets: Mapping[str, Secret] | None = None, tables: Mapping[str, Any] | None = None,
            options: Mapping[str, Any] | None = None) -> None:
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
        if tables:
            if data or set(tables) - {"data", "test_data"}:
                raise ParameterError("a party's tables are its data and test_data (and then no arrays)")
            self.tables[name] = tables
        if options:
            self.options[name] = options


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
    """Write the trial's files into ``out_dir``; returns the path of ``run.toml``.

    Every party's data, keys, TLS keys and passphrases are readable by their owner only (files
    0600, the folders made here 0700, :mod:`securetrees.files`); the public files (``run.toml``,
    ``pki/ca.pem``, ``pki/NAME.crt``) keep the process's default mode."""
    out = Path(out_dir)
    for sub in ("pki", "keys", "data"):
        private_dir(out / sub)
    names = [*plan.roles, plan.operator]
    passphrases = {n: SYSTEM_RANDOM.token_bytes(24).hex().encode() for n in names}
    for n, pw in passphrases.items():
        write_private(out / "pki" / f"{n}.pass", pw + b"\n")
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
            with open_private(out / "data" / f"{n}.npz", "wb") as f:
                np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
            entry["data"] = f"data/{n}.npz"
        for key, frame in plan.tables.get(n, {}).items():
            file = f"data/{n}.csv" if key == "data" else f"data/{n}-test.csv"
            with open_private(out / file, "w", newline="", encoding="utf-8") as f:
                frame.to_csv(f, index=False)
            entry[key] = file
        entry.update(plan.options.get(n, {}))
        parties[n] = entry
    run = {"protocol": plan.protocol, "operator": plan.operator}
    doc: dict[str, dict[str, Any]] = {"run": run, "transport": {"deadline": deadline}, "tls": {"ca": "pki/ca.pem"},
                                      "protocol": plan.params, "parties": parties}
    path = out / "run.toml"
    path.write_text(dump_toml(doc), encoding="utf-8")
    return path


def deal_rows(n: int, names: Sequence[str], *, lacking: int, rng: RandomSource = SYSTEM_RANDOM
              ) -> dict[str, npt.NDArray[np.int64]]:
    """Each party's rows of an ``n``-row table, shuffled: all but ``lacking`` rows of its own
    choosing, so every party holds ids that some other party lacks (a trial where the private
    set intersection matters)."""
    if lacking < 0 or lacking * len(names) >= n:
        raise ParameterError("lacking must leave rows every party holds")
    spare = random_permutation(n, rng)[: lacking * len(names)]
    out = {}
    for i, name in enumerate(names):
        dropped = set(spare[i * lacking:(i + 1) * lacking].tolist())
        keep = np.asarray([r for r in range(n) if r not in dropped], dtype=np.int64)
        out[name] = keep[random_permutation(keep.size, rng)]
    return out


def table_frame(ids: Sequence[str], X: npt.ArrayLike, names: Sequence[str], *,
                categories: Mapping[str, Sequence[str]] | None = None, label: tuple[str, Sequence[Any]] | None = None,
                id_column: str = "id") -> Any:
    """A party's table as a DataFrame: the id column, the features (a column in ``categories``
    holds codes, written as their category names; NaN is an empty cell), then the label."""
    import pandas as pd

    Xa = np.asarray(X, dtype=np.float64)
    cats = categories or {}
    cols: dict[str, Any] = {id_column: list(ids)}
    for j, name in enumerate(names):
        v = Xa[:, j]
        cols[name] = ([None if np.isnan(c) else cats[name][int(c)] for c in v] if name in cats else v)
    if label is not None:
        cols[label[0]] = list(label[1])
    return pd.DataFrame(cols)


def vertical_tables(ids: Sequence[str], test_ids: Sequence[str], X: npt.ArrayLike, X_test: npt.ArrayLike,
                    rows: npt.ArrayLike, test_rows: npt.ArrayLike, columns: Sequence[int], names: Sequence[str], *,
                    categories: Mapping[str, Sequence[str]] | None = None,
                    labels: npt.ArrayLike | None = None) -> tuple[dict[str, Any], dict[str, Sequence[str]]]:
    """A vertical party's trial tables, ``data`` and ``test_data``: its ``columns`` of ``X`` and
    ``X_test`` (named ``names[j]``) on its ``rows`` and ``test_rows``, with ``labels`` (one per row of
    ``X``) as the training table's ``label`` column when given; also the categories of its columns."""
    Xa, Xt = np.asarray(X, dtype=np.float64), np.asarray(X_test, dtype=np.float64)
    c, r, rt = list(columns), np.asarray(rows, dtype=np.int64), np.asarray(test_rows, dtype=np.int64)
    mine = [names[j] for j in c]
    cats = {n: v for n, v in (categories or {}).items() if n in mine}
    label = None if labels is None else ("label", np.asarray(labels)[r].tolist())
    return ({"data": table_frame([ids[k] for k in r], Xa[r][:, c], mine, categories=cats, label=label),
             "test_data": table_frame([test_ids[k] for k in rt], Xt[rt][:, c], mine, categories=cats)}, cats)
