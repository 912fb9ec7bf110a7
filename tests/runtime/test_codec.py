"""The wire codec: round trips, strict typing on decode, and fuzzing (specs/runtime.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import DecodeError, ParameterError
from securetrees.runtime import Message, codec, message


@message("test.codec.inner")
@dataclass(frozen=True)
class Inner(Message):
    x: int
    tag: str


@message("test.codec.all")
@dataclass(frozen=True)
class AllTypes(Message):
    big: int
    flag: bool
    ratio: float
    name: str
    blob: bytes
    ints: tuple[int, ...]
    pair: tuple[int, str]
    items: list[Inner]
    table: dict[str, int]
    arr: np.ndarray
    maybe: int | None


@message("test.codec.small")
@dataclass(frozen=True)
class Small(Message):
    value: int


@message("test.codec.validated")
@dataclass(frozen=True)
class Validated(Message):
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("value must be non-negative")


def _sample() -> AllTypes:
    return AllTypes(
        big=-(2**4095) + 17, flag=True, ratio=-0.125, name="héllo", blob=b"\x00\xff",
        ints=(0, 1, -1, 2**64), pair=(5, "x"), items=[Inner(3, "a"), Inner(-4, "b")],
        table={"a": 1, "b": -2}, arr=np.arange(6, dtype=np.int32).reshape(2, 3), maybe=None,
    )


def _equal(a: AllTypes, b: AllTypes) -> bool:
    return all(
        np.array_equal(getattr(a, f), getattr(b, f)) if f == "arr" else getattr(a, f) == getattr(b, f)
        for f in AllTypes.__dataclass_fields__
    )


def test_round_trip_all_types() -> None:
    msg = _sample()
    out = codec.decode(codec.encode(msg))
    assert isinstance(out, AllTypes) and _equal(out, msg)
    assert out.arr.dtype == np.int32 and out.arr.shape == (2, 3)
    assert isinstance(out.ints, tuple) and isinstance(out.items, list)


def test_known_answer_bytes() -> None:
    """The frame layout is pinned: magic, version, message tag, name, one int field."""
    assert codec.encode(Small(300)) == b"ST\x01\x0a\x10test.codec.small\x03\x02\x01\x2c"
    assert codec.encode(Small(-1)) == b"ST\x01\x0a\x10test.codec.small\x03\x01\xff"


@given(st.integers(min_value=-(2**2048), max_value=2**2048))
def test_int_round_trip(v: int) -> None:
    assert codec.decode(codec.encode(Small(v))) == Small(v)


@given(st.binary(max_size=200))
def test_fuzz_arbitrary_bytes(data: bytes) -> None:
    try:
        codec.decode(data)
    except DecodeError:
        pass


@given(st.data())
def test_fuzz_mutated_frames(data: st.DataObject) -> None:
    frame = bytearray(codec.encode(_sample()))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] = data.draw(st.integers(0, 255))
    try:
        codec.decode(bytes(frame))
    except DecodeError:
        pass


def test_truncated_and_extended_frames() -> None:
    frame = codec.encode(_sample())
    for cut in (0, 1, 2, 3, 10, len(frame) - 1):
        with pytest.raises(DecodeError):
            codec.decode(frame[:cut])
    with pytest.raises(DecodeError, match="trailing"):
        codec.decode(frame + b"\x00")


def test_wrong_magic_and_version() -> None:
    frame = codec.encode(Small(1))
    with pytest.raises(DecodeError, match="magic"):
        codec.decode(b"XX" + frame[2:])
    with pytest.raises(DecodeError, match="version"):
        codec.decode(frame[:2] + b"\x02" + frame[3:])


def test_unknown_type_name() -> None:
    frame = codec.encode(Small(1)).replace(b"test.codec.small", b"test.codec.smalx")
    with pytest.raises(DecodeError, match="unknown message type"):
        codec.decode(frame)


def test_field_type_mismatch_is_rejected() -> None:
    """A peer cannot put a string where the receiver declared an int."""
    frame = b"ST\x01\x0a\x10test.codec.small\x05\x01a"
    with pytest.raises(DecodeError, match="int"):
        codec.decode(frame)


def test_bool_is_not_an_int() -> None:
    frame = b"ST\x01\x0a\x10test.codec.small\x02"
    with pytest.raises(DecodeError):
        codec.decode(frame)


def test_non_canonical_integer_rejected() -> None:
    with pytest.raises(DecodeError, match="non-canonical"):
        codec.decode(b"ST\x01\x0a\x10test.codec.small\x03\x02\x00\x01")
    with pytest.raises(DecodeError, match="empty"):
        codec.decode(b"ST\x01\x0a\x10test.codec.small\x03\x00")


def test_oversized_integer_rejected() -> None:
    with pytest.raises(DecodeError, match="limit"):
        codec.decode(b"ST\x01\x0a\x10test.codec.small\x03\xff\xff\x7f")


def test_object_dtype_cannot_be_sent() -> None:
    msg = AllTypes(**{**_sample().__dict__, "arr": np.array([1, 2], dtype=object)})
    with pytest.raises(DecodeError, match="dtype"):
        codec.encode(msg)


def test_message_validation_runs_on_decode() -> None:
    frame = codec.encode(Validated(1)).replace(b"\x03\x01\x01", b"\x03\x01\xff")
    with pytest.raises(DecodeError, match="non-negative"):
        codec.decode(frame)


def test_unregistered_and_non_messages_cannot_be_sent() -> None:
    @dataclass(frozen=True)
    class Loose(Message):
        x: int

    with pytest.raises(DecodeError):
        codec.encode(Loose(1))
    with pytest.raises(DecodeError):
        codec.encode("not a message")  # type: ignore[arg-type]


def test_registration_rules() -> None:
    with pytest.raises(ParameterError):
        message("Bad Name")

    @dataclass
    class Mutable(Message):
        x: int

    with pytest.raises(ParameterError, match="frozen"):
        message("test.codec.mutable")(Mutable)

    @dataclass(frozen=True)
    class Other(Message):
        x: int

    with pytest.raises(ParameterError, match="already registered"):
        message("test.codec.small")(Other)


def test_deep_nesting_rejected() -> None:
    frame = b"ST\x01\x0a\x0etest.codec.all" + b""
    # a frame claiming a field of type int, but whose bytes nest sequences 40 deep
    nested = b"ST\x01\x0a\x10test.codec.small" + b"\x07\x01" * 40
    with pytest.raises(DecodeError):
        codec.decode(nested)
    with pytest.raises(DecodeError):
        codec.decode(frame)


@message("test.codec.array")
@dataclass(frozen=True)
class ArrayOnly(Message):
    arr: np.ndarray


@pytest.mark.parametrize(
    "arr",
    [
        np.zeros(0, dtype=np.uint8),
        np.zeros((3, 0)),
        np.array(5),
        np.arange(5000, dtype=np.int16)[::2],  # non-contiguous
        np.arange(6, dtype=">i4"),  # big-endian input travels little-endian
        np.arange(10**5, dtype=np.uint64),  # large: sent as a zero-copy view
        np.array([True, False]),
    ],
)
def test_array_shapes_and_dtypes(arr: np.ndarray) -> None:
    out = codec.decode(codec.encode(ArrayOnly(arr)))
    assert isinstance(out, ArrayOnly)
    assert out.arr.shape == arr.shape and np.array_equal(out.arr, arr)
    assert out.arr.flags.writeable


def test_boolean_array_with_bad_bytes_rejected() -> None:
    frame = bytearray(codec.encode(ArrayOnly(np.array([True, False]))))
    frame[-1] = 2
    with pytest.raises(DecodeError, match="boolean"):
        codec.decode(bytes(frame))
