"""Fixtures shared by the core tests; none of them needs Django."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.store import FsBlobStore


@pytest.fixture
def store(tmp_path: Path) -> FsBlobStore:
    """An empty blob store in a fresh temporary directory."""
    return FsBlobStore(tmp_path / "blobs")
