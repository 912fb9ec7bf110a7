"""The three organisations' example tables shipped in ``securetrees/data/example`` (README, "Your own data").

A synthetic vertical federation for Federated Forest: one population of customers, seen by

* ``bank.csv``: ``customer``, ``age``, ``income``, ``account`` (``basic``/``plus``/``premium``) and
  the label ``outcome`` (``repaid`` / ``defaulted``): the label holder;
* ``shop.csv``: ``customer``, ``monthly_spend``, ``loyalty`` (``none``/``silver``/``gold``),
  ``online_share``;
* ``telco.csv``: ``customer``, ``contract`` (``prepaid``/``monthly``/``yearly``), ``tenure_months``,
  ``late_payments``;

and ``NAME-new.csv``: each organisation's columns (no label) of new customers to predict.  Each
organisation lacks some customers the others have (the ids overlap in part), lists its rows in its
own order, and has empty cells (missing values).  The outcome depends on columns of all three
(income, account, monthly spend, loyalty, late payments, contract) plus noise, so no organisation
predicts it alone as well as the federation.

:func:`make_example` is deterministic in its seed (numpy's PCG64: example data, never a secret);
:func:`write_example` wrote the shipped files (``python -m securetrees.testing.example_tables DIR``),
and ``tests/net/test_setup_cli.py`` checks that the shipped files are its output.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["EXAMPLE_FILES", "ORGANISATIONS", "make_example", "write_example"]

ORGANISATIONS = ("bank", "shop", "telco")
EXAMPLE_FILES = tuple(f"{o}{s}.csv" for o in ORGANISATIONS for s in ("", "-new"))


def _customers(rng: np.random.Generator, n: int) -> dict[str, Any]:
    """One row per customer: every organisation's columns and the outcome."""
    age = rng.integers(19, 80, n)
    account = rng.choice(["basic", "plus", "premium"], n, p=[0.5, 0.3, 0.2])
    income = np.round(rng.lognormal(10.3, 0.45, n) * np.where(account == "premium", 1.6, 1.0), -2)
    loyalty = rng.choice(["none", "silver", "gold"], n, p=[0.55, 0.3, 0.15])
    spend = np.round(income / 12 * rng.uniform(0.05, 0.45, n), 2)
    online = np.round(rng.beta(2, 3, n), 2)
    contract = rng.choice(["prepaid", "monthly", "yearly"], n, p=[0.3, 0.45, 0.25])
    tenure = rng.integers(1, 120, n)
    late = rng.poisson(np.where(contract == "prepaid", 1.2, 0.5))
    score = (0.9 * (np.log(income) - 10.3) / 0.45 - 1.2 * (spend / (income / 12) - 0.25) / 0.12
             + 0.6 * (account == "premium") + 0.5 * (loyalty == "gold") - 0.9 * (late - 0.7)
             - 0.6 * (contract == "prepaid") + 0.01 * (tenure - 60) + rng.logistic(0, 0.8, n))
    outcome = np.where(score > -0.6, "repaid", "defaulted")
    return {"bank": {"age": age, "income": income, "account": account, "outcome": outcome},
            "shop": {"monthly_spend": spend, "loyalty": loyalty, "online_share": online},
            "telco": {"contract": contract, "tenure_months": tenure, "late_payments": late}}


def _frame(rng: np.random.Generator, ids: list[str], cols: dict[str, Any], keep: np.ndarray, *,
           missing: float, exclude: tuple[str, ...] = ()) -> Any:
    import pandas as pd

    frame = pd.DataFrame({"customer": ids, **{k: v for k, v in cols.items() if k not in exclude}})
    frame = frame.iloc[keep].reset_index(drop=True)
    for col in frame.columns:
        if col in ("customer", "outcome"):
            continue
        holes = rng.random(len(frame)) < missing
        frame[col] = frame[col].astype(object).where(~holes, None)
    return frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)


def make_example(*, n_train: int = 300, n_new: int = 40, seed: int = 16) -> dict[str, Any]:
    """The example's six tables (DataFrames) by file name."""
    rng = np.random.default_rng(seed)  # example data, reproducible by seed: no secret is drawn here
    n = n_train + n_new
    everyone = _customers(rng, n)
    ids = [f"c{i:04d}" for i in rng.choice(10_000, n, replace=False)]
    tables: dict[str, Any] = {}
    for org in ORGANISATIONS:
        # each organisation knows 85-95% of the customers: their ids overlap only in part
        train = np.flatnonzero(rng.random(n_train) < rng.uniform(0.85, 0.95))
        new = n_train + np.flatnonzero(rng.random(n_new) < 0.9)
        tables[f"{org}.csv"] = _frame(rng, ids, everyone[org], train, missing=0.04)
        tables[f"{org}-new.csv"] = _frame(rng, ids, everyone[org], new, missing=0.04, exclude=("outcome",))
    return tables


def write_example(out_dir: str | Path) -> list[Path]:
    """Write the six example files into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in make_example().items():
        frame.to_csv(out / name, index=False, lineterminator="\n")
        paths.append(out / name)
    return paths


def main() -> None:  # pragma: no cover - how the shipped files were written
    for p in write_example(sys.argv[1] if len(sys.argv) > 1 else "securetrees/data/example"):
        print(p)


if __name__ == "__main__":  # pragma: no cover
    main()
