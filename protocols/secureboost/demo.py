"""``securetrees demo secureboost``: SecureBoost on Adult split vertically between an active party
(the labels and 5 columns) and passive parties sharing the other 9 columns.

Trains SecureBoost (2048-bit key by default) and the central reference GBDT on the joined
columns with the same binning, depth, learning rate and rounds, and prints both test
accuracies, whether the trees are the same, the time, the decryptions saved by packing and the
bytes exchanged.  Default: the first 2000 training rows, 3 trees of depth 3 (a few seconds
at 1024 bits, about half a minute at 2048).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

from securetrees.datasets import load_adult
from securetrees.paillier import generate_keypair
from securetrees.progress import phase
from securetrees.protocols.secureboost.estimators import SecureBoostClassifier
from securetrees.protocols.secureboost.testing import joined_tree
from securetrees.trees import BinningParams, GrowParams, train_boosted

ABOUT = "SecureBoost on Adult split vertically: one active and 1-3 passive parties"
"""One line for ``securetrees demo --list``."""

__all__ = ["adult_partition", "main"]

#: Columns of the active party (age, education-num, sex, capital-gain, hours-per-week); the rest
#: are dealt round-robin to the passive parties.
ACTIVE_COLUMNS = (0, 4, 9, 10, 12)
MAX_BINS = 64  # Adult's native-country has 41 category codes


def adult_partition(n_passive: int, n_features: int = 14) -> list[list[int]]:
    """The demo's vertical split: the active columns, then the others round-robin."""
    rest = [c for c in range(n_features) if c not in ACTIVE_COLUMNS]
    return [list(ACTIVE_COLUMNS), *[rest[u::n_passive] for u in range(n_passive)]]


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="securetrees demo secureboost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2000, help="first ROWS training rows (default 2000)")
    parser.add_argument("--trees", type=int, default=3)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=0.3)
    parser.add_argument("--passives", type=int, default=2, choices=[1, 2, 3])
    parser.add_argument("--key-bits", type=int, default=2048)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar or lines on stderr")
    args = parser.parse_args(list(argv))
    d = load_adult()
    X, y = d.X_train[: args.rows], d.y_train[: args.rows]
    Xt, yt = d.X_test[: args.rows // 2], d.y_test[: args.rows // 2]
    cat = [int(c) for c in np.flatnonzero(d.categorical)]
    partition = adult_partition(args.passives)
    names = d.feature_names
    print(f"Adult: {len(y)} training / {len(yt)} test rows")
    print("active party (labels): " + ", ".join(names[c] for c in partition[0]))
    for u, cols in enumerate(partition[1:], start=1):
        print(f"passive party {u}: " + ", ".join(names[c] for c in cols))
    keys = generate_keypair(args.key_bits, allow_insecure=args.key_bits < 2048)
    model = SecureBoostClassifier(partition, args.trees, max_depth=args.depth, learning_rate=args.learning_rate,
                                  max_bins=MAX_BINS, keypair=keys, categorical_features=cat,
                                  allow_insecure=args.key_bits < 2048, record_payloads=False)
    t0 = time.perf_counter()
    with phase(f"SecureBoost: {args.trees} trees of depth {args.depth}, {args.passives} passive parties",
               enabled=not args.no_progress):  # its elapsed time at least every few seconds
        model.fit(X, y)
    train = time.perf_counter() - t0
    acc = model.score(Xt, yt)
    order = [c for cols in partition for c in cols]
    ref, _ = train_boosted(X[:, order], y, n_classes=2, n_estimators=args.trees, learning_rate=args.learning_rate,
                           grow=GrowParams(max_depth=args.depth),
                           binning=BinningParams(max_bins=MAX_BINS, categorical=[c in cat for c in order]),
                           providers=[p for p, cols in enumerate(partition) for _ in cols], classes=np.unique(y))
    ref_acc = float(np.mean(ref.predict(Xt[:, order]) == yt))
    fitted = model.active_.model
    same = fitted is not None and all(
        np.array_equal(joined_tree(r, model.passives_, len(partition[0])).feature, t.feature)
        for r, t in zip(fitted.trees, ref.trees, strict=True)
    )
    c = model.active_.counts
    print(f"SecureBoost ({args.key_bits}-bit key, {args.trees} trees of depth {args.depth}): accuracy {acc:.4f}, "
          f"training {train:.1f} s; reference GBDT on the joined columns: accuracy {ref_acc:.4f}; "
          f"same split features: {same}")
    print(f"{c['encrypt']} encryptions; {c['decrypt']} decryptions for {c['buckets']} bucket sums "
          f"(packing); {c['rounds']} training rounds; "
          f"{model.network_.transcript.total_bytes / 1e6:.1f} MB exchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
