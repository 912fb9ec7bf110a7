"""What each RevFRF party keeps of a fitted forest (``specs/deployment.md``, "Model files";
``specs/revfrf.md``, "Model parts").

The CS keeps the forest as prediction needs it: per tree the node ids, structure and leaf
values, and per internal node its provider, column, encrypted split ``[[s]]_{pk_provider}``
with the epoch and the provider's signature, and the missing side; plus the forest's epoch, the
revoked participants and (classification) the class names of its labels.  It keeps no sample
selection μ nor per-sample statistics: those are FLE-Expan's training inputs (a predict-only
run grows nothing).  A participant keeps its own nodes (column, plaintext threshold, missing
side), its epoch, its revoked flag, the requesters it refuses and its table's schema.  The KGC
and the CC keep the revoked participants (public within the federation: no secret).  Messages
of the runtime's strict codec (ciphertexts as integers), so a part round-trips exactly and
decodes without pickle; :func:`restore_forest` and :func:`restore_nodes` check what they adopt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.dtpkc import Ciphertext, PublicKey
from securetrees.errors import DecodeError, SecureTreesError
from securetrees.net.models import SchemaState
from securetrees.protocols.revfrf.forest import Node, RevTree
from securetrees.protocols.revfrf.participant import OwnNode
from securetrees.runtime import Message, message

__all__ = ["CSPart", "ParticipantPart", "RevokedPart", "TreeState", "forest_state", "node_state", "restore_forest",
           "restore_nodes"]

IntArray = npt.NDArray[np.int64]
_NO_SAMPLES = np.zeros(0, dtype=np.int64)


@message("revfrf.model.tree")
@dataclass(frozen=True)
class TreeState(Message):
    """One tree of the CS's forest, node by node (``ids[i]`` is node i's id; ``-1``: no parent
    or child; ``provider[i]`` is empty at a leaf, whose ``t1``/``t2``/``signature`` are 0/empty)."""

    index: int
    root: int
    next_id: int
    ids: np.ndarray
    depth: np.ndarray
    parent: np.ndarray
    left: np.ndarray
    right: np.ndarray
    weight: np.ndarray
    value: np.ndarray
    provider: tuple[str, ...]
    column: np.ndarray
    t1: tuple[int, ...]
    t2: tuple[int, ...]
    epoch: np.ndarray
    signature: tuple[bytes, ...]
    missing_left: np.ndarray


@message("revfrf.model.cs")
@dataclass(frozen=True)
class CSPart(Message):
    """The CS's part: its forest, the forest epoch, the revoked participants, the task, the
    voting rule, the number of features and (classification) its class names."""

    trees: tuple[TreeState, ...]
    epoch: int
    revoked: tuple[str, ...]
    task: str
    voting: str
    n_features: int
    classes: tuple[str, ...]


@message("revfrf.model.participant")
@dataclass(frozen=True)
class ParticipantPart(Message):
    """A participant's part: its columns, its live nodes (``tree``/``node`` ids, column,
    threshold, missing side), its epoch and revoked flag, the requesters it refuses, its schema."""

    columns: np.ndarray
    tree: np.ndarray
    node: np.ndarray
    column: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    epoch: int
    revoked: bool
    refused: tuple[str, ...]
    schema: SchemaState


@message("revfrf.model.revoked")
@dataclass(frozen=True)
class RevokedPart(Message):
    """The KGC's or the CC's part: the participants revoked so far (nothing secret)."""

    revoked: tuple[str, ...]


def _tree_state(tree: RevTree) -> TreeState:
    nodes = [tree.nodes[k] for k in sorted(tree.nodes)]

    def ints(values: list[int]) -> IntArray:
        return np.asarray(values, dtype=np.int64)

    return TreeState(
        tree.index, tree.root, tree.next_id, ints([n.id for n in nodes]), ints([n.depth for n in nodes]),
        ints([n.parent for n in nodes]), ints([n.left for n in nodes]), ints([n.right for n in nodes]),
        np.asarray([n.weight for n in nodes], dtype=np.float64),
        np.stack([np.asarray(n.value, dtype=np.float64) for n in nodes]),
        tuple(n.provider or "" for n in nodes), ints([n.column for n in nodes]),
        tuple(int(n.split.t1) if n.split is not None else 0 for n in nodes),
        tuple(int(n.split.t2) if n.split is not None else 0 for n in nodes),
        ints([n.epoch for n in nodes]), tuple(n.signature for n in nodes),
        np.asarray([n.missing_left for n in nodes], dtype=bool))


def forest_state(trees: list[RevTree]) -> tuple[TreeState, ...]:
    """The CS's forest as model-file messages (without the training inputs μ and statistics)."""
    return tuple(_tree_state(t) for t in trees)


def _array(a: object, dtype: type, n: int, ndim: int = 1) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.dtype != np.dtype(dtype) or a.ndim != ndim or a.shape[0] != n:
        raise DecodeError("malformed tree in a RevFRF model part")
    return a


def _restore_tree(s: TreeState, keys: Mapping[str, PublicKey], n_features: int) -> RevTree:
    n = int(np.asarray(s.ids).size) if isinstance(s.ids, np.ndarray) else -1
    if n < 1 or not all(len(v) == n for v in (s.provider, s.t1, s.t2, s.signature)):
        raise DecodeError("malformed tree in a RevFRF model part")
    ids, depth, parent, left, right, column, epoch = (
        _array(a, np.int64, n) for a in (s.ids, s.depth, s.parent, s.left, s.right, s.column, s.epoch))
    weight, missing = _array(s.weight, np.float64, n), _array(s.missing_left, np.bool_, n)
    value = _array(s.value, np.float64, n, 2)
    if len(set(ids.tolist())) != n or ids.min() < 0 or ids.max() >= s.next_id or s.root not in set(ids.tolist()):
        raise DecodeError("inconsistent node ids in a RevFRF model part")
    tree = RevTree(s.index, np.zeros((0, value.shape[1])), root=s.root, next_id=s.next_id)
    for i, k in enumerate(ids.tolist()):
        node = Node(k, int(depth[i]), _NO_SAMPLES, np.zeros(0), float(weight[i]), value[i].copy(), int(parent[i]),
                    int(left[i]), int(right[i]))
        if (node.left < 0) != (node.right < 0):
            raise DecodeError("a RevFRF node has one child")
        if not node.is_leaf:
            provider = keys.get(s.provider[i])
            if provider is None or not 0 <= int(column[i]) < n_features:
                raise DecodeError("a RevFRF split names an unknown provider or column")
            try:
                node.split = Ciphertext.from_ints(provider, s.t1[i], s.t2[i])
            except SecureTreesError as exc:
                raise DecodeError(f"a RevFRF split is not a ciphertext: {exc}") from None
            node.provider, node.column, node.epoch = s.provider[i], int(column[i]), int(epoch[i])
            node.signature, node.missing_left = s.signature[i], bool(missing[i])
        tree.nodes[k] = node
    _check_shape(tree)
    return tree


def _check_shape(tree: RevTree) -> None:
    """Every node reached once from the root, parents as the children say: a tree."""
    seen: set[int] = set()
    stack = [(tree.root, -1)]
    while stack:
        k, parent = stack.pop()
        node = tree.nodes.get(k)
        if node is None or k in seen or node.parent != parent:
            raise DecodeError("the nodes of a RevFRF model part do not form a tree")
        seen.add(k)
        if not node.is_leaf:
            stack += [(node.left, k), (node.right, k)]
    if len(seen) != len(tree.nodes):
        raise DecodeError("the nodes of a RevFRF model part do not form a tree")


def restore_forest(states: tuple[TreeState, ...], keys: Mapping[str, PublicKey], n_features: int) -> list[RevTree]:
    """The CS's forest from its part (:class:`DecodeError` if it is not a well-formed forest over
    the providers ``keys`` and ``n_features`` columns); nodes carry no training inputs."""
    if not states or [s.index for s in states] != list(range(len(states))):
        raise DecodeError("a RevFRF model part holds trees 0 .. T-1")
    trees = [_restore_tree(s, keys, n_features) for s in states]
    if len({t.nodes[t.root].value.size for t in trees}) != 1:
        raise DecodeError("the trees of a RevFRF model part disagree on the output width")
    return trees


def node_state(nodes: Mapping[tuple[int, int], OwnNode]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A participant's nodes as arrays: tree ids, node ids, columns, thresholds, missing sides."""
    keys = sorted(nodes)
    own = [nodes[k] for k in keys]
    return (np.asarray([t for t, _ in keys], dtype=np.int64), np.asarray([n for _, n in keys], dtype=np.int64),
            np.asarray([o.column for o in own], dtype=np.int64),
            np.asarray([o.threshold for o in own], dtype=np.float64),
            np.asarray([o.missing_left for o in own], dtype=bool))


def restore_nodes(part: ParticipantPart, columns: tuple[int, ...]) -> dict[tuple[int, int], OwnNode]:
    """A participant's nodes from its part (:class:`DecodeError` if malformed, or if a node or the
    part's column list names a column other than this participant's ``columns``)."""
    cols = part.columns
    if not isinstance(cols, np.ndarray) or cols.dtype != np.int64 or tuple(cols.tolist()) != columns:
        raise DecodeError("the model part is of a participant with other columns")
    n = int(part.tree.size) if isinstance(part.tree, np.ndarray) else -1
    tree, node, column = (_array(a, np.int64, n) for a in (part.tree, part.node, part.column))
    threshold, missing = _array(part.threshold, np.float64, n), _array(part.missing_left, np.bool_, n)
    if not set(column.tolist()) <= set(columns) or np.isnan(threshold).any():
        raise DecodeError("a participant's node names a column it does not own")
    out = {(int(t), int(k)): OwnNode(int(c), float(s), bool(m))
           for t, k, c, s, m in zip(tree.tolist(), node.tolist(), column.tolist(), threshold.tolist(),
                                    missing.tolist(), strict=True)}
    if len(out) != n:
        raise DecodeError("a participant's part lists a node twice")
    return out
