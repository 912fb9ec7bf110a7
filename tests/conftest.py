"""Shared test configuration.

Hypothesis runs with the ``securetrees`` profile: no per-example deadline
(big-number arithmetic varies with load) and a derandomised search in CI so
that a failure reproduces.  Tests use small or cached keys wherever the key
size is not the point; 2048-bit key generation carries the ``slow`` marker.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "securetrees",
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("securetrees")
