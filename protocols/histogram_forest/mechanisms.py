"""Noise for the histogram forest's two DP placements, drawn from :mod:`securetrees.rand`.

Spec: ``specs/histogram_forest.md`` section "Differential privacy and its accounting".

- :func:`geometric_noise`: the two-sided geometric mechanism of Section 3.1 as
  corrected in CRYPTO_NOTES §7, ``P[Z = z] = (1-α)/(1+α) · α^|z|`` with
  ``α = exp(-ε/Δ)`` (the paper's Eq. 6 writes ε where α belongs).
- :func:`laplace_noise` and :func:`randomized_response`: the input-perturbation
  alternative of Section 5.0.2.

Uniforms come from ``rng.token_bytes`` as 53-bit fractions in ``(0, 1]``; numpy's
generator is never used for noise.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = [
    "check_epsilon",
    "geometric_alpha",
    "geometric_noise",
    "geometric_pmf",
    "laplace_noise",
    "randomized_response",
    "uniforms",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_TWO_53 = float(1 << 53)


def check_epsilon(epsilon: float) -> float:
    """``epsilon`` as a float; ParameterError unless it is finite and > 0."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)):
        raise ParameterError(f"epsilon must be a number, got {epsilon!r}")
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return eps


def uniforms(size: int, *, rng: RandomSource = SYSTEM_RANDOM) -> FloatArray:
    """``size`` independent uniforms in ``(0, 1]`` on the grid ``k · 2^-53`` (k = 1 .. 2^53)."""
    if size < 0:
        raise ParameterError("size must be non-negative")
    raw = np.frombuffer(rng.token_bytes(8 * size), dtype="<u8") >> np.uint64(11)
    return np.asarray((raw.astype(np.float64) + 1.0) / _TWO_53, dtype=np.float64)


def geometric_alpha(epsilon: float, sensitivity: float) -> float:
    """``α = exp(-ε/Δ)``: the ratio of neighbouring probabilities of the mechanism."""
    eps = check_epsilon(epsilon)
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ParameterError(f"sensitivity must be finite and > 0, got {sensitivity!r}")
    return math.exp(-eps / sensitivity)


def geometric_pmf(z: npt.ArrayLike, alpha: float) -> FloatArray:
    """``P[Z = z] = (1-α)/(1+α) · α^|z|`` (the corrected Eq. 6)."""
    if not 0.0 < alpha < 1.0:
        raise ParameterError("alpha must lie in (0, 1)")
    za = np.abs(np.asarray(z, dtype=np.float64))
    return np.asarray((1.0 - alpha) / (1.0 + alpha) * alpha**za, dtype=np.float64)


def _one_sided(size: int, log_alpha: float, rng: RandomSource) -> IntArray:
    # Number of failures before the first success, P[G >= k] = α^k, by inversion:
    # G = floor(ln U / ln α) for U uniform in (0, 1].
    g = np.floor(np.log(uniforms(size, rng=rng)) / log_alpha)
    return g.astype(np.int64)


def geometric_noise(
    shape: int | tuple[int, ...], epsilon: float, sensitivity: float, *, rng: RandomSource = SYSTEM_RANDOM
) -> IntArray:
    """Independent two-sided geometric noise with ``α = exp(-ε/Δ)``, one draw per cell of ``shape``.

    ``Z = G1 - G2`` for independent one-sided geometrics ``P[G = k] = (1-α) α^k``,
    whose difference has exactly the two-sided law.  Adding it to an integer
    vector of L1 sensitivity ``Δ`` gives ε-DP (up to the 2^-53 tail truncation
    of the inversion; see the spec).
    """
    alpha = geometric_alpha(epsilon, sensitivity)
    size = int(np.prod(shape))
    log_alpha = math.log(alpha)
    if log_alpha == 0.0:
        raise ParameterError("epsilon / sensitivity is too small for the geometric sampler")
    z = _one_sided(size, log_alpha, rng) - _one_sided(size, log_alpha, rng)
    return z.reshape(shape)


def laplace_noise(
    shape: int | tuple[int, ...], scale: float, *, rng: RandomSource = SYSTEM_RANDOM
) -> FloatArray:
    """Laplace(0, ``scale``) noise by inversion from cryptographic uniforms (input perturbation)."""
    if not (math.isfinite(scale) and scale > 0):
        raise ParameterError("the Laplace scale must be finite and > 0")
    size = int(np.prod(shape))
    u = uniforms(size, rng=rng)
    sign = np.where(uniforms(size, rng=rng) <= 0.5, -1.0, 1.0)
    return np.asarray((sign * -scale * np.log(u)).reshape(shape), dtype=np.float64)


def randomized_response(
    codes: npt.ArrayLike, k: int, epsilon: float, *, rng: RandomSource = SYSTEM_RANDOM
) -> IntArray:
    """k-ary randomised response: keep each code with ``e^ε / (e^ε + k - 1)``, else one of the others uniformly."""
    eps = check_epsilon(epsilon)
    if k < 2:
        raise ParameterError("randomised response needs at least two values")
    c = np.asarray(codes, dtype=np.int64)
    if c.size and (c.min() < 0 or c.max() >= k):
        raise ParameterError(f"codes must lie in [0, {k})")
    keep_p = math.exp(eps) / (math.exp(eps) + k - 1) if eps < 700 else 1.0
    flat = c.reshape(-1)
    keep = uniforms(flat.size, rng=rng) <= keep_p
    # Another value uniformly among the k - 1 others: code + 1 + r (mod k), r in [0, k-2].
    offsets = np.minimum(np.floor((1.0 - uniforms(flat.size, rng=rng)) * (k - 1)), k - 2).astype(np.int64)
    other = (flat + 1 + offsets) % k
    return np.asarray(np.where(keep, flat, other).reshape(c.shape), dtype=np.int64)
