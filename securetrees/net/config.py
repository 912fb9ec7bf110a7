"""The run configuration every party of a networked federation shares (TOML).

::

    [run]
    protocol = "revfrf"            # which protocol module serves the roles
    operator = "operator"          # the only identity allowed to send control requests (role "operator")
    job = "fit"                    # or "predict": load each party's model part, predict only
    model_dir = "models"           # where each party keeps its model part (NAME.model)
    assumption = "the CS and the CC do not collude; ..."   # informative: the protocol's non-collusion
                                   # assumption (securetrees.net.collusion), written by `securetrees setup run`

    [transport]                    # optional: any field of TransportOptions, each role's and the operator's
    deadline = 600.0               # seconds per call
    max_message_bytes = 268435456  # 256 MiB: the largest message sent or accepted

    [tls]
    ca = "pki/ca.pem"              # the CA bundle: one CA, or several (e.g. one per organisation)

    [parties.cs]
    role = "cs"                    # the protocol role: what may this party send to whom
    address = "127.0.0.1:50101"
    cert = "pki/cs.crt"
    key = "pki/cs.key"             # PKCS#8, encrypted under the party's passphrase
    secrets = "keys/cs.keys"       # protocol secrets, sealed under the same passphrase
    data = "data/cs.csv"           # this party's own data (optional): CSV or Parquet with an id
                                   # column (securetrees.net.tables: test_data, id_column, label,
                                   # columns, categories, features, drop), or arrays (.npz)
    organisation = "bank-a"        # optional: who hosts the party; one organisation may not host two
                                   # roles the protocol's non-collusion assumption holds apart
    issuer = "4c…"                 # the CA allowed to issue "cs" (SHA-256 of its DER); required
                                   # when ca.pem holds several CAs
    fingerprint = "9f…"            # optional: pin the certificate (SHA-256 of its DER)

    [protocol]                     # the protocol's public parameters, same for every party
    n_estimators = 10

The ``[transport]`` keys are :class:`~securetrees.net.transport.TransportOptions`' fields (integers
where the field is one, numbers otherwise), checked by its own rules; ``deadline``, ``retries``,
``backoff`` and ``keepalive`` (``keepalive_seconds``) are also read from ``[run]``, where files
written before ``[transport]`` existed give them, but not from both tables at once.
Every section is checked against the keys its reader knows: an unknown key (a typo, a secret
put in the file) is refused with :class:`~securetrees.errors.UnknownKeyError`, which names
the key, its section, the allowed keys and the closest one.  The ``[protocol]`` section's keys
are the deployment module's ``PARAMETERS`` (``specs/deployment.md``).

Every party but the operator names its ``role``; the operator's role is ``operator``
and no other party may claim it.  The roles are the deployment module's ``ROLES``: a role the
protocol does not have is refused, and so is a party of a single-party role (SecureBoost's
``active``, HybridTree's ``host``, a server) under another name than the role's own, which the
other roles address it by (:func:`check_roles`).  Each process admits a message only from a party whose
role the message's type declares as a sender (``specs/runtime.md``).
Relative paths are read from the configuration file's folder.  No secret is
ever read from the configuration: passphrases come from a file, the
``SECURETREES_PASSPHRASE`` environment variable or a prompt (:func:`read_passphrase`).
"""

from __future__ import annotations

import difflib
import getpass
import os
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

import tomli_w

from securetrees import plugins
from securetrees.errors import ParameterError, TypeMismatchError, UnknownKeyError
from securetrees.net.collusion import check_layout
from securetrees.net.control import OPERATOR_ROLE
from securetrees.net.tls import check_fingerprint, check_name
from securetrees.net.transport import Peer, TransportOptions
from securetrees.runtime.messages import check_role

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["JOBS", "PARTY_KEYS", "RUN_KEYS", "SECTIONS", "TLS_KEYS", "TRANSPORT_KEYS", "PartyConfig", "RunConfig",
           "check_keys", "check_roles", "dump_toml", "load_config", "parse_config", "protocol_parameters",
           "protocol_roles", "read_passphrase", "transport_options"]

PASSPHRASE_ENV = "SECURETREES_PASSPHRASE"  # noqa: S105 - the variable's name, not a secret

SECTIONS: Final = frozenset({"run", "tls", "parties", "protocol", "transport"})
"""The tables a run configuration may hold."""
_RUN_TRANSPORT: Final = {"deadline": "deadline", "retries": "retries", "backoff": "backoff",
                         "keepalive": "keepalive_seconds"}
"""``[run]`` keys read as ``[transport]`` ones (their older place), by their ``TransportOptions`` field."""
RUN_KEYS: Final = frozenset({"protocol", "operator", "job", "model_dir", "assumption", *_RUN_TRANSPORT})
TRANSPORT_KEYS: Final = frozenset(f.name for f in fields(TransportOptions))
"""``[transport]``: every field of :class:`~securetrees.net.transport.TransportOptions`."""
_INT_FIELDS: Final = frozenset(f.name for f in fields(TransportOptions) if f.type == "int")
JOBS: Final = ("fit", "predict")
"""``[run] job``: train (the default; each party saves its model part), or load those parts and
predict only (``securetrees.net.models``)."""
TLS_KEYS: Final = frozenset({"ca"})
_TABLE_KEYS = ("id_column", "label", "columns", "categories", "features", "drop")
PARTY_KEYS: Final = frozenset({"role", "address", "cert", "key", "secrets", "data", "fingerprint", "issuer",
                               "test_data", "organisation", *_TABLE_KEYS})
"""The keys of a roster entry (no secret: passphrases never go in the configuration)."""


def check_keys(table: Mapping[str, Any], allowed: Collection[str], section: str, where: str) -> None:
    """Refuse the first key of ``table`` (in sorted order) that is not in ``allowed`` with
    :class:`UnknownKeyError` naming it, ``section`` (``""``: the top level), the allowed keys
    and the closest of them."""
    unknown = sorted(set(table) - set(allowed))
    if not unknown:
        return
    key = unknown[0]
    close = difflib.get_close_matches(key, sorted(allowed), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    more = f" and {len(unknown) - 1} more" if len(unknown) > 1 else ""
    place = f"in [{section}]" if section else "at the top level"
    raise UnknownKeyError(f"{where}: unknown key {key!r}{more} {place}{hint}; "
                          f"allowed keys: {', '.join(sorted(allowed)) or '(none)'}")


def protocol_parameters(protocol: str) -> frozenset[str]:
    """The ``[protocol]`` keys deployment ``protocol`` reads: its module's ``PARAMETERS``."""
    module = plugins.load_deployment(protocol)
    declared = getattr(module, "PARAMETERS", None)
    if not isinstance(declared, (frozenset, set)) or not all(isinstance(k, str) for k in declared):
        raise TypeMismatchError(f"deployment {protocol!r} ({module.__name__}) declares no PARAMETERS "
                                "(a frozenset of the [protocol] keys it reads; specs/deployment.md)")
    return frozenset(declared)


def protocol_roles(protocol: str) -> Mapping[str, str | None]:
    """The roles of deployment ``protocol``: its module's ``ROLES``, each role mapped to the name
    its one party must carry (``None``: any number of parties, each under its own name)."""
    module = plugins.load_deployment(protocol)
    declared = getattr(module, "ROLES", None)
    if not isinstance(declared, Mapping) or not all(
            isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in declared.items()):
        raise TypeMismatchError(f"deployment {protocol!r} ({module.__name__}) declares no ROLES "
                                "(a mapping of its roles to the fixed name of a single-party role, else None; "
                                "specs/deployment.md)")
    return declared


def check_roles(protocol: str, roles: Mapping[str, str], where: str) -> None:
    """Refuse (:class:`ParameterError`) a party, operator aside, whose role ``protocol``'s deployment
    does not have, or whose role is a single-party one (:func:`protocol_roles`) and its name not the
    role's: the other roles address that party by that name.  ``roles`` maps names to roles."""
    declared = protocol_roles(protocol)
    for name, role in sorted(roles.items()):
        if role == OPERATOR_ROLE:
            continue
        if role not in declared:
            close = difflib.get_close_matches(role, sorted(declared), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ParameterError(f"{where}: party {name!r} has the role {role!r}, which a {protocol} run does not "
                                 f"have{hint}; its roles: {', '.join(sorted(declared))}")
        fixed = declared[role]
        if fixed is not None and name != fixed:
            raise ParameterError(
                f"{where}: a {protocol} run's {role} party is named {fixed!r}, not {name!r} (the other roles "
                f"address it by that name); name it {fixed!r} and give its organisation in organisation = ... "
                f"(setup run: --party name={fixed},role={role},organisation=...)")


@dataclass(frozen=True)
class PartyConfig:
    name: str
    role: str
    address: str
    cert: Path
    key: Path
    secrets: Path | None = None
    data: Path | None = None
    fingerprint: str | None = None
    issuer: str | None = None
    test_data: Path | None = None
    table: dict[str, Any] = field(default_factory=dict)
    """How to read the data table: ``id_column``, ``label``, ``columns``, ``categories``, ``features``, ``drop``."""
    organisation: str | None = None
    """Who hosts the party (``securetrees.net.collusion`` checks the protocol's assumption)."""
    run_labels: tuple[str, ...] = ()
    """The label column names of the run's parties (``label`` of their sections), sorted: another
    party's label name is no feature of this party's unless it lists it (``securetrees.net.tables``)."""



@dataclass(frozen=True)
class RunConfig:
    path: Path
    protocol: str
    operator: str
    ca: Path
    parties: dict[str, PartyConfig]
    transport: TransportOptions
    params: dict[str, Any] = field(default_factory=dict)
    job: str = "fit"
    """``fit`` (train, then save each party's model part) or ``predict`` (load the parts, predict)."""
    models: Path | None = None
    """``[run] model_dir``: where each party keeps its model part (default ``models/`` beside the file)."""

    @property
    def model_dir(self) -> Path:
        return self.models if self.models is not None else self.path.parent / "models"

    def roster(self) -> dict[str, Peer]:
        return {n: Peer(p.address, p.fingerprint, p.issuer, p.role) for n, p in self.parties.items()}

    def party(self, name: str) -> PartyConfig:
        p = self.parties.get(name)
        if p is None:
            raise ParameterError(f"no party {name!r} in {self.path}; the roster is {sorted(self.parties)}")
        return p

    @property
    def roles(self) -> list[str]:
        """Every party but the operator (the processes a launcher starts)."""
        return [n for n in self.parties if n != self.operator]


def transport_options(run: Mapping[str, Any], table: Mapping[str, Any], where: str) -> TransportOptions:
    """The transport options of ``[transport]`` (``table``) and ``[run]``'s older keys; an unknown key
    is refused with :class:`UnknownKeyError`, a value of the wrong type or out of range (the rules of
    :class:`~securetrees.net.transport.TransportOptions`) with :class:`ParameterError`."""
    check_keys(table, TRANSPORT_KEYS, "transport", where)
    values = {_RUN_TRANSPORT[k]: v for k, v in run.items() if k in _RUN_TRANSPORT}
    both = sorted(set(values) & set(table))
    if both:
        raise ParameterError(f"{where}: {both[0]} is given in [run] and in [transport]; keep the [transport] one")
    values.update(table)
    for key, value in sorted(values.items()):
        kind = "an integer" if key in _INT_FIELDS else "a number"
        numeric = isinstance(value, int) or (key not in _INT_FIELDS and isinstance(value, float))
        if isinstance(value, bool) or not numeric:
            raise ParameterError(f"{where}: [transport] {key} must be {kind}, not {value!r}")
    try:
        given: dict[str, Any] = {k: v if k in _INT_FIELDS else float(v) for k, v in values.items()}
        return TransportOptions(**given)
    except OverflowError:
        raise ParameterError(f"{where}: [transport]: a value is too large") from None
    except ParameterError as exc:
        raise ParameterError(f"{where}: [transport]: {exc}") from None


def _table(doc: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    v = doc.get(key)
    if not isinstance(v, dict):
        raise ParameterError(f"{where}: missing table [{key}]")
    return v


def _str(t: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    v = t.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v:
        raise ParameterError(f"{where}: {key} must be a non-empty string")
    return v


def load_config(path: str | Path) -> RunConfig:
    """Read and check a run configuration; :class:`ParameterError` names what is wrong."""
    p = Path(path).resolve()
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ParameterError(f"{p} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ParameterError(f"cannot read {p}: {exc}") from exc
    return parse_config(text, p)


def parse_config(text: str, path: str | Path) -> RunConfig:
    """Check the text of a run configuration meant to be the file ``path`` (which need not exist
    yet: relative paths are read from its folder, and every message names it)."""
    p = Path(path).resolve()
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ParameterError(f"{p} is not valid TOML: {exc}") from exc
    except RecursionError:  # the parser recurses once per nested array or inline table
        raise ParameterError(f"{p} nests too deeply") from None
    base = p.parent
    check_keys(doc, SECTIONS, "", str(p))
    run = _table(doc, "run", str(p))
    tls = _table(doc, "tls", str(p))
    parties_doc = _table(doc, "parties", str(p))
    check_keys(run, RUN_KEYS, "run", str(p))
    check_keys(tls, TLS_KEYS, "tls", str(p))
    transport_doc = doc.get("transport", {})
    if not isinstance(transport_doc, dict):
        raise ParameterError(f"{p}: [transport] must be a table")
    transport = transport_options(run, transport_doc, str(p))

    def path_of(t: Mapping[str, Any], key: str, where: str, required: bool = True) -> Path | None:
        s = _str(t, key, where, required=required)
        return None if s is None else (base / s).resolve()

    parties: dict[str, PartyConfig] = {}
    for name, t in parties_doc.items():
        where = f"{p} [parties.{name}]"
        check_name(name)
        if not isinstance(t, dict):
            raise ParameterError(f"{where} must be a table")
        check_keys(t, PARTY_KEYS, f"parties.{name}", str(p))
        cert, key = path_of(t, "cert", where), path_of(t, "key", where)
        if cert is None or key is None:  # pragma: no cover - required
            raise ParameterError(f"{where}: cert and key are required")
        role = t.get("role", OPERATOR_ROLE if name == run.get("operator") else None)
        check_role(role, f"{where}:")
        if (role == OPERATOR_ROLE) != (name == run.get("operator")):
            raise ParameterError(f"{where}: the role {OPERATOR_ROLE!r} belongs to the run's operator, and only to it")
        pin, issuer = (_str(t, k, where, required=False) for k in ("fingerprint", "issuer"))
        parties[name] = PartyConfig(name, str(role), str(_str(t, "address", where)), cert, key,
                                    path_of(t, "secrets", where, False), path_of(t, "data", where, False),
                                    None if pin is None else check_fingerprint(pin, f"{where} fingerprint"),
                                    None if issuer is None else check_fingerprint(issuer, f"{where} issuer"),
                                    path_of(t, "test_data", where, False), {k: t[k] for k in _TABLE_KEYS if k in t},
                                    _str(t, "organisation", where, required=False))
    labels = tuple(sorted({str(q.table["label"]) for q in parties.values() if isinstance(q.table.get("label"), str)}))
    parties = {n: replace(q, run_labels=labels) for n, q in parties.items()}
    operator = str(_str(run, "operator", f"{p} [run]"))
    if operator not in parties:
        raise ParameterError(f"{p}: the operator {operator!r} has no [parties.{operator}] entry")
    ca = path_of(tls, "ca", f"{p} [tls]")
    if ca is None:  # pragma: no cover - required
        raise ParameterError(f"{p}: [tls] ca is required")
    params = doc.get("protocol", {})
    if not isinstance(params, dict):
        raise ParameterError(f"{p}: [protocol] must be a table")
    protocol = str(_str(run, "protocol", f"{p} [run]"))
    check_keys(params, protocol_parameters(protocol), "protocol", str(p))
    check_roles(protocol, {n: q.role for n, q in parties.items()}, str(p))
    check_layout(protocol, {n: q.role for n, q in parties.items()},
                 {n: q.organisation for n, q in parties.items() if q.organisation is not None})
    job = str(_str(run, "job", f"{p} [run]", required=False) or "fit")
    if job not in JOBS:
        raise ParameterError(f"{p}: [run] job is one of {JOBS}, not {job!r}")
    return RunConfig(p, protocol, operator, ca, parties, transport, dict(params), job,
                     path_of(run, "model_dir", f"{p} [run]", False))


def read_passphrase(role: str, passphrase_file: str | Path | None) -> bytes:
    """The passphrase of ``role``'s key files: from ``passphrase_file``, else the environment
    variable ``SECURETREES_PASSPHRASE``, else a prompt on the terminal."""
    if passphrase_file is not None:
        try:
            raw = Path(passphrase_file).read_bytes().rstrip(b"\r\n")
        except OSError as exc:
            raise ParameterError(f"cannot read the passphrase file: {exc}") from exc
    elif os.environ.get(PASSPHRASE_ENV):
        raw = os.environ[PASSPHRASE_ENV].encode("utf-8")
    elif sys.stdin.isatty():
        raw = getpass.getpass(f"passphrase for {role}: ").encode("utf-8")
    else:
        raise ParameterError(f"no passphrase for {role}: give --passphrase-file or set {PASSPHRASE_ENV}")
    if not raw:
        raise ParameterError(f"the passphrase for {role} is empty")
    return raw


def _without_none(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {str(k): _without_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_without_none(x) for x in v]
    return v


def dump_toml(doc: Mapping[str, Mapping[str, Any]]) -> str:
    """TOML text of a run configuration (tomli-w); keys whose value is ``None`` are left out (TOML
    has no null).  :class:`ParameterError` for a value TOML cannot hold."""
    try:
        return tomli_w.dumps(_without_none(doc))
    except TypeError as exc:
        raise ParameterError(f"cannot write the configuration as TOML: {exc}") from exc
