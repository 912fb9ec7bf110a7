"""``run.toml`` from the command line (``securetrees setup run``).

Each party is given as ``key=value`` pairs separated by commas (:func:`parse_party`)::

    name=bank,role=client,address=bank.example.org:7443,organisation=bank,data=bank.csv,label=default

with optional ``cert`` / ``key`` (default ``pki/NAME.crt`` / ``pki/NAME.key``), ``secrets``,
``test_data``, ``id_column``, ``label``, ``features`` or ``drop`` (column names separated by ``:``,
e.g. ``drop=zip:outcome``: the columns the party uses, or those it ignores) and ``ca`` (the
certificate of the CA that issues this name, when the run has several).  :func:`party_features`
reads each data holder's header (and its test table's) at set-up: the id and label columns and
the listed ones must be there, and it gives the feature columns the party will use.
:func:`build_run` makes the document: the CA bundle's path, each entry's ``issuer`` (the
fingerprint of the CA that issued the entry's certificate, read from the certificate when it is at
hand, else of its ``ca``, else of the one CA), the ``[protocol]`` parameters (given ones, public key
material from ``securetrees setup keys``, the party lists the protocol reads, e.g. Federated
Forest's ``clients``, and the global column layout from the parties' headers: Federated Forest's
``feature_ids``, RevFRF's ``columns`` and ``n_features``), and the protocol's
non-collusion assumption (``[run] assumption``, checked by :func:`securetrees.net.collusion.check_layout`).
:func:`write_run` writes it with tomli-w only after :func:`~securetrees.net.config.parse_config` has
accepted it as the file it will be (so every message names that file).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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
from securetrees.net.tables import TableOptions, feature_columns, table_columns
from securetrees.net.tls import check_name, fingerprint, issued_by, load_ca_bundle

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["LIST_FIELDS", "PARTY_FIELDS", "PartySpec", "build_run", "check_key_material", "parse_param",
           "parse_party", "party_features", "read_params", "write_run"]

PARTY_FIELDS: Final = ("name", "role", "address", "organisation", "cert", "key", "secrets", "data", "test_data",
                       "id_column", "label", "features", "drop", "ca")
"""What a ``--party`` specification may give."""
LIST_FIELDS: Final = ("features", "drop")
"""The ``--party`` keys whose value is a list of column names, separated by ``:``."""
_REQUIRED = ("name", "address", "organisation")
_ALIASES: Final = {"org": "organisation"}


@dataclass(frozen=True)
class PartySpec:
    name: str
    role: str
    address: str
    organisation: str
    options: dict[str, str | list[str]] = field(default_factory=dict)
    """The entry's further keys: ``cert``, ``key``, ``secrets``, ``data``, ``test_data``, ``id_column``,
    ``label``, ``ca`` (strings), ``features``, ``drop`` (lists of column names)."""

    def option(self, key: str) -> str | None:
        """A string option (``data``, ``label`` ...), or None."""
        v = self.options.get(key)
        return v if isinstance(v, str) else None


def parse_party(spec: str, *, operator: str = OPERATOR_ROLE) -> PartySpec:
    """A party from ``key=value,key=value``; :class:`ParameterError` names a malformed pair, an
    unknown or repeated key, or a missing ``name``, ``address``, ``organisation`` (or ``role``; the
    operator's is ``operator``)."""
    fields: dict[str, str | list[str]] = {}
    for pair in spec.split(","):
        key, eq, value = pair.partition("=")
        key = _ALIASES.get(key.strip(), key.strip())
        if not eq or not value.strip():
            raise ParameterError(f"--party {spec!r}: {pair!r} is not key=value")
        if key not in PARTY_FIELDS:
            raise ParameterError(f"--party {spec!r}: unknown key {key!r}; the keys are {', '.join(PARTY_FIELDS)}")
        if key in fields:
            raise ParameterError(f"--party {spec!r}: {key} given twice")
        fields[key] = _column_list(spec, key, value) if key in LIST_FIELDS else value.strip()
    missing = [k for k in _REQUIRED if k not in fields]
    if missing:
        raise ParameterError(f"--party {spec!r} lacks {', '.join(missing)}")
    if all(k in fields for k in LIST_FIELDS):
        raise ParameterError(f"--party {spec!r}: give features (the columns used) or drop (the columns ignored), "
                             "not both")
    text = {k: v for k, v in fields.items() if isinstance(v, str)}
    name = check_name(text["name"])
    role = text.get("role", OPERATOR_ROLE if name == operator else "")
    if not role:
        raise ParameterError(f"--party {spec!r} lacks its role")
    options = {k: v for k, v in fields.items() if k not in ("name", "role", "address", "organisation")}
    return PartySpec(name, role, text["address"], text["organisation"], options)


def _column_list(spec: str, key: str, value: str) -> list[str]:
    """``a:b:c`` as ``["a", "b", "c"]``: :class:`ParameterError` for an empty or repeated name."""
    names = [c.strip() for c in value.split(":")]
    if not all(names):
        raise ParameterError(f"--party {spec!r}: {key} lists column names separated by ':', one of them empty")
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise ParameterError(f"--party {spec!r}: {key} names {twice[0]!r} twice")
    return names


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
    own_ca = party.option("ca")
    if own_ca is not None:
        ca = _cert(base / own_ca)
        if ca is None:
            raise ParameterError(f"{party.name}: cannot read its CA certificate {own_ca}")
        fp = fingerprint(ca.public_bytes(_PEM))
        if fp not in pems:
            raise ParameterError(f"{party.name}: its CA {own_ca} is not in the run's CA bundle")
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


def party_features(protocol: str, parties: Sequence[PartySpec], base: Path,
                   params: Mapping[str, Any] | None = None) -> dict[str, list[str] | None]:
    """The feature columns each data holder (a party naming ``data``) will use, by name, read from
    its table's header as its role will read the table (:func:`~securetrees.net.tables.feature_columns`:
    ``features``, else every column but the id, the label and ``drop``; a column named like another
    party's ``label`` is refused unless listed in ``features``).  The histogram forest's are the
    declared ``[protocol] columns``, and a column outside them must be dropped.  A party's
    ``test_data`` must exist and hold its id column and those feature columns.  Every problem raises
    :class:`TableError` (or :class:`ParameterError`) naming the party and the column, at set-up
    rather than when the roles start.  A data file that is not on this machine (another
    organisation's, across machines) maps to None: its role makes the same checks when it starts."""
    raw = (params or {}).get("columns") if protocol == "histogram-forest" else None
    declared = [str(c) for c in raw] if isinstance(raw, list) and all(isinstance(c, str) for c in raw) else None
    labels = {v for p in parties if (v := p.option("label")) is not None}
    out: dict[str, list[str] | None] = {}
    for p in parties:
        data = p.option("data")
        if data is None:
            continue
        if not (base / data).is_file():
            out[p.name] = None
            continue
        where = f"{p.name}'s data ({base / data})"
        opts = TableOptions.from_config(p.options, f"--party {p.name}",
                                        tuple(sorted(labels - {p.option("label")})))
        header = table_columns(base / data, f"{p.name}'s data")
        listed = opts.features
        if declared is not None:
            if listed is not None and sorted(listed) != sorted(declared):
                raise TableError(f"{p.name}: features {sorted(set(listed) ^ set(declared))} differ from [protocol] "
                                 "columns (every histogram-forest client uses the declared columns)")
            _refuse_undeclared(where, header, opts, declared)
        used = opts if declared is None else replace(opts, features=tuple(declared))
        features = feature_columns(header, used, where)
        test = p.option("test_data")
        if test is not None:
            if not (base / test).is_file():
                raise TableError(f"{p.name}'s test data {base / test} does not exist (its data file is here)")
            have = table_columns(base / test, f"{p.name}'s test data")
            lacking = [c for c in [opts.id_column, *features] if c not in have]
            if lacking:
                raise TableError(f"{p.name}'s test data ({base / test}) lacks the columns {lacking} of its "
                                 f"training table (the rows to predict need the id column and every feature column)")
            if declared is not None:
                _refuse_undeclared(f"{p.name}'s test data ({base / test})", have, opts, declared)
        out[p.name] = features
    return out


def _refuse_undeclared(where: str, header: Sequence[str], options: TableOptions, declared: Sequence[str]) -> None:
    """A histogram-forest client's table holds no column beyond its id, its label, the declared
    ones and those it drops (its role reads the table strictly, unless its section lists its
    ``features``): :class:`TableError` says which to drop."""
    extra = [c for c in header if c not in (options.id_column, options.label, *declared, *options.drop)]
    if extra and options.features is None:
        raise TableError(f"{where}: columns not in [protocol] columns: {extra}; drop them (drop={':'.join(extra)})")


def _layout_params(protocol: str, parties: Sequence[PartySpec], params: Mapping[str, Any],
                   features: Mapping[str, Sequence[str] | None]) -> dict[str, Any]:
    """The party lists the protocol reads from ``[protocol]``, in the order the parties were given,
    unless given already; the global column layout from the parties' ``features`` (Federated Forest's
    ``feature_ids``, RevFRF's ``columns`` and ``n_features``: each data holder's columns numbered in
    turn)."""
    def of(role: str) -> list[str]:
        return [p.name for p in parties if p.role == role]

    lists = {"federated-forest": {"clients": of("client")}, "secureboost": {"passives": of("passive")},
             "hybridtree": {"guests": of("guest")}, "histogram-forest": {"clients": of("client")},
             "revfrf": {"participants": of("participant"), "requesters": of("requester")}}.get(protocol, {})
    out: dict[str, Any] = {k: v for k, v in lists.items() if k not in params and v}
    layout = {"federated-forest": ("client", "feature_ids"), "revfrf": ("participant", "columns")}.get(protocol)
    if layout is None:
        return out
    role, key = layout
    ids = params[key] if key in params else _global_columns(parties, role, key, features)
    if key not in params:
        out[key] = ids
    if protocol == "revfrf" and "n_features" not in params and isinstance(ids, list) and all(
            isinstance(c, list) for c in ids):
        out["n_features"] = d = sum(len(c) for c in ids)
        for r in parties:  # a requester holds every feature column, in the global order
            held = features.get(r.name) if r.role == "requester" else None
            if held is not None and len(held) != d:
                raise TableError(f"{r.name}'s rows have {len(held)} feature columns, the participants {d}: a "
                                 "requester holds every feature column, in the participants' order")
    return out


def _global_columns(parties: Sequence[PartySpec], role: str, key: str,
                    features: Mapping[str, Sequence[str] | None]) -> list[list[int]]:
    """Each ``role`` party's feature columns numbered in turn (``[[0, 1, 2], [3, 4]]``), from the
    parties' ``features``; :class:`TableError` for a party whose table is not at hand."""
    ids: list[list[int]] = []
    start = 0
    for p in parties:
        if p.role != role:
            continue
        used = features.get(p.name)
        if used is None:
            data = p.option("data")
            raise TableError(f"{p.name}'s data {'(none named)' if data is None else f'{data} is not on this machine'}"
                             f": its header gives its feature count, else [protocol] {key} must be given (one list "
                             f"of global column numbers per {role}, e.g. --param '{key}=[[0, 1], [2, 3, 4]]')")
        ids.append(list(range(start, start + len(used))))
        start += len(used)
    return ids


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
              run: Mapping[str, Any] | None = None, transport: Mapping[str, Any] | None = None,
              features: Mapping[str, Sequence[str] | None] | None = None) -> dict[str, Any]:
    """The configuration document (a mapping for tomli-w) of a run; ``base`` is the folder ``run.toml``
    goes in (relative paths are read from it); ``run`` adds to its ``[run]`` table, ``transport`` is its
    ``[transport]`` table (none when empty).  Refuses (typed errors) a party named twice, no
    operator entry, a layout the protocol's non-collusion assumption forbids, a table that its party
    cannot read as its section says (:func:`party_features`, unless ``features`` gives its result),
    missing key material (:func:`check_key_material`), and an ``issuer`` that cannot be determined."""
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
        cert, key = p.option("cert") or f"pki/{p.name}.crt", p.option("key") or f"pki/{p.name}.key"
        issuer = _issuer(p, folder, cas, folder / cert)
        for k in ("cert", "key", "ca"):
            opts.pop(k, None)
        entries[p.name] = {"role": p.role, "organisation": p.organisation, "address": p.address, "cert": cert,
                           "key": key, "issuer": issuer, **opts}
    used = party_features(protocol, parties, folder, given) if features is None else features
    protocol_params = {**given, **_layout_params(protocol, parties, given, used)}
    check_key_material(protocol, protocol_params, parties)
    rule = assumption(protocol)
    head: dict[str, Any] = {"protocol": protocol, "operator": operator, **dict(run or {})}
    if rule is not None:
        head["assumption"] = rule.text
    doc = {"run": head, "tls": {"ca": ca_bundle}, "protocol": protocol_params, "parties": entries}
    return {**doc, "transport": dict(transport)} if transport else doc


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
