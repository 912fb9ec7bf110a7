"""Sample-id alignment by a keyed hash (``specs/federated_forest.md``, "Setup"; paper Section 4.3).

The paper hashes ids and then applies MD5, which anyone can recompute over a
guessed id space.  Here the clients share a secret key (the master never
gets it) and send ``HMAC-SHA256(key, id)``; the canonical sample order is the
sorted list of these values, so every party can compute it alone.

This is the trusted setting only: the master with any one client's key can hash guessed ids
and look for them in the digests every client sent, and every client must hold exactly the
same ids (no intersection).  Between
clients that do not trust each other with their id sets, align with private set intersection
first (:mod:`securetrees.psi`, ``specs/psi.md``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError

__all__ = ["DIGEST_BYTES", "MIN_KEY_BYTES", "canonical_order", "check_aligned", "hash_ids", "split_digests"]

MIN_KEY_BYTES = 16
DIGEST_BYTES = 32


def hash_ids(key: bytes, ids: Sequence[object]) -> tuple[bytes, ...]:
    """``HMAC-SHA256(key, str(id))`` of each id; duplicate ids raise ParameterError."""
    if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
        raise ParameterError(f"the id key must be at least {MIN_KEY_BYTES} bytes")
    out = tuple(hmac.new(key, str(i).encode("utf-8"), hashlib.sha256).digest() for i in ids)
    if len(set(out)) != len(out):
        raise ParameterError("sample ids must be unique")
    return out


def canonical_order(hashed: Sequence[bytes]) -> npt.NDArray[np.int64]:
    """The permutation that sorts the hashed ids: row ``order[j]`` is canonical sample ``j``."""
    return np.asarray(sorted(range(len(hashed)), key=hashed.__getitem__), dtype=np.int64)


def split_digests(blob: bytes) -> list[bytes]:
    """Concatenated digests (the wire form) back to a list; ParameterError on a ragged blob."""
    if len(blob) % DIGEST_BYTES:
        raise ParameterError("hashed ids must be whole 32-byte digests")
    return [blob[i:i + DIGEST_BYTES] for i in range(0, len(blob), DIGEST_BYTES)]


def check_aligned(reports: Sequence[Sequence[bytes]]) -> None:
    """Raise ParameterError unless every party reported the same set of distinct ids."""
    if not reports:
        raise ParameterError("no id reports")
    first = reports[0]
    ref = set(first)
    if len(ref) != len(first):
        raise ParameterError("a party reported duplicate sample ids")
    for other in reports[1:]:
        if len(other) != len(first) or set(other) != ref:
            raise ParameterError("sample ids are not aligned across parties")
