"""Noise for the histogram forest's two DP placements, drawn from :mod:`securetrees.rand`.

Spec: ``specs/histogram_forest.md`` section "Differential privacy and its accounting".

- :func:`geometric_noise`: the two-sided geometric mechanism of Section 3.1,
  corrected: ``P[Z = z] = (1-α)/(1+α) · α^|z|`` with ``α = exp(-ε/Δ)`` (the
  paper's Eq. 6 writes ε where α belongs), sampled
  exactly with integer arithmetic (no floating point touches a noise value).
- :func:`laplace_noise` and :func:`randomized_response`: the input-perturbation
  alternative of Section 5.0.2.

Every random bit comes from ``rng.token_bytes``; numpy's generator is never used for noise.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = [
    "GRID_BITS",
    "MAX_RATIO",
    "MIN_RATIO",
    "check_epsilon",
    "check_sensitivity",
    "geometric_alpha",
    "geometric_noise",
    "geometric_pmf",
    "geometric_rate",
    "laplace_noise",
    "random_words",
    "randomized_response",
    "uniforms",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
WordArray = npt.NDArray[np.uint64]

_TWO_53 = float(1 << 53)

#: ε/Δ is rounded *down* to a multiple of 2^-GRID_BITS before sampling: the noise is then exactly
#: geometric with a rate never above ε/Δ (slightly more noise, never less privacy).
GRID_BITS = 40
#: Smallest accepted ε/Δ (below it the grid rounding would change the rate by more than 0.1 %).
MIN_RATIO = 2.0**-30
#: Largest accepted ε/Δ: beyond it α = exp(-ε/Δ) < 1e-304 is not a usable float and the
#: mechanism adds no noise with probability 1 - 1e-304, so such a request is refused.
MAX_RATIO = 700.0
_WORDS_PER_DRAW = 4096  # 32 KiB per token_bytes call


def check_epsilon(epsilon: float) -> float:
    """``epsilon`` as a float; ParameterError unless it is finite and > 0."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)):
        raise ParameterError(f"epsilon must be a number, got {epsilon!r}")
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return eps


def check_sensitivity(sensitivity: float) -> float:
    """``sensitivity`` as a float; ParameterError unless it is a finite number > 0."""
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, (int, float, np.integer, np.floating)):
        raise ParameterError(f"sensitivity must be a number, got {sensitivity!r}")
    delta = float(sensitivity)
    if not (math.isfinite(delta) and delta > 0):
        raise ParameterError(f"sensitivity must be finite and > 0, got {sensitivity!r}")
    return delta


def geometric_rate(epsilon: float, sensitivity: float) -> int:
    """The sampler's rate ``s`` with ``s / 2^GRID_BITS = ⌊(ε/Δ) · 2^GRID_BITS⌋ / 2^GRID_BITS ≤ ε/Δ``
    (exact rational arithmetic on the floats given); ParameterError unless ε/Δ lies in
    ``[MIN_RATIO, MAX_RATIO]``."""
    ratio = Fraction(check_epsilon(epsilon)) / Fraction(check_sensitivity(sensitivity))
    if not MIN_RATIO <= ratio <= MAX_RATIO:
        raise ParameterError(
            f"epsilon / sensitivity = {float(ratio):.3g} is outside [{MIN_RATIO:.3g}, {MAX_RATIO:g}] "
            "(no usable geometric noise)"
        )
    return math.floor(ratio * (1 << GRID_BITS))


def geometric_alpha(epsilon: float, sensitivity: float) -> float:
    """``α = exp(-s / 2^GRID_BITS)``, the ratio of neighbouring probabilities the sampler realises:
    ``exp(-ε/Δ)`` with ε/Δ rounded down to the grid (so ``α ≥ exp(-ε/Δ)``)."""
    return math.exp(-geometric_rate(epsilon, sensitivity) / (1 << GRID_BITS))


def geometric_pmf(z: npt.ArrayLike, alpha: float) -> FloatArray:
    """``P[Z = z] = (1-α)/(1+α) · α^|z|`` (the corrected Eq. 6)."""
    if not 0.0 < alpha < 1.0:
        raise ParameterError("alpha must lie in (0, 1)")
    za = np.abs(np.asarray(z, dtype=np.float64))
    return np.asarray((1.0 - alpha) / (1.0 + alpha) * alpha**za, dtype=np.float64)


def random_words(count: int, rng: RandomSource) -> WordArray:
    """``count`` independent uniform 64-bit words from ``rng`` (little-endian bytes)."""
    out = np.empty(count, dtype=np.uint64)
    for start in range(0, count, _WORDS_PER_DRAW):
        stop = min(count, start + _WORDS_PER_DRAW)
        out[start:stop] = np.frombuffer(rng.token_bytes(8 * (stop - start)), dtype="<u8")
    return out


def uniforms(size: int, *, rng: RandomSource = SYSTEM_RANDOM) -> FloatArray:
    """``size`` independent uniforms in ``(0, 1]`` on the grid ``k · 2^-53`` (k = 1 .. 2^53)."""
    if size < 0:
        raise ParameterError("size must be non-negative")
    raw = np.frombuffer(rng.token_bytes(8 * size), dtype="<u8") >> np.uint64(11)
    return np.asarray((raw.astype(np.float64) + 1.0) / _TWO_53, dtype=np.float64)


def _bernoulli_reciprocal(count: int, k: int, rng: RandomSource) -> BoolArray:
    """``count`` exact Bernoulli(1/k): a 64-bit word ``r`` below the largest multiple of ``k`` that
    fits (others are redrawn), success when ``r mod k = 0``."""
    if k == 1:
        return np.ones(count, dtype=bool)
    limit = ((1 << 64) // k) * k
    out = np.empty(count, dtype=bool)
    todo = np.arange(count)
    while todo.size:
        r = random_words(todo.size, rng)
        ok = r < np.uint64(limit) if limit < (1 << 64) else np.ones(todo.size, dtype=bool)
        out[todo[ok]] = r[ok] % np.uint64(k) == 0
        todo = todo[~ok]
    return out


def _bernoulli_exp(numerator: IntArray, rng: RandomSource) -> BoolArray:
    """Exact Bernoulli(exp(-γ)) for each ``γ = numerator / 2^GRID_BITS ∈ [0, 1]`` (Canonne, Kamath and
    Steinke 2020, Algorithm 1): draw Bernoulli(γ/K) for K = 1, 2, ... until one fails; the result is
    ``K`` odd.  Bernoulli(γ/K) is Bernoulli(γ) (a 40-bit word below the numerator) and Bernoulli(1/K)."""
    result = np.zeros(numerator.size, dtype=bool)
    active = np.arange(numerator.size)
    k = 1
    while active.size:
        below = (random_words(active.size, rng) >> np.uint64(64 - GRID_BITS)).astype(np.int64) < numerator[active]
        success = below & _bernoulli_reciprocal(active.size, k, rng)
        result[active[~success]] = k % 2 == 1
        active = active[success]
        k += 1
    return result


def _discrete_laplace(count: int, rate: int, rng: RandomSource) -> IntArray:
    """``count`` exact draws of ``P[Z = z] ∝ exp(-|z| · rate / 2^GRID_BITS)`` (Canonne, Kamath and
    Steinke 2020, Algorithm 2, with t = 2^GRID_BITS): ``X = U + t·V`` is geometric with rate 1/t
    (``U`` uniform below t kept with probability exp(-U/t), ``V`` geometric with rate 1), ``Y = ⌊X/s⌋``
    is geometric with rate s/t, and a fair sign (rejecting "−0") makes it two-sided."""
    t = 1 << GRID_BITS
    out = np.empty(count, dtype=np.int64)
    filled = 0
    while filled < count:
        batch = 2 * (count - filled) + 16  # at least ~30 % of candidates are accepted
        u = (random_words(batch, rng) >> np.uint64(64 - GRID_BITS)).astype(np.int64)
        u = u[_bernoulli_exp(u, rng)]
        v = np.zeros(u.size, dtype=np.int64)
        active = np.arange(u.size)
        while active.size:
            success = _bernoulli_exp(np.full(active.size, t, dtype=np.int64), rng)
            active = active[success]
            v[active] += 1
        if v.size and int(v.max()) >= 1 << (62 - GRID_BITS):  # pragma: no cover - probability < exp(-2^22)
            raise ParameterError("geometric sampler overflow")
        y = (u + v * t) // rate
        negative = (random_words(u.size, rng) & np.uint64(1)).astype(bool)
        z = np.where(negative, -y, y)[~(negative & (y == 0))]
        take = z[: count - filled]
        out[filled : filled + take.size] = take
        filled += take.size
    return out


def _check_shape(shape: int | tuple[int, ...]) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool) else shape
    if not isinstance(dims, tuple) or any(
        isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0 for d in dims
    ):
        raise ParameterError(f"shape must be a non-negative int or a tuple of them, got {shape!r}")
    return tuple(int(d) for d in dims)


def geometric_noise(
    shape: int | tuple[int, ...], epsilon: float, sensitivity: float, *, rng: RandomSource = SYSTEM_RANDOM
) -> IntArray:
    """Independent two-sided geometric noise, ``P[Z = z] = (1-α)/(1+α) · α^|z|`` with
    ``α = geometric_alpha(ε, Δ) ≥ exp(-ε/Δ)``, one draw per cell of ``shape``.

    Sampled exactly (integer arithmetic on uniform words from ``rng``), so adding it to an integer
    vector of L1 sensitivity ``Δ`` gives pure ε-DP with no δ.  ParameterError for a bad shape, a
    non-positive or non-finite ε or Δ, or ε/Δ outside ``[MIN_RATIO, MAX_RATIO]``.
    """
    dims = _check_shape(shape)
    rate = geometric_rate(epsilon, sensitivity)
    size = math.prod(dims)
    return _discrete_laplace(size, rate, rng).reshape(dims)


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
