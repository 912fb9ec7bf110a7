"""``securetrees demo hybridtree``: HybridTree on Adult in the paper's hybrid split.

The split (``securetrees.protocols.hybridtree.data``, seed ``ADULT_SEED``): the host holds a
seeded random 12 of Adult's 14 columns for every row (the proportion of the
paper's Table 5, 102 of 123), less ``education-num`` when the guests hold
``education`` (the two encode one attribute and stay on one side: the guests
then share education, education-num and occupation); the 5 guests hold
disjoint, equal, random fifths of the rows, in training and test alike.  The
demo trains HybridTree (secure by default, 2048-bit key) and the two baselines
of Section 5.1 with the same trees and learning rate: ALL-IN (one GBDT of the
same total depth on the joined data) and SOLO (the host alone), and prints test
accuracy, time, and how many nodes the guest layers split or kept as leaves.

Default: all of Adult, 3 trees at learning rate 0.5: about 1 minute of CPU (the
guest layers need nodes of at least ``min_node_size`` = 100 guest instances, so a
few hundred rows leave them empty).  ``--full``: the paper's 50 trees at
learning rate 0.1, about 15 minutes of CPU (about 17 s per tree at 2048 bits,
measured on the default run; almost all of it the host's gradient encryptions).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.datasets import load_adult
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.hybridtree.boosting import FitProgress
from securetrees.protocols.hybridtree.data import ADULT_SEED, HybridSplit, hybrid_split
from securetrees.protocols.hybridtree.estimators import HybridTreeClassifier, with_guest_column
from securetrees.trees import GradientBoostingClassifier

ABOUT = "HybridTree on Adult's hybrid split, host and 5 guests"
"""One line for ``securetrees demo --list``."""

__all__ = ["AdultHybrid", "adult_hybrid", "baseline_accuracies", "main"]

MAX_BINS = 64  # Adult's native-country has 41 category codes


@dataclass(frozen=True)
class AdultHybrid:
    X_train: npt.NDArray[np.float64]
    y_train: npt.NDArray[np.int64]
    X_test: npt.NDArray[np.float64]
    y_test: npt.NDArray[np.int64]
    categorical: list[int]
    names: tuple[str, ...]
    split: HybridSplit


#: Adult's columns that encode one attribute: ``education`` and its numeric code ``education-num``.
ADULT_LINKED = (("education", "education-num"),)


def adult_hybrid(
    *, n_guests: int = 5, rows: int | None = None, seed: int = ADULT_SEED, link: bool = True,
) -> AdultHybrid:
    """Adult and its pinned hybrid split; ``rows`` keeps the first rows of each file (smoke runs).
    ``link`` (default) keeps the two encodings of education on one side (with the pinned seed
    the guests hold education, education-num and occupation); ``link=False`` is the former
    split, where the host holds education-num, a recoding of the guests' education."""
    d = load_adult()
    Xtr, ytr, Xte, yte = d.X_train, d.y_train, d.X_test, d.y_test
    if rows is not None:
        Xtr, ytr, Xte, yte = Xtr[:rows], ytr[:rows], Xte[: rows // 2], yte[: rows // 2]
    names = list(d.feature_names)
    linked = [[names.index(c) for c in group] for group in ADULT_LINKED] if link else []
    split = hybrid_split(Xtr.shape[1], len(ytr), len(yte), n_guests=n_guests, seed=seed,
                         linked=linked)
    return AdultHybrid(Xtr, ytr, Xte, yte, np.flatnonzero(d.categorical).tolist(),
                       d.feature_names, split)


def baseline_accuracies(
    data: AdultHybrid, n_trees: int, depth: int, *, learning_rate: float = 0.1, progress: bool = False,
) -> dict[str, float]:
    """ALL-IN and SOLO test accuracy with securetrees' reference GBDT (same λ, lr, bins)."""
    host = data.split.host_features
    allin = GradientBoostingClassifier(n_trees, learning_rate=learning_rate, max_depth=depth,
                                       min_samples_leaf=1, max_bins=MAX_BINS,
                                       categorical_features=data.categorical, progress=progress)
    allin.fit(data.X_train, data.y_train)
    solo = GradientBoostingClassifier(n_trees, learning_rate=learning_rate, max_depth=depth,
                                      min_samples_leaf=1, max_bins=MAX_BINS,
                                      categorical_features=[i for i, c in enumerate(host)
                                                            if c in data.categorical],
                                      progress=progress)
    solo.fit(data.X_train[:, host], data.y_train)
    return {"ALL-IN": float(allin.score(data.X_test, data.y_test)),
            "SOLO": float(solo.score(data.X_test[:, host], data.y_test))}


def hybridtree(
    data: AdultHybrid, mode: str, n_trees: int, *, keypair: tuple[PublicKey, PrivateKey] | None = None,
    key_bits: int = 2048, encryption: str = "key-owner", learning_rate: float = 0.1,
    progress: bool | Callable[[FitProgress], None] = False,
) -> HybridTreeClassifier:
    """Fit HybridTree in ``mode`` on the split (insecure modes are asked for explicitly here)."""
    model = HybridTreeClassifier(
        n_trees, host_features=data.split.host_features, guest_features=data.split.guest_features,
        guest_column=-1, categorical_features=data.categorical, max_bins=MAX_BINS, mode=mode,  # type: ignore[arg-type]
        allow_insecure=mode != "secure", keypair=keypair, key_bits=key_bits,
        encryption=encryption, learning_rate=learning_rate, progress=progress,  # type: ignore[arg-type]
    )
    with warnings.catch_warnings():
        if mode != "secure":
            warnings.simplefilter("ignore")
        model.fit(with_guest_column(data.X_train, data.split.train_rows), data.y_train)
    return model


def _say(text: str) -> None:
    print(text, flush=True)


def _status(text: str) -> None:
    """A progress line on stderr (results go to stdout)."""
    print(text, file=sys.stderr, flush=True)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="securetrees demo hybridtree", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true",
                        help="the paper's run: 50 trees at learning rate 0.1 (about 15 min of CPU "
                             "at 2048 bits; the default run takes about 1 min)")
    parser.add_argument("--trees", type=int, default=None, help="trees (default 3; 50 with --full)")
    parser.add_argument("--learning-rate", type=float, default=None,
                        help="learning rate (default 0.5; 0.1 with --full)")
    parser.add_argument("--mode", choices=["secure", "plaintext", "paper"], default="secure")
    parser.add_argument("--encryption", choices=["djn", "djn-short", "key-owner"], default="key-owner")
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--guests", type=int, default=5)
    parser.add_argument("--seed", type=int, default=ADULT_SEED, help="seed of the hybrid split")
    parser.add_argument("--rows", type=int, default=None,
                        help="use only the first ROWS training rows (ROWS/2 test rows)")
    parser.add_argument("--no-baselines", action="store_true")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(list(argv))
    trees = args.trees if args.trees is not None else (50 if args.full else 3)
    lr = args.learning_rate if args.learning_rate is not None else (0.1 if args.full else 0.5)
    show = not args.no_progress
    data = adult_hybrid(n_guests=args.guests, rows=args.rows, seed=args.seed)
    _say(f"Adult: {len(data.y_train)} training / {len(data.y_test)} test rows")
    _say("host columns: " + ", ".join(data.names[c] for c in data.split.host_features))
    _say(f"{args.guests} guests share: " + ", ".join(data.names[c] for c in data.split.guest_features))
    if show and args.mode == "secure":
        _status(f"generating the host's {args.key_bits}-bit Paillier key, then {trees} trees "
                "(progress below)")
    t0, c0 = time.perf_counter(), time.process_time()
    model = hybridtree(data, args.mode, trees, key_bits=args.key_bits, encryption=args.encryption,
                       learning_rate=lr, progress=show)
    train, train_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    acc = model.score(with_guest_column(data.X_test, data.split.test_rows), data.y_test)
    infer = time.perf_counter() - t0
    _say(f"HybridTree ({args.mode}, E_h=5, E_g=2, {trees} trees, learning rate {lr}): accuracy "
         f"{acc:.4f}; training {train:.1f} s ({train_cpu:.1f} s CPU), inference {infer:.2f} s; "
         f"{model.network_.transcript.total_bytes / 1e6:.1f} MB exchanged")
    _say(_guest_layers(model, trees))
    majority = float(max(np.mean(data.y_test), 1.0 - np.mean(data.y_test)))
    _say(f"{'majority':>10}: accuracy {majority:.4f} (always the most frequent class)")
    if not args.no_baselines:
        if show:
            _status(f"training the ALL-IN and SOLO baselines ({trees} trees each)")
        for name, value in baseline_accuracies(data, trees, 7, learning_rate=lr, progress=show).items():
            _say(f"{name:>10}: accuracy {value:.4f} (GBDT, depth 7, {trees} trees, learning rate {lr})")
    _say("paper (Table 1, Adult, 50 trees): HybridTree 0.832, ALL-IN 0.853, SOLO 0.653")
    return 0


def _guest_layers(model: HybridTreeClassifier, trees: int) -> str:
    """What the guest layers did, and why nodes stayed leaves (specs/hybridtree.md, "Too few
    guests" and "Subset-sum inference")."""
    if model.params_.mode == "paper":
        return "guest layers: each guest grew its own under every host leaf (paper mode)"
    splits = sum(r.n_guest_splits for r in model.host_.records)
    line = (f"guest layers: {splits} guest splits in {trees} trees; kept as leaves: "
            f"{model.small_nodes_} nodes too small for a guest split (min_node_size="
            f"{model.min_node_size} instances of guests, two groups of min_bin_size="
            f"{model.min_bin_size}: the subset-sum mitigation), {model.fallback_nodes_} with fewer "
            f"than {model.min_guests} contributing guests")
    if splits == 0:
        line += ("; no guest split grew: with fewer rows no node reaches min_node_size, so the "
                 "model is the host's alone (use all rows)")
    return line
