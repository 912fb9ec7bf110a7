"""A tabular schema: each column's name, kind (numeric or categorical) and category list.

Every estimator turns its input table into a float matrix through a :class:`TabularSchema`:
numeric columns become floats (NaN, ``None`` and pandas' missing markers become NaN, the
library's missing value), categorical columns become the index of their value in the column's
sorted category list (a value outside the list, or a missing one, becomes NaN).  The schema is
inferred from a table (:meth:`TabularSchema.infer`) or declared (:meth:`TabularSchema.declare`);
after ``fit`` it is the estimator's ``schema_`` and every later table is encoded with it.

What inference reads: the column names and dtypes, and, for a categorical column whose
categories are not declared (a string column, not a pandas ``category`` column), the set of its
distinct values.  In a one-process federation facade that set is pooled over every party's
rows; an estimator that must not learn it (differential privacy) refuses inferred categories.

pandas is never imported: a DataFrame is recognised by its ``columns`` and ``dtypes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError, TypeMismatchError

__all__ = ["Column", "ColumnKind", "ColumnRef", "TabularSchema", "is_dataframe"]

FloatArray = npt.NDArray[np.float64]
ColumnKind = Literal["numeric", "categorical"]
ColumnRef = int | str
"""A column named by its position or (for a DataFrame) by its name."""


def is_dataframe(X: object) -> bool:
    """Whether ``X`` looks like a pandas DataFrame (without importing pandas)."""
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc")


@dataclass(frozen=True)
class Column:
    """One column: ``categories`` is the sorted category list of a categorical column (the code of
    a value is its index) and empty for a numeric one; ``declared`` says whether the categories
    came from the caller (a pandas ``category`` dtype or :meth:`TabularSchema.declare`) rather
    than from the data."""

    name: str
    kind: ColumnKind
    categories: tuple[str, ...] = ()
    declared: bool = False


def _missing(v: object) -> bool:
    if v is None:
        return True
    if isinstance(v, (float, np.floating)):
        return bool(np.isnan(v))
    return type(v).__name__ in ("NAType", "NaTType")


def _cell_kind(v: object, where: str) -> str:
    """``"missing"``, ``"number"`` or ``"string"``; anything else raises :class:`TypeMismatchError`."""
    if _missing(v):
        return "missing"
    if isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)):
        return "number"
    if isinstance(v, (str, np.str_)):
        return "string"
    raise TypeMismatchError(f"{where} holds a {type(v).__name__}: argument must be a string or a real number")


def _text_cells(values: npt.NDArray[Any]) -> list[Any] | None:
    """For a column whose every cell is a ``str`` or ``None`` (a table reader's text column): its
    cells as one list, so that its categories and codes come from whole-column operations; else None."""
    if values.dtype != object:
        return None
    cells: list[Any] = values.tolist()
    return cells if set(map(type, cells)) <= {str, type(None)} else None


def _numeric(values: npt.NDArray[Any], where: str) -> FloatArray:
    out = np.empty(values.shape[0], dtype=np.float64)
    for i, v in enumerate(values):
        kind = _cell_kind(v, where)
        if kind == "string":
            raise ParameterError(f"{where} is numeric in the schema but holds the string {v!r}")
        out[i] = np.nan if kind == "missing" else float(v)
    return out


def _raw_columns(X: object) -> tuple[list[str] | None, list[npt.NDArray[Any]], list[str | None]]:
    """The column names (None for an array), each column's values, and each column's declared
    categories marker: the pandas dtype kind (``"category"``, ``"numeric"``, ``"object"``)."""
    if is_dataframe(X):
        df: Any = X
        names = [c if isinstance(c, str) else None for c in df.columns]
        cols: list[npt.NDArray[Any]] = []
        kinds: list[str | None] = []
        for j in range(df.shape[1]):
            s = df.iloc[:, j]
            dtype = s.dtype
            if str(dtype) == "category":
                cols.append(np.asarray(s.astype(object).to_numpy(), dtype=object))
                kinds.append("category:" + "\x1f".join(str(c) for c in dtype.categories))
            elif getattr(dtype, "kind", "O") in "biuf":
                cols.append(np.asarray(s.to_numpy(dtype=np.float64, na_value=np.nan)))
                kinds.append("numeric")
            else:
                cols.append(np.asarray(s.to_numpy(dtype=object, na_value=None), dtype=object))
                kinds.append(None)
        all_named = all(n is not None for n in names) and len(names) > 0
        return ([str(n) for n in names] if all_named else None), cols, kinds
    if hasattr(X, "toarray") and hasattr(X, "nnz"):
        raise TypeMismatchError("sparse input is not supported: pass a dense array (X.toarray())")
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"X is not a table: {exc}") from None
    if arr.ndim != 2:
        raise ParameterError(f"X must be a 2-D table, got {arr.ndim} dimension(s). Reshape your data "
                             "(X.reshape(-1, 1) for one feature, X.reshape(1, -1) for one sample)")
    if arr.shape[1] == 0:
        raise ParameterError(f"0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if arr.dtype.kind == "c":
        raise ParameterError("Complex data not supported")
    if arr.dtype.kind in "biuf":
        return None, [arr[:, j].astype(np.float64) for j in range(arr.shape[1])], ["numeric"] * arr.shape[1]
    if arr.dtype.kind in "OUS":
        return None, [arr[:, j].astype(object) for j in range(arr.shape[1])], [None] * arr.shape[1]
    raise ParameterError(f"X has an unsupported dtype {arr.dtype}")


@dataclass(frozen=True)
class TabularSchema:
    """The columns of a table, in order; ``named`` says whether the names came from the table
    (a DataFrame with string column names) or are positional (``"x0"``, ``"x1"``, ...)."""

    columns: tuple[Column, ...]
    named: bool = False

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def declare(
        cls, names: Sequence[str], categories: dict[str, Sequence[object]] | None = None
    ) -> TabularSchema:
        """A declared schema: every column numeric except those in ``categories`` (name to
        category list; stored as strings, sorted)."""
        cats = dict(categories or {})
        unknown = set(cats) - set(names)
        if unknown:
            raise ParameterError(f"categories name columns that do not exist: {sorted(unknown)}")
        if len(set(names)) != len(names):
            raise ParameterError("column names must be distinct")
        cols = tuple(
            Column(n, "categorical", tuple(sorted({str(v) for v in cats[n]})), True) if n in cats
            else Column(n, "numeric") for n in names
        )
        return cls(cols, named=True)

    @classmethod
    def infer(cls, X: object) -> TabularSchema:
        """The schema of ``X``: a pandas ``category`` column is categorical with its declared
        categories; a column holding any string is categorical with its sorted distinct values
        (numbers in it are read as their string form); every other column is numeric."""
        names, cols, kinds = _raw_columns(X)
        if not cols or cols[0].shape[0] == 0:
            raise ParameterError("X must be a non-empty 2-D table")
        out = []
        for j, (values, kind) in enumerate(zip(cols, kinds, strict=True)):
            name = names[j] if names is not None else f"x{j}"
            if kind == "numeric":
                out.append(Column(name, "numeric"))
            elif kind is not None and kind.startswith("category:"):
                declared = kind[len("category:"):]
                out.append(Column(name, "categorical", tuple(sorted(declared.split("\x1f"))) if declared else (),
                                  True))
            elif (cells := _text_cells(values)) is not None:  # text cells: the same result, faster
                cats = sorted({c for c in cells if c is not None})
                out.append(Column(name, "categorical", tuple(cats)) if cats else Column(name, "numeric"))
            else:
                where = f"column {name!r}"
                seen = {_cell_kind(v, where) for v in values}
                if "string" in seen:
                    cats = sorted({_as_category(v) for v in values if not _missing(v)})
                    out.append(Column(name, "categorical", tuple(cats)))
                else:
                    out.append(Column(name, "numeric"))
        return cls(tuple(out), named=names is not None)

    # -- reading ---------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def n_columns(self) -> int:
        return len(self.columns)

    def categorical_mask(self) -> list[bool]:
        return [c.kind == "categorical" for c in self.columns]

    def n_categories(self) -> list[int]:
        """The number of codes of each categorical column (0 for a numeric one)."""
        return [len(c.categories) if c.kind == "categorical" else 0 for c in self.columns]

    def index(self, ref: ColumnRef, *, negative: bool = False) -> int:
        """The position of the column named ``ref`` (a name, or an index; with ``negative``, a
        negative index counts from the end)."""
        if isinstance(ref, (bool, np.bool_)):
            raise ParameterError(f"a column is named by an index or a name, not {ref!r}")
        if isinstance(ref, (int, np.integer)):
            if not (-self.n_columns if negative else 0) <= int(ref) < self.n_columns:
                raise ParameterError(f"column {int(ref)} is not in [0, {self.n_columns})")
            return int(ref) % self.n_columns
        if isinstance(ref, str):
            if not self.named:
                raise ParameterError(f"column {ref!r} is named, but X has no column names (pass a DataFrame)")
            try:
                return self.names.index(ref)
            except ValueError:
                raise ParameterError(f"X has no column {ref!r}") from None
        raise ParameterError(f"a column is named by an index or a name, not {type(ref).__name__}")

    def indexes(self, refs: Sequence[ColumnRef] | Sequence[bool] | None) -> list[int]:
        """Positions of ``refs``: column names or indexes, or a boolean mask with one flag per column."""
        if refs is None:
            return []
        if isinstance(refs, (str, bytes)):
            raise ParameterError("columns are given as a list of names or indexes")
        items = list(refs)
        if items and all(isinstance(v, (bool, np.bool_)) for v in items):
            if len(items) != self.n_columns:
                raise ParameterError("a column mask needs one flag per column")
            return [j for j, v in enumerate(items) if v]
        out = [self.index(r) for r in items]
        if len(set(out)) != len(out):
            raise ParameterError("a column is listed twice")
        return out

    def check_names(self, given: list[str]) -> None:
        """:class:`ParameterError` (scikit-learn's wording) unless ``given`` are this schema's column
        names in order."""
        if given != self.names:
            raise ParameterError(_names_mismatch(self.names, given))

    # -- encoding --------------------------------------------------------------------------

    def encode(self, X: object) -> FloatArray:
        """``X`` as a float matrix under this schema (see the module docstring); ±inf refused."""
        names, cols, _ = _raw_columns(X)
        if len(cols) != self.n_columns:
            raise ParameterError(f"X has {len(cols)} features, but the model was fitted with {self.n_columns}")
        if names is not None and self.named:
            self.check_names(names)
        n = cols[0].shape[0] if cols else 0
        if n == 0:
            raise ParameterError("X must have at least one row")
        out = np.empty((n, self.n_columns), dtype=np.float64)
        for j, (col, values) in enumerate(zip(self.columns, cols, strict=True)):
            where = f"column {col.name!r}"
            if col.kind == "numeric":
                out[:, j] = values if values.dtype == np.float64 else _numeric(values, where)
            else:
                code = {c: float(k) for k, c in enumerate(col.categories)}
                if (cells := _text_cells(values)) is not None:  # text cells: one C-level pass
                    out[:, j] = np.fromiter(map(code.get, cells, repeat(np.nan)), dtype=np.float64, count=n)
                else:
                    out[:, j] = [np.nan if _cell_kind(v, where) == "missing" else code.get(_as_category(v), np.nan)
                                 for v in values]
        if np.isinf(out).any():
            raise ParameterError("X holds infinite values (NaN means missing; infinities are refused)")
        return out


def _names_mismatch(fitted: list[str], given: list[str]) -> str:
    """scikit-learn's wording for a table whose column names differ from the fitted ones."""
    unseen = [n for n in given if n not in fitted]
    missing = [n for n in fitted if n not in given]
    msg = "The feature names should match those that were passed during fit.\n"
    if unseen:
        msg += "Feature names unseen at fit time:\n" + "".join(f"- {n}\n" for n in unseen[:5])
    if missing:
        msg += "Feature names seen at fit time, yet now missing:\n" + "".join(f"- {n}\n" for n in missing[:5])
    if not unseen and not missing:
        msg += "Feature names must be in the same order as they were in fit.\n"
    return msg


def _as_category(v: object) -> str:
    """A category's string form: ``1.0`` and ``1`` are the same category ``"1"``."""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)
