"""Test-only helpers: deterministic randomness, tiny keys built from given primes,
transcript scanners.  Nothing here may protect real data: keys built here are
outside the size policy on purpose, and :class:`~securetrees.rand.DeterministicRandom`
is predictable by design."""

from securetrees.rand import DeterministicRandom

__all__ = ["DeterministicRandom"]
