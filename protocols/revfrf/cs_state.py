"""What RevFRF's CS holds, shared by its steps (``cs_training``, ``cs_prediction``,
``revocation``): the labels' per-sample statistics, the forest, the column owners, the
participants' keys, the epoch and the revoked participants (``specs/revfrf.md``, "Roles").

The CS extends :class:`securetrees.dtpkc.twoserver.CentralServer`, so HoLT is the one
implementation of the project (batched: one CS↔CC round per tree level).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from securetrees.dtpkc import Ciphertext, PublicKey, StrongKeyShare, WeakSecretKey, twoserver
from securetrees.dtpkc.twoserver import HoLTParams
from securetrees.errors import KeyMismatchError, ProtocolError, RevokedError
from securetrees.protocols.revfrf.defaults import DEFAULT_HOLT
from securetrees.protocols.revfrf.forest import Node, RevTree
from securetrees.protocols.revfrf.messages import NodeRef
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import Network
from securetrees.trees import Criterion, GrowParams

__all__ = ["ArchivedSplit", "CSState", "TreeNode"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class TreeNode(NamedTuple):
    """A node of the CS's forest with its tree (a frontier entry)."""

    tree: RevTree
    node: Node


class ArchivedSplit(NamedTuple):
    """A split destroyed by FRF-Revoc, refreshed at the second level, with its provider."""

    provider: str
    split: Ciphertext


class CSState(twoserver.CentralServer):
    """The CS's holdings and set-up; the protocol steps are in the subclasses."""

    def __init__(
        self,
        name: str,
        network: Network,
        *,
        share: StrongKeyShare,
        weak_key: WeakSecretKey,
        stats: Sequence[FloatArray],
        criterion: Criterion,
        task: str,
        grow: GrowParams,
        columns: Mapping[str, Sequence[int]],
        participant_keys: Mapping[str, PublicKey],
        verify_keys: Mapping[str, bytes],
        session: bytes,
        n_features: int,
        max_features: int,
        voting: str = "soft",
        ml_seed: int = 0,
        cc: str = "cc",
        kgc: str = "kgc",
        holt_params: HoLTParams = DEFAULT_HOLT,
        rng: RandomSource = SYSTEM_RANDOM,
    ) -> None:
        super().__init__(name, network, share=share, weak_key=weak_key, cc=cc, holt_params=holt_params, rng=rng)
        self.ml_seed = ml_seed
        self.criterion = criterion
        self.task = task
        self.grow = grow
        self.voting = voting
        self.kgc = kgc
        self.n_features = n_features
        self.max_features = max_features
        self._owner = {int(c): p for p, cols in columns.items() for c in cols}
        self._keys = dict(participant_keys)
        self._verify_keys = dict(verify_keys)
        self._session = session
        self.trees = [RevTree(t, np.asarray(s, dtype=np.float64)) for t, s in enumerate(stats)]
        self.epoch = 0
        self.revoked: set[str] = set()
        self.archive: list[ArchivedSplit] = []
        self._nonces: set[bytes] = set()
        self._round = 0
        self._requesters: dict[str, PublicKey] = {}

    def register_requester(self, name: str, pk: PublicKey) -> None:
        """Accept prediction requests from ``name`` under its weak key ``pk``."""
        if pk.params != self.params or pk.is_joint:
            raise KeyMismatchError("a requester's key is a weak key of this system")
        if name in self.revoked:
            raise RevokedError(f"{name!r} has been revoked")
        self._requesters[name] = pk

    @property
    def active_columns(self) -> IntArray:
        return np.array(sorted(c for c, p in self._owner.items() if p not in self.revoked), dtype=np.int64)

    def _check_not_revoked(self, party: str) -> None:
        if party in self.revoked:
            raise RevokedError(f"{party!r} has been revoked")

    def _ref(self, tree: RevTree, node: Node) -> NodeRef:
        """The node as its provider signed it (what the provider checks before serving it)."""
        if node.split is None:
            raise ProtocolError("a leaf has no split")
        return NodeRef(tree.index, node.id, node.epoch, int(node.split.t1), int(node.split.t2), node.signature)
