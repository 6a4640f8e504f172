from __future__ import annotations

from pathlib import Path

import pytest

from importers.recordings import FIXTURES


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES
