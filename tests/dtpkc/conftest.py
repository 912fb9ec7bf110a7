"""Shared fixtures for the DT-PKC tests: the cached deterministic 512-bit test keys."""

from __future__ import annotations

import pytest

from securetrees.testing.dtpkc import DTPKCTestKeys, dtpkc_test_keys


@pytest.fixture(scope="session")
def keys() -> DTPKCTestKeys:
    return dtpkc_test_keys(512)
