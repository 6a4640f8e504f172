"""A sparse index of line offsets in a text blob's file, for reading lines near the end of
a huge blob without reading the file from the start.

Built in one pass; it records how many newlines come before each block of the file, so
finding a line reads at most one block. It serializes to a small JSON object so a caller
(the web site) can cache it beside the blob's other metadata. Lines follow the line model
of core.lines: split on "\\n", one trailing "\\r" removed, no empty line after a final "\\n".
"""

from __future__ import annotations

import os
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from core.content import cut_utf8, decode_text

BLOCK = 64 * 1024
_RANGE_READ_LIMIT = 8 * 1024 * 1024  # a range smaller than this is read in one go


@dataclass(frozen=True, slots=True)
class IndexedLine:
    number: int
    text: str  # the line, or its start when it was cut
    size: int  # the whole line's size in bytes

    @property
    def cut(self) -> bool:
        return len(self.text.encode("utf-8", "surrogatepass")) < self.size


@dataclass(frozen=True, slots=True)
class LineIndex:
    size: int  # bytes in the file
    newlines_before: tuple[int, ...]  # newlines before block i
    newlines: int  # newlines in the file
    ends_with_newline: bool
    block: int = BLOCK

    @property
    def line_count(self) -> int:
        return self.newlines + (1 if self.size and not self.ends_with_newline else 0)

    @classmethod
    def build(cls, path: str | os.PathLike[str], *, block: int = BLOCK) -> LineIndex:
        counts = []
        total = 0
        last = b""
        with open(path, "rb") as file:
            while chunk := file.read(block):
                counts.append(total)
                total += chunk.count(b"\n")
                last = chunk[-1:]
            size = file.tell()
        return cls(size, tuple(counts), total, last == b"\n", block)

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "block": self.block,
            "newlines": self.newlines,
            "ends_with_newline": self.ends_with_newline,
            "newlines_before": list(self.newlines_before),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LineIndex:
        return cls(
            int(data["size"]),
            tuple(int(n) for n in data["newlines_before"]),
            int(data["newlines"]),
            bool(data["ends_with_newline"]),
            int(data["block"]),
        )

    def matches(self, path: str | os.PathLike[str]) -> bool:
        """Whether this index still describes the file (blobs are immutable; this is a guard)."""
        try:
            return Path(path).stat().st_size == self.size
        except OSError:
            return False

    def offset_of(self, file: BinaryIO, number: int) -> int:
        """Byte offset where line *number* starts; the file size for the line after the last."""
        target = number - 1  # newlines before the line
        if target <= 0:
            return 0
        if target > self.newlines or (target == self.newlines and self.ends_with_newline):
            return self.size
        block = bisect_left(self.newlines_before, target) - 1  # last block starting before it
        file.seek(block * self.block)
        data = file.read(self.block)
        position = -1
        for _ in range(target - self.newlines_before[block]):
            position = data.index(b"\n", position + 1)
        return block * self.block + position + 1

    def read_lines(
        self,
        path: str | os.PathLike[str],
        start: int,
        end: int,
        *,
        max_line_bytes: int | None = None,
    ) -> list[IndexedLine]:
        """Lines *start*..*end* (1-based, inclusive, clamped), each cut to *max_line_bytes*.

        Reads only the bytes of those lines; a line longer than *max_line_bytes* is read
        only as far as it is shown.
        """
        start, end = max(start, 1), min(end, self.line_count)
        if start > end:
            return []
        with open(path, "rb") as file:
            begin = self.offset_of(file, start)
            stop = self.offset_of(file, end + 1)
            if max_line_bytes is None or stop - begin <= _RANGE_READ_LIMIT:
                file.seek(begin)
                data = file.read(stop - begin)
                raws = data.split(b"\n")
                if data.endswith(b"\n"):
                    raws.pop()
                return [
                    _line(number, raw.removesuffix(b"\r"), max_line_bytes)
                    for number, raw in enumerate(raws, start=start)
                ]
            lines = []
            for number in range(start, end + 1):
                following = self.offset_of(file, number + 1)
                content_end = following - 1 if number <= self.newlines else following
                if content_end > begin:
                    file.seek(content_end - 1)
                    if file.read(1) == b"\r":
                        content_end -= 1
                file.seek(begin)
                raw = file.read(min(content_end - begin, max_line_bytes + 4))
                lines.append(_line(number, raw, max_line_bytes, size=content_end - begin))
                begin = following
            return lines


def _line(number: int, raw: bytes, limit: int | None, *, size: int | None = None) -> IndexedLine:
    size = len(raw) if size is None else size
    if limit is not None and len(raw) > limit:
        raw = cut_utf8(raw, limit)
    return IndexedLine(number, decode_text(raw), size)
