"""Secure aggregation with pairwise X25519 masks that survives dropouts (specs/secagg.md).

Two layers:

* the reusable masking core for protocols with their own roles (HybridTree,
  the histogram forest): :class:`AgreementKey` once per session,
  :class:`PairwiseMasker` per party, masks per round and purpose in a
  :class:`Ring` (:class:`Z2k`, :class:`ZN` for Paillier plaintexts,
  :class:`FixedPointVectors` for bounded reals);
* the dropout-tolerant protocol of Bonawitz et al. (2017) with double masking,
  Shamir-shared secrets and a signed consistency round:
  :class:`SecAggServer`, :class:`SecAggClient`, :class:`SecAggConfig`, and
  :func:`simulate_secure_sum` to run every party in one process.
"""

from securetrees.secagg.keyagree import AgreementKey, KeyContext, derive_key
from securetrees.secagg.masker import MIN_PARTIES, PairwiseMasker, check_party_count
from securetrees.secagg.prg import MaskExpander, expand_mod
from securetrees.secagg.rings import ZN, FixedPointVectors, Ring, Z2k
from securetrees.secagg.roles import (
    AggregateResult,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    Stage,
)
from securetrees.secagg.simulation import Simulation, build_simulation, simulate_secure_sum
from securetrees.signing import SigningKey, make_roster

__all__ = [
    "MIN_PARTIES",
    "ZN",
    "AggregateResult",
    "AgreementKey",
    "FixedPointVectors",
    "KeyContext",
    "MaskExpander",
    "PairwiseMasker",
    "Ring",
    "SecAggClient",
    "SecAggConfig",
    "SecAggServer",
    "SigningKey",
    "Simulation",
    "Stage",
    "Z2k",
    "build_simulation",
    "check_party_count",
    "derive_key",
    "expand_mod",
    "make_roster",
    "simulate_secure_sum",
]
