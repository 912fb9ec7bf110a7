"""Fuzzing the wire codec with mutated frames of every registered message type.

Every module of ``securetrees`` (the protocols included) is imported, so the registry holds every
message class the library declares.  For each one a valid instance is built from its
dataclass field types (a few value profiles are tried until the class's own validation
accepts one; :data:`MANUAL` holds the rest), encoded, and then mutated: every truncation,
bit flips, byte overwrites, extensions, splices of canonical lengths (0, 2^30, 2^63...),
and, for frames holding an array, rewritten array headers (zero and huge dimensions, other
dtypes, other ranks).  Decoding a mutated frame either succeeds or raises an error of the
library's hierarchy; anything else (numpy's ``ValueError``, ``RecursionError``,
``OverflowError``...) fails the test.

Budget: the deterministic sweeps are exhaustive over positions; the hypothesis part runs
``max_examples`` per type (derandomised in CI by the ``securetrees`` profile).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees.errors import DecodeError, SecureTreesError
from securetrees.runtime import codec
from securetrees.runtime.messages import Message, message_fields, registered_messages
from securetrees.testing.modules import import_library

import_library()
LIBRARY_MESSAGES: dict[str, type[Message]] = {
    name: cls for name, cls in sorted(registered_messages().items())
    if cls.__module__.split(".")[0] == "securetrees"
}

# --------------------------------------------------------------------------- valid examples

# Each profile is a way to fill a field of a given type; the first profile whose values the
# class's validation accepts gives the example.  Profiles differ in array dtype and rank,
# integer range and container length, which covers the usual validation rules.
PROFILES: tuple[dict[str, Any], ...] = (
    {"int": 1, "float": 0.5, "str": "a", "bytes": b"\x01" * 16, "len": 2,
     "array": lambda: np.arange(2, dtype=np.int64)},
    {"int": 0, "float": 0.5, "str": "a", "bytes": b"\x02" * 32, "len": 1,
     "array": lambda: np.zeros(1, dtype=np.int64)},
    {"int": 1, "float": 0.25, "str": "a", "bytes": b"\x03" * 16, "len": 2,
     "array": lambda: np.ones(2, dtype=bool)},
    {"int": 2, "float": 1.0, "str": "a", "bytes": b"\x04" * 16, "len": 2,
     "array": lambda: np.linspace(0.0, 1.0, 2)},
    {"int": 1, "float": 0.5, "str": "a", "bytes": b"\x05" * 16, "len": 2,
     "array": lambda: np.zeros((2, 2), dtype=np.int64)},
    {"int": 1, "float": 0.5, "str": "a", "bytes": b"\x06" * 16, "len": 0,
     "array": lambda: np.zeros(0, dtype=np.int64)},
)


def _value(tp: Any, profile: dict[str, Any]) -> Any:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return _value(options[0], profile)
    if tp is bool:
        return True
    if tp is int:
        return profile["int"]
    if tp is float:
        return profile["float"]
    if tp is str:
        return profile["str"]
    if tp is bytes:
        return profile["bytes"]
    if tp is np.ndarray or origin is np.ndarray:
        return profile["array"]()
    if tp is Any:
        return profile["int"]
    args = typing.get_args(tp)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], profile) for _ in range(profile["len"]))
        return tuple(_value(a, profile) for a in args)
    if origin is list:
        return [_value(args[0], profile) for _ in range(profile["len"])]
    if origin is dict:
        return {f"k{i}": _value(args[1], profile) for i in range(profile["len"])}
    if isinstance(tp, type) and issubclass(tp, Message):
        return build_example(tp)
    raise TypeError(f"no example value for field type {tp!r}")


def _i64(*shape: int) -> np.ndarray:
    return np.ones(shape, dtype=np.int64)


# Messages whose validation the generic profiles cannot satisfy (arrays of several kinds).
MANUAL: dict[str, Callable[[], dict[str, Any]]] = {
    "histogram_forest.bins": lambda: {
        "centres": np.array([0.5, 1.5]), "counts": _i64(2, 2), "lengths": np.array([2]), "missing": _i64(1, 2)},
    "histogram_forest.layer": lambda: {
        "step": 2, "tree": 0, "layer": 1, "split_feature": np.array([1]), "split_threshold": np.array([0.5]),
        "split_categorical": np.array([False]), "split_missing_left": np.array([True]), "keep": np.array([0, 1]),
        "features": np.ones((2, 3), dtype=bool)},
    "histogram_forest.setup": lambda: {
        "session": b"\x07" * 16, "n_features": 2, "categories": (0, 3), "n_classes": 2, "n_trees": 1,
        "histogram": "fixed", "n_bins": 4, "low": np.array([0.0, 0.0]), "high": np.array([1.0, 2.0]),
        "sampling": "bootstrap", "subsample_fraction": 1.0, "max_multiplicity": 3, "features_per_node": 1,
        "max_depth": 2, "grid_cells": 16, "epsilon": 1.0, "input_epsilon": None, "secure": True},
    "secureboost.histogram_reply": lambda: {
        "n_buckets": 3, "kinds": np.array([0, 1, 2], dtype=np.uint8), "packed": (5, 7)},
    "hybridtree.predict_request": lambda: {"batch": 0, "ids": np.arange(3), "host_leaves": _i64(3, 2)},
    "securetrees.model.file": lambda: {  # its body is any registered message: here a schema
        "version": 1, "protocol": "p", "party": "a", "role": "r", "model_id": b"\x01" * 16,
        "body": LIBRARY_MESSAGES["securetrees.model.schema"](("x", "c"), (False, True), ((), ("u", "v")))},
    "federated_forest.winners_request": lambda: {
        "tree": 0, "layer": 1, "positions": np.array([0, 2]), "counts": np.array([1, 2]),
        "clients": np.array([1, 0, 1])},
}


def build_example(cls: type[Message]) -> Message:
    """A valid instance of ``cls``: the first profile its validation accepts."""
    if cls.wire_type in MANUAL:
        return cls(**MANUAL[cls.wire_type]())
    errors = []
    for profile in PROFILES:
        try:
            return cls(**{name: _value(tp, profile) for name, tp in message_fields(cls)})
        except (SecureTreesError, ValueError, TypeError) as exc:
            errors.append(repr(exc))
    raise AssertionError(f"no valid example of {cls.wire_type}; add one to MANUAL: {errors}")


FRAMES: dict[str, bytes] = {}


def frame_of(name: str) -> bytes:
    if name not in FRAMES:
        FRAMES[name] = codec.encode(build_example(LIBRARY_MESSAGES[name]))
    return FRAMES[name]


# --------------------------------------------------------------------------- the oracle


def decodes_or_raises_typed(data: bytes) -> None:
    """The property: decoding succeeds, or fails with an error of the library's hierarchy."""
    try:
        codec.decode(data)
    except SecureTreesError:
        pass
    except Exception as exc:  # the point: any other type is a finding
        pytest.fail(f"untyped {type(exc).__name__} from codec.decode: {exc!r} on {data[:80]!r}")


def _varint(n: int) -> bytes:
    out = bytearray()
    codec._varint(n, out)
    return bytes(out)


INTERESTING_LENGTHS = (0, 1, 0x7F, 0x80, 1 << 30, (1 << 30) + 1, 1 << 31, 1 << 63, (1 << 70) - 1)


def _array_headers(frame: bytes) -> Iterator[int]:
    """Offsets just past each array dtype string in ``frame`` (where ndim and dims follow)."""
    for dtype in codec._DTYPES:
        name = dtype.encode()
        start = 0
        while (i := frame.find(b"\x09\x03" + name, start)) >= 0:
            yield i + 2 + len(name)
            start = i + 1


def _header_rewrites(frame: bytes) -> Iterator[bytes]:
    """The frame with each array's rank and dimensions rewritten (data left as is)."""
    shapes = [(0,), (0, 1 << 30), (1 << 30, 0), (0, 1 << 29, 1 << 29, 1 << 29), (1 << 30,),
              (1 << 62,), (0,) * 8, (2,) * 8, (1, 0, 1 << 30), ()]
    for pos in _array_headers(frame):
        ndim = frame[pos]
        tail = pos + 1
        for _ in range(ndim):  # skip the old dims (varints)
            while tail < len(frame) and frame[tail] & 0x80:
                tail += 1
            tail += 1
        for shape in shapes:
            yield frame[:pos] + bytes([len(shape)]) + b"".join(_varint(d) for d in shape) + frame[tail:]
        yield frame[:pos] + bytes([9]) + frame[pos + 1:]  # rank over the limit
        for dtype in ("|O", "<c16", ">i8", "<f8", "|b1", "<U1"):
            name = dtype.encode()
            yield frame[: pos - 4] + bytes([len(name)]) + name + frame[pos:]


# --------------------------------------------------------------------------- the tests


def test_every_library_message_has_an_example() -> None:
    """The registry walk found the library's messages, and each has a valid, round-tripping example."""
    assert len(LIBRARY_MESSAGES) >= 100
    for name in LIBRARY_MESSAGES:
        assert type(codec.decode(frame_of(name))) is LIBRARY_MESSAGES[name]


@pytest.mark.parametrize("name", list(LIBRARY_MESSAGES))
def test_deterministic_sweep(name: str) -> None:
    """Every truncation and extension, a bit flip at every byte, array-header rewrites."""
    frame = frame_of(name)
    for n in range(len(frame)):
        decodes_or_raises_typed(frame[:n])
    for tail in (b"\x00", b"\xff", b"\x0a", frame):
        decodes_or_raises_typed(frame + tail)
    for i in range(3, len(frame)):
        for mask in (0x01, 0x80, 0xFF):
            decodes_or_raises_typed(frame[:i] + bytes([frame[i] ^ mask]) + frame[i + 1:])
    for mutated in _header_rewrites(frame):
        decodes_or_raises_typed(mutated)


@st.composite
def mutated_frames(draw: st.DrawFn, name: str) -> bytes:
    data = bytearray(frame_of(name))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "splice", "varint", "extend"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[i] = draw(st.sampled_from([0, 1, 2, 3, 7, 8, 9, 10, 0x7F, 0x80, 0xFF]))
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[i : i + draw(st.integers(1, 16))]
        elif kind == "splice":
            data[i : i + draw(st.integers(0, 8))] = draw(st.binary(max_size=16))
        elif kind == "varint":
            data[i : i + draw(st.integers(0, 2))] = _varint(draw(st.sampled_from(INTERESTING_LENGTHS)))
        else:
            data += draw(st.binary(min_size=1, max_size=32))
    return bytes(data)


@pytest.mark.parametrize("name", list(LIBRARY_MESSAGES))
@settings(max_examples=25)
@given(data=st.data())
def test_fuzz_mutated_frames(name: str, data: st.DataObject) -> None:
    decodes_or_raises_typed(data.draw(mutated_frames(name)))


# --------------------------------------------------------------------------- regressions


def test_zero_dimension_array_header_is_a_decode_error() -> None:
    """Issue 14: a shape with one zero dimension and huge others made numpy raise ValueError
    ("array is too big", "cannot reshape"); over gRPC the caller saw RemoteError("ValueError")."""
    frame = frame_of("secagg.masked_input")
    pos = next(_array_headers(frame))
    for shape in [(0, 1 << 30), (1 << 30, 1 << 30, 0), (0, 1 << 29, 1 << 29, 1 << 29)]:
        tail = pos + 1 + frame[pos]
        bad = frame[:pos] + bytes([len(shape)]) + b"".join(_varint(d) for d in shape) + frame[tail:]
        with pytest.raises(DecodeError, match="array too large"):
            codec.decode(bad)


def test_zero_sized_arrays_still_decode() -> None:
    """The bound on the extent keeps ordinary empty arrays: (0,), (0, 5), (3, 0, 2)."""
    cls = LIBRARY_MESSAGES["secagg.masked_input"]
    for shape in [(0,), (0, 5), (3, 0, 2)]:
        out = codec.decode(codec.encode(cls(1, np.zeros(shape, dtype=np.int64))))
        assert out.vector.shape == shape  # type: ignore[attr-defined]


def test_oracle_catches_an_untyped_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: a decoder that lets numpy's ValueError through fails the property."""
    def leaky(r: Any) -> np.ndarray:
        raise ValueError("array is too big")

    monkeypatch.setattr(codec, "_read_array", leaky)
    frame = frame_of("secagg.masked_input")
    with pytest.raises(pytest.fail.Exception, match="untyped ValueError"):
        decodes_or_raises_typed(frame)
