"""The line index: reading lines of a text blob's file near its end without reading it all,
following the same line model as core.lines."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import line_index as line_index_module
from core.line_index import IndexedLine, LineIndex
from core.lines import count_lines, line_slice, split_lines


def write(tmp_path: Path, text: str, name: str = "blob.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path


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
    assert LineIndex.build(write(tmp_path, text)).line_count == count


def test_it_reads_a_range_of_lines(tmp_path: Path) -> None:
    text = "".join(f"line {n}\r\n" for n in range(1, 1001))
    path = write(tmp_path, text)
    index = LineIndex.build(path, block=64)
    assert [line.text for line in index.read_lines(path, 998, 2000)] == [
        "line 998",
        "line 999",
        "line 1000",
    ]
    assert index.read_lines(path, 500, 500) == [IndexedLine(500, "line 500", 8)]


def test_a_range_past_the_end_is_empty(tmp_path: Path) -> None:
    path = write(tmp_path, "a\nb\n")
    index = LineIndex.build(path)
    assert index.read_lines(path, 3, 10) == []
    assert index.read_lines(path, 2, 1) == []


def test_long_lines_are_cut_on_a_character_boundary(tmp_path: Path) -> None:
    long_line = "€" * 100  # 300 bytes
    path = write(tmp_path, f"short\n{long_line}\nend")
    index = LineIndex.build(path, block=16)
    lines = index.read_lines(path, 1, 3, max_line_bytes=10)
    assert lines[0] == IndexedLine(1, "short", 5)
    assert lines[1] == IndexedLine(2, "€€€", 300)  # 9 bytes: a 4th € would need 12
    assert lines[1].cut
    assert not lines[2].cut


def test_far_ranges_read_line_by_line_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "".join(f"{'é' * (n % 7)}{n}\r\n" for n in range(300)) + "tail"
    path = write(tmp_path, text)
    index = LineIndex.build(path, block=32)
    whole = index.read_lines(path, 1, 400, max_line_bytes=5)
    monkeypatch.setattr(line_index_module, "_RANGE_READ_LIMIT", 0)
    assert index.read_lines(path, 1, 400, max_line_bytes=5) == whole


def test_it_serializes_to_json_and_back(tmp_path: Path) -> None:
    path = write(tmp_path, "a\nb\nc" * 100)
    index = LineIndex.build(path, block=16)
    assert LineIndex.from_json(index.to_json()) == index
    assert index.matches(path)
    assert not index.matches(tmp_path / "missing.txt")
    path.write_text("changed")
    assert not index.matches(path)


def test_offsets_point_at_line_starts(tmp_path: Path) -> None:
    text = "ab\ncd\n\nef"
    path = write(tmp_path, text)
    index = LineIndex.build(path, block=2)
    with open(path, "rb") as file:
        assert [index.offset_of(file, n) for n in range(1, 6)] == [0, 3, 6, 7, 9]


texts = st.lists(
    st.sampled_from(["a", "é", "€", "\U0001f600", "\n", "\r", "\r\n", "\ud800", " "]), max_size=120
).map("".join)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts,
    st.integers(min_value=1, max_value=16),
    st.integers(min_value=-2, max_value=60),
    st.integers(min_value=0, max_value=80),
    st.one_of(st.none(), st.integers(min_value=0, max_value=12)),
    st.booleans(),
)
def test_any_range_agrees_with_the_line_model(
    tmp_path: Path,
    text: str,
    block: int,
    start: int,
    end: int,
    limit: int | None,
    line_by_line: bool,
) -> None:
    path = write(tmp_path, text)
    index = LineIndex.build(path, block=block)
    assert index.line_count == count_lines(text) == len(split_lines(text))
    if line_by_line:
        saved = line_index_module._RANGE_READ_LIMIT
        line_index_module._RANGE_READ_LIMIT = 0
    try:
        got = index.read_lines(path, start, end, max_line_bytes=limit)
    finally:
        if line_by_line:
            line_index_module._RANGE_READ_LIMIT = saved
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


def test_offset_of_reads_at_most_one_block(tmp_path: Path) -> None:
    path = write(tmp_path, "x\n" * 100_000)
    index = LineIndex.build(path, block=1024)

    class CountingFile(io.FileIO):
        read_bytes = 0

        def read(self, size: int = -1) -> bytes:
            data = super().read(size)
            CountingFile.read_bytes += len(data)
            return data

    with CountingFile(path, "rb") as file:
        assert index.offset_of(file, 99_000) == 2 * 98_999
    assert CountingFile.read_bytes <= 1024
