"""A party's own data table: a CSV or Parquet file, or a DataFrame, with an id column.

Each organisation names its files in its own section of ``run.toml`` (``specs/deployment.md``,
"Your own data")::

    [parties.client0]
    data = "data/client0.csv"        # or .parquet: the training rows
    test_data = "data/client0-test.csv"  # optional: rows to predict
    id_column = "id"                 # default "id"
    label = "income"                 # the label holder only: its label column
    columns = ["age", "workclass"]   # optional: the feature columns, in this order (declared)
    categories = { workclass = ["Private", "State-gov"] }  # optional: declared categories
    features = ["age", "workclass"]  # or: the feature columns it uses (kinds inferred)
    drop = ["zip"]                   # or: the columns it ignores (every other one is a feature)

At most one of ``columns``, ``features`` and ``drop`` is given (:func:`feature_columns`).
Without ``columns`` or ``features`` every column but the id, the label and the dropped ones is a
feature; a column named like another party's label column is then refused, since it would
silently become a feature (list it in ``features`` to keep it).  The schema is inferred
locally (:meth:`securetrees.schema.TabularSchema.infer`: a column holding any string
is categorical over its sorted distinct values; empty cells are missing, NaN).  Test rows are
encoded with the training rows' schema, so a category code means the same in both.  Every
problem raises :class:`~securetrees.errors.TableError` (or :class:`DuplicateIdError` for a
repeated id) naming the file and the column.  Reading a table reveals nothing: it is local.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import DuplicateIdError, MissingDependencyError, ParameterError, TableError
from securetrees.net.config import PartyConfig
from securetrees.schema import TabularSchema, is_dataframe

__all__ = ["TABLE_SUFFIXES", "PartyTable", "TableOptions", "encode_labels", "feature_columns", "party_tables",
           "read_table", "table_columns", "test_table"]

FloatArray = npt.NDArray[np.float64]
TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


@dataclass(frozen=True)
class TableOptions:
    """How to read a party's table (its configuration section's keys)."""

    id_column: str = "id"
    label: str | None = None
    columns: tuple[str, ...] | None = None
    categories: Mapping[str, tuple[str, ...]] | None = None
    features: tuple[str, ...] | None = None
    """The feature columns the party uses, in this order (kinds inferred, unlike ``columns``)."""
    drop: tuple[str, ...] = ()
    """Columns the party ignores (every other column but the id and the label is a feature)."""
    reserved: tuple[str, ...] = ()
    """Other parties' label column names: such a column is refused as a feature unless listed."""

    @classmethod
    def from_config(cls, options: Mapping[str, Any], where: str, reserved: tuple[str, ...] = ()) -> TableOptions:
        """Check the configuration's table keys (:class:`ParameterError` names the bad one)."""
        def name(key: str, default: str | None) -> str | None:
            v = options.get(key, default)
            if v is not None and (not isinstance(v, str) or not v):
                raise ParameterError(f"{where}: {key} must be a non-empty string")
            return v

        def names(key: str) -> tuple[str, ...] | None:
            v = options.get(key)
            if v is not None and (not isinstance(v, list) or not all(isinstance(c, str) and c for c in v)):
                raise ParameterError(f"{where}: {key} must be a list of column names")
            if v is not None and len(set(v)) != len(v):
                raise ParameterError(f"{where}: {key} names a column twice")
            return None if v is None else tuple(v)

        given = [k for k in ("columns", "features", "drop") if k in options]
        if len(given) > 1:
            raise ParameterError(f"{where}: give one of columns (declared), features (used) or drop (ignored), "
                                 f"not {' and '.join(given)}")
        cats = options.get("categories")
        if cats is not None and (not isinstance(cats, dict) or not all(
                isinstance(v, list) and v for v in cats.values())):
            raise ParameterError(f"{where}: categories maps a column name to its list of categories")
        return cls(str(name("id_column", "id")), name("label", None), names("columns"),
                   None if cats is None else {str(k): tuple(str(x) for x in v) for k, v in cats.items()},
                   names("features"), names("drop") or (), reserved)

    @classmethod
    def of_party(cls, party: PartyConfig) -> TableOptions:
        """A roster entry's table keys, with the other parties' label names reserved."""
        own = party.table.get("label")
        return cls.from_config(party.table, f"[parties.{party.name}]",
                               tuple(n for n in party.run_labels if n != own))


@dataclass(frozen=True)
class PartyTable:
    """One party's rows: ``ids[i]`` names row ``i`` of ``X`` (features encoded by ``schema``:
    floats, categories as codes, NaN missing) and of ``labels`` (the label holder's, raw)."""

    ids: tuple[str, ...]
    X: FloatArray
    schema: TabularSchema
    labels: npt.NDArray[Any] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, rows: npt.ArrayLike) -> PartyTable:
        """The rows ``rows`` (indices), in that order: e.g. the agreed order of an intersection."""
        r = np.asarray(rows, dtype=np.int64)
        return PartyTable(tuple(self.ids[int(i)] for i in r), self.X[r], self.schema,
                          None if self.labels is None else self.labels[r])


def _frame(source: object, where: str) -> Any:
    if is_dataframe(source):
        return source
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - the data extra
        raise MissingDependencyError("reading CSV or Parquet needs pandas and pyarrow: "
                                     "pip install 'securetrees[data]'") from exc
    path = Path(str(source))
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise TableError(f"{where}: a data table is a .csv or .parquet file, not {path.name!r}")
    try:
        if suffix == ".csv":
            return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
        return _parquet(path)
    except pd.errors.EmptyDataError:
        raise TableError(f"{where}: the file is empty") from None
    except _read_errors() as exc:
        raise TableError(f"{where}: cannot read the table: {type(exc).__name__}: {exc}") from None


def _read_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged file raises from pandas and pyarrow: a missing file (OSError), bad
    bytes (pyarrow's ArrowException, whose ArrowInvalid is also a ValueError), and the KeyError or
    TypeError of pyarrow's pandas metadata when that part of the file is damaged."""
    import pandas as pd

    found: list[type[BaseException]] = [OSError, ValueError, KeyError, TypeError, ImportError,
                                         pd.errors.ParserError]
    try:
        import pyarrow as pa  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - the data extra
        return tuple(found)
    return (*found, pa.ArrowException)


def _parquet(path: Path) -> Any:
    """A Parquet file as a DataFrame, every value checked while reading (``validate(full=True)``:
    a string cell that is not UTF-8 fails here, not later where a step touches the cell)."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    table = pq.read_table(path)
    table.validate(full=True)
    return table.to_pandas()


def table_columns(source: object, name: str = "table") -> list[str]:
    """The column names of a table (a CSV file's header, a Parquet file's schema, a DataFrame's
    columns), without its rows: a party whose feature columns are not declared finds them here."""
    where = f"{name} ({source if not is_dataframe(source) else 'DataFrame'})"
    if is_dataframe(source):
        return [str(c) for c in source.columns]  # type: ignore[attr-defined]
    path = Path(str(source))
    if path.suffix.lower() != ".csv":
        return [str(c) for c in _frame(source, where).columns]
    import pandas as pd

    try:
        return [str(c) for c in pd.read_csv(path, dtype=str, nrows=0).columns]
    except pd.errors.EmptyDataError:
        raise TableError(f"{where}: the file is empty") from None
    except _read_errors() as exc:
        raise TableError(f"{where}: cannot read the table: {type(exc).__name__}: {exc}") from None


def feature_columns(header: list[str], options: TableOptions, where: str) -> list[str]:
    """The feature columns of a training table whose columns are ``header``: ``options.columns``
    or ``options.features`` when given, else every column but the id, the label and ``options.drop``.
    :class:`TableError` names a missing id or label column, a listed column the table lacks, a
    feature that is the id or the label, and (when no list is given) a column named like another
    party's label column (``options.reserved``): list it in ``features`` to keep it, or drop it."""
    if options.id_column not in header:
        raise TableError(f"{where}: no id column {options.id_column!r} (the columns are {header}); "
                         "name it with id_column")
    if options.label is not None and options.label not in header:
        raise TableError(f"{where}: no label column {options.label!r} (the columns are {header})")
    listed = options.columns if options.columns is not None else options.features
    key = "columns" if options.columns is not None else "features"
    for k, named in ((key, listed or ()), ("drop", options.drop)):
        unknown = [c for c in named if c not in header]
        if unknown:
            what = "declared columns" if k == "columns" else f"{k} names columns"
            raise TableError(f"{where}: {what} not in the table: {unknown} (the columns are {header})")
        own = [c for c in named if c in (options.id_column, options.label)]
        if own:
            raise TableError(f"{where}: {k} names the id or label column {own[0]!r}")
    both = [c for c in options.drop if c in (listed or ())]
    if both:
        raise TableError(f"{where}: {both[0]!r} is both a feature column and dropped")
    if listed is not None:
        return list(listed)
    features = [c for c in header if c not in (options.id_column, options.label, *options.drop)]
    clash = [c for c in features if c in options.reserved]
    if clash:
        raise TableError(f"{where}: the column {clash[0]!r} has the name of the run's label column; it would "
                         f"become a feature: list it in features to keep it, or in drop to ignore it")
    return features


def _is_missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v)) or type(v).__name__ in ("NAType", "NaTType")


def _numbers(values: Any, where: str) -> FloatArray:
    """A column's cells (a pandas Series) as floats (empty: NaN); a cell that is not a number, or
    an infinite one, raises :class:`TableError`."""
    already = values.dtype.kind in "biuf"  # numbers already (Parquet): no per-cell conversion
    out = values.to_numpy(dtype=np.float64, na_value=np.nan) if already else _parsed(values, where)
    infinite = np.flatnonzero(np.isinf(out))
    if infinite.size:
        raise TableError(f"{where}: row {int(infinite[0])} is infinite (leave the cell empty for a missing value)")
    return out


def _parsed(values: Any, where: str) -> FloatArray:
    """Cells that are not numbers yet (CSV text): each present one through Python's ``float`` in
    one numpy pass, the values a cell-by-cell conversion gives, without a Python list of the column."""
    cells = values.to_numpy(dtype=object, copy=True)
    cells[values.isna().to_numpy()] = np.nan
    try:
        out: FloatArray = cells.astype(np.float64)
    except (TypeError, ValueError):
        for i, v in enumerate(cells.tolist()):  # only to name the first cell that is not a number
            try:
                float(v)
            except (TypeError, ValueError):
                raise TableError(f"{where}: row {i} holds {v!r}, which is not a number") from None
        raise TableError(f"{where}: a cell is not a number") from None
    return out


def _texts(values: Any, where: str) -> npt.NDArray[np.object_]:
    """A column's cells as text (empty: None), an object array; a Parquet byte cell that is not
    UTF-8 raises :class:`TableError`."""
    try:
        out: npt.NDArray[np.object_] = values.astype(str).to_numpy(dtype=object)
    except UnicodeDecodeError:
        raise TableError(f"{where}: a cell holds bytes that are not UTF-8 text") from None
    out[values.isna().to_numpy()] = None
    return out


def _typed_column(values: Any, where: str) -> tuple[npt.NDArray[Any], bool]:
    """CSV cells are text: a column whose every present cell parses as a number is numeric."""
    try:
        return _numbers(values, where), True
    except TableError:
        return _texts(values, where), False


def read_table(source: object, options: TableOptions | None = None, *, schema: TabularSchema | None = None,
               name: str = "table", strict: bool = False, test_labels: bool = False) -> PartyTable:
    """A party's table from a CSV or Parquet path, or a DataFrame.

    ``schema`` (the training table's) encodes a test table; without it the schema is declared by
    ``options.columns`` / ``options.categories`` or inferred from this table.  A label column
    is read only when ``options.label`` is set and the table is not a test table (with
    ``test_labels``, a test table's label column is read too when the table has one).

    ``strict`` (a schema declared for every party alike): a column that is neither the id, the
    label, a feature nor dropped is refused (unless ``options.features`` lists the features), and
    so is, in a training table, a category cell outside the declared categories (in a test table
    such a cell is missing, NaN).
    """
    import pandas as pd

    opt = options or TableOptions()
    where = f"{name} ({source if not is_dataframe(source) else 'DataFrame'})"
    df = _frame(source, where)
    if df.shape[0] == 0:
        raise TableError(f"{where}: the table has no rows")
    names = [str(c) for c in df.columns]
    label = opt.label if schema is None or (test_labels and opt.label in names) else None
    features = schema.names if schema is not None else feature_columns(names, opt, where)
    if opt.id_column not in names:
        raise TableError(f"{where}: no id column {opt.id_column!r} (the columns are {names}); "
                         "name it with id_column")
    raw_ids = df[opt.id_column].tolist()
    if any(_is_missing(v) or str(v) == "" for v in raw_ids):
        raise TableError(f"{where}: the id column {opt.id_column!r} has an empty cell")
    ids = tuple(str(v) for v in raw_ids)
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DuplicateIdError(f"{where}: the id {dup!r} names more than one row")
    unknown = [c for c in dict.fromkeys([*features, *(opt.categories or {})]) if c not in names]
    if unknown and schema is not None and not strict:
        raise TableError(f"{where}: the training table's feature columns {unknown} are not in this table (its "
                         f"columns are {names}); the rows to predict need every feature column of the training rows")
    if unknown:
        raise TableError(f"{where}: declared columns not in the table: {unknown}")
    extra = [c for c in names if c not in (opt.id_column, opt.label, *features, *opt.drop)]
    if strict and extra and opt.features is None:  # listed features: every other column is ignored
        raise TableError(f"{where}: columns not in the declared feature columns: {extra} (its section's drop = "
                         f"{extra!r} ignores them)")
    declared = dict(opt.categories or {})
    data: dict[str, npt.NDArray[Any]] = {}
    numeric: dict[str, bool] = {}
    for c in features:
        values = df[c]
        col_where = f"{where} column {c!r}"
        known_numeric = schema is not None and schema.columns[schema.index(c)].kind == "numeric"
        if known_numeric or (schema is None and opt.columns is not None and c not in declared):
            data[c], numeric[c] = _numbers(values, col_where), True  # declared numeric: must parse
        elif c in declared or (schema is not None):
            data[c], numeric[c] = _texts(values, col_where), False
            outside = sorted({str(v) for v in data[c] if v is not None} - set(declared.get(c, ())))
            if strict and schema is None and outside:
                raise TableError(f"{col_where}: categories outside the declared ones: {outside[:5]}")
        else:
            data[c], numeric[c] = _typed_column(values, col_where)
    frame = pd.DataFrame({c: pd.Series(data[c], dtype="float64" if numeric[c] else "object") for c in features})
    try:
        if schema is None:
            inferred = TabularSchema.infer(frame) if features else TabularSchema((), named=True)
            cats = {col.name: col.categories for col in inferred.columns if col.kind == "categorical"}
            schema = TabularSchema.declare(features, {**cats, **declared})
        X = schema.encode(frame) if features else np.empty((len(ids), 0), dtype=np.float64)
    except TableError:
        raise
    except ParameterError as exc:
        raise TableError(f"{where}: {exc}") from None
    labels = None
    if label is not None:
        col = df[label].tolist()
        if any(_is_missing(v) or str(v) == "" for v in col):
            raise TableError(f"{where}: the label column {label!r} has an empty cell")
        labels = np.asarray(col, dtype=object)
    return PartyTable(ids, X, schema, labels)


def party_tables(party: PartyConfig) -> tuple[PartyTable, PartyTable | None]:
    """The training table (``data``) and test table (``test_data``, or None) of a party."""
    if party.data is None:
        raise TableError(f"party {party.name!r} names no data file in its configuration section")
    opt = TableOptions.of_party(party)
    train = read_table(party.data, opt, name=f"{party.name}'s data")
    test = (read_table(party.test_data, opt, schema=train.schema, name=f"{party.name}'s test data")
            if party.test_data is not None else None)
    return train, test


def test_table(party: PartyConfig, schema: TabularSchema) -> PartyTable:
    """The test table (``test_data``) alone, encoded with the ``schema`` saved at training: a
    predict-only run reads no training data (``securetrees.net.models``)."""
    if party.test_data is None:
        raise TableError(f"party {party.name!r} names no test_data (the rows to predict) in its configuration section")
    opt = TableOptions.of_party(party)
    return read_table(party.test_data, opt, schema=schema, name=f"{party.name}'s test data")


def encode_labels(table: PartyTable, n_classes: int) -> npt.NDArray[Any]:
    """The label holder's labels: class codes over the sorted class names (``n_classes`` > 0,
    the run's public class count, an upper bound), else regression targets (floats)."""
    if table.labels is None:
        raise TableError("this table has no label column")
    raw = np.asarray(table.labels)
    if not n_classes:
        try:
            return raw.astype(np.float64)
        except ValueError:
            raise TableError("a regression label column holds a value that is not a number") from None
    names = raw.astype(str)
    classes = np.unique(names)
    if classes.size > n_classes:
        raise TableError(f"the label column holds {classes.size} classes, above the run's n_classes {n_classes}")
    return np.searchsorted(classes, names).astype(np.int64)
