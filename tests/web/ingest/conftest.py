"""Fixtures of the ingest tests."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from blobviewer.ingest.importers.json_lines import DEFAULT_MAX_RECORD, RecordingText


class _Counted:
    """A file whose reads are counted."""

    def __init__(self, file, counts: list[int]) -> None:
        self._file, self._counts = file, counts

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        self._counts.append(len(data))
        return data

    def __getattr__(self, name: str):
        return getattr(self._file, name)


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the reads ingest makes of the recordings it parses."""
    counts: list[int] = []

    @contextmanager
    def counting_open(cls, path, *, max_record=DEFAULT_MAX_RECORD, resume=None):
        with path.open("rb") as file:
            yield cls(path, _Counted(file, counts), max_record=max_record, resume=resume)

    monkeypatch.setattr(RecordingText, "open", classmethod(counting_open))
    return counts
