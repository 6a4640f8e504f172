"""Settings for the whole suite. Nothing here may import Django: tests/core runs without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

# Property tests judge behaviour, not speed (bench/ measures that): on a busy two-core CI
# machine a slow example must not fail a run.
hypothesis_settings.register_profile("blobviewer", deadline=None, print_blob=True)
hypothesis_settings.load_profile("blobviewer")


@pytest.fixture
def data_dir(tmp_path: Path, settings: Any) -> Path:
    """An empty data directory (blobs/, sessions/) that the site reads from (web and
    browser tests; `settings` is pytest-django's fixture, so Django loads only for them)."""
    root = tmp_path / "data"
    (root / "blobs").mkdir(parents=True)
    (root / "sessions").mkdir()
    settings.BLOBVIEWER_DATA = root
    return root
