"""The only source of secret randomness in securetrees.

Keys, blinding factors, coins, masks, nonces and encryption randomness all
come from a :class:`RandomSource`.  The default, :data:`SYSTEM_RANDOM`, draws
from the operating system's CSPRNG through :mod:`secrets`.  A
:class:`DeterministicRandom` (a SHAKE-256 stream keyed by a label) exists only
so that known-answer tests can pin exact numbers; it must never protect data.
A :class:`KeyedRandom` is the same construction under a secret 32-byte key drawn
from a :class:`RandomSource`: a party's repeatable choices (the same key and
label give the same numbers after a restart) that nobody without the key predicts.

Machine-learning randomness (bootstrap samples, feature subsets) is a separate
concern, seeded by the user through ``random_state``; it never feeds this
module and this module never feeds it.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Final, Protocol, runtime_checkable

from securetrees.errors import ParameterError

__all__ = ["SYSTEM_RANDOM", "DeterministicRandom", "KeyedRandom", "RandomSource", "SystemRandom"]


@runtime_checkable
class RandomSource(Protocol):
    """What every randomised function of securetrees draws from."""

    def randbelow(self, n: int, /) -> int:
        """A uniform integer in ``[0, n)``; ``n`` must be positive."""
        ...

    def randbits(self, k: int, /) -> int:
        """A uniform integer in ``[0, 2**k)``."""
        ...

    def token_bytes(self, k: int, /) -> bytes:
        """``k`` uniform bytes."""
        ...


def _check_bound(n: int) -> None:
    if n <= 0:
        raise ParameterError(f"upper bound must be positive, got {n}")


class SystemRandom:
    """The operating system's CSPRNG (:mod:`secrets`); the default everywhere."""

    __slots__ = ()

    def randbelow(self, n: int, /) -> int:
        _check_bound(n)
        return secrets.randbelow(n)

    def randbits(self, k: int, /) -> int:
        if k < 0:
            raise ParameterError(f"bit count must be non-negative, got {k}")
        return secrets.randbits(k) if k else 0

    def token_bytes(self, k: int, /) -> bytes:
        return secrets.token_bytes(k)

    def __repr__(self) -> str:
        return "SystemRandom()"


SYSTEM_RANDOM: Final[SystemRandom] = SystemRandom()


class _ShakeStream:
    """SHAKE-256 of ``domain || label || counter`` in 64-byte blocks; ``randbelow`` uses
    rejection sampling, so it is exactly uniform."""

    __slots__ = ("_buffer", "_counter", "_label")
    _domain = b""

    def __init__(self, label: bytes) -> None:
        self._label = label
        self._counter = 0
        self._buffer = b""

    def token_bytes(self, k: int, /) -> bytes:
        if k < 0:
            raise ParameterError(f"byte count must be non-negative, got {k}")
        while len(self._buffer) < k:
            block = hashlib.shake_256(
                self._domain + self._label + self._counter.to_bytes(8, "big")
            ).digest(64)
            self._counter += 1
            self._buffer += block
        out, self._buffer = self._buffer[:k], self._buffer[k:]
        return out

    def randbits(self, k: int, /) -> int:
        if k < 0:
            raise ParameterError(f"bit count must be non-negative, got {k}")
        if k == 0:
            return 0
        value = int.from_bytes(self.token_bytes((k + 7) // 8), "big")
        return value >> (-k % 8)

    def randbelow(self, n: int, /) -> int:
        _check_bound(n)
        k = n.bit_length()
        while True:
            value = self.randbits(k)
            if value < n:
                return value

class DeterministicRandom(_ShakeStream):
    """A reproducible stream for known-answer tests only: NOT for protecting data.

    Output is SHAKE-256 of ``label || counter`` in 64-byte blocks, so two
    sources with the same label produce the same numbers on every platform.
    ``randbelow`` uses rejection sampling, so it is exactly uniform.
    """

    __slots__ = ()
    _domain = b"securetrees/deterministic/"

    def __init__(self, label: bytes | str) -> None:
        super().__init__(label.encode() if isinstance(label, str) else bytes(label))

    def __repr__(self) -> str:
        return f"DeterministicRandom(label={self._label!r})"


class KeyedRandom(_ShakeStream):
    """A pseudorandom stream under a secret key: SHAKE-256 of ``key || label || counter``
    (the key is 32 bytes drawn from a :class:`RandomSource`, so the stream is a PRF of the
    label).  A party uses it for choices it must be able to repeat exactly after a restart
    (the same key and label give the same numbers) yet others must not predict."""

    __slots__ = ()
    _domain = b"securetrees/keyed/"

    def __init__(self, key: bytes, label: bytes | str) -> None:
        if not isinstance(key, bytes) or len(key) != 32:
            raise ParameterError("a KeyedRandom key is 32 bytes")
        super().__init__(key + (label.encode() if isinstance(label, str) else bytes(label)))

    def __repr__(self) -> str:
        return "KeyedRandom(key=<hidden>)"
