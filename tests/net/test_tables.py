"""A party's own table (``securetrees.net.tables``): CSV, Parquet or a DataFrame with an id
column; the schema inferred or declared; every unusable table refused with a typed error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from securetrees.errors import DuplicateIdError, ParameterError, TableError
from securetrees.net.config import dump_toml, load_config
from securetrees.net.tables import PartyTable, TableOptions, encode_labels, party_tables, read_table

CSV = "id,age,work,income\nr1,30,Private,>50K\nr2,,State-gov,<=50K\nr3,41,,<=50K\n"


def write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_string_categories_and_missing_values(tmp_path: Path) -> None:
    t = read_table(write(tmp_path, CSV), TableOptions(label="income"))
    assert t.ids == ("r1", "r2", "r3")
    assert t.schema.names == ["age", "work"] and t.schema.categorical_mask() == [False, True]
    assert t.schema.columns[1].categories == ("Private", "State-gov")
    np.testing.assert_array_equal(t.X, [[30.0, 0.0], [np.nan, 1.0], [41.0, np.nan]])
    assert list(t.labels) == [">50K", "<=50K", "<=50K"]  # type: ignore[arg-type]
    np.testing.assert_array_equal(encode_labels(t, 2), [1, 0, 0])  # sorted class names: "<=50K", ">50K"


def test_parquet_and_dataframe_read_as_the_csv(tmp_path: Path) -> None:
    opt = TableOptions(label="income")
    want = read_table(write(tmp_path, CSV), opt)
    frame = pd.read_csv(tmp_path / "t.csv")
    frame.to_parquet(tmp_path / "t.parquet")
    for source in (frame, tmp_path / "t.parquet"):
        got = read_table(source, opt)
        assert got.ids == want.ids and got.schema == want.schema
        np.testing.assert_array_equal(got.X, want.X)


def test_test_rows_use_the_training_schema(tmp_path: Path) -> None:
    train = read_table(write(tmp_path, CSV), TableOptions(label="income"))
    test = read_table(write(tmp_path, "id,age,work\nt1,50,State-gov\nt2,20,Never-seen\n", "u.csv"),
                      schema=train.schema)
    np.testing.assert_array_equal(test.X, [[50.0, 1.0], [20.0, np.nan]])  # an unseen category is missing


def test_declared_schema(tmp_path: Path) -> None:
    opt = TableOptions(columns=("work", "age"), categories={"work": ("Private", "Self-emp", "State-gov")})
    t = read_table(write(tmp_path, CSV), opt)
    assert t.schema.names == ["work", "age"] and t.schema.n_categories() == [3, 0]
    np.testing.assert_array_equal(t.X[:, 0], [0.0, 2.0, np.nan])


def test_take_reorders_every_part() -> None:
    t = read_table(pd.DataFrame({"id": ["a", "b", "c"], "x": [1.0, 2.0, 3.0], "y": ["p", "q", "p"]}),
                   TableOptions(label="y"))
    s = t.take([2, 0])
    assert isinstance(s, PartyTable) and s.ids == ("c", "a") and list(s.labels) == ["p", "p"]  # type: ignore[arg-type]
    np.testing.assert_array_equal(s.X[:, 0], [3.0, 1.0])


@pytest.mark.parametrize(("text", "options", "error", "words"), [
    ("ident,age\nr1,3\n", TableOptions(), TableError, "no id column 'id'"),
    ("id,age\nr1,3\nr1,4\n", TableOptions(), DuplicateIdError, "'r1' names more than one row"),
    ("id,age\nr1,3\n,4\n", TableOptions(), TableError, "empty cell"),
    ("id,age\nr1,3\n", TableOptions(columns=("age", "height")), TableError, "not in the table: ['height']"),
    ("id,age\nr1,3\n", TableOptions(categories={"colour": ("red",)}), TableError, "not in the table: ['colour']"),
    ("id,age\nr1,3\nr2,old\n", TableOptions(columns=("age",)), TableError, "'old', which is not a number"),
    ("id,age\nr1,3\nr2,inf\n", TableOptions(columns=("age",)), TableError, "infinite"),
    ("id,age\n", TableOptions(), TableError, "no rows"),
    ("", TableOptions(), TableError, "empty"),
    ("id,age\nr1,3\n", TableOptions(label="income"), TableError, "no label column 'income'"),
    ("id,age,y\nr1,3,\n", TableOptions(label="y"), TableError, "label column 'y' has an empty cell"),
])
def test_unusable_tables_are_refused(tmp_path: Path, text: str, options: TableOptions,
                                     error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=None) as info:
        read_table(write(tmp_path, text), options)
    assert words in str(info.value)
    assert isinstance(info.value, ParameterError)


def test_test_rows_with_text_in_a_numeric_column_are_refused(tmp_path: Path) -> None:
    train = read_table(write(tmp_path, CSV))
    with pytest.raises(TableError, match="'young', which is not a number"):
        read_table(write(tmp_path, "id,age,work,income\nt1,young,Private,x\n", "u.csv"), schema=train.schema)


def test_test_rows_lacking_a_training_column_say_so(tmp_path: Path) -> None:
    """No column was declared: the message names the training table's column the test rows lack (it said
    "declared columns not in the table", which sent the user looking for a declaration)."""
    train = read_table(write(tmp_path, CSV))
    with pytest.raises(TableError, match=r"the training table's feature columns \['income'\] are not in this"):
        read_table(write(tmp_path, "id,age,work\nt1,3,Private\n", "u.csv"), schema=train.schema)


def test_unreadable_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TableError, match="cannot read"):
        read_table(tmp_path / "absent.csv")
    with pytest.raises(TableError, match="cannot read"):
        read_table(write(tmp_path, "not parquet", "t.parquet"))
    with pytest.raises(TableError, match=r"\.csv or \.parquet"):
        read_table(write(tmp_path, "x", "t.xlsx"))


def test_a_regression_label_must_be_numeric(tmp_path: Path) -> None:
    t = read_table(write(tmp_path, "id,x,y\nr1,1,2.5\nr2,2,high\n"), TableOptions(label="y"))
    with pytest.raises(TableError, match="not a number"):
        encode_labels(t, 0)
    with pytest.raises(TableError, match="above the run's n_classes"):
        encode_labels(read_table(write(tmp_path, "id,x,y\nr1,1,a\nr2,2,b\nr3,1,c\n"), TableOptions(label="y")), 2)


def _config(tmp_path: Path, party: dict[str, object]) -> Path:
    entry = {"role": "psi_member", "address": "127.0.0.1:1", "cert": "a.crt", "key": "a.key", **party}
    doc = {"run": {"protocol": "psi", "operator": "op"}, "tls": {"ca": "ca.pem"},
           "parties": {"a": entry, "op": {"address": "127.0.0.1:2", "cert": "o.crt", "key": "o.key"}}}
    path = tmp_path / "run.toml"
    path.write_text(dump_toml(doc), encoding="utf-8")
    return path


def test_the_party_section_names_its_table(tmp_path: Path) -> None:
    write(tmp_path, CSV, "a.csv")
    write(tmp_path, "key,age,work\nt1,50,Private\n", "a-test.csv")
    path = _config(tmp_path, {"data": "a.csv", "test_data": "a-test.csv", "label": "income",
                              "categories": {"work": ["Private", "State-gov", "Self-emp"]}, "id_column": "id"})
    party = load_config(path).party("a")
    assert party.test_data == tmp_path / "a-test.csv" and party.table["categories"]["work"][2] == "Self-emp"
    with pytest.raises(TableError, match="no id column 'id'"):  # the test file names its ids "key"
        party_tables(party)
    write(tmp_path, "id,age,work\nt1,50,Self-emp\n", "a-test.csv")
    train, test = party_tables(load_config(path).party("a"))
    assert train.schema.n_categories() == [0, 3] and test is not None and test.X[0, 1] == 1.0


@pytest.mark.parametrize(("party", "words"), [
    ({"data": "a.csv", "columns": "age"}, "columns must be a list"),
    ({"data": "a.csv", "categories": {"work": "Private"}}, "categories maps"),
    ({"data": "a.csv", "id_column": ""}, "id_column must be a non-empty string"),
])
def test_bad_table_keys_are_refused(tmp_path: Path, party: dict[str, object], words: str) -> None:
    write(tmp_path, CSV, "a.csv")
    with pytest.raises(ParameterError, match=words):
        party_tables(load_config(_config(tmp_path, party)).party("a"))


def test_unknown_party_keys_stay_refused(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match=r"unknown key 'schema' in \[parties\.a\]"):
        load_config(_config(tmp_path, {"data": "a.csv", "schema": "a.json"}))


def test_strict_reading_refuses_other_columns_and_undeclared_categories(tmp_path: Path) -> None:
    """``strict`` (one schema declared for every party): an extra column and, at training, an undeclared
    category are refused; a test table's undeclared category is missing and ``test_labels`` reads its labels.
    Without ``strict`` the same tables read as before."""
    declared = TableOptions(label="income", columns=("work", "age"), categories={"work": ("Private", "State-gov")})
    path = write(tmp_path, "id,income,age,work,zip\nr1,>50K,30,Private,8000\n")
    with pytest.raises(TableError, match=r"not in the declared feature columns: \['zip'\]"):
        read_table(path, declared, strict=True)
    assert read_table(path, declared).schema.names == ["work", "age"]  # not strict: the extra column is ignored
    odd = write(tmp_path, CSV.replace("State-gov", "Moon-base"), "odd.csv")
    with pytest.raises(TableError, match=r"column 'work'.*outside the declared ones: \['Moon-base'\]"):
        read_table(odd, declared, strict=True)
    train = read_table(write(tmp_path, CSV, "train.csv"), declared, strict=True)
    test = read_table(odd, declared, schema=train.schema, strict=True, test_labels=True)
    np.testing.assert_array_equal(test.X[:, 0], [0.0, np.nan, np.nan])  # an unseen category is missing
    assert list(test.labels) == [">50K", "<=50K", "<=50K"]  # type: ignore[arg-type]
    assert read_table(odd, declared, schema=train.schema).labels is None  # a test table's labels only on request


def test_number_cells_are_python_floats_of_the_text(tmp_path: Path) -> None:
    """Text cells become exactly ``float(cell)`` (the reader converts a whole column at once);
    a column with one non-number is a category column, and a Parquet column of numbers, with
    gaps, is read as numbers."""
    cells = [" 2.5 ", "1_000", "1e-3", "nan", "0.1", "-0", "7"]
    text = "id,x,y\n" + "".join(f"r{i},{c},{'a' if i == 3 else i}\n" for i, c in enumerate(cells))
    t = read_table(write(tmp_path, text))
    assert t.schema.categorical_mask() == [False, True]
    np.testing.assert_array_equal(t.X[:, 0], [float(c) for c in cells])
    assert np.signbit(t.X[5, 0])
    frame = pd.DataFrame({"id": ["a", "b", "c"], "n": pd.array([1, None, 3], dtype="Int64"),
                          "f": [0.5, np.nan, 2.0], "b": [True, False, True]})
    frame.to_parquet(tmp_path / "p.parquet")
    got = read_table(tmp_path / "p.parquet")
    np.testing.assert_array_equal(got.X, [[1.0, 0.5, 1.0], [np.nan, np.nan, 0.0], [3.0, 2.0, 1.0]])
    with pytest.raises(TableError, match="row 1 is infinite"):
        read_table(pd.DataFrame({"id": ["a", "b"], "f": [1.0, np.inf]}), TableOptions(columns=("f",)))
    with pytest.raises(TableError, match=r"row 2 holds 'x', which is not a number"):
        read_table(write(tmp_path, "id,f\na,1\nb,2\nc,x\n", "bad.csv"), TableOptions(columns=("f",)))
