"""The index of a text blob (core.store.index.text_index): where its lines start, read in part,
following the line model of core.lines; and where the store keeps it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.content import Text
from core.lines import count_lines, line_slice, split_lines
from core.store import FsBlobStore
from core.store.file_reader import FileReader
from core.store.index import INDEX_FOLDER, TextIndex, index_path, open_index
from core.store.index.index_file import HEADER, BytesReader
from core.store.index.text_index import (
    IndexedLine,
    open_text_index,
    text_index_from_bytes,
    text_index_from_file,
)


def write(tmp_path: Path, text: str, name: str = "blob.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path


def indexed(path: Path, *, block: int = 8192, group: int = 64) -> TextIndex:
    with FileReader(path) as blob:
        data = text_index_from_file(blob, block=block, group=group)
    return open_text_index(FileReader(path), BytesReader(data))


def expected(text: str, start: int, end: int) -> list[IndexedLine]:
    first = max(start, 1)
    return [
        IndexedLine(n, line, len(line.encode("utf-8", "surrogatepass")))
        for n, line in enumerate(line_slice(text, first, end), start=first)
    ]


@pytest.mark.parametrize(
    ("text", "count"),
    [("", 0), ("a", 1), ("a\n", 1), ("a\n\nb", 3), ("\n", 1), ("a\r\nb\r\n", 2), ("\n\n\n", 3)],
)
def test_it_counts_lines_like_the_line_model(tmp_path: Path, text: str, count: int) -> None:
    with indexed(write(tmp_path, text)) as index:
        assert index.line_count == count


def test_it_reads_a_range_of_lines(tmp_path: Path) -> None:
    text = "".join(f"line {n}\r\n" for n in range(1, 1001))
    with indexed(write(tmp_path, text), block=64, group=4) as index:
        assert [line.text for line in index.read_lines(998, 2000)] == [
            "line 998",
            "line 999",
            "line 1000",
        ]
        assert index.read_lines(500, 500) == [IndexedLine(500, "line 500", 8)]


def test_it_counts_the_newlines_before_any_byte(tmp_path: Path) -> None:
    text = "".join(f"line {n}\n" * (n % 3) + "x" * (n % 50) for n in range(300))
    data = text.encode()
    with indexed(write(tmp_path, text), block=64, group=4) as index:
        for offset in [*range(0, len(data) + 1, 37), len(data), len(data) + 10, -5]:
            assert index.newlines_before(offset) == data[: max(offset, 0)].count(b"\n")


def test_a_range_past_the_end_is_empty(tmp_path: Path) -> None:
    with indexed(write(tmp_path, "a\nb\n")) as index:
        assert index.read_lines(3, 10) == []
        assert index.read_lines(2, 1) == []


def test_long_lines_are_cut_on_a_character_boundary(tmp_path: Path) -> None:
    long_line = "€" * 100  # 300 bytes
    with indexed(write(tmp_path, f"short\n{long_line}\nend"), block=16, group=1) as index:
        lines = index.read_lines(1, 3, max_line_bytes=10)
    assert lines[0] == IndexedLine(1, "short", 5)
    assert lines[1] == IndexedLine(2, "€€€", 300)  # 9 bytes: a 4th € would need 12
    assert lines[1].cut
    assert not lines[2].cut


def test_line_starts_point_after_their_newline(tmp_path: Path) -> None:
    with indexed(write(tmp_path, "ab\ncd\n\nef"), block=2, group=1) as index:
        assert [index.line_start(n) for n in range(1, 6)] == [0, 3, 6, 7, 9]


def test_the_same_index_comes_from_the_bytes_and_from_the_file(tmp_path: Path) -> None:
    text = "".join(f"{'é' * (n % 9)}{n}\r\n" for n in range(5000)) + "no newline"
    path = write(tmp_path, text)
    with FileReader(path) as blob:
        from_file = text_index_from_file(blob, block=100, group=7)
    assert text_index_from_bytes(path.read_bytes(), block=100, group=7) == from_file


texts = st.lists(
    st.sampled_from(["a", "é", "€", "\U0001f600", "\n", "\r", "\r\n", "\ud800", " ", "x" * 40]),
    max_size=120,
).map("".join)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts,
    st.integers(min_value=1, max_value=16),
    st.integers(min_value=1, max_value=5),
    st.integers(min_value=-2, max_value=60),
    st.integers(min_value=0, max_value=80),
    st.one_of(st.none(), st.integers(min_value=0, max_value=12)),
)
def test_any_range_agrees_with_the_line_model(
    tmp_path: Path,
    text: str,
    block: int,
    group: int,
    start: int,
    end: int,
    limit: int | None,
) -> None:
    """Blocks of a few bytes put every line, newline and multi-byte character across a
    block's edge somewhere."""
    with indexed(write(tmp_path, text), block=block, group=group) as index:
        assert index.line_count == count_lines(text) == len(split_lines(text))
        got = index.read_lines(start, end, max_line_bytes=limit)
    want = expected(text, start, end)
    assert [(line.number, line.size) for line in got] == [(w.number, w.size) for w in want]
    for line, whole in zip(got, want, strict=True):
        if limit is None:
            assert line.text == whole.text
        else:
            shown = line.text.encode("utf-8", "surrogatepass")
            assert len(shown) <= limit
            assert whole.text.encode("utf-8", "surrogatepass").startswith(shown)
            assert line.cut == (len(shown) < whole.size)


def test_finding_a_line_among_long_lines_reads_one_block_and_a_few_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 64 lines of 100 KB between group records: the blocks between them are searched
    # through their records, and only the block holding the line is read.
    path = write(tmp_path, "".join(f"{n:06d}" + "x" * 100_000 + "\n" for n in range(300)))
    with indexed(path, block=1024, group=64) as index:
        reads: list[int] = []
        real_pread = os.pread

        def pread(fd: int, size: int, offset: int) -> bytes:
            data = real_pread(fd, size, offset)
            reads.append(len(data))
            return data

        monkeypatch.setattr(os, "pread", pread)
        assert index.line_start(200) == 199 * 100_007
        assert sum(reads) <= 1024 + 10 * 4096  # one block, a few windows of records
        reads.clear()
        (line,) = index.read_lines(250, 250, max_line_bytes=20)
    assert line == IndexedLine(250, "000249" + "x" * 14, 100_006)
    assert sum(reads) <= 20 + 4 + 2 * (1024 + 10 * 4096) + 4096  # its start, not its bytes


def test_the_store_writes_a_text_index_beside_the_blob(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path / "blobs", index_min_bytes=0)
    blob_id = store.store_sync(Text("a\nb\n" * 1000))
    path = index_path(store.root, str(blob_id))
    assert path.parent == store.root / INDEX_FOLDER
    assert path.name == f"{blob_id}.idx"
    assert path.read_bytes() == text_index_from_bytes(store.path_of(blob_id).read_bytes())
    assert list(store.ids_sync()) == [blob_id]  # the index folder is not a blob


def test_a_small_blob_gets_no_index_file(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path / "blobs")
    blob_id = store.store_sync(Text("a\n" * 100))
    assert not index_path(store.root, str(blob_id)).exists()
    # It is still read through an index, made in memory for the call.
    index = open_index(store, blob_id, min_bytes=store.index_min_bytes)
    assert isinstance(index, TextIndex)
    with index:
        assert index.line_count == 100
    assert not (store.root / INDEX_FOLDER).exists()


def test_a_stale_index_is_made_again(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path / "blobs", index_min_bytes=0)
    blob_id = store.store_sync(Text("a\nb\n"))
    blob = store.path_of(blob_id)
    blob.write_bytes(b"a\nb\nc\n")  # blobs are immutable; this is what the check guards
    with open_index(store, blob_id, min_bytes=0) as index:
        assert index.line_count == 3
    data = index_path(store.root, str(blob_id)).read_bytes()
    assert data == text_index_from_bytes(b"a\nb\nc\n")


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: HEADER.size - 1],
        lambda data: data[:-1],
        lambda data: b"garbage!" + data[8:],
        lambda data: data + b"\0",
        lambda data: b"",
    ],
)
def test_a_damaged_index_is_made_again(tmp_path: Path, damage) -> None:
    store = FsBlobStore(tmp_path / "blobs", index_min_bytes=0)
    text = "".join(f"line {n}\n" for n in range(1, 5001))
    blob_id = store.store_sync(Text(text))
    path = index_path(store.root, str(blob_id))
    good = path.read_bytes()
    path.write_bytes(damage(good))
    with open_index(store, blob_id, min_bytes=0) as index:
        assert index.read_lines(5000, 6000) == [IndexedLine(5000, "line 5000", 9)]
    assert path.read_bytes() == good
