"""HybridTree (Li et al., ICLR 2024): federated GBDT on hybrid data (``specs/hybridtree.md``).

The host grows the top layers on its own features and labels; the guests grow
the bottom layers jointly on encrypted gradients, and the host decrypts only
pairwise-masked aggregates of their packed histograms.

* :class:`HybridTreeClassifier`, :class:`HybridTreeRegressor`: the one-process facade;
* :class:`Host`, :class:`Guest`: the runtime roles (the host runs the boosting loop,
  :meth:`Host.fit`, and inference; each role needs only its own data and the network);
  :func:`owners`, :func:`agree_bins`, :func:`guest_matrix`: each role's inputs;
  :class:`FitProgress`: the host's progress events; :class:`HybridTreeParams`;
* :func:`adult_hybrid_split`: the demo's and benchmark's pinned Adult layout.
"""

from __future__ import annotations

from securetrees.protocols.hybridtree.boosting import FitProgress
from securetrees.protocols.hybridtree.estimators import HybridTreeClassifier, HybridTreeRegressor, check_layout
from securetrees.protocols.hybridtree.guest import Guest, GuestSplit, agree_bins, guest_matrix
from securetrees.protocols.hybridtree.host import Host, TreeRecord, owners
from securetrees.protocols.hybridtree.layout import Slot, SlotLayout
from securetrees.protocols.hybridtree.params import HybridTreeParams, check_mode

__all__ = [
    "FitProgress",
    "Guest",
    "GuestSplit",
    "Host",
    "HybridTreeClassifier",
    "HybridTreeParams",
    "HybridTreeRegressor",
    "Slot",
    "SlotLayout",
    "TreeRecord",
    "agree_bins",
    "check_layout",
    "check_mode",
    "guest_matrix",
    "owners",
]
