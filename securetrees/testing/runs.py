"""Test helpers for deployed runs: a fit run's ``run.toml`` turned predict-only, its new rows joined
in the agreed order (the one-process reference), and the operator's end of the model-id check
answered without processes (tests only)."""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ProtocolError
from securetrees.net.alignment import rows_path
from securetrees.net.config import dump_toml, load_config
from securetrees.net.control import ControlReply
from securetrees.net.tables import TableOptions, read_table
from securetrees.schema import TabularSchema

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["ModelIdReplies", "joined_new_rows", "predict_only"]


def predict_only(cfg: Path, new_tests: Mapping[str, str], *, keep: Collection[str] = (),
                 out: str = "predict.toml") -> Path:
    """``cfg`` turned predict-only, written beside it as ``out``: ``[run] job = "predict"``, party
    ``name``'s ``test_data`` set to ``new_tests[name]``, and every party's training ``data`` file
    deleted (its key stays, naming an absent file), except the parties in ``keep``."""
    doc: dict[str, Any] = tomllib.loads(cfg.read_text(encoding="utf-8"))
    doc.setdefault("run", {})["job"] = "predict"
    parties = doc["parties"]
    for name, new in new_tests.items():
        parties[name]["test_data"] = new
    for name, party in parties.items():
        if "data" in party and name not in keep:
            (cfg.parent / party["data"]).unlink(missing_ok=True)
    written = cfg.parent / out
    written.write_text(dump_toml(doc), encoding="utf-8")
    return written


class ModelIdReplies:
    """The operator's end of ``model_id`` requests (``securetrees.net.models.check_models``),
    answered from given ids as the parties that opened those parts would answer."""

    def __init__(self, ids: Mapping[str, bytes]) -> None:
        self.ids = dict(ids)

    def control_many(self, roles: Sequence[str], action: str) -> dict[str, ControlReply]:
        if action != "model_id":
            raise ProtocolError(f"only model_id is answered here, not {action!r}")
        return {r: ControlReply(info={"model_id": self.ids[r].hex()}) for r in roles}


def joined_new_rows(config_path: Path, parties: Sequence[str], partition: Sequence[Sequence[int]],
                    schemas: Mapping[str, TabularSchema], d: int) -> tuple[npt.NDArray[np.float64], tuple[str, ...]]:
    """A predict-only run's new rows joined over ``parties`` (party ``parties[i]`` holds the global
    columns ``partition[i]``; a column no party holds is NaN) in the agreed order of its alignment,
    each party's ``test_data`` read with its saved ``schemas[name]``, and their ids.
    :class:`ProtocolError` when a party aligned more than the test ids or the orders differ."""
    config = load_config(config_path)
    X: npt.NDArray[np.float64] | None = None
    ids: tuple[str, ...] = ()
    for name, cols in zip(parties, partition, strict=True):
        party = config.party(name)
        if party.test_data is None:
            raise ProtocolError(f"{name} names no test_data")
        table = read_table(party.test_data, TableOptions.from_config(party.table, name), schema=schemas[name])
        with np.load(rows_path(config, name), allow_pickle=False) as rows:
            if rows.files != ["test"]:  # a predict-only run aligns the test ids only
                raise ProtocolError(f"{name} aligned {rows.files}, not the test ids alone")
            aligned = table.take(rows["test"])
        if X is None:
            X, ids = np.full((len(aligned), d), np.nan), aligned.ids
        if aligned.ids != ids:
            raise ProtocolError(f"{name}'s new rows are not in the agreed order")
        X[:, list(cols)] = aligned.X
    if X is None:
        raise ProtocolError("no party to join")
    return X, ids
