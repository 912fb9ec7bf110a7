"""A party's protocol key material, sealed into its key file (``securetrees setup keys``).

The protocols whose key set-up is one party's Paillier key pair:

* Federated Forest: the label holder's key (its labels go out encrypted under it); its public key is
  ``[protocol] label_public_key``, which every client pins;
* SecureBoost: the active party's key; its public key is ``[protocol] active_public_key``, which
  every passive party pins;
* HybridTree: the host's key; its public key is ``[protocol] host_public_key``, which every
  guest pins.

:func:`paillier_keys` makes the pair (:func:`securetrees.paillier.generate_keypair`), seals the
private key in the party's key file as ``paillier_key`` exactly as the deployments' trials do
(:func:`securetrees.net.deployment.seal_paillier` inside :func:`securetrees.net.keyfile.write_key_file`),
and returns the public ``[protocol]`` parameters to merge into ``run.toml`` (``securetrees setup run
--params``).  RevFRF's set-up is the KGC's, for every party at once (``securetrees setup kgc``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from securetrees.errors import OutputExistsError, ParameterError
from securetrees.net.config import dump_toml
from securetrees.net.deployment import seal_paillier
from securetrees.net.keyfile import write_key_file
from securetrees.net.tls import check_name
from securetrees.paillier import generate_keypair
from securetrees.rand import SYSTEM_RANDOM

__all__ = ["CHECKPOINT_ONLY", "KGC_KEYS", "PAILLIER_HOLDERS", "PaillierHolder", "key_sources", "paillier_keys",
           "write_public"]


@dataclass(frozen=True)
class PaillierHolder:
    role: str
    """The role that holds the key pair."""
    public_parameter: str | None
    """The ``[protocol]`` key its public key goes under (``None``: the protocol sends it in-band only)."""


PAILLIER_HOLDERS: Final[Mapping[str, PaillierHolder]] = {
    "federated-forest": PaillierHolder("client", "label_public_key"),
    "secureboost": PaillierHolder("active", "active_public_key"),
    "hybridtree": PaillierHolder("host", "host_public_key"),
}
"""Every one of them checkpoints: any party's key file may carry a ``checkpoint_key``."""


CHECKPOINT_ONLY: Final = frozenset({"histogram-forest"})
"""Protocols without a Paillier key whose parties' key files may still carry a ``checkpoint_key``
(``securetrees setup keys histogram-forest --no-paillier --checkpoint-key``)."""


KGC_KEYS: Final = ("directory", "verify_keys")
"""The ``[protocol]`` keys of RevFRF's public KGC output (``securetrees setup kgc``): its roles read
both at start-up and have no other way to learn them, so a RevFRF run always needs them."""


def key_sources(protocol: str, holder: str = "NAME") -> dict[str, str]:
    """The ``[protocol]`` keys of ``protocol`` that a set-up step makes (public key material), each
    with the commands that make it and merge it into ``run.toml``; ``holder`` names the party that
    holds the key pair (for the Paillier holders).  Empty for a protocol without such keys."""
    if protocol == "revfrf":
        make = ("securetrees setup kgc --participants U1 U2 ... --passphrase-dir DIR --out keys, then "
                "securetrees setup run revfrf --params keys/revfrf.public.toml ...")
        return dict.fromkeys(KGC_KEYS, make)
    held = PAILLIER_HOLDERS.get(protocol)
    if held is None or held.public_parameter is None:
        return {}
    return {held.public_parameter: f"securetrees setup keys {protocol} --party {holder} --out keys/{holder}.keys "
                                   f"(on {holder}'s machine; its {held.role} key), then securetrees setup run "
                                   f"{protocol} --params keys/{holder}.public.toml ..."}


def paillier_keys(protocol: str, party: str, out: str | Path, passphrase: bytes, *, bits: int = 2048,
                  allow_insecure: bool = False, checkpoint_key: bool = False, paillier: bool = True,
                  force: bool = False) -> dict[str, Any]:
    """Make ``party``'s Paillier key pair for ``protocol`` and seal it into the key file ``out``
    (with a fresh 32-byte ``checkpoint_key`` when asked); returns the public ``[protocol]`` parameters
    (the public key in hex under the protocol's key, ``key_bits``, and ``allow_insecure`` for a key
    under 2048 bits).  ``paillier=False`` writes the checkpoint key alone (a party that holds no
    Paillier key: a Federated Forest client without labels, a SecureBoost passive party, a HybridTree
    guest)."""
    holder = PAILLIER_HOLDERS.get(protocol)
    if holder is None and protocol in CHECKPOINT_ONLY and not paillier:
        holder = PaillierHolder("", None)  # a checkpoint key alone
    if holder is None:
        raise ParameterError(f"{protocol!r} has no Paillier key set-up; the protocols that do: "
                             f"{', '.join(sorted(PAILLIER_HOLDERS))} (RevFRF: securetrees setup kgc)")
    check_name(party)
    if not paillier and not checkpoint_key:
        raise ParameterError("nothing to write: no Paillier key and no checkpoint key")
    target = Path(out)
    if target.exists() and not force:
        raise OutputExistsError(f"refusing to overwrite {target} (--force replaces it)")
    if bits < 2048 and not allow_insecure:
        raise ParameterError(f"a {bits}-bit key is insecure: use 2048 bits or more (--insecure-1024 for a trial)")
    items: dict[str, bytes] = {}
    params: dict[str, Any] = {}
    if paillier:
        public, private = generate_keypair(bits, allow_insecure=allow_insecure)
        items["paillier_key"] = seal_paillier(private)(passphrase)
        params["key_bits"] = bits
        if bits < 2048:
            params["allow_insecure"] = True
        if holder.public_parameter is not None:
            params[holder.public_parameter] = public.to_bytes().hex()
    if checkpoint_key:
        items["checkpoint_key"] = SYSTEM_RANDOM.token_bytes(32)
    write_key_file(target, party, items, passphrase)
    return params


def write_public(path: str | Path, params: Mapping[str, Any], *, force: bool = False) -> Path:
    """Write public ``[protocol]`` parameters as a TOML file (``securetrees setup run --params`` reads it)."""
    target = Path(path)
    if target.exists() and not force:
        raise OutputExistsError(f"refusing to overwrite {target} (--force replaces it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("# public [protocol] parameters: no secret; merge with securetrees setup run --params\n"
                      + dump_toml({"protocol": dict(params)}), encoding="utf-8")
    return target
