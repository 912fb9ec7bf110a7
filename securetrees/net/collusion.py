"""Which roles of a protocol must be hosted by different organisations (its non-collusion assumption).

Each protocol's security rests on some roles not pooling what they see (its spec's "Threat model").
When a run's roster says which ``organisation`` hosts each party, :func:`check_layout` refuses a
layout in which one organisation hosts two roles the assumption holds apart
(:class:`~securetrees.errors.CollusionError`): an organisation running both would be a
collusion by construction.  ``securetrees setup run`` writes the assumption into ``run.toml``, and
:func:`~securetrees.net.config.load_config` checks it whenever organisations are given.

The table is keyed by the deployments' registered names (``securetrees.deployments``); a
protocol absent from it states no assumption about organisations (e.g. ``psi``: each party
trusts only itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from securetrees.errors import CollusionError

__all__ = ["ASSUMPTIONS", "Assumption", "assumption", "check_layout"]


@dataclass(frozen=True)
class Assumption:
    """``apart``: pairs of roles no single organisation may host together (a pair of one role twice:
    no organisation hosts two parties of that role); ``text``: the assumption in words and its spec."""

    text: str
    apart: tuple[tuple[str, str], ...]


ASSUMPTIONS: Final[Mapping[str, Assumption]] = {
    "federated-forest": Assumption(
        "the master does not collude with a client, nor clients with each other (specs/federated_forest.md): "
        "the master and every client are hosted by different organisations",
        (("master", "client"), ("client", "client"))),
    "revfrf": Assumption(
        "the CS and the CC do not collude; the KGC is trusted (specs/revfrf.md): "
        "the CS and the CC are hosted by different organisations",
        (("cs", "cc"),)),
    "secureboost": Assumption(
        "the active party does not collude with a passive party (specs/secureboost.md): "
        "the active party and every passive party are hosted by different organisations",
        (("active", "passive"),)),
    "hybridtree": Assumption(
        "the host and the guests do not collude (specs/hybridtree.md): the host and every guest are hosted "
        "by different organisations",
        (("host", "guest"),)),
    "histogram-forest": Assumption(
        "the server does not collude with the clients (specs/histogram_forest.md): the server and every "
        "client are hosted by different organisations",
        (("server", "client"),)),
}


def assumption(protocol: str) -> Assumption | None:
    """The protocol's non-collusion assumption, or ``None`` when it states none about organisations."""
    return ASSUMPTIONS.get(protocol)


def check_layout(protocol: str, roles: Mapping[str, str], organisations: Mapping[str, str]) -> None:
    """Refuse (:class:`CollusionError`) a layout where one organisation hosts two parties whose roles
    the protocol's assumption holds apart.  ``roles`` and ``organisations`` map party names to their
    role and hosting organisation; a party without an organisation is not checked."""
    rule = assumption(protocol)
    if rule is None:
        return
    named = sorted(n for n in roles if n in organisations)
    for i, a in enumerate(named):
        for b in named[i + 1:]:
            if organisations[a] != organisations[b]:
                continue
            pair = {(roles[a], roles[b]), (roles[b], roles[a])}
            if pair & set(rule.apart):
                raise CollusionError(
                    f"{protocol}: organisation {organisations[a]!r} would host both {a!r} ({roles[a]}) and "
                    f"{b!r} ({roles[b]}), which the protocol's assumption holds apart: {rule.text}")
