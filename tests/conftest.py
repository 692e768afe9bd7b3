"""Shared test fixtures: the read-only benchmark data beside the checkout (`../shared/data`)."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data directory; tests using it skip when it is absent or incomplete."""
    if not (SHARED_DATA / "READY").is_file():
        pytest.skip(f"shared data not available at {SHARED_DATA}")
    return SHARED_DATA
