"""Model files and predict-only runs (issue 16, part 5): each trial of ``securetrees federation init``
(Federated Forest, the histogram forest, HybridTree, RevFRF) launched as a fit run, then again as a
predict-only run (``[run] job = "predict"``) with every training file deleted.  RevFRF's fit run also
revokes a participant at level 2 and predicts again (its launcher's job), and both of its runs include
the requester's encrypted predictions (FRF-Predict); its requester keeps its request rows (not
training data) as ``test_data``.

Figures: the operator's job after every role is up (``launch``'s ``job_seconds``; process start-up
excluded) of the fit run (alignment, training, saving the model parts, predicting the test rows) and
of the predict-only run (loading the parts happens at start-up; the job aligns the test ids where the
protocol aligns, checks the model ids and predicts), their ratio, and the size of each party's model
file.  Medians over repeats (3; ``--quick``: one, smaller trials).  The trials' test arrays are given
their own ``test_data`` files so that the predict-only run never opens a training file.
"""

from __future__ import annotations

import re
import statistics
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from harness import Report

from securetrees.errors import InsecureParameterWarning
from securetrees.net.service import init_trial, launch


def _split_test_arrays(cfg: Path) -> str:
    """Each ``.npz`` party's test arrays in a ``test_data`` file of their own, and RevFRF's requester's
    request rows as its ``test_data``; returns the new text."""
    text = cfg.read_text(encoding="utf-8")
    for data in re.findall(r'^data = "(.+\.npz)"$', text, flags=re.M):
        arrays = dict(np.load(cfg.parent / data, allow_pickle=False))
        test = {k: v for k, v in arrays.items() if k.endswith("_test") or k == "test_ids"}
        np.savez(cfg.parent / data.replace(".npz", "-test.npz"), **test)  # type: ignore[arg-type]
        text = text.replace(f'data = "{data}"', f'data = "{data}"\ntest_data = "{data.replace(".npz", "-test.npz")}"')
    for data in re.findall(r'^data = "(.+requester\.csv)"$', text, flags=re.M):  # RevFRF: its request rows
        test = data.replace(".csv", "-test.csv")
        (cfg.parent / test).write_bytes((cfg.parent / data).read_bytes())
        text = text.replace(f'data = "{data}"', f'data = "{data}"\ntest_data = "{test}"')
    cfg.write_text(text, encoding="utf-8")
    return text


def _once(folder: Path, protocol: str, rows: int, trees: int) -> tuple[float, float, dict[str, int]]:
    cfg = init_trial(protocol, folder, rows=rows, trees=trees, insecure=True)
    text = _split_test_arrays(cfg)
    fit_report: dict[str, Any] = {}
    launch(cfg, folder / "pki", report=fit_report)
    sizes = {p.stem: p.stat().st_size for p in sorted((folder / "models").iterdir())}
    predict_cfg = folder / "predict.toml"
    predict_cfg.write_text(text.replace("[run]\n", '[run]\njob = "predict"\n', 1), encoding="utf-8")
    for data in re.findall(r'^data = "(.+)"$', text, flags=re.M):
        (folder / data).unlink()
    predict_report: dict[str, Any] = {}
    launch(predict_cfg, folder / "pki", report=predict_report)
    return float(fit_report["job_seconds"]), float(predict_report["job_seconds"]), sizes


def run(report: Report, quick: bool) -> None:
    repeats = 1 if quick else 3
    trials = [("federated-forest", 100 if quick else 200, 2), ("histogram-forest", 500 if quick else 2000, 5),
              ("hybridtree", 300 if quick else 1000, 2 if quick else 3), ("revfrf", 100 if quick else 200, 2)]
    table = report.table("Fit run against predict-only run (every role in its own process, mutual TLS)",
                         ["trial", "rows", "trees", "fit run job (s)", "predict-only job (s)", "ratio",
                          "model files (bytes)"],
                         note="job seconds exclude start-up; a predict-only role opens its sealed part at "
                              "start-up (one scrypt, log2 n = 14)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParameterWarning)
        for protocol, rows, trees in trials:
            fits, predicts = [], []
            sizes: dict[str, int] = {}
            for r in range(repeats):
                with tempfile.TemporaryDirectory() as tmp:
                    f, p, sizes = _once(Path(tmp) / f"{protocol}-{r}", protocol, rows, trees)
                fits.append(f)
                predicts.append(p)
            fit_s, predict_s = statistics.median(fits), statistics.median(predicts)
            table.add(protocol, rows, trees, f"{fit_s:.2f}", f"{predict_s:.2f}", f"{predict_s / fit_s:.2f}",
                      ", ".join(f"{k} {v}" for k, v in sizes.items()))
