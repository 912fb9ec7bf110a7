"""Mask expansion: AES-256-CTR keystream from a derived key (``specs/secagg.md``, "Rings, bounds and defaults").

Each derived key seeds exactly one stream (the counter block starts at zero),
so no (key, nonce) pair is ever reused.  :meth:`MaskExpander.accumulate` adds
many masks (and vectors) to an accumulator in one cache-blocked pass: for
each block of the accumulator it expands the next block of every mask's
stream into a small reused buffer and adds it while both are still in cache,
so a mask costs its keystream plus an in-cache addition and no party
allocates mask-sized buffers.  For a modulus ``2^k`` the keystream
is read directly as little-endian ``uint64`` words (and the top ``64 - k`` bits
cleared), which is exactly uniform; for any other modulus (``Z_N`` for
Paillier plaintexts) each element is drawn by rejection sampling from
``bitlen(N)``-bit candidates, so there is no modular bias.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms, modes

from securetrees.errors import ParameterError
from securetrees.secagg.keyagree import KEY_BYTES

__all__ = ["MaskExpander", "MaskTerm", "expand_mod", "keystream_bytes"]

_BLOCK = 16
_ZERO_COUNTER = bytes(_BLOCK)
_CHUNK_WORDS = 1 << 15
"""Words per block of :meth:`MaskExpander.accumulate`: 256 KiB of keystream stays in L2."""
_CHUNK_ZEROS = bytes(8 * _CHUNK_WORDS)  # immutable CTR input, shared by every expander

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


class MaskTerm(NamedTuple):
    """One mask of a sum: ``-PRG(key)`` if ``subtract`` else ``+PRG(key)``."""

    key: bytes
    subtract: bool = False


class MaskExpander:
    """Expands keys into ``uint64`` masks, reusing its buffers between calls.

    One expander per party and thread: the buffers are not shared.
    """

    __slots__ = ("_block", "_block_words", "_buffer", "_zeros")

    def __init__(self) -> None:
        self._zeros = b""
        self._buffer = bytearray()
        self._block = bytearray(8 * _CHUNK_WORDS + _BLOCK)
        self._block_words = np.frombuffer(self._block, dtype=np.uint64, count=_CHUNK_WORDS)

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

    def accumulate(
        self,
        acc: U64Array,
        masks: Sequence[MaskTerm],
        *,
        plus: Sequence[U64Array] = (),
    ) -> None:
        """``acc += sum(plus) ± PRG(key)`` for every mask, mod 2^64, in place (callers reduce mod 2^k).

        One pass over ``acc`` in blocks of ``_CHUNK_WORDS``: each block of ``acc``
        receives the same block of every vector in ``plus`` and of every mask's stream
        while it is in cache.  The result equals adding the whole streams one by one.
        """
        if not isinstance(acc, np.ndarray) or acc.dtype != np.uint64 or acc.ndim != 1:
            raise ParameterError("the accumulator must be a one-dimensional uint64 array")
        if not acc.flags.writeable:
            raise ParameterError("the accumulator must be writable")
        count = acc.shape[0]
        for v in plus:
            if not isinstance(v, np.ndarray) or v.dtype != np.uint64 or v.shape != acc.shape:
                raise ParameterError("every added vector must be a uint64 array shaped like acc")
        streams = [(_encryptor(m.key), np.subtract if m.subtract else np.add) for m in masks]
        zeros = memoryview(_CHUNK_ZEROS)
        block, words = self._block, self._block_words
        for start in range(0, count, _CHUNK_WORDS):
            stop = min(start + _CHUNK_WORDS, count)
            part = acc[start:stop]
            for v in plus:
                np.add(part, v[start:stop], out=part)
            n = stop - start
            src, out = (zeros, words) if n == _CHUNK_WORDS else (zeros[: 8 * n], words[:n])
            for ctx, op in streams:
                ctx.update_into(src, block)
                op(part, out, out=part)


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
