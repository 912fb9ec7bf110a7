"""Fuzzing helpers shared by ``tests/fuzz``: the oracle (:func:`typed`) and byte mutations.

Needs the test extra (pytest, hypothesis); nothing outside the tests imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import strategies as st

from securetrees.errors import SecureTreesError

__all__ = ["bytes_inputs", "mutated", "typed"]


def typed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Call ``fn``; success and SecureTreesError are fine, any other exception fails the test."""
    try:
        fn(*args, **kwargs)
    except SecureTreesError:
        pass
    except Exception as exc:  # the point: any other type is a finding
        pytest.fail(f"untyped {type(exc).__name__} from {getattr(fn, '__qualname__', fn)}: {exc!r}")


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    """``valid`` with one to three mutations: bit flip, truncation, extension, splice."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "extend", "splice"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[i:]
        elif kind == "extend":
            data += draw(st.binary(min_size=1, max_size=16))
        else:
            data[i : i + draw(st.integers(0, 8))] = draw(st.binary(max_size=8))
    return bytes(data)


def bytes_inputs(valid: bytes) -> st.SearchStrategy[bytes]:
    """Mutations of ``valid``, arbitrary bytes, and ``valid``'s first 8 bytes followed by arbitrary ones."""
    return st.one_of(mutated(valid), st.binary(max_size=200), st.binary(max_size=64).map(lambda b: valid[:8] + b))
