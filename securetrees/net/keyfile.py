"""A party's secrets on disk: one passphrase-sealed file per party.

The file is the library's one sealing envelope (:mod:`securetrees.sealing`: scrypt,
AES-256-GCM; see ``specs/paillier.md``) around a wire-codec :class:`KeyBundle`, a map from item
names to bytes, so no new format is introduced and nothing is unpickled.  A
protocol decides what its items are (a DT-PKC weak key, a strong-key share, an
Ed25519 seed, a session id, an HMAC key...).  The bundle names its party; opening
it for another party raises :class:`~securetrees.errors.KeyMismatchError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from securetrees.errors import DecodeError, KeyMismatchError, ParameterError
from securetrees.files import write_private
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import codec
from securetrees.runtime.messages import Message, message
from securetrees.sealing import open_sealed, seal

__all__ = ["KeyBundle", "open_key_file", "write_key_file"]

_LABEL = b"securetrees.keyfile.v1"


@message("securetrees.keyfile")
@dataclass(frozen=True)
class KeyBundle(Message):
    """The plaintext of a key file: whose it is, and its named secret items."""

    party: str
    items: dict[str, bytes]

    def __repr__(self) -> str:
        return f"KeyBundle({self.party!r}, items={sorted(self.items)})"


def _kid(party: str) -> bytes:
    return hashlib.sha256(b"securetrees key file\x00" + party.encode("utf-8")).digest()[:16]


def write_key_file(path: str | Path, party: str, items: Mapping[str, bytes], passphrase: bytes, *,
                   rng: RandomSource = SYSTEM_RANDOM) -> None:
    """Seal ``items`` for ``party`` under ``passphrase`` into ``path`` (mode 0600)."""
    if not all(isinstance(k, str) and isinstance(v, bytes) for k, v in items.items()):
        raise ParameterError("key-file items map names to bytes")
    data = seal(_LABEL, _kid(party), codec.encode(KeyBundle(party, dict(items))), passphrase, rng=rng)
    write_private(path, data)


def open_key_file(path: str | Path, party: str, passphrase: bytes) -> dict[str, bytes]:
    """The items of ``party``'s key file; :class:`DecodeError` on a wrong passphrase or a
    modified file, :class:`KeyMismatchError` when the file belongs to another party."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ParameterError(f"cannot read the key file of {party!r}: {exc}") from exc
    label, kid, secret = open_sealed(data, passphrase)
    if label != _LABEL:
        raise DecodeError("not a securetrees key file")
    bundle = codec.decode(secret)
    if not isinstance(bundle, KeyBundle):
        raise DecodeError("not a securetrees key file")
    if bundle.party != party or kid != _kid(party):
        raise KeyMismatchError(f"this key file belongs to {bundle.party!r}, not {party!r}")
    return dict(bundle.items)
