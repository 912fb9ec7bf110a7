"""Fuzzing a party's table readers: ``read_table`` and ``table_columns`` on damaged or odd files.

A party's data file is its own, but it may be damaged (a bad disk, a half-copied file) or
produced by another tool with column types the reader never planned for; either way the
party must get a :class:`~securetrees.errors.TableError` naming the file, never pyarrow's or
pandas' own exceptions.  Covered: one bit flipped in every byte of a small Parquet file (the
deterministic sweep), hypothesis mutations of that file and of the same table as CSV, and
valid Parquet files whose id, feature and label columns hold every Arrow type of
:data:`ARROW_COLUMNS`.  :func:`test_the_sweep_finds_the_unwrapped_reader` shows the sweep
fails on the reader as it was before its errors were wrapped.
"""

from __future__ import annotations

import datetime
import decimal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees.errors import SecureTreesError
from securetrees.net import tables
from securetrees.net.tables import TableOptions, read_table, table_columns
from securetrees.testing.fuzzing import bytes_inputs, typed

FUZZ_DIR = Path(tempfile.mkdtemp(prefix="securetrees-fuzz-tables-"))
OPTIONS = TableOptions(label="label")
FRAME = pd.DataFrame({"id": [f"r{i}" for i in range(6)], "age": [1.5 * i for i in range(6)],
                      "work": ["a", "b", None, "c", "b", "a"], "label": [0, 1, 0, 1, 1, 0]})
FRAME.to_parquet(FUZZ_DIR / "valid.parquet", index=False)
FRAME.to_csv(FUZZ_DIR / "valid.csv", index=False)
PARQUET = (FUZZ_DIR / "valid.parquet").read_bytes()
CSV = (FUZZ_DIR / "valid.csv").read_bytes()

ARROW_COLUMNS: dict[str, pa.Array] = {
    "string": pa.array(["x", "y", None]),
    "large_string": pa.array(["x", None, "z"], pa.large_string()),
    "dictionary": pa.array(["a", "b", "a"]).dictionary_encode(),
    "binary_not_utf8": pa.array([b"\xff\x00", b"x", None]),
    "int64": pa.array([1, None, 3]),
    "uint64_max": pa.array([2**64 - 1, 0, None], pa.uint64()),
    "float16": pa.array([1.0, None, 2.0], pa.float16()),
    "infinite": pa.array([float("inf"), 1.0, None]),
    "bool": pa.array([True, None, False]),
    "null": pa.nulls(3),
    "decimal": pa.array([decimal.Decimal("1.5"), None, decimal.Decimal("2")]),
    "timestamp": pa.array([datetime.datetime(2020, 1, 1), None, datetime.datetime(2021, 1, 1)]),
    "date": pa.array([datetime.date(2020, 1, 1), None, datetime.date(2021, 1, 1)]),
    "duration": pa.array([1, None, 2], pa.duration("s")),
    "list": pa.array([[1, 2], [3], None]),
    "struct": pa.array([{"a": 1}, {"a": 2}, None]),
    "map": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())),
}


def read_both(path: Path) -> Iterator[Callable[[], Any]]:
    """The two readers a party runs on its file: the rows (with a label) and the header alone."""
    yield lambda: read_table(path, OPTIONS)
    yield lambda: table_columns(path)


def untyped_flips(valid: bytes, suffix: str) -> list[str]:
    """Flip one bit in every byte of ``valid`` (bit ``i % 8`` of byte ``i``) and read each result;
    the untyped exceptions met, as ``"byte: type"`` (empty when every failure was typed)."""
    path = FUZZ_DIR / f"flipped{suffix}"
    found: list[str] = []
    for i in range(len(valid)):
        data = bytearray(valid)
        data[i] ^= 1 << (i % 8)
        path.write_bytes(bytes(data))
        for read in read_both(path):
            try:
                read()
            except SecureTreesError:
                pass
            except Exception as exc:  # the point: any other type is a finding
                found.append(f"{i}: {type(exc).__name__}")
    return found


@pytest.mark.parametrize(("valid", "suffix"), [(PARQUET, ".parquet"), (CSV, ".csv")], ids=["parquet", "csv"])
def test_a_bit_flipped_in_any_byte_raises_only_typed_errors(valid: bytes, suffix: str) -> None:
    assert untyped_flips(valid, suffix) == []


def test_the_sweep_finds_the_unwrapped_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted companion: with the error wrapping of before (OSError and ValueError only, and
    pandas' lazy Parquet read), the same sweep meets pyarrow's and pandas' own exceptions."""
    monkeypatch.setattr(tables, "_read_errors", lambda: (OSError, ValueError, pd.errors.ParserError))
    monkeypatch.setattr(tables, "_parquet", pd.read_parquet)
    assert untyped_flips(PARQUET, ".parquet")


@given(bytes_inputs(PARQUET))
def test_mutated_parquet(data: bytes) -> None:
    path = FUZZ_DIR / "mutated.parquet"
    path.write_bytes(data)
    for read in read_both(path):
        typed(read)


@given(bytes_inputs(CSV))
def test_mutated_csv(data: bytes) -> None:
    path = FUZZ_DIR / "mutated.csv"
    path.write_bytes(data)
    for read in read_both(path):
        typed(read)


@settings(max_examples=60)
@given(st.sampled_from(sorted(ARROW_COLUMNS)), st.sampled_from(sorted(ARROW_COLUMNS)),
       st.sampled_from(sorted(ARROW_COLUMNS)))
def test_parquet_columns_of_every_arrow_type(id_type: str, feature_type: str, label_type: str) -> None:
    path = FUZZ_DIR / "typed.parquet"
    pq.write_table(pa.table({"id": ARROW_COLUMNS[id_type], "x": ARROW_COLUMNS[feature_type],
                             "label": ARROW_COLUMNS[label_type]}), path)
    for read in read_both(path):
        typed(read)
    typed(read_table, path)  # no label: the label column is a feature too
