"""The index of a text blob: where its lines start, so that reading line N of a huge text
reads a few index records and the lines it returns, not the file from its start.

Lines follow the line model of core.lines: split on "\\n", one trailing "\\r" removed,
no empty line after a final "\\n".

The index holds two tables of fixed-width records (unsigned 64-bit, little-endian):

- ``before[j]``: how many newlines come before block *j* of the blob (blocks of BLOCK
  bytes; one more record at the end holds the total). Built with one C-speed count per
  block, so writing it costs about one pass of `bytes.count`.
- ``group[r]``: the block that holds the (r·GROUP)-th newline. Line N's start follows
  newline N-1, which lies between the blocks ``group[(N-1)//GROUP]`` and the next
  group's: two records name the few ``before`` records to read, and one block read finds
  the newline itself. Long lines cost no more: a line is never read to be skipped.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate

from core.content import cut_utf8, decode_text
from core.store.base import BlobReader
from core.store.errors import IndexUnusable
from core.store.index.index_file import (
    HEADER,
    KIND_TEXT,
    Header,
    pack_index,
    pack_numbers,
    read_header,
    unpack_numbers,
)

BLOCK = 4 * 1024  # bytes per `before` record: the most read to find where a line starts
GROUP = 64  # newlines per `group` record
_RECORD = 8
_SEARCH_WINDOW = 512  # `before` records read at once (4 KB) while narrowing a search
_FIRST_CHUNK = 4 * 1024  # lines are read in chunks that start small and double...
_MAX_CHUNK = 256 * 1024  # ...up to this, so a short read reads little past its lines
_FILE_CHUNK = 128 * BLOCK  # what building from a file reads at a time


@dataclass(frozen=True, slots=True)
class IndexedLine:
    number: int
    text: str  # the line, or its start when it was cut
    size: int  # the whole line's size in bytes

    @property
    def cut(self) -> bool:
        return len(self.text.encode("utf-8", "surrogatepass")) < self.size


# -- building ---------------------------------------------------------------------------------


def text_index_from_bytes(data: bytes, *, block: int = 0, group: int = 0) -> bytes:
    """The index of a text blob whose bytes are *data* (as the store wrote them), with
    blocks of *block* bytes and group records every *group* newlines (default: BLOCK, GROUP)."""
    block, group = block or BLOCK, group or GROUP
    counts = [data.count(b"\n", start, start + block) for start in range(0, len(data), block)]
    return _packed_index(counts, len(data), data.endswith(b"\n"), block, group)


def text_index_from_file(blob: BlobReader, *, block: int = 0, group: int = 0) -> bytes:
    """The index of the text blob that *blob* reads, read once a chunk at a time (bounded
    memory); chunks need not fall on block edges."""
    block, group = block or BLOCK, group or GROUP
    counts: list[int] = []
    size = 0
    last = b""
    newlines = filled = 0  # of the block being counted
    for chunk in blob.blocks(0, _FILE_CHUNK // block * block or block):
        at = 0
        while at < len(chunk):
            take = min(block - filled, len(chunk) - at)
            newlines += chunk.count(b"\n", at, at + take)
            filled += take
            at += take
            if filled == block:
                counts.append(newlines)
                newlines = filled = 0
        size += len(chunk)
        last = chunk[-1:]
    if filled:
        counts.append(newlines)
    return _packed_index(counts, size, last == b"\n", block, group)


def _packed_index(
    counts: list[int], size: int, ends_with_newline: bool, block: int, group: int
) -> bytes:
    before = list(accumulate(counts, initial=0))
    newlines = before[-1]
    # The block of newline r·group: the last block with fewer newlines before it.
    groups = [0] + [bisect_left(before, r * group) - 1 for r in range(1, newlines // group + 1)]
    body = pack_numbers(before, "Q") + pack_numbers(groups, "Q")
    fields = (block, group, len(before), newlines, int(ends_with_newline), len(groups))
    return pack_index(KIND_TEXT, size, fields, body)


# -- reading ----------------------------------------------------------------------------------


class TextIndex:
    """Lines of a text blob read through its index. *blob* reads the blob's file, *index*
    its index (a file or bytes); both stay open until :meth:`close`."""

    def __init__(self, blob: BlobReader, index: BlobReader, header: Header) -> None:
        self.blob = blob
        self.index = index
        block, group, befores, newlines, ends_with_newline, groups = header.fields
        self.size = header.blob_size
        self.block = block
        self.group = group
        self.befores = befores
        self.newlines = newlines
        self.ends_with_newline = bool(ends_with_newline)
        self.groups = groups
        expected = HEADER.size + _RECORD * (befores + groups)
        if block <= 0 or group <= 0 or header.index_size != expected:
            raise IndexUnusable("malformed text index")
        self._before_at = HEADER.size
        self._groups_at = HEADER.size + _RECORD * befores

    @classmethod
    def open(cls, blob: BlobReader, index: BlobReader) -> TextIndex:
        """The index in *index* of the blob in *blob*; IndexUnusable when it is stale."""
        return cls(blob, index, read_header(index, blob_size=blob.size, kinds=(KIND_TEXT,)))

    def close(self) -> None:
        self.blob.close()
        self.index.close()

    def __enter__(self) -> TextIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def line_count(self) -> int:
        return self.newlines + (1 if self.size and not self.ends_with_newline else 0)

    def _records(self, at: int, first: int, count: int) -> array[int]:
        return unpack_numbers(self.index.exact(at + _RECORD * first, _RECORD * count), "Q")

    def _after_newline(self, target: int) -> tuple[int, bytes]:
        """The offset just past newline number *target* (1-based; 0 for none), and the
        rest of the block read to find it (the bytes from there on, for the caller)."""
        if target <= 0:
            return 0, b""
        if target > self.newlines:
            return self.size, b""
        group = target // self.group
        count = 2 if group + 1 < self.groups else 1
        bounds = self._records(self._groups_at, group, count)
        low = bounds[0]
        high = bounds[1] if count == 2 else self.befores - 2  # the last block
        # The newline lies in the block j of low..high with before[j] < target <= before[j+1].
        while high - low > _SEARCH_WINDOW:
            middle = (low + high) // 2
            if self._records(self._before_at, middle, 1)[0] < target:
                low = middle
            else:
                high = middle - 1
        before = self._records(self._before_at, low, high - low + 2)
        block = low + bisect_left(before, target) - 1
        if not low <= block <= high:
            raise IndexUnusable("the text index does not match the blob")
        data = self.blob.read(block * self.block, self.block)
        position = -1
        try:
            for _ in range(target - before[block - low]):
                position = data.index(b"\n", position + 1)
        except ValueError:
            raise IndexUnusable("the text index does not match the blob") from None
        return block * self.block + position + 1, data[position + 1 :]

    def line_start(self, number: int) -> int:
        """Byte offset where line *number* starts; the file size past the last line."""
        if number > self.line_count:
            return self.size
        return self._after_newline(number - 1)[0]

    def newlines_before(self, offset: int) -> int:
        """How many newlines the blob holds before byte *offset* (clamped to the blob):
        one record of the index and at most one block of the blob read, so the line that
        holds a byte is found without reading the lines before it."""
        offset = min(max(offset, 0), self.size)
        block, into = divmod(offset, self.block)
        before = self._records(self._before_at, block, 1)[0]
        if into:
            before += self.blob.read(block * self.block, into).count(b"\n")
        return before

    def iter_lines(
        self,
        start: int,
        end: int,
        *,
        max_line_bytes: int | None = None,
        expected_bytes: int = _FIRST_CHUNK,
    ) -> Iterator[IndexedLine]:
        """Lines *start*..*end* (1-based, inclusive, clamped), each cut to *max_line_bytes*.

        Reads from where line *start* begins: first about *expected_bytes* (what the
        caller expects to take), then in chunks that grow while the caller keeps asking,
        so a caller that stops early has read little past what it took. A line longer than
        *max_line_bytes* is read only as far as it is shown: the index says where the next
        line starts.
        """
        start, end = max(start, 1), min(end, self.line_count)
        if start > end:
            return
        # The block read to find the first line goes on being read, not read again.
        position, buffer = self._after_newline(start - 1)  # file offset of buffer[cursor]
        cursor = 0
        read_at = position + len(buffer)  # file offset just past the buffer
        chunk = max(expected_bytes - len(buffer), _FIRST_CHUNK)
        room = None if max_line_bytes is None else max_line_bytes + 4
        number = start
        while number <= end:
            newline = buffer.find(b"\n", cursor)
            while newline < 0 and (room is None or len(buffer) - cursor <= room):
                more = self.blob.read(read_at, chunk)
                if not more:
                    break
                searched = len(buffer)
                buffer = buffer[cursor:] + more if cursor else buffer + more
                searched -= cursor
                cursor = 0
                read_at += len(more)
                chunk = min(chunk * 2, _MAX_CHUNK)
                newline = buffer.find(b"\n", searched)
            if newline >= 0:
                yield _line(number, buffer[cursor:newline].removesuffix(b"\r"), max_line_bytes)
                position += newline + 1 - cursor
                cursor = newline + 1
            elif newline < 0 and (room is None or len(buffer) - cursor <= room):
                # The last line, with no newline after it.
                yield _line(number, buffer[cursor:].removesuffix(b"\r"), max_line_bytes)
                return
            else:  # a long line: show its start, learn its size from the index
                following = self.line_start(number + 1)
                content_end = following - 1 if number <= self.newlines else following
                if content_end > position and self.blob.read(content_end - 1, 1) == b"\r":
                    content_end -= 1
                raw = buffer[cursor : cursor + min(content_end - position, room or 0)]
                yield _line(number, raw, max_line_bytes, size=content_end - position)
                position = read_at = following
                buffer, cursor, chunk = b"", 0, _FIRST_CHUNK
            number += 1

    def read_lines(
        self, start: int, end: int, *, max_line_bytes: int | None = None
    ) -> list[IndexedLine]:
        """:meth:`iter_lines` as a list."""
        return list(self.iter_lines(start, end, max_line_bytes=max_line_bytes))


def _line(number: int, raw: bytes, limit: int | None, *, size: int | None = None) -> IndexedLine:
    size = len(raw) if size is None else size
    if limit is not None and len(raw) > limit:
        raw = cut_utf8(raw, limit)
    return IndexedLine(number, decode_text(raw), size)


def open_text_index(blob: BlobReader, index: BlobReader) -> TextIndex:
    """A TextIndex over *blob*, which it closes when it is closed (and when *index* is
    stale: IndexUnusable)."""
    try:
        return TextIndex.open(blob, index)
    except BaseException:
        blob.close()
        raise
