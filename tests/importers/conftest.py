from __future__ import annotations

from pathlib import Path

import pytest

from importers.recordings import require_fixtures


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return require_fixtures()
