"""Test helpers for the tree machinery: random trees with random providers, and the
one-hot view of a dataset that scikit-learn's forests need."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from securetrees.trees.tree import Tree, TreeBuilder

__all__ = ["one_hot", "random_tree"]


def random_tree(
    rng: np.random.Generator,
    *,
    n_features: int,
    providers: npt.NDArray[np.int64],
    categorical: npt.NDArray[np.bool_] | None = None,
    max_depth: int = 4,
    split_probability: float = 0.8,
    n_categories: int = 4,
) -> Tree:
    """A random full tree grown breadth first: each node splits with ``split_probability``
    (below ``max_depth``) on a random feature; numeric thresholds are standard normal
    draws (sometimes ``+inf``), categorical ones codes below ``n_categories``;
    ``providers[f]`` owns feature ``f``.  Leaf values are random class counts (2)."""
    cat = np.zeros(n_features, dtype=bool) if categorical is None else categorical
    b = TreeBuilder(n_features, 2)
    b.add_root(1.0, rng.integers(1, 5, size=2))
    frontier = [0]
    for _ in range(max_depth):
        nxt: list[int] = []
        for node in frontier:
            if rng.random() >= split_probability:
                continue
            f = int(rng.integers(n_features))
            if cat[f]:
                thr = float(rng.integers(n_categories))
            else:
                thr = float("inf") if rng.random() < 0.1 else float(rng.normal())
            nxt += b.split(
                node, feature=f, threshold=thr, categorical=bool(cat[f]),
                missing_left=bool(rng.random() < 0.5), provider=int(providers[f]),
                left=(1.0, rng.integers(1, 5, size=2)), right=(1.0, rng.integers(1, 5, size=2)),
            )
        frontier = nxt
    return b.build()


def one_hot(
    X_train: npt.NDArray[np.float64],
    X_test: npt.NDArray[np.float64],
    categorical: npt.NDArray[np.bool_],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Numeric columns kept (NaN as -1), each categorical column replaced by one indicator
    per training code plus one for missing: the usual one-hot baseline encoding of Adult
    (missing as its own value; ``specs/trees.md``, "Agreement with scikit-learn")."""
    parts_tr: list[npt.NDArray[np.float64]] = []
    parts_te: list[npt.NDArray[np.float64]] = []
    for f in range(X_train.shape[1]):
        a = np.nan_to_num(X_train[:, f], nan=-1.0)
        t = np.nan_to_num(X_test[:, f], nan=-1.0)
        if not categorical[f]:
            parts_tr.append(a[:, None])
            parts_te.append(t[:, None])
            continue
        codes = np.unique(a)
        parts_tr.append((a[:, None] == codes[None, :]).astype(np.float64))
        parts_te.append((t[:, None] == codes[None, :]).astype(np.float64))
    return np.hstack(parts_tr), np.hstack(parts_te)
