"""How RevFRF routes missing values (NaN), as the shared trees do (``specs/revfrf.md``,
"Missing values"; ``securetrees.trees``: the missing bin, the split's missing side).

* **Codes.** A participant gives a sample whose value is missing the candidate code
  :data:`MISSING_CODE`; the CS counts those samples in the histogram's missing slot, so
  ``trees.best_splits`` tries them on both sides and learns the split's missing side
  (``missing_left``), or sends them to the heavier child where the node had none.
  Candidate ``b = n_codes - 1`` ("every present value left") isolates the missing values;
  its threshold is ``+inf``.
* **Plaintexts for HoLT.** The provider holds the split's missing side with its threshold.
  Every present value and every finite threshold is encoded in fixed point with
  ``|m| <= B - 2`` (``B = 2^ℓ - 1``, the largest HoLT input); the ``+inf`` threshold is
  ``B - 1``; a missing value is compared as ``-B`` at a missing-left node and ``+B`` at a
  missing-right one, so ``x ≤ s`` sends it to its side and every present value is left of
  the ``+inf`` threshold.
"""

from __future__ import annotations

import math
from typing import Final

from securetrees.encoding import FixedPoint, SignedRange
from securetrees.errors import EncodingOverflowError

__all__ = ["MISSING_CODE", "threshold_plaintext", "value_plaintext"]

MISSING_CODE: Final = 65535
"""The candidate code of a missing value (no real code reaches it: ``n_codes < 65535``)."""


def _largest(holt_inputs: SignedRange) -> int:
    """``B``: the largest magnitude HoLT accepts (its inputs are ``|m| < 2^ℓ``)."""
    return int(holt_inputs.bound) - 1


def _finite(codec: FixedPoint, holt_inputs: SignedRange, v: float) -> int:
    m = codec.encode_scalar(v)
    if abs(m) > _largest(holt_inputs) - 2:
        raise EncodingOverflowError("a feature value or threshold is too large for HoLT's input range")
    return m


def threshold_plaintext(codec: FixedPoint, holt_inputs: SignedRange, threshold: float) -> int:
    """The integer a provider encrypts as a node's split ``s``: fixed point, or ``B - 1``
    for the ``+inf`` threshold of a split that isolates the missing values."""
    if threshold == math.inf:
        return _largest(holt_inputs) - 1
    return _finite(codec, holt_inputs, threshold)


def value_plaintext(codec: FixedPoint, holt_inputs: SignedRange, x: float, missing_left: bool) -> int:
    """The integer compared with a split at a node whose missing side is ``missing_left``:
    fixed point for a present value; ``-B`` (left) or ``+B`` (right) for a missing one."""
    if math.isnan(x):
        return -_largest(holt_inputs) if missing_left else _largest(holt_inputs)
    return _finite(codec, holt_inputs, x)
