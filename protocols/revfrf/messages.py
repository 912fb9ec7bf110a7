"""RevFRF's wire messages (``revfrf.<step>``; the step names of ``specs/revfrf.md``).

Each request names the role that sends it and the role that receives it, each reply the
request it answers (``specs/runtime.md``, authorization); ``NodeRef`` travels only inside
other messages.  Ciphertexts travel as ``(T1, T2)`` integers; every receiver re-validates them
against its own copy of the key.  Arrays are numpy arrays (the codec carries
dtype and shape).  No message carries a key or a secret.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from securetrees.runtime import Message, message

__all__ = [
    "Ack",
    "EpochAck",
    "EpochNotice",
    "ExpandReply",
    "ExpandRequest",
    "KGCRevoke",
    "NodeRef",
    "ParHDecReply",
    "ParHDecRequest",
    "PathReply",
    "PathRequest",
    "PredictReply",
    "PredictRequest",
    "RefreshReply",
    "RefreshRequest",
    "RevokeReply",
    "RevokeRequest",
    "SplitReply",
    "SplitRequest",
    "TestReply",
    "TestRequest",
]


@message("revfrf.ack", reply_to="revfrf.revoke.kgc")
@dataclass(frozen=True)
class Ack(Message):
    """A plain acknowledgement."""


@message("revfrf.expand.request", sender="cs", receiver="participant")
@dataclass(frozen=True)
class ExpandRequest(Message):
    """FLE-Expan lines 5-7, CS → participant, one layer of the forest.

    ``tree[k]``/``node[k]``: the k-th node; its sample selection μ is
    ``samples[offsets[k]:offsets[k+1]]``.  Task t asks for the candidate codes of
    column ``task_column[t]`` on node ``task_node[t]``.
    """

    round: int
    tree: np.ndarray
    node: np.ndarray
    offsets: np.ndarray
    samples: np.ndarray
    task_node: np.ndarray
    task_column: np.ndarray


@message("revfrf.expand.reply", reply_to=ExpandRequest)
@dataclass(frozen=True)
class ExpandReply(Message):
    """FLE-Expan lines 8-13, participant → CS: per task, the candidate code of each of the
    node's samples (concatenated in task order), and the number of codes of the task.
    Same information as the split vectors W_τ (spec step 4)."""

    round: int
    codes: np.ndarray
    n_codes: np.ndarray


@message("revfrf.split.request", sender="cs", receiver="participant")
@dataclass(frozen=True)
class SplitRequest(Message):
    """FOS-Find line 7, CS → winning participant: upload the split of candidate
    ``candidate[i]`` of task ``task[i]`` as node ``(tree[i], node[i])`` in ``epoch``;
    missing values go left at that node where ``missing_left[i]`` (one bool per split)."""

    round: int
    epoch: int
    task: np.ndarray
    candidate: np.ndarray
    tree: np.ndarray
    node: np.ndarray
    missing_left: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


@message("revfrf.split.reply", reply_to=SplitRequest)
@dataclass(frozen=True)
class SplitReply(Message):
    """FOS-Find line 8: ``HoEnc(pk_u, s)`` per node and the provider's node signature."""

    t1: tuple[int, ...]
    t2: tuple[int, ...]
    signature: tuple[bytes, ...]


@message("revfrf.node.ref")
@dataclass(frozen=True)
class NodeRef(Message):
    """A node as its provider signed it: (tree, node, epoch, ``[[s]]``, signature)."""

    tree: int
    node: int
    epoch: int
    t1: int
    t2: int
    signature: bytes


@message("revfrf.predict.request", sender="requester", receiver="cs")
@dataclass(frozen=True)
class PredictRequest(Message):
    """FRF-Predict line 1, requester → CS: every feature, fixed point, HoEnc under pk_0.

    ``(t1, t2)``: the value compared at nodes whose missing values go right (a missing value
    as ``+B``), ``(low_t1, low_t2)``: at nodes whose missing values go left (``-B``); both
    encrypt the value itself when it is present (``securetrees.protocols.revfrf.missing``).  Empty low
    fields mean the same ciphertexts at every node (a request that reveals it has no missing
    value; :class:`~securetrees.protocols.revfrf.requester.Requester` always sends both)."""

    t1: tuple[int, ...]
    t2: tuple[int, ...]
    low_t1: tuple[int, ...] = ()
    low_t2: tuple[int, ...] = ()


@message("revfrf.predict.reply", reply_to=PredictRequest)
@dataclass(frozen=True)
class PredictReply(Message):
    """FRF-Predict line 10, CS → requester: the class distribution (or the regression value)."""

    output: np.ndarray


@message("revfrf.predict.parhdec", sender="cs", receiver="participant")
@dataclass(frozen=True)
class ParHDecRequest(Message):
    """FT-Predict lines 5-6, CS → provider: the requester's id, the nodes reached and, per
    node, ``[[l]]`` under ``h_CS·h_provider``."""

    requester: str
    nodes: tuple[NodeRef, ...]
    t1: tuple[int, ...]
    t2: tuple[int, ...]


@message("revfrf.predict.parhdec.reply", reply_to=ParHDecRequest)
@dataclass(frozen=True)
class ParHDecReply(Message):
    """ParHDec1 outputs, under ``h_CS`` alone, re-randomised."""

    t1: tuple[int, ...]
    t2: tuple[int, ...]


@message("revfrf.path.request", sender="cs", receiver="participant")
@dataclass(frozen=True)
class PathRequest(Message):
    """``predict(X)``, CS → provider: answer ``x ≤ s`` for (row, node) pairs of the current batch."""

    batch: str
    rows: np.ndarray
    tree: np.ndarray
    node: np.ndarray


@message("revfrf.path.reply", reply_to=PathRequest)
@dataclass(frozen=True)
class PathReply(Message):
    """The path bits (True: left)."""

    left: np.ndarray


@message("revfrf.test.request", sender="cs", receiver="participant")
@dataclass(frozen=True)
class TestRequest(Message):
    """FT-Test, CS → provider: encrypt your feature of each (row, node) under your own key."""

    __test__ = False  # not a pytest class

    batch: str
    rows: np.ndarray
    tree: np.ndarray
    node: np.ndarray


@message("revfrf.test.reply", reply_to=TestRequest)
@dataclass(frozen=True)
class TestReply(Message):
    """FT-Test: ``[[x]]_{pk_provider}`` per (row, node)."""

    __test__ = False

    t1: tuple[int, ...]
    t2: tuple[int, ...]


@message("revfrf.revoke.request", sender="participant", receiver="cs")
@dataclass(frozen=True)
class RevokeRequest(Message):
    """FRF-Revoc line 1, participant → CS: signed by the participant's registered Ed25519 key."""

    participant: str
    epoch: int
    level: int
    nonce: bytes
    signature: bytes


@message("revfrf.revoke.reply", reply_to=RevokeRequest)
@dataclass(frozen=True)
class RevokeReply(Message):
    """The new epoch and how many nodes were destroyed and rebuilt."""

    epoch: int
    destroyed: int
    rebuilt: int


@message("revfrf.revoke.cc", sender="cs", receiver="cc")
@dataclass(frozen=True)
class RefreshRequest(Message):
    """FRF-Revoc lines 10-11, CS → CC: the request and the destroyed splits (with their
    providers) to refresh with HEncRef; empty for a first-level revocation."""

    revocation: RevokeRequest
    provider: tuple[str, ...]
    t1: tuple[int, ...]
    t2: tuple[int, ...]


@message("revfrf.revoke.cc.reply", reply_to=RefreshRequest)
@dataclass(frozen=True)
class RefreshReply(Message):
    """The refreshed splits (under ``θ + ρ_CC``, ρ_CC forgotten) and their new public ``h·g^ρ``."""

    t1: tuple[int, ...]
    t2: tuple[int, ...]
    h: tuple[int, ...]


@message("revfrf.revoke.kgc", sender="cs", receiver="kgc")
@dataclass(frozen=True)
class KGCRevoke(Message):
    """FRF-Revoc line 15, CS → KGC: the signed request; the KGC revokes the key."""

    revocation: RevokeRequest


@message("revfrf.epoch.notice", sender="cs", receiver="participant")
@dataclass(frozen=True)
class EpochNotice(Message):
    """FRF-Revoc line 16 and forest epochs, CS → remaining participant: the new epoch, the
    signed revocation, and the participant's surviving nodes to re-sign."""

    epoch: int
    revocation: RevokeRequest
    nodes: tuple[NodeRef, ...]


@message("revfrf.epoch.ack", reply_to=EpochNotice)
@dataclass(frozen=True)
class EpochAck(Message):
    """The surviving nodes' signatures under the new epoch."""

    signature: tuple[bytes, ...]
