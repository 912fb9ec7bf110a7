"""Mask expansion: AES-256-CTR keystream from a derived key (CRYPTO_NOTES §4).

Each derived key seeds exactly one stream (the counter block starts at zero),
so no (key, nonce) pair is ever reused.  For a modulus ``2^k`` the keystream
is read directly as little-endian ``uint64`` words (and the top ``64 - k`` bits
cleared), which is exactly uniform; for any other modulus (``Z_N`` for
Paillier plaintexts) each element is drawn by rejection sampling from
``bitlen(N)``-bit candidates, so there is no modular bias.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms, modes

from securetrees.errors import ParameterError
from securetrees.secagg.keyagree import KEY_BYTES

__all__ = ["MaskExpander", "expand_mod", "keystream_bytes"]

_BLOCK = 16
_ZERO_COUNTER = bytes(_BLOCK)

U64Array = npt.NDArray[np.uint64]


def _encryptor(key: bytes) -> CipherContext:
    if len(key) != KEY_BYTES:
        raise ParameterError(f"a mask key has {KEY_BYTES} bytes, got {len(key)}")
    return Cipher(algorithms.AES(key), modes.CTR(_ZERO_COUNTER)).encryptor()


def keystream_bytes(key: bytes, nbytes: int) -> bytes:
    """The first ``nbytes`` of the stream of ``key`` (allocating; for small outputs)."""
    if nbytes < 0:
        raise ParameterError("byte count must be non-negative")
    return _encryptor(key).update(bytes(nbytes))


class MaskExpander:
    """Expands keys into ``uint64`` masks in place, reusing its buffers between calls.

    One expander per party and thread: the buffers are not shared.
    """

    __slots__ = ("_buffer", "_zeros")

    def __init__(self) -> None:
        self._zeros = b""
        self._buffer = bytearray()

    def stream(self, key: bytes, count: int) -> U64Array:
        """The first ``count`` keystream words of ``key``: a view valid until the next call."""
        nbytes = 8 * count
        if len(self._zeros) < nbytes:
            self._zeros = bytes(nbytes)
            self._buffer = bytearray(nbytes + _BLOCK)
        view = memoryview(self._zeros)[:nbytes]
        _encryptor(key).update_into(view, self._buffer)
        return np.frombuffer(self._buffer, dtype=np.uint64, count=count)

    def u64(self, key: bytes, count: int, *, bits: int = 64) -> U64Array:
        """A fresh array of ``count`` uniform values mod ``2^bits``."""
        out: U64Array = self.stream(key, count).copy()
        if bits < 64:
            np.bitwise_and(out, np.uint64((1 << bits) - 1), out=out)
        return out

    def accumulate(self, acc: U64Array, key: bytes, *, subtract: bool = False) -> None:
        """``acc ±= PRG(key)`` mod 2^64 in place (callers reduce mod 2^k at the end)."""
        if acc.dtype != np.uint64 or acc.ndim != 1:
            raise ParameterError("the accumulator must be a one-dimensional uint64 array")
        stream = self.stream(key, acc.shape[0])
        if subtract:
            np.subtract(acc, stream, out=acc)
        else:
            np.add(acc, stream, out=acc)


def expand_mod(key: bytes, count: int, modulus: int) -> list[int]:
    """``count`` uniform integers in ``[0, modulus)`` by rejection sampling."""
    if modulus < 2:
        raise ParameterError("the modulus must be at least 2")
    if count < 0:
        raise ParameterError("count must be non-negative")
    bits = (modulus - 1).bit_length()
    width = (bits + 7) // 8
    top = (1 << bits) - 1
    enc = _encryptor(key)
    out: list[int] = []
    while len(out) < count:
        # Every candidate is accepted with probability > 1/2; ask for a little more than needed.
        need = count - len(out)
        chunk = enc.update(bytes(width * (need + need // 2 + 4)))
        for start in range(0, len(chunk), width):
            value = int.from_bytes(chunk[start : start + width], "little") & top
            if value < modulus:
                out.append(value)
                if len(out) == count:
                    break
    return out
