"""``run.toml`` from the command line (``securetrees setup run``).

Each party is given as ``key=value`` pairs separated by commas (:func:`parse_party`)::

    name=bank,role=client,address=bank.example.org:7443,organisation=bank,data=bank.csv,label=default

with optional ``cert`` / ``key`` (default ``pki/NAME.crt`` / ``pki/NAME.key``), ``secrets``,
``test_data``, ``id_column``, ``label`` and ``ca`` (the certificate of the CA that issues this
name, when the run has several).  :func:`build_run` makes the document: the CA bundle's path, each
entry's ``issuer`` (the fingerprint of the CA that issued the entry's certificate, read from the
certificate when it is at hand, else of its ``ca``, else of the one CA), the ``[protocol]``
parameters (given ones, public key material from ``securetrees setup keys``, and the party lists the
protocol reads, e.g. Federated Forest's ``clients`` and ``feature_ids``), and the protocol's
non-collusion assumption (``[run] assumption``, checked by :func:`securetrees.net.collusion.check_layout`).
:func:`write_run` writes it with tomli-w only after :func:`~securetrees.net.config.parse_config` has
accepted it as the file it will be (so every message names that file).
"""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from securetrees import plugins
from securetrees.errors import (
    MissingKeyMaterialError,
    MissingParameterError,
    OutputExistsError,
    ParameterError,
    TableError,
)
from securetrees.net.collusion import assumption, check_layout
from securetrees.net.config import dump_toml, parse_config
from securetrees.net.control import OPERATOR_ROLE
from securetrees.net.keysetup import PAILLIER_HOLDERS, key_sources
from securetrees.net.tables import table_columns
from securetrees.net.tls import check_name, fingerprint, issued_by, load_ca_bundle

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["PARTY_FIELDS", "PartySpec", "build_run", "check_key_material", "parse_param", "parse_party", "read_params",
           "write_run"]

PARTY_FIELDS: Final = ("name", "role", "address", "organisation", "cert", "key", "secrets", "data", "test_data",
                       "id_column", "label", "ca")
"""What a ``--party`` specification may give."""
_REQUIRED = ("name", "address", "organisation")
_ALIASES: Final = {"org": "organisation"}


@dataclass(frozen=True)
class PartySpec:
    name: str
    role: str
    address: str
    organisation: str
    options: dict[str, str] = field(default_factory=dict)
    """The entry's further keys: ``cert``, ``key``, ``secrets``, ``data``, ``test_data``, ``id_column``,
    ``label``, ``ca``."""


def parse_party(spec: str, *, operator: str = OPERATOR_ROLE) -> PartySpec:
    """A party from ``key=value,key=value``; :class:`ParameterError` names a malformed pair, an
    unknown or repeated key, or a missing ``name``, ``address``, ``organisation`` (or ``role``; the
    operator's is ``operator``)."""
    fields: dict[str, str] = {}
    for pair in spec.split(","):
        key, eq, value = pair.partition("=")
        key = _ALIASES.get(key.strip(), key.strip())
        if not eq or not value.strip():
            raise ParameterError(f"--party {spec!r}: {pair!r} is not key=value")
        if key not in PARTY_FIELDS:
            raise ParameterError(f"--party {spec!r}: unknown key {key!r}; the keys are {', '.join(PARTY_FIELDS)}")
        if key in fields:
            raise ParameterError(f"--party {spec!r}: {key} given twice")
        fields[key] = value.strip()
    missing = [k for k in _REQUIRED if k not in fields]
    if missing:
        raise ParameterError(f"--party {spec!r} lacks {', '.join(missing)}")
    name = check_name(fields.pop("name"))
    role = fields.pop("role", OPERATOR_ROLE if name == operator else "")
    if not role:
        raise ParameterError(f"--party {spec!r} lacks its role")
    return PartySpec(name, role, fields.pop("address"), fields.pop("organisation"), fields)


def parse_param(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE a TOML value (``5``, ``true``, ``[[0, 1], [2]]``, ``"text"``), or
    else taken as a string (``n_jobs=auto``)."""
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise ParameterError(f"--param {text!r} is not KEY=VALUE")
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    return key.strip(), parsed


def read_params(path: str | Path) -> dict[str, Any]:
    """The ``[protocol]`` parameters of a TOML file (``securetrees setup keys`` writes the public
    key material so): its top-level keys, or those of its ``[protocol]`` table."""
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ParameterError(f"cannot read parameters from {path}: {exc}") from exc
    body = doc.get("protocol", doc)
    if not isinstance(body, dict):
        raise ParameterError(f"{path}: [protocol] must be a table")
    return dict(body)


_PEM = Encoding.PEM


def _cert(path: Path) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except OSError:
        return None
    except ValueError as exc:
        raise ParameterError(f"{path} is not a PEM certificate") from exc


def _issuer(party: PartySpec, base: Path, cas: list[x509.Certificate], cert_path: Path) -> str:
    """The fingerprint of the CA that issues ``party``'s name."""
    pems = {fingerprint(ca.public_bytes(_PEM)): ca for ca in cas}
    if "ca" in party.options:
        ca = _cert(base / party.options["ca"])
        if ca is None:
            raise ParameterError(f"{party.name}: cannot read its CA certificate {party.options['ca']}")
        fp = fingerprint(ca.public_bytes(_PEM))
        if fp not in pems:
            raise ParameterError(f"{party.name}: its CA {party.options['ca']} is not in the run's CA bundle")
    elif len(cas) == 1:
        fp = next(iter(pems))
    else:
        fp = ""
    cert = _cert(cert_path)
    if cert is not None:
        signers = [f for f, ca in pems.items() if issued_by(cert, ca)]
        if not signers:
            raise ParameterError(f"{party.name}: its certificate {cert_path} is not signed by a CA of the bundle")
        if fp and fp not in signers:
            raise ParameterError(f"{party.name}: its certificate is not signed by the CA its entry names")
        fp = signers[0]
    if not fp:
        raise ParameterError(f"{party.name}: the bundle holds {len(cas)} CAs; give ca=ORG-CA.pem (or place its "
                             "certificate) so its entry names the one CA allowed to issue it")
    return fp


def _feature_count(party: PartySpec, base: Path) -> int:
    """The number of feature columns of a party's table (a CSV file's header, a Parquet file's schema):
    every column but the id and label."""
    data = party.options.get("data")
    if data is None:
        raise ParameterError(f"{party.name} names no data file, so [protocol] feature_ids must be given")
    path = base / data
    if path.suffix.lower() == ".csv":
        try:
            with open(path, newline="", encoding="utf-8-sig") as f:  # a spreadsheet's byte-order mark is no column
                header = next(csv.reader(f), [])
        except OSError as exc:
            raise TableError(f"{party.name}: cannot read {path}: {exc}") from exc
    else:
        header = table_columns(path, f"{party.name}'s data")
    skip = {party.options.get("id_column", "id"), party.options.get("label")}
    missing = sorted(c for c in skip if c is not None and c not in header)
    if missing:
        raise TableError(f"{party.name}'s data ({path}) has no column {missing[0]!r}; its columns are {header}")
    return sum(1 for c in header if c not in skip)


def _layout_params(protocol: str, parties: Sequence[PartySpec], params: Mapping[str, Any],
                   base: Path) -> dict[str, Any]:
    """The party lists the protocol reads from ``[protocol]``, in the order the parties were given,
    unless given already (and Federated Forest's ``feature_ids`` from the clients' table headers)."""
    def of(role: str) -> list[str]:
        return [p.name for p in parties if p.role == role]

    lists = {"federated-forest": {"clients": of("client")}, "secureboost": {"passives": of("passive")},
             "hybridtree": {"guests": of("guest")}, "histogram-forest": {"clients": of("client")},
             "revfrf": {"participants": of("participant"), "requesters": of("requester")}}.get(protocol, {})
    out: dict[str, Any] = {k: v for k, v in lists.items() if k not in params and v}
    if protocol == "federated-forest" and "feature_ids" not in params:
        clients = [p for p in parties if p.role == "client"]
        ids, start = [], 0
        for c in clients:
            n = _feature_count(c, base)
            ids.append(list(range(start, start + n)))
            start += n
        out["feature_ids"] = ids
    return out


def _holder(protocol: str, parties: Sequence[PartySpec]) -> str:
    """The name of the party that holds ``protocol``'s Paillier key pair (the one of the holder's
    role naming a label column when several have that role), else ``NAME``."""
    held = PAILLIER_HOLDERS.get(protocol)
    of_role = [p for p in parties if held is not None and p.role == held.role]
    labelled = [p for p in of_role if "label" in p.options]
    chosen = labelled if len(of_role) > 1 else of_role
    return chosen[0].name if len(chosen) == 1 else "NAME"


def check_key_material(protocol: str, params: Mapping[str, Any], parties: Sequence[PartySpec] = ()) -> None:
    """Refuse a ``[protocol]`` table that lacks public key material the protocol's roles need at
    start-up, with :class:`MissingKeyMaterialError` naming the key and the set-up command that makes
    it (:func:`~securetrees.net.keysetup.key_sources`).  What is needed is the deployment module's own
    check: its ``check_parameters(params)``, else its ``estimator_from(params)`` (the check its roles
    make before they start), which names what it lacks (:class:`~securetrees.errors.MissingParameterError`)."""
    sources = key_sources(protocol, _holder(protocol, parties))
    module = plugins.load_deployment(protocol)
    check = getattr(module, "check_parameters", None) or getattr(module, "estimator_from", None)
    if not callable(check):
        return
    try:
        check(params)
        return
    except MissingParameterError as exc:  # names the keys it lacks
        missing = [k for k in exc.keys if k in sources]
        if not missing:
            raise
        raise MissingKeyMaterialError(
            "; ".join(f"[protocol] {k} is missing: {sources[k]}" for k in missing)
            + f" ({protocol}'s roles need it at start-up)") from exc


def build_run(protocol: str, parties: Sequence[PartySpec], *, ca_bundle: str, base: str | Path,
              params: Mapping[str, Any] | None = None, operator: str = OPERATOR_ROLE,
              run: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The configuration document (a mapping for tomli-w) of a run; ``base`` is the folder ``run.toml``
    goes in (relative paths are read from it).  Refuses (typed errors) a party named twice, no
    operator entry, a layout the protocol's non-collusion assumption forbids, missing key material
    (:func:`check_key_material`), and an ``issuer`` that cannot be determined."""
    folder = Path(base)
    names = [p.name for p in parties]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ParameterError(f"parties named twice: {twice}")
    if operator not in names:
        raise ParameterError(f"no --party entry for the operator {operator!r}")
    check_layout(protocol, {p.name: p.role for p in parties}, {p.name: p.organisation for p in parties})
    try:
        cas = load_ca_bundle((folder / ca_bundle).read_bytes())
    except OSError as exc:
        raise ParameterError(f"cannot read the CA bundle {ca_bundle}: {exc}") from exc
    given = dict(params or {})
    entries: dict[str, Any] = {}
    for p in parties:
        opts = dict(p.options)
        cert, key = opts.pop("cert", f"pki/{p.name}.crt"), opts.pop("key", f"pki/{p.name}.key")
        issuer = _issuer(p, folder, cas, folder / cert)
        opts.pop("ca", None)
        entries[p.name] = {"role": p.role, "organisation": p.organisation, "address": p.address, "cert": cert,
                           "key": key, "issuer": issuer, **opts}
    protocol_params = {**given, **_layout_params(protocol, parties, given, folder)}
    check_key_material(protocol, protocol_params, parties)
    rule = assumption(protocol)
    head: dict[str, Any] = {"protocol": protocol, "operator": operator, **dict(run or {})}
    if rule is not None:
        head["assumption"] = rule.text
    return {"run": head, "tls": {"ca": ca_bundle},
            "protocol": protocol_params, "parties": entries}


def write_run(path: str | Path, doc: Mapping[str, Mapping[str, Any]], *, force: bool = False) -> Path:
    """Write ``doc`` as TOML to ``path`` once :func:`~securetrees.net.config.parse_config` accepts it
    as that file (relative paths resolve from its folder; every message names ``path``), atomically
    (a temporary file beside it, then renamed); :class:`OutputExistsError` when ``path`` exists and
    not ``force``."""
    target = Path(path)
    if target.exists() and not force:
        raise OutputExistsError(f"refusing to overwrite {target} (--force replaces it)")
    rule = assumption(str(doc["run"]["protocol"]))
    header = ["# securetrees run configuration, written by `securetrees setup run`.",
              "# Every party receives this same file; no secret is in it."]
    if rule is not None:
        header.append(f"# Non-collusion assumption: {rule.text}.")
    text = "\n".join(header) + "\n\n" + dump_toml(doc)
    parse_config(text, target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        raise ParameterError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return target
