"""``securetrees demo hybridtree``: HybridTree on Adult in the paper's hybrid split.

The split (``protocols.hybridtree.data``, seed ``ADULT_SEED``): the host holds a
seeded random 12 of Adult's 14 columns for every row (the proportion of the
paper's Table 5, 102 of 123), the 5 guests share the other 2 columns and hold
disjoint, equal, random fifths of the rows, in training and test alike.  The
demo trains HybridTree (secure by default) and the two baselines of Section 5.1:
ALL-IN (one GBDT of the same size and total depth on the joined data) and SOLO
(the host alone), and prints test accuracy and time.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from protocols.hybridtree.data import ADULT_SEED, HybridSplit, hybrid_split
from protocols.hybridtree.estimators import HybridTreeClassifier
from securetrees.datasets import load_adult
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.trees import GradientBoostingClassifier

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


def adult_hybrid(*, n_guests: int = 5, rows: int | None = None, seed: int = ADULT_SEED) -> AdultHybrid:
    """Adult and its pinned hybrid split; ``rows`` keeps the first rows of each file (smoke runs)."""
    d = load_adult()
    Xtr, ytr, Xte, yte = d.X_train, d.y_train, d.X_test, d.y_test
    if rows is not None:
        Xtr, ytr, Xte, yte = Xtr[:rows], ytr[:rows], Xte[: rows // 2], yte[: rows // 2]
    split = hybrid_split(Xtr.shape[1], len(ytr), len(yte), n_guests=n_guests, seed=seed)
    return AdultHybrid(Xtr, ytr, Xte, yte, np.flatnonzero(d.categorical).tolist(),
                       d.feature_names, split)


def baseline_accuracies(data: AdultHybrid, n_trees: int, depth: int) -> dict[str, float]:
    """ALL-IN and SOLO test accuracy with securetrees' reference GBDT (same λ, lr, bins)."""
    host = data.split.host_features
    allin = GradientBoostingClassifier(n_trees, max_depth=depth, min_samples_leaf=1,
                                       max_bins=MAX_BINS, categorical_features=data.categorical)
    allin.fit(data.X_train, data.y_train)
    solo = GradientBoostingClassifier(n_trees, max_depth=depth, min_samples_leaf=1,
                                      max_bins=MAX_BINS,
                                      categorical_features=[i for i, c in enumerate(host)
                                                            if c in data.categorical])
    solo.fit(data.X_train[:, host], data.y_train)
    return {"ALL-IN": float(allin.score(data.X_test, data.y_test)),
            "SOLO": float(solo.score(data.X_test[:, host], data.y_test))}


def hybridtree(
    data: AdultHybrid, mode: str, n_trees: int, *, keypair: tuple[PublicKey, PrivateKey] | None = None,
    key_bits: int = 2048, encryption: str = "key-owner", progress: bool = False,
) -> HybridTreeClassifier:
    """Fit HybridTree in ``mode`` on the split (insecure modes are asked for explicitly here)."""
    model = HybridTreeClassifier(
        n_trees, categorical_features=data.categorical, max_bins=MAX_BINS, mode=mode,  # type: ignore[arg-type]
        allow_insecure=mode != "secure", keypair=keypair, key_bits=key_bits,
        encryption=encryption, progress=progress,  # type: ignore[arg-type]
    )
    with warnings.catch_warnings():
        if mode != "secure":
            warnings.simplefilter("ignore")
        model.fit(data.X_train, data.y_train, data.split.host_features,
                  data.split.guest_features, data.split.train_rows)
    return model


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="securetrees demo hybridtree", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", type=int, default=50)
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
    data = adult_hybrid(n_guests=args.guests, rows=args.rows, seed=args.seed)
    print(f"Adult: {len(data.y_train)} training / {len(data.y_test)} test rows")
    print("host columns: ", ", ".join(data.names[c] for c in data.split.host_features))
    print(f"{args.guests} guests share:", ", ".join(data.names[c] for c in data.split.guest_features))
    t0 = time.perf_counter()
    model = hybridtree(data, args.mode, args.trees, key_bits=args.key_bits,
                       encryption=args.encryption, progress=not args.no_progress)
    train = time.perf_counter() - t0
    t0 = time.perf_counter()
    acc = model.score(data.X_test, data.y_test, data.split.test_rows)
    infer = time.perf_counter() - t0
    print(f"HybridTree ({args.mode}, E_h=5, E_g=2, {args.trees} trees): accuracy {acc:.4f}; "
          f"training {train:.1f} s, inference {infer:.2f} s; "
          f"{model.network_.transcript.total_bytes / 1e6:.1f} MB exchanged; "
          f"{model.fallback_nodes_} nodes kept as leaves (fewer than 3 guests)")
    if not args.no_baselines:
        for name, value in baseline_accuracies(data, args.trees, 7).items():
            print(f"{name:>10}: accuracy {value:.4f} (GBDT, depth 7, {args.trees} trees)")
    print("paper (Table 1, Adult): HybridTree 0.832, ALL-IN 0.853, SOLO 0.653")
    return 0
