"""Text columns in :class:`securetrees.schema.TabularSchema`: a column of ``str`` and ``None``
cells is read by whole-column operations; its categories and codes are those of the cell-by-cell
reading, which any other column (e.g. one holding a number too) still takes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from securetrees.schema import TabularSchema

CELLS = st.one_of(st.none(), st.sampled_from(["a", "b", "B", "ä", "10", "2", ""]), st.text(max_size=3))


@settings(max_examples=80, deadline=None)
@given(st.lists(CELLS, min_size=1, max_size=30), st.lists(CELLS, min_size=1, max_size=30))
def test_text_columns_read_as_cell_by_cell(train: list[str | None], test: list[str | None]) -> None:
    column = np.array(train, dtype=object).reshape(-1, 1)
    schema = TabularSchema.infer(column)
    present = sorted({v for v in train if v is not None})
    if not present:
        assert schema.categorical_mask() == [False]
        return
    assert schema.columns[0].categories == tuple(present)
    code = {c: float(k) for k, c in enumerate(present)}
    for cells in (train, test):
        got = schema.encode(np.array(cells, dtype=object).reshape(-1, 1))[:, 0]
        want = np.array([np.nan if v is None else code.get(v, np.nan) for v in cells])
        np.testing.assert_array_equal(got, want)
    mixed = np.array([*train, 1.0], dtype=object).reshape(-1, 1)  # a number: the cell-by-cell reading
    assert TabularSchema.infer(mixed).columns[0].categories == tuple(sorted({*present, "1"}))
