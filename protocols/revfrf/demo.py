"""``securetrees demo revfrf``: RevFRF on UCI Adult (shipped with the package; see
``securetrees/data/ATTRIBUTION.md``): federated training among participants that each own
some columns, encrypted prediction requests (FRF-Predict), the revocation of a participant
(FRF-Revoc with a new forest epoch), and accuracy against scikit-learn with the same settings.

Adult's missing categorical values (``?``) get the code -1 before training (as in
the published figures; RevFRF also accepts NaN, ``specs/revfrf.md`` "Missing values").
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from securetrees.datasets import load_adult
from securetrees.errors import InsecureParameterWarning
from securetrees.progress import phase
from securetrees.protocols.revfrf.facade import RevFRFClassifier

ABOUT = "RevFRF on Adult: train, encrypted prediction, revocation"
"""One line for ``securetrees demo --list``."""

__all__ = ["main"]


def _accuracy(pred: npt.NDArray[np.generic], y: npt.NDArray[np.int64]) -> float:
    return float(np.mean(pred == y) * 100)


def _sklearn_accuracy(X: npt.NDArray[np.float64], y: npt.NDArray[np.int64], Xt: npt.NDArray[np.float64],
                      yt: npt.NDArray[np.int64], cols: list[int], args: argparse.Namespace) -> str:
    try:
        from sklearn.ensemble import RandomForestClassifier
    except ImportError:
        return "n/a (scikit-learn not installed: pip install 'securetrees[test]')"
    sk = RandomForestClassifier(n_estimators=args.trees, max_depth=args.depth, max_features="sqrt",
                                random_state=args.seed, n_jobs=1)
    sk.fit(X[:, cols], y)
    return f"{_accuracy(sk.predict(Xt[:, cols]), yt):.2f} %"


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="securetrees demo revfrf", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--participants", type=int, default=5, help="participants; columns dealt round-robin")
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--rows", type=int, default=5000, help="training rows (of Adult's 32,561)")
    parser.add_argument("--test-rows", type=int, default=None, help="test rows (default: all 16,281)")
    parser.add_argument("--requests", type=int, default=2, help="encrypted prediction requests")
    parser.add_argument("--revoke", default="u1", help="participant to revoke")
    parser.add_argument("--level", type=int, default=1, choices=(1, 2),
                        help="revocation level; 2 adds the HEncRef refresh (two per destroyed split: slow)")
    parser.add_argument("--bits", type=int, default=2048)
    parser.add_argument("--insecure", action="store_true", help="allow 1024-bit keys (about 80-bit security)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars or lines on stderr")
    args = parser.parse_args(list(argv))

    with phase("loading UCI Adult", enabled=not args.no_progress):
        ad = load_adult()
    X = np.nan_to_num(ad.X_train[: args.rows], nan=-1.0)
    y = ad.y_train[: args.rows]
    Xt, yt = np.nan_to_num(ad.X_test[: args.test_rows], nan=-1.0), ad.y_test[: args.test_rows]
    d = X.shape[1]
    if not 1 <= args.participants <= d:
        parser.error(f"--participants must be in [1, {d}]")
    partition = [list(range(i, d, args.participants)) for i in range(args.participants)]
    print(f"RevFRF on Adult: {X.shape[0]} training rows, {Xt.shape[0]} test rows, {args.trees} trees of depth "
          f"{args.depth}, {args.bits}-bit DT-PKC keys")
    for i, cols in enumerate(partition):
        print(f"  u{i + 1} owns {', '.join(ad.feature_names[c] for c in cols)}")

    clf = RevFRFClassifier(n_estimators=args.trees, max_depth=args.depth, key_bits=args.bits,
                           allow_insecure=args.insecure, random_state=args.seed,
                           progress=not args.no_progress)
    bar = not args.no_progress
    with warnings.catch_warnings():
        if args.insecure:
            warnings.simplefilter("ignore", InsecureParameterWarning)
        clf.set_params(partition=partition).fit(X, y)
    tr = clf.transcript_
    splits = sum(len(t.internal()) for t in clf.cs_.trees)
    print(f"\nTraining (FLE-Expan + FOS-Find): key set-up {clf.timings_['setup']:.2f} s, growth "
          f"{clf.timings_['grow']:.2f} s for {splits} splits; {tr.total_bytes / 1e6:.2f} MB in {tr.rounds} rounds")

    t0 = time.perf_counter()
    acc = _accuracy(clf.predict(Xt), yt)
    with phase("scikit-learn on the same data", enabled=bar):
        sk = _sklearn_accuracy(X, y, Xt, yt, list(range(d)), args)
    print(f"Accuracy (vertical prediction, {Xt.shape[0]} rows, {time.perf_counter() - t0:.2f} s): {acc:.2f} %; "
          f"scikit-learn with the same settings: {sk}")

    mark = tr.mark()
    t0 = time.perf_counter()
    enc = clf.predict(Xt[: args.requests], method="encrypted")
    dt = time.perf_counter() - t0
    st = tr.since(mark)
    agree = bool(np.array_equal(enc, clf.predict(Xt[: args.requests])))
    print(f"Encrypted requests (FRF-Predict): {args.requests} in {dt:.2f} s ({dt / max(args.requests, 1):.2f} s "
          f"each), {st.bytes / 1e6:.3f} MB, {st.rounds} rounds; same as the plaintext model: {agree}")

    mark = tr.mark()
    rec = clf.revoke(args.revoke, level=args.level)
    st = tr.since(mark)
    print(f"\nRevocation of {args.revoke} (level {args.level}): {rec.destroyed} nodes destroyed "
          f"({rec.destroyed_splits} splits), {rec.rebuilt} splits rebuilt in {rec.rebuild_seconds:.2f} s, "
          f"refresh {rec.refresh_seconds:.2f} s, epoch {rec.epoch}; {st.bytes / 1e6:.2f} MB, {st.rounds} rounds")
    remaining = sorted(c for u, p in clf.participants_.items() if not p.revoked for c in p.columns)
    acc = _accuracy(clf.predict(Xt), yt)
    with phase("scikit-learn on the remaining columns", enabled=bar):
        sk = _sklearn_accuracy(X, y, Xt, yt, remaining, args)
    print(f"Accuracy after revocation: {acc:.2f} %; scikit-learn on the remaining columns: {sk}")
    return 0
