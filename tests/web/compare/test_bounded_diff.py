"""Diffing two 100 MB outputs reads the bytes up to their first difference and a window
after it, no more, and holds little of them (blobviewer.compare.output_diff)."""

from __future__ import annotations

import os
import tracemalloc
import uuid
from collections.abc import Callable, Iterator

import pytest

from blobviewer.compare.line_sources import StoredOutput
from blobviewer.compare.output_diff import DiffPage, output_diff
from core.store import FsBlobStore
from core.store.index import open_index

LINE = 80  # bytes a line, newline included
BLOCK_LINES = 10_000  # lines made once and written again and again
BLOCKS = 125  # 125 blocks of 800 KB: 100 MB
WINDOW = 2000
MEMORY = 8 * 2**20
# Past the first difference and the window's lines, a side reads at most one block of
# the byte comparison (1 MB, the last of them) and the line reader's read-ahead (256 KB),
# and the few 4 KB blocks of index records and lines that find where a line starts.
SLACK = 2**20 + 256 * 1024 + 64 * 1024


def _block(changed: int | None = None) -> bytes:
    """BLOCK_LINES numbered log lines; line *changed* (0-based) says CHANGED."""
    lines = []
    for n in range(BLOCK_LINES):
        word = "CHANGED" if n == changed else "ok"
        line = f"{n:08d} INFO worker-{n % 7} processed an item status={word}"
        lines.append(line.ljust(LINE - 1))
    return "\n".join(lines).encode() + b"\n"


def _chunks(changed: int | None) -> Iterator[bytes]:
    """100 MB of lines, line *changed* (0-based) changed, a block at a time."""
    base = _block()
    for number in range(BLOCKS):
        first = number * BLOCK_LINES
        if changed is not None and first <= changed < first + BLOCK_LINES:
            yield _block(changed - first)
        else:
            yield base


LAST_LINE = BLOCKS * BLOCK_LINES


@pytest.fixture(scope="module")
def blobs(tmp_path_factory: pytest.TempPathFactory) -> tuple[FsBlobStore, dict[str, uuid.UUID]]:
    """Three 100 MB text blobs in a real store, with their indexes: the original, one
    that differs 50 lines before its end, one that differs at its 50th line."""
    store = FsBlobStore(tmp_path_factory.mktemp("big") / "blobs")
    ids = {}
    for name, changed in (("base", None), ("near_end", LAST_LINE - 50), ("near_start", 49)):
        blob_id = uuid.uuid4()
        store.put_stream_sync(blob_id, "text", _chunks(changed))
        index = open_index(store, blob_id)  # made as the store makes a big blob's index
        assert index is not None
        index.close()
        ids[name] = blob_id
    return store, ids


def _measured(
    run: Callable[[], DiffPage], monkeypatch: pytest.MonkeyPatch
) -> tuple[DiffPage, int, int]:
    """The page, the bytes read from files (every os.pread: blobs and indexes) and the
    peak of Python's memory above where it was, while *run* ran."""
    read = 0
    pread = os.pread

    def counting(fd: int, size: int, offset: int) -> bytes:
        nonlocal read
        data = pread(fd, size, offset)
        read += len(data)
        return data

    monkeypatch.setattr(os, "pread", counting)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        page = run()
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
        monkeypatch.undo()
    return page, read, peak


@pytest.mark.parametrize(
    ("name", "changed_line"), [("near_end", LAST_LINE - 50), ("near_start", 49)]
)
def test_the_diff_of_two_100_mb_outputs_reads_up_to_the_difference_and_a_window(
    blobs: tuple[FsBlobStore, dict[str, uuid.UUID]],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    changed_line: int,
) -> None:
    store, ids = blobs
    a, b = StoredOutput(store, ids["base"]), StoredOutput(store, ids[name])
    page, read, peak = _measured(lambda: output_diff(a, b, window=WINDOW), monkeypatch)
    [hunk] = page.hunks
    changed = [line for line in hunk.lines if line.kind != "context"]
    assert [(line.kind, line.a_number, line.b_number) for line in changed] == [
        ("removed", changed_line + 1, None),
        ("added", None, changed_line + 1),
    ]
    assert "status=CHANGED" in changed[1].text
    up_to_difference = changed_line * LINE
    window = min(WINDOW, LAST_LINE - changed_line + 3) * LINE
    assert read <= 2 * (up_to_difference + window + SLACK), (read, up_to_difference)
    assert peak <= MEMORY, peak


def test_identical_100_mb_outputs_are_compared_in_bounded_memory(
    blobs: tuple[FsBlobStore, dict[str, uuid.UUID]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = blobs
    same = StoredOutput(store, ids["base"])
    page, read, peak = _measured(lambda: output_diff(same, same), monkeypatch)
    assert page.identical
    assert peak <= MEMORY
