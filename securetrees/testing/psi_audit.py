"""Audits of a PSI run's secrets as a curious party would run them (``specs/psi.md``).

* **Fresh scalars** (:func:`reused_points`): a party draws its blinding scalar afresh for
  every run.  Two runs under the *same* session id (the leader chooses it, so a curious leader
  can repeat it; :class:`Overridden` makes the harness do so) then still give unrelated
  points; a reused scalar gives the same point for the same id, so the leader links the
  member's ids across runs and can test, in a later run, points it kept from an earlier one
  (and a member whose leader reused its scalar links the leader's ids the same way).
* **The agreed order is the leader's secret.**  The leader sorts the intersection by a keyed
  hash of the double-blinded values, under a key only it holds.  Two checks:

  - :func:`order_attack`, the first member's attack: it computed every double-blinded value
    ``b·a·H(x_j)`` itself, in the leader's row order ``j``.  If the order were a public
    function of what it saw, it would recompute it and name, for each of its ids in the
    intersection, the leader's row that holds it.  It tries each of :data:`ORDERINGS`; under the
    keyed hash the order is a uniformly random permutation independent of them, so it names
    ``t`` or more rows correctly with probability at most ``1/t!`` per ordering (the fixed
    points of a uniform permutation).
  - two runs whose every message is the same and whose leaders draw different order keys
    (:class:`Overridden` on the key's draw) must give different orders: an order that is any
    function of the views, whatever the function, gives the same one twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from securetrees.psi import messages as m
from securetrees.psi.group import Id, split_points
from securetrees.rand import RandomSource
from securetrees.runtime import Record, Transcript

__all__ = ["ORDERINGS", "Overridden", "order_attack", "reused_points", "sent_points"]

IntArray = npt.NDArray[np.int64]


def sent_points(records: Iterable[Record], party: str) -> set[bytes]:
    """Every point ``party`` sent in ``records``: its blinded chunks (leader) or its
    double-blinded and own blinded chunks (member)."""
    out: set[bytes] = set()
    for r in records:
        if r.sender != party:
            continue
        if isinstance(r.payload, m.Exchange):
            out |= set(split_points(r.payload.points))
        elif isinstance(r.payload, m.ExchangeReply):
            out |= set(split_points(r.payload.double)) | set(split_points(r.payload.own))
    return out


def reused_points(first: Iterable[Record], second: Iterable[Record], party: str) -> set[bytes]:
    """The points ``party`` sent in both of two runs (fresh scalars: none, with probability
    above ``1 - K²/2^250`` for ``K`` points, even under one session id)."""
    return sent_points(first, party) & sent_points(second, party)


class Overridden:
    """A party's random source in which every draw of ``size`` bytes is ``value`` (the PSI
    leader draws its 16-byte session id and its 32-byte order key this way; scalars are 64
    bytes): the audits' harness for two runs under one session id, or under two chosen keys."""

    def __init__(self, inner: RandomSource, size: int, value: bytes) -> None:
        self._inner, self._size, self._value = inner, size, value

    def randbelow(self, n: int, /) -> int:
        return self._inner.randbelow(n)

    def randbits(self, k: int, /) -> int:
        return self._inner.randbits(k)

    def token_bytes(self, k: int, /) -> bytes:
        return self._value if k == self._size else self._inner.token_bytes(k)


def _as_bytes(points: Sequence[bytes]) -> IntArray:
    return np.asarray(sorted(range(len(points)), key=lambda j: points[j]), dtype=np.int64)


def _as_integers(points: Sequence[bytes]) -> IntArray:
    return np.asarray(sorted(range(len(points)), key=lambda j: int.from_bytes(points[j], "little")),
                      dtype=np.int64)


def _leader_rows(points: Sequence[bytes]) -> IntArray:
    return np.arange(len(points), dtype=np.int64)


ORDERINGS: tuple[Callable[[Sequence[bytes]], IntArray], ...] = (_as_bytes, _as_integers, _leader_rows)
"""The public orderings the member tries: the double-blinded values' bytes, their u-coordinates
as numbers, and the leader's row order itself."""


def _double_blinded(transcript: Transcript, member: str) -> list[bytes]:
    """``b·a·H(x_j)`` in the leader's row order, from the member's own replies."""
    replies = sorted((r.payload for r in transcript.sent(member) if isinstance(r.payload, m.ExchangeReply)),
                     key=lambda p: p.index)
    return [p for reply in replies for p in split_points(reply.double)]


def order_attack(transcript: Transcript, member: str, member_ids: Sequence[Id], member_rows: IntArray,
                 leader_ids: Sequence[Id]) -> int:
    """The member's attack on the agreed order: the most ids of the intersection, over
    :data:`ORDERINGS`, whose leader row it names correctly by taking the ``i``-th row of the
    ordering as the row of the ``i``-th id of the agreed order.  ``member_rows`` is the
    member's result (its rows in the agreed order); ``leader_ids`` is used only to score the
    guesses.  Exact when every leader id is in the intersection."""
    double = _double_blinded(transcript, member)
    where = {v: j for j, v in enumerate(leader_ids)}
    truth = np.asarray([where[member_ids[int(k)]] for k in member_rows], dtype=np.int64)
    best = 0
    for ordering in ORDERINGS:
        guess = ordering(double)[:truth.size]
        best = max(best, int((guess == truth).sum()))
    return best
