"""The CS's resumable construction (``specs/revfrf.md``, "Checkpoints"): FLE-Expan/FOS-Find layer
by layer as :meth:`~securetrees.protocols.revfrf.cs_training.CSTraining.grow_forest`, the CS's
state sealed after every layer (:class:`~securetrees.protocols.revfrf.checkpoint.ServerState`);
:func:`resume_forest` restores the latest one and grows the rest.  A participant answers the
layer in progress again from its journal (the same request, the same reply)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from securetrees.dtpkc import Ciphertext
from securetrees.errors import DecodeError
from securetrees.protocols.revfrf.checkpoint import NodeState, ServerState, generator, generator_state
from securetrees.protocols.revfrf.cs_state import CSState, TreeNode
from securetrees.protocols.revfrf.cs_training import CSTraining
from securetrees.protocols.revfrf.forest import Node
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.trees import TreeDraws

__all__ = ["grow_with_checkpoints", "restore_server", "resume_forest", "server_state"]


def server_state(cs: CSState, layers: int, frontier: Sequence[TreeNode], draws: Sequence[TreeDraws]) -> ServerState:
    """The CS's state after ``layers`` layers (what it reveals: nothing, it stays with the CS)."""
    nodes = tuple(
        NodeState(t.index, n.id, n.depth, n.parent, n.left, n.right, n.samples, n.stats, n.weight, n.value,
                  n.provider or "", n.column, int(n.split.t1) if n.split else 0, int(n.split.t2) if n.split else 0,
                  n.epoch, n.signature, n.missing_left)
        for t in cs.trees for n in t.nodes.values())
    return ServerState(layers, cs._round, cs.epoch, np.array([t.root for t in cs.trees], dtype=np.int64),
                       np.array([t.next_id for t in cs.trees], dtype=np.int64), nodes,
                       np.array([(e.tree.index, e.node.id) for e in frontier], dtype=np.int64).reshape(-1, 2),
                       tuple(generator_state(d.rng) for d in draws))


def restore_server(cs: CSState, state: ServerState, draws: Sequence[TreeDraws]) -> list[TreeNode]:
    """Put ``state`` into a freshly built CS and the draws; returns the frontier to expand."""
    roots, next_ids = np.asarray(state.roots).tolist(), np.asarray(state.next_ids).tolist()
    if not len(roots) == len(next_ids) == len(state.draws) == len(cs.trees) == len(draws):
        raise DecodeError("the CS checkpoint is for another forest")
    for t, root, nxt in zip(cs.trees, roots, next_ids, strict=True):
        t.root, t.next_id, t.nodes = int(root), int(nxt), {}
    for s in state.nodes:
        if not 0 <= s.tree < len(cs.trees):
            raise DecodeError("a node of an unknown tree in the CS checkpoint")
        split = Ciphertext.from_ints(cs._keys[s.provider], s.t1, s.t2) if s.provider else None
        cs.trees[s.tree].nodes[s.id] = Node(
            s.id, s.depth, np.asarray(s.samples, dtype=np.int64), np.asarray(s.stats, dtype=np.float64), s.weight,
            np.asarray(s.value, dtype=np.float64), s.parent, s.left, s.right, s.provider or None, s.column, split,
            s.epoch, s.signature, s.missing_left)
    for d, g in zip(draws, state.draws, strict=True):
        d.rng = generator(g)
    cs._round, cs.epoch = state.round, state.epoch
    try:
        return [TreeNode(cs.trees[t], cs.trees[t].nodes[n]) for t, n in np.asarray(state.frontier).tolist()]
    except (KeyError, IndexError) as exc:
        raise DecodeError("the CS checkpoint's frontier names an unknown node") from exc


def grow_with_checkpoints(cs: CSTraining, store: CheckpointStore, frontier: list[TreeNode],
                          draws: Sequence[TreeDraws], layers: int = 0) -> int:
    """Grow layer by layer from ``frontier`` (``layers`` already grown), sealing the CS's state
    after every layer; returns the number of layers grown in all."""
    store.save(server_state(cs, layers, frontier, draws))
    while frontier:
        frontier = cs.expand_layer(frontier, lambda tree: draws[tree.index].node_features())
        layers += 1
        store.save(server_state(cs, layers, frontier, draws))
    return layers


def resume_forest(cs: CSTraining, store: CheckpointStore, draws: Sequence[TreeDraws],
                  sample_weight: Sequence[np.ndarray]) -> int:
    """Restore the CS's latest checkpoint (or plant the roots when there is none) and grow the rest."""
    state = store.latest(ServerState)
    if state is None:
        return grow_with_checkpoints(cs, store, cs.plant(sample_weight), draws)
    return grow_with_checkpoints(cs, store, restore_server(cs, state, draws), draws, state.layers)
