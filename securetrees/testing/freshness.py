"""Ciphertext freshness: every ciphertext that leaves a party carries randomness of its own.

A ciphertext is *fresh* when its randomness was drawn for it: never one the sender used
before, never one it received (forwarded, or shifted by a plaintext constant), never none
at all, and never a deterministic function of what the sender holds.  A stale ciphertext
lets its receiver (or anyone who sees two of them) link plaintexts: for Paillier,
``c·c'⁻¹ = 1 + (m − m')·N`` when ``c`` and ``c'`` share an obfuscator, and a bucket sum that
was not re-randomised is the product of the key owner's own ciphertexts, whose obfuscators
the key owner knows.

The checks work on *fingerprints*: a number that depends on a ciphertext's randomness and not
on its plaintext.  For Paillier ``c = (1 + mN)·r^N mod N²`` the fingerprint is ``c mod N =
r^N mod N`` (:func:`paillier_fingerprints`): ``r ↦ r^N`` permutes the units mod ``N``, so two
ciphertexts share it exactly when they share ``r mod N``, and adding a plaintext constant
(a factor ``(1 + kN)``) keeps it.  For DT-PKC ``(T1, T2) = ((1 + mN)·h^r, g^r)`` it is
``T2 = g^r`` (:func:`dtpkc_fingerprints`; ``g`` is common to every key, so equal ``T2`` means
equal ``r`` under any two keys).

* :func:`stale_ciphertexts` reads a transcript as the receivers would: a fingerprint equal
  to 1 (no randomness), one seen in two messages of the sender, or one seen in a message the
  sender received.
* :func:`replayed_fingerprints` compares what one step returned when it ran twice on the
  same input: a fresh step shares nothing between the two outputs, neither a fingerprint nor
  (given the modulus) a ratio of two consecutive fingerprints, which a single re-randomisation
  factor per run would keep.

False alarms: fresh fingerprints are uniform over the ``φ(N)`` units (DT-PKC: over the
subgroup ``g`` generates, of order above ``2^(bitlen(N)−2)``), so ``K`` of them collide, or
meet any of ``K`` fixed values, with probability at most ``K²/2^(bitlen(N)−2)``: below
``2^-900`` for a million ciphertexts under a 1024-bit test key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

from securetrees.paillier.pool import RandomnessPool
from securetrees.paillier.prefill import BackgroundPool
from securetrees.runtime.transcript import Transcript

__all__ = [
    "Fingerprints",
    "FixedRandom",
    "Stale",
    "assert_fresh",
    "assert_replay_fresh",
    "dtpkc_fingerprints",
    "paillier_fingerprints",
    "repeating_pool",
    "replayed_fingerprints",
    "stale_ciphertexts",
]

Fingerprints = Callable[[Any], Iterable[int]]
"""The fingerprints of the ciphertexts a message payload carries (one per ciphertext)."""

StaleKind = Literal["trivial", "repeated", "echoed"]


@dataclass(frozen=True)
class Stale:
    """One stale ciphertext: how it is stale, who sent it in which message type."""

    kind: StaleKind
    sender: str
    type_name: str
    fingerprint: int


class FixedRandom:
    """A random source that draws the same value every time (planted leaks only): encryption
    randomness that is a constant, so every ciphertext is a function of its plaintext."""

    def randbelow(self, n: int, /) -> int:
        return 0xC0FFEE % n or 1

    def randbits(self, k: int, /) -> int:
        return (0xC0FFEE | 1) & ((1 << k) - 1)

    def token_bytes(self, k: int, /) -> bytes:
        return b"\x5a" * k


def repeating_pool() -> type[BackgroundPool]:
    """A background randomness pool that serves the obfuscators of its first batch again at every
    later batch (planted leaks on the pool path: put it in place of
    ``securetrees.paillier.prefill.BackgroundPool``).  Each call gives a class with its own state."""
    served: list[Any] = []

    class RepeatingPool(BackgroundPool):
        def ready(self, count: int) -> RandomnessPool:
            pool = super().ready(count)
            values = [pool.take() for _ in range(len(pool))]
            if not served:
                served.extend(values)
            pool.extend(served)
            return pool

    return RepeatingPool


def paillier_fingerprints(values: Iterable[int], n: int) -> list[int]:
    """``c mod N`` of each Paillier ciphertext value ``c`` (``r^N mod N``: its randomness only)."""
    return [int(v) % n for v in values]


def dtpkc_fingerprints(t2_values: Iterable[int]) -> list[int]:
    """``T2 = g^r`` of each DT-PKC ciphertext (its randomness only)."""
    return [int(v) for v in t2_values]


def _scan(transcript: Transcript, sender: str, fingerprints: Mapping[str, Fingerprints]) -> tuple[list[Stale], int]:
    """The stale ciphertexts ``sender`` sent and how many ciphertexts it sent, reading the
    transcript in order (a ciphertext is echoed only if its sender had received it before).
    A broadcast (one byte string to several receivers) counts once; the same bytes twice to
    one receiver count twice."""
    received: set[int] = set()
    used: set[int] = set()
    receivers: dict[bytes | int, set[str]] = {}
    found: list[Stale] = []
    count = 0
    for r in transcript.records:
        read = fingerprints.get(r.type_name)
        if read is None or r.payload is None:
            continue
        if r.receiver == sender:
            received.update(read(r.payload))
            continue
        if r.sender != sender:
            continue
        key: bytes | int = r.data if r.data is not None else id(r.payload)
        copies = receivers.setdefault(key, set())
        if copies and r.receiver not in copies:  # the same broadcast to another receiver
            copies.add(r.receiver)
            continue
        copies.add(r.receiver)
        for f in read(r.payload):
            count += 1
            kind: StaleKind | None = ("trivial" if f == 1 else "echoed" if f in received
                                      else "repeated" if f in used else None)
            if kind is not None:
                found.append(Stale(kind, sender, r.type_name, f))
            used.add(f)
    return found, count


def stale_ciphertexts(transcript: Transcript, sender: str, fingerprints: Mapping[str, Fingerprints]
                      ) -> list[Stale]:
    """Every stale ciphertext ``sender`` sent in the message types of ``fingerprints``:
    fingerprint 1 (``trivial``), a fingerprint already in an earlier message or twice in one
    (``repeated``), or one of a ciphertext ``sender`` had received (``echoed``)."""
    return _scan(transcript, sender, fingerprints)[0]


def assert_fresh(transcript: Transcript, senders: Iterable[str], fingerprints: Mapping[str, Fingerprints]) -> None:
    """:func:`stale_ciphertexts` of each sender; ``AssertionError`` naming the stale ones.
    Also fails when no sender sent a ciphertext of these types (a check that saw nothing)."""
    names = list(senders)
    scans = [_scan(transcript, name, fingerprints) for name in names]
    if not any(count for _, count in scans):
        raise AssertionError(f"no ciphertext of {sorted(fingerprints)} sent by {names}: nothing was checked")
    stale = [s for found, _ in scans for s in found]
    if stale:
        kinds = sorted({(s.sender, s.type_name, s.kind) for s in stale})
        raise AssertionError(f"{len(stale)} stale ciphertexts: {kinds}")


def _ratios(values: list[int], modulus: int) -> set[int]:
    """``a_j · a_{j+1}⁻¹ mod modulus`` of consecutive fingerprints."""
    return {a * pow(b, -1, modulus) % modulus for a, b in pairwise(values)}


def replayed_fingerprints(first: Iterable[int], second: Iterable[int], modulus: int | None = None) -> set[int]:
    """What two runs of one step on the same input have in common (fresh: nothing): shared
    fingerprints and, given the ``modulus`` of the fingerprints, shared ratios of consecutive
    fingerprints (a step that re-randomises every output with one factor per run keeps them)."""
    a, b = list(first), list(second)
    common = set(a) & set(b)
    if modulus is not None:
        common |= _ratios(a, modulus) & _ratios(b, modulus)
    return common


def assert_replay_fresh(first: Iterable[int], second: Iterable[int], modulus: int | None = None) -> None:
    """``AssertionError`` if the two outputs of one step on the same input share randomness
    (:func:`replayed_fingerprints`: the step's ciphertexts are a deterministic function of its
    input, up to one factor per run), or if either is empty."""
    a, b = list(first), list(second)
    if not a or not b:
        raise AssertionError("a replayed step returned no ciphertext: nothing was checked")
    common = replayed_fingerprints(a, b, modulus)
    if common:
        raise AssertionError(f"{len(common)} fingerprints or ratios of {len(a)} ciphertexts came back unchanged "
                             "on the same input: not re-randomised")
