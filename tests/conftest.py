"""Settings for the whole suite. Nothing here may import Django: tests/core runs without it."""

from __future__ import annotations

from hypothesis import settings

# Property tests judge behaviour, not speed (bench/ measures that): on a busy two-core CI
# machine a slow example must not fail a run.
settings.register_profile("blobviewer", deadline=None, print_blob=True)
settings.load_profile("blobviewer")
