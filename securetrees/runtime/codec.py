"""The wire codec: messages to bytes and back, strict and self-describing, never pickle.

Frame: ``b"ST"``, a version byte (1), the message (see below).  Values are
tagged: ``0x00`` None, ``0x01``/``0x02`` False/True, ``0x03`` int (LEB128
byte length, then two's-complement big-endian bytes), ``0x04`` float (IEEE
754 binary64, big-endian), ``0x05`` str (length, UTF-8), ``0x06`` bytes
(length, raw), ``0x07`` sequence (count, items), ``0x08`` map (count, then
str key and value pairs), ``0x09`` numpy array (dtype string, ndim, dims,
raw little-endian data), ``0x0A`` message (wire type name, then its fields
in declaration order, without names).

Decoding is driven by the receiver's own message classes: the wire type
name must be registered, and each field is read against its annotation
(``tuple`` vs ``list``, element types, fixed tuple arity, ``X | None``,
nested messages).  Anything else raises :class:`~securetrees.errors.DecodeError`:
unknown tags or names, truncated or trailing bytes, non-canonical or
oversized lengths, object or unsupported dtypes, excessive nesting.
Decoding bytes from a peer never runs code.  See ``specs/runtime.md``.
"""

from __future__ import annotations

import struct
import types
import typing
from typing import Any, Final

import numpy as np

from securetrees.errors import DecodeError, SecureTreesError
from securetrees.runtime.messages import Message, message_class, message_fields

__all__ = ["MAX_DEPTH", "MAX_INT_BYTES", "MAX_MESSAGE_BYTES", "WIRE_VERSION", "decode", "encode", "message_type"]

WIRE_VERSION: Final = 1
MAGIC: Final = b"ST"
MAX_MESSAGE_BYTES: Final = 1 << 30
"""Largest frame accepted (1 GiB): a ciphertext batch fits, a memory bomb does not."""
MAX_INT_BYTES: Final = 1 << 16
"""Largest integer accepted on the wire (512 kbit): far above any modulus in use."""
MAX_DEPTH: Final = 32

_NONE, _FALSE, _TRUE, _INT, _FLOAT, _STR, _BYTES, _SEQ, _MAP, _ARRAY, _MSG = range(11)
_DTYPES: Final = frozenset(
    {"|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f4", "<f8"}
)
_MPZ_TYPE: Final = type(__import__("gmpy2").mpz(0))
_NoneType = type(None)


# --------------------------------------------------------------------------- encoding


class _Out(bytearray):
    """The frame being built: small values go into this buffer, large arrays are kept as
    zero-copy views and joined once at the end (one copy of array data per message)."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[bytes | memoryview] = []

    def blob(self, view: memoryview) -> None:
        self.chunks.append(bytes(self))
        self.chunks.append(view)
        del self[:]

    def frame(self) -> bytes:
        if not self.chunks:
            return bytes(self)
        return b"".join([*self.chunks, bytes(self)])

    def size(self) -> int:
        return len(self) + sum(len(c) for c in self.chunks)


def _varint(n: int, out: bytearray) -> None:
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _encode_int(v: int, out: _Out) -> None:
    length = (v.bit_length() + 8) // 8  # room for the sign bit
    out.append(_INT)
    _varint(length, out)
    out += v.to_bytes(length, "big", signed=True)


def _encode_value(v: Any, out: _Out, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise DecodeError("message nests too deeply to encode")
    # str, bytes and sequences first (the most frequent values): no type is both one of them and
    # a bool, integer or float (their layouts conflict), so this order encodes exactly as before.
    if v is None:
        out.append(_NONE)
    elif isinstance(v, str):
        data = v.encode("utf-8")
        out.append(_STR)
        _varint(len(data), out)
        out += data
    elif isinstance(v, (bytes, bytearray, memoryview)):
        data = bytes(v)
        out.append(_BYTES)
        _varint(len(data), out)
        out += data
    elif isinstance(v, (list, tuple)):
        out.append(_SEQ)
        _varint(len(v), out)
        for item in v:
            _encode_value(item, out, depth + 1)
    elif v is True or v is False or isinstance(v, np.bool_):
        out.append(_TRUE if v else _FALSE)
    elif isinstance(v, (int, np.integer, _MPZ_TYPE)):
        _encode_int(int(v), out)
    elif isinstance(v, (float, np.floating)):
        out.append(_FLOAT)
        out += struct.pack(">d", float(v))
    elif isinstance(v, dict):
        out.append(_MAP)
        _varint(len(v), out)
        for key, item in v.items():
            if not isinstance(key, str):
                raise DecodeError("only str keys can be sent in a map")
            data = key.encode("utf-8")
            _varint(len(data), out)
            out += data
            _encode_value(item, out, depth + 1)
    elif isinstance(v, np.ndarray):
        arr = v if v.flags.c_contiguous else np.array(v, order="C")
        dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
        arr = arr.astype(dtype, copy=False)
        if dtype.str not in _DTYPES:
            raise DecodeError(f"numpy dtype {arr.dtype} cannot be sent")
        name = dtype.str.encode()
        out.append(_ARRAY)
        _varint(len(name), out)
        out += name
        _varint(arr.ndim, out)
        for dim in arr.shape:
            _varint(dim, out)
        if arr.nbytes >= 4096:
            out.blob(arr.reshape(-1).view(np.uint8).data)
        else:
            out += arr.tobytes()
    elif isinstance(v, Message):
        _encode_message(v, out, depth + 1)
    else:
        raise DecodeError(f"a value of type {type(v).__name__} cannot be sent")


def _encode_message(msg: Message, out: _Out, depth: int) -> None:
    if not msg.wire_type:
        raise DecodeError(f"{type(msg).__name__} is not a registered message")
    name = msg.wire_type.encode()
    out.append(_MSG)
    _varint(len(name), out)
    out += name
    for field_name, _ in message_fields(type(msg)):
        _encode_value(getattr(msg, field_name), out, depth)


def encode(msg: Message) -> bytes:
    """The wire bytes of ``msg``."""
    if not isinstance(msg, Message):
        raise DecodeError(f"only messages can be sent, not {type(msg).__name__}")
    out = _Out()
    out += MAGIC
    out.append(WIRE_VERSION)
    _encode_message(msg, out, 0)
    size = out.size()
    if size > MAX_MESSAGE_BYTES:
        raise DecodeError(f"message of {size} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit")
    return out.frame()


# --------------------------------------------------------------------------- decoding


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise DecodeError("truncated message")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise DecodeError("truncated message")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self, limit: int) -> int:
        pos = self.pos
        if pos < len(self.data) and self.data[pos] < 0x80:  # one byte: the common case
            value = self.data[pos]
            if value > limit:
                raise DecodeError(f"length {value} exceeds its limit {limit}")
            self.pos = pos + 1
            return value
        value = shift = 0
        for _ in range(10):
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                if b == 0 and shift:
                    raise DecodeError("non-canonical length encoding")
                if value > limit:
                    raise DecodeError(f"length {value} exceeds its limit {limit}")
                return value
            shift += 7
        raise DecodeError("length field too long")

    def text(self) -> str:
        raw = self.take(self.varint(len(self.data)))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError("invalid UTF-8 text") from exc


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


def _expect(tag: int, wanted: int, tp: Any) -> None:
    if tag != wanted:
        raise DecodeError(f"expected a value of type {_type_name(tp)}, found wire tag {tag}")


def _read_int(r: _Reader) -> int:
    length = r.varint(MAX_INT_BYTES)
    if length == 0:
        raise DecodeError("empty integer")
    raw = r.take(length)
    value = int.from_bytes(raw, "big", signed=True)
    if length != (value.bit_length() + 8) // 8:
        raise DecodeError("non-canonical integer encoding")
    return value


def _read_array(r: _Reader) -> np.ndarray:
    dtype_name = r.take(r.varint(8)).decode("ascii", errors="replace")
    if dtype_name not in _DTYPES:
        raise DecodeError(f"numpy dtype {dtype_name!r} is not accepted")
    dtype = np.dtype(dtype_name)
    ndim = r.varint(8)
    shape = tuple(r.varint(MAX_MESSAGE_BYTES) for _ in range(ndim))
    count = extent = 1
    for dim in shape:
        count *= dim
        extent *= max(dim, 1)
    nbytes = count * dtype.itemsize
    # The extent bounds the shape even when one dimension is zero: numpy refuses a shape
    # whose product of the other dimensions overflows its index type, with its own ValueError.
    if extent * dtype.itemsize > MAX_MESSAGE_BYTES:
        raise DecodeError("array too large")
    if r.pos + nbytes > len(r.data):
        raise DecodeError("truncated message")
    arr: np.ndarray = np.frombuffer(r.data, dtype=dtype, count=count, offset=r.pos).reshape(shape).copy()
    r.pos += nbytes
    if dtype.kind == "b" and arr.view(np.uint8).max(initial=0) > 1:
        raise DecodeError("boolean array holds values other than 0 and 1")
    return arr


def _decode_value(r: _Reader, tp: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise DecodeError("message nests too deeply")
    # A plain class (str, bytes, int, a message, np.ndarray) has no origin: skip the lookup.
    origin = None if type(tp) is type else typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return _decode_union(r, typing.get_args(tp), depth)
    tag = r.byte()
    if tp is Any:
        return _decode_any(r, tag, depth)
    if tp is None or tp is _NoneType:
        _expect(tag, _NONE, tp)
        return None
    if tp is bool:
        if tag not in (_FALSE, _TRUE):
            _expect(tag, _TRUE, tp)
        return tag == _TRUE
    if tp is int:
        _expect(tag, _INT, tp)
        return _read_int(r)
    if tp is float:
        _expect(tag, _FLOAT, tp)
        return float(struct.unpack(">d", r.take(8))[0])
    if tp is str:
        _expect(tag, _STR, tp)
        return r.text()
    if tp is bytes:
        _expect(tag, _BYTES, tp)
        return r.take(r.varint(MAX_MESSAGE_BYTES))
    if tp is np.ndarray or origin is np.ndarray:
        _expect(tag, _ARRAY, tp)
        return _read_array(r)
    if origin in (tuple, list):
        _expect(tag, _SEQ, tp)
        args = typing.get_args(tp)
        count = r.varint(len(r.data) - r.pos)  # every item takes at least one byte
        if origin is list:
            elem = args[0] if args else Any
            return [_decode_value(r, elem, depth + 1) for _ in range(count)]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode_value(r, args[0], depth + 1) for _ in range(count))
        if not args:
            return tuple(_decode_value(r, Any, depth + 1) for _ in range(count))
        if count != len(args):
            raise DecodeError(f"expected a tuple of {len(args)} items, found {count}")
        return tuple(_decode_value(r, a, depth + 1) for a in args)
    if origin is dict:
        _expect(tag, _MAP, tp)
        key_tp, val_tp = typing.get_args(tp) or (str, Any)
        if key_tp is not str:
            raise DecodeError("only maps with str keys can be received")
        count = r.varint(len(r.data) - r.pos)
        out: dict[str, Any] = {}
        for _ in range(count):
            key = r.text()
            if key in out:
                raise DecodeError(f"duplicate map key {key!r}")
            out[key] = _decode_value(r, val_tp, depth + 1)
        return out
    if isinstance(tp, type) and issubclass(tp, Message):
        _expect(tag, _MSG, tp)
        return _decode_message_body(r, tp, depth + 1)
    raise DecodeError(f"field type {tp!r} cannot be received")


_TAG_TYPES: Final[dict[int, tuple[type, ...]]] = {
    _NONE: (_NoneType,), _FALSE: (bool,), _TRUE: (bool,), _INT: (int,), _FLOAT: (float,),
    _STR: (str,), _BYTES: (bytes,), _SEQ: (tuple, list), _MAP: (dict,), _ARRAY: (np.ndarray,),
    _MSG: (Message,),
}


def _accepts(tag: int, tp: Any) -> bool:
    if tp is Any:
        return True
    base = typing.get_origin(tp) or tp
    if tp is None:
        base = _NoneType
    wanted = _TAG_TYPES.get(tag, ())
    return isinstance(base, type) and any(base is w or issubclass(base, w) for w in wanted)


def _decode_union(r: _Reader, options: tuple[Any, ...], depth: int) -> Any:
    if r.pos >= len(r.data):
        raise DecodeError("truncated message")
    tag = r.data[r.pos]
    for option in options:
        if _accepts(tag, option):
            return _decode_value(r, option, depth)
    raise DecodeError(f"wire tag {tag} matches none of {[_type_name(o) for o in options]}")


def _decode_any(r: _Reader, tag: int, depth: int) -> Any:
    simple = {_NONE: None, _FALSE: False, _TRUE: True, _INT: int, _FLOAT: float, _STR: str,
              _BYTES: bytes, _ARRAY: np.ndarray, _SEQ: tuple, _MAP: dict[str, Any]}
    if tag in (_NONE, _FALSE, _TRUE):
        return simple[tag]
    if tag == _MSG:
        name = r.text()
        cls = message_class(name)
        if cls is None:
            raise DecodeError(f"unknown message type {name!r}")
        return _decode_fields(r, cls, depth + 1)
    if tag not in simple:
        raise DecodeError(f"unknown wire tag {tag}")
    r.pos -= 1
    return _decode_value(r, simple[tag] if tag != _SEQ else tuple[Any, ...], depth)


def _decode_fields(r: _Reader, cls: type[Message], depth: int) -> Message:
    values = {name: _decode_value(r, tp, depth) for name, tp in message_fields(cls)}
    try:
        return cls(**values)
    except DecodeError:
        raise
    except (SecureTreesError, TypeError, ValueError, ArithmeticError, LookupError) as exc:
        # a message's own __post_init__ validation, typed or not: the peer sent a bad message
        raise DecodeError(f"invalid {cls.wire_type} message: {exc}") from exc


def _decode_message_body(r: _Reader, expected: type[Message], depth: int) -> Message:
    name = r.text()
    cls = message_class(name)
    if cls is None:
        raise DecodeError(f"unknown message type {name!r}")
    if not issubclass(cls, expected):
        raise DecodeError(f"expected a {expected.__name__}, found {name!r}")
    return _decode_fields(r, cls, depth)


def _open(data: bytes) -> _Reader:
    """A reader past a valid frame header, at the top-level message's wire name."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DecodeError("wire data must be bytes")
    if not isinstance(data, bytes):
        data = bytes(data)
    if len(data) > MAX_MESSAGE_BYTES:
        raise DecodeError("message exceeds the size limit")
    if data[:2] != MAGIC:
        raise DecodeError("not a securetrees message (bad magic)")
    if len(data) < 3 or data[2] != WIRE_VERSION:
        raise DecodeError(f"unsupported wire version {data[2] if len(data) > 2 else None}")
    r = _Reader(data)
    r.pos = 3
    if r.byte() != _MSG:
        raise DecodeError("frame does not hold a message")
    return r


def message_type(data: bytes) -> type[Message]:
    """The registered class of the message in ``data``, read from the frame's header only (its
    fields are not parsed): the receiver checks who may send it before decoding anything else."""
    name = _open(data).text()
    cls = message_class(name)
    if cls is None:
        raise DecodeError(f"unknown message type {name!r}")
    return cls


def decode(data: bytes) -> Message:
    """The message in ``data``; raises :class:`DecodeError` on anything malformed."""
    r = _open(data)
    msg = _decode_message_body(r, Message, 0)
    if r.pos != len(r.data):
        raise DecodeError(f"{len(r.data) - r.pos} trailing bytes after the message")
    return msg
