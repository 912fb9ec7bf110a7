"""Every section of ``run.toml`` refuses a key its reader does not know, with a typed error that
names the key, its section, the allowed keys and the closest one; ``[protocol]``'s keys are the
deployment module's ``PARAMETERS`` (one mechanism for every deployment).  Every party's role is one
its deployment declares (``ROLES``), and the party of a single-party role (SecureBoost's active
party, HybridTree's host, a server) carries the role's own name, which the other roles address it
by: refused when the file is read, so ``setup run`` refuses it before writing and no role starts."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees import plugins
from securetrees.errors import ParameterError, TypeMismatchError, UnknownKeyError
from securetrees.net import config as config_module
from securetrees.net.config import TRANSPORT_KEYS, dump_toml, load_config, protocol_parameters, protocol_roles
from securetrees.net.service import network_for
from securetrees.net.transport import TransportOptions
from securetrees.psi import deploy as psi_deploy

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.fixture(scope="module")
def trial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return psi_deploy.prepare(tmp_path_factory.mktemp("psi"), {"a": np.arange(4), "b": np.arange(2, 6)})


def _with(trial: Path, tmp_path: Path, edit: Any) -> Path:
    doc = tomllib.loads(trial.read_text())
    edit(doc)
    path = trial.parent / f"edited-{tmp_path.name}.toml"  # beside the trial: its relative paths hold
    path.write_text(dump_toml(doc))
    return path


SECRET = {"passphrase": "hunter2"}  # a planted secret where secrets never go

CASES = [
    # (section as named in the message, edit, the unknown key, the suggestion or None)
    ("at the top level", lambda d: d.update(protocl={"leader": "a"}), "protocl", "protocol"),
    ("in [run]", lambda d: d["run"].update(deadlin=5.0), "deadlin", "deadline"),
    ("in [tls]", lambda d: d["tls"].update(cert="pki/a.crt"), "cert", None),
    ("in [transport]", lambda d: d["transport"].update(max_mesage_bytes=1 << 20), "max_mesage_bytes",
     "max_message_bytes"),
    ("in [parties.a]", lambda d: d["parties"]["a"].update(SECRET), "passphrase", None),
    ("in [parties.operator]", lambda d: d["parties"]["operator"].update(adress="x:1"), "adress", "address"),
    ("in [protocol]", lambda d: d["protocol"].update(chunk_sise=3), "chunk_sise", "chunk_size"),
]


def test_the_trial_loads(trial: Path) -> None:
    assert load_config(trial).params["leader"] == "a"


@pytest.mark.parametrize(("where", "edit", "key", "hint"), CASES, ids=[c[0] for c in CASES])
def test_unknown_key_is_refused_in_every_section(trial: Path, tmp_path: Path, where: str, edit: Any, key: str,
                                                 hint: str | None) -> None:
    path = _with(trial, tmp_path, edit)
    with pytest.raises(UnknownKeyError) as info:
        load_config(path)
    text = str(info.value)
    assert isinstance(info.value, ParameterError)
    assert f"unknown key {key!r} {where}" in text, text
    assert "allowed keys:" in text
    assert (f"did you mean {hint!r}" in text) if hint else ("did you mean" not in text)


def test_allowed_keys_of_protocol_are_the_deployments(trial: Path, tmp_path: Path) -> None:
    path = _with(trial, tmp_path, lambda d: d["protocol"].update(n_estimators=3))  # a key of other protocols
    with pytest.raises(UnknownKeyError, match=r"allowed keys: chunk_size, leader, max_set_size$"):
        load_config(path)


def test_planted_without_the_check_a_secret_in_the_roster_passes(trial: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: with the key check disabled, the passphrase written into a party's entry (and a
    typo in [protocol]) would be accepted silently; the test above is what catches it."""
    path = _with(trial, tmp_path, lambda d: (d["parties"]["a"].update(SECRET),
                                             d["protocol"].update(chunk_sise=3)))
    monkeypatch.setattr(config_module, "check_keys", lambda *a, **k: None)
    cfg = load_config(path)
    assert "chunk_sise" in cfg.params


def test_every_registered_deployment_declares_its_parameters() -> None:
    for name in plugins.registered(plugins.DEPLOYMENTS):
        declared = protocol_parameters(name)
        assert declared and all(isinstance(k, str) for k in declared), name


def test_a_deployment_without_parameters_is_refused(trial: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = types.ModuleType("bare_deploy")
    monkeypatch.setattr(plugins, "load_deployment", lambda name: bare)
    with pytest.raises(TypeMismatchError, match="declares no PARAMETERS"):
        load_config(trial)


def test_an_unknown_protocol_is_refused(trial: Path, tmp_path: Path) -> None:
    path = _with(trial, tmp_path, lambda d: d["run"].update(protocol="psy"))
    with pytest.raises(ParameterError, match="no deployment named 'psy'"):
        load_config(path)


# -- transport -----------------------------------------------------------------------------------
BOUNDS = {"deadline": 30.0, "retries": 1, "backoff": 0.5, "keepalive_seconds": 20.0, "max_message_bytes": 1 << 20,
          "server_threads": 4, "max_calls_per_peer": 3, "max_streams_per_connection": 10,
          "receive_window_bytes": 1 << 16, "refusal_log_seconds": 5.0, "request_seconds": 2.5}


def test_every_transport_bound_is_set_from_the_file_and_used(trial: Path, tmp_path: Path) -> None:
    """``[transport]`` sets every field of TransportOptions; the network a role or the operator builds
    from the file (``network_for``) serves and calls with them."""
    assert set(BOUNDS) == TRANSPORT_KEYS
    cfg = load_config(_with(trial, tmp_path, lambda d: d.update(transport=BOUNDS)))
    assert cfg.transport == TransportOptions(**BOUNDS)  # type: ignore[arg-type]
    for name in ("a", "operator"):
        passphrase = (trial.parent / "pki" / f"{name}.pass").read_bytes().strip()
        with network_for(cfg, name, passphrase) as net:
            assert net.options == cfg.transport
            assert net._slots.per_peer == 3 and net._request_timer.seconds == 2.5
            assert net.refusals.interval == 5.0


def test_the_defaults_and_the_older_run_keys(trial: Path, tmp_path: Path) -> None:
    """Without ``[transport]`` the defaults hold; ``[run]`` still gives deadline, retries, backoff and
    keepalive (files written before ``[transport]``), but the same bound in both tables is refused."""
    cfg = load_config(_with(trial, tmp_path, lambda d: d.pop("transport")))
    assert cfg.transport == TransportOptions()
    older = {"deadline": 9.0, "retries": 0, "backoff": 1.0, "keepalive": 3.0}
    cfg = load_config(_with(trial, tmp_path, lambda d: (d.pop("transport"), d["run"].update(older))))
    assert cfg.transport == TransportOptions(deadline=9.0, retries=0, backoff=1.0, keepalive_seconds=3.0)
    with pytest.raises(ParameterError, match=r"keepalive_seconds is given in \[run\] and in \[transport\]"):
        load_config(_with(trial, tmp_path, lambda d: (d["transport"].update(keepalive_seconds=3.0),
                                                      d["run"].update(keepalive=3.0))))


BAD_BOUNDS = [({"max_message_bytes": 1.5}, "must be an integer"), ({"max_calls_per_peer": True}, "must be an integer"),
              ({"deadline": "60"}, "must be a number"), ({"max_calls_per_peer": 0}, "max_calls_per_peer"),
              ({"max_message_bytes": 1 << 31}, "max_message_bytes must be"),
              ({"receive_window_bytes": 1024}, "receive_window_bytes must be"),
              ({"request_seconds": 0}, "request_seconds must be"), ({"deadline": float("inf")}, "finite"),
              ({"refusal_log_seconds": -1}, "refusal_log_seconds must be")]


@pytest.mark.parametrize(("bad", "message"), BAD_BOUNDS, ids=[next(iter(b)) + "=" + repr(next(iter(b.values())))
                                                              for b, _ in BAD_BOUNDS])
def test_a_bad_transport_value_is_refused(trial: Path, tmp_path: Path, bad: dict[str, Any], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        load_config(_with(trial, tmp_path, lambda d: d["transport"].update(bad)))


# -- roles ---------------------------------------------------------------------------------------
def _run(trial: Path, tmp_path: Path, protocol: str, roles: dict[str, str]) -> Path:
    """The trial's file turned into a ``protocol`` run whose parties ``a``, ``b`` take ``roles``
    (a party renamed by giving its new name: ``{"a->active": "active"}``)."""
    doc: dict[str, Any] = tomllib.loads(trial.read_text())
    doc["run"]["protocol"], doc["protocol"] = protocol, {}
    parties = doc["parties"]
    for key, role in roles.items():
        old, _, new = key.partition("->")
        entry = parties.pop(old)
        entry["role"] = role
        parties[new or old] = entry
    path = trial.parent / f"roles-{tmp_path.name}.toml"  # beside the trial: its relative paths hold
    path.write_text(dump_toml(doc))
    return path


def test_every_registered_deployment_declares_its_roles() -> None:
    for name in plugins.registered(plugins.DEPLOYMENTS):
        roles = protocol_roles(name)
        assert roles, name
        assert all(fixed in (None, role) for role, fixed in roles.items()), name  # a single party carries its role


FIXED = [("secureboost", "active", "passive"), ("hybridtree", "host", "guest"),
         ("federated-forest", "master", "client"), ("histogram-forest", "server", "client"),
         ("revfrf", "cs", "participant")]


@pytest.mark.parametrize(("protocol", "single", "many"), FIXED, ids=[f[0] for f in FIXED])
def test_a_single_party_role_under_another_name_is_refused(trial: Path, tmp_path: Path, protocol: str, single: str,
                                                           many: str) -> None:
    """The user's natural layout (the bank as SecureBoost's active party, named ``a`` here) is refused
    with the name to use; under the role's name the same file loads."""
    with pytest.raises(ParameterError, match=rf"{single} party is named '{single}', not 'a'.*name={single}"):
        load_config(_run(trial, tmp_path, protocol, {"a": single, "b": many}))
    cfg = load_config(_run(trial, tmp_path, protocol, {f"a->{single}": single, "b": many}))
    assert cfg.party(single).role == single and cfg.party("b").role == many


def test_parties_of_a_many_party_role_take_any_name(trial: Path, tmp_path: Path) -> None:
    cfg = load_config(_run(trial, tmp_path, "secureboost", {"a->active": "active", "b->shop": "passive"}))
    assert cfg.party("shop").role == "passive"


def test_a_role_the_protocol_lacks_is_refused_with_the_closest(trial: Path, tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match=r"'b' has the role 'pasive'.*did you mean 'passive'.*active, passive"):
        load_config(_run(trial, tmp_path, "secureboost", {"a->active": "active", "b": "pasive"}))
    with pytest.raises(ParameterError, match=r"'b' has the role 'guest', which a secureboost run does not have"):
        load_config(_run(trial, tmp_path, "secureboost", {"a->active": "active", "b": "guest"}))


def test_the_operator_role_is_not_a_protocol_role(trial: Path) -> None:
    """The PSI trial as it is: its operator's role is the runtime's, not the deployment's."""
    assert "operator" not in protocol_roles("psi")
    assert load_config(trial).party("operator").role == "operator"


def test_a_deployment_without_roles_is_refused(trial: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bare = types.ModuleType("bare_deploy")
    bare.PARAMETERS = psi_deploy.PARAMETERS  # type: ignore[attr-defined]
    monkeypatch.setattr(plugins, "load_deployment", lambda name: bare)
    with pytest.raises(TypeMismatchError, match="declares no ROLES"):
        load_config(trial)
    bare.ROLES = {"psi_leader": 3}  # type: ignore[attr-defined]  # not a name or None
    with pytest.raises(TypeMismatchError, match="declares no ROLES"):
        load_config(trial)
