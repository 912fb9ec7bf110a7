"""Test helpers for deployed runs: a fit run's ``run.toml`` turned predict-only, and the operator's
end of the model-id check answered without processes (tests only)."""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from securetrees.errors import ProtocolError
from securetrees.net.config import dump_toml
from securetrees.net.control import ControlReply

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["ModelIdReplies", "predict_only"]


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
