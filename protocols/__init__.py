"""Federated tree-learning protocols built on :mod:`securetrees` (RevFRF, Federated Forest,
HybridTree, the cross-silo histogram forest)."""
