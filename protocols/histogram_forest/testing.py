"""Simulation helpers for the histogram forest: fit a facade on one ``(X_i, y_i)`` part per client, or on
the clients' own tables of a deployed run pooled in one process."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from securetrees.protocols.histogram_forest.facade import HistogramForestBase, Part, stack_parts

__all__ = ["CLIENT_COLUMN", "PooledTables", "fit_parts", "fit_tables", "pooled_tables"]

Model = TypeVar("Model", bound=HistogramForestBase)
CLIENT_COLUMN = "__client__"
"""The pooled table's column naming each row's client (its index in ``[protocol] clients``)."""


def fit_parts(model: Model, parts: Sequence[Part], **fit_kw: Any) -> Model:
    """``model`` fitted on ``parts`` (one ``(X_i, y_i)`` pair per client): the rows stacked by
    :func:`stack_parts` with the client index as the last column, named by ``client_column=-1``.
    The fitted model predicts from the feature columns alone."""
    model.set_params(client_column=-1).fit(*stack_parts(parts), **fit_kw)
    return model


@dataclass(frozen=True)
class PooledTables:
    """A deployed run's tables in one process: every client's training rows (in its file's order, the
    clients in ``[protocol] clients`` order) with :data:`CLIENT_COLUMN` last, their labels, and each
    client's test rows (features only) with their ids, by client name."""

    X: Any
    y: npt.NDArray[Any]
    tests: dict[str, Any]
    test_ids: dict[str, npt.NDArray[np.str_]]


def _features(frame: Any, columns: Sequence[str], categories: dict[str, list[str]]) -> Any:
    """The declared columns of a CSV frame read as text: categorical ones as pandas ``category`` columns
    over the declared names (an undeclared cell is missing), the others as floats (empty: NaN)."""
    import pandas as pd

    return pd.DataFrame({c: pd.Categorical(frame[c].where(frame[c].isin(categories[c])),
                                           categories=sorted(categories[c])) if c in categories
                         else pd.to_numeric(frame[c]).astype("float64") for c in columns})


def _read(path: Path) -> Any:
    """A CSV file as text (empty cells missing), or a Parquet file with its own types."""
    import pandas as pd

    if path.suffix.lower() == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    return pd.read_parquet(path)


def pooled_tables(run_toml: str | Path) -> PooledTables:
    """The clients' CSV tables of the run ``run_toml`` read with pandas alone (not through the
    deployment's reader), pooled as :func:`fit_tables` fits them: what the in-process facade sees of
    the same rows."""
    import pandas as pd

    from securetrees.net.config import load_config
    from securetrees.protocols.histogram_forest.deploy import label_values

    config = load_config(Path(run_toml))
    p = config.params
    columns = [str(c) for c in p["columns"]]
    categories = {str(k): [str(v) for v in vs] for k, vs in p.get("categories", {}).items()}
    frames, labels, tests, test_ids = [], [], {}, {}
    for i, name in enumerate(str(c) for c in p["clients"]):
        party = config.party(name)
        id_column, label = str(party.table.get("id_column", "id")), str(party.table["label"])
        if party.data is not None and party.data.exists():
            raw = _read(party.data)
            frame = _features(raw, columns, categories)
            frame[CLIENT_COLUMN] = float(i)
            frames.append(frame)
            labels.append(label_values(raw[label].tolist(), p, name))
        if party.test_data is not None:
            raw = _read(party.test_data)
            tests[name] = _features(raw, columns, categories)
            test_ids[name] = np.asarray([str(v) for v in raw[id_column]], dtype=str)
    X = pd.concat(frames, ignore_index=True) if frames else None
    return PooledTables(X, np.concatenate(labels) if labels else np.empty(0), tests, test_ids)


def fit_tables(run_toml: str | Path, pooled: PooledTables | None = None) -> tuple[HistogramForestBase, PooledTables]:
    """The facade of the run ``run_toml``'s ``[protocol]`` settings fitted in one process on its clients'
    pooled tables (``pooled``, else :func:`pooled_tables`; ``client_column`` naming each row's client): the
    forest the deployed run grows without DP."""
    from securetrees.net.config import load_config
    from securetrees.protocols.histogram_forest.deploy import estimator_from

    pooled = pooled if pooled is not None else pooled_tables(run_toml)
    model = estimator_from(load_config(Path(run_toml)).params).set_params(client_column=CLIENT_COLUMN)
    model.fit(pooled.X, pooled.y)
    return model, pooled
