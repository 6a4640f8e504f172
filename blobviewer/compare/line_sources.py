"""The outputs a diff reads, as lines: a text in memory, or a stored blob read through
its blob index a few lines at a time, so that diffing two 100 MB outputs holds a page of
lines, never an output.

A line is read as it is shown (core.lines' line model: split on "\\n", one trailing
"\\r" dropped) and compared whole: a line longer than LINE_BYTES is read cut there, and
compared by its size and a digest of all its bytes, read from the blob in blocks.

Which lines an output has:

- a text (in memory, or a text blob): its lines; the numbers are those of `lines:`;
- JSON: its indented form (core.json_values.dumps_indented: two spaces a level, keys in
  the order they came), the rows the blob page numbers. A JSON blob under
  RENDERED_FROM_BYTES is loaded and indented; a bigger one is read from its indented
  rendering (the site keeps one per big JSON blob in `derived/`, with its own line
  index), when the caller says where renderings are. A big JSON blob with no rendering
  is read as the store keeps it (compact JSON, usually one long line): its raw lines,
  which takes one pass over the blob to count them (the view is then "json_raw");
- a text in memory is taken as JSON only when both outputs are JSON
  (:func:`open_pair`) and it is at most SMALL_JSON_TEXT long.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Literal, NamedTuple

from core.content import Structured, cut_utf8, decode_text, encode_text
from core.json_values import JsonError, dumps_indented, parse_json
from core.lines import split_lines
from core.store import BlobCorrupt, BlobNotFound, BlobStat, BlobStore
from core.store.blob_id import BlobId
from core.store.index import TextIndex, open_index
from core.store.index.index_file import KIND_TEXT, BytesReader, read_header
from core.store.index.text_index import text_index_from_file

View = Literal["text", "json", "json_raw"]

LINE_BYTES = 8_000  # a longer line is read cut, and compared by size and digest
RENDERED_FROM_BYTES = 1 << 20  # as blobviewer.catalog.blobs.RENDER_JSON_FROM_BYTES
SMALL_JSON_TEXT = 1 << 20  # a text in memory longer than this is never parsed as JSON
_DIGEST_BLOCK = 1 << 20
_FIRST_COMPARE_BLOCK = 64 * 1024  # the byte comparison reads blocks that start small...
_MAX_COMPARE_BLOCK = 1 << 20  # ...and double up to this


@dataclass(frozen=True, slots=True)
class TextOutput:
    """An output held in memory: an inline output, or a blob's text already loaded."""

    text: str


@dataclass(frozen=True, slots=True)
class StoredOutput:
    """A blob of *store*. *renderings* is the store of big JSON blobs' indented
    renderings, each under its blob's id (the site's `data_dir.renderings()`); without
    it a big JSON blob is read raw."""

    store: BlobStore
    blob_id: BlobId | str
    renderings: BlobStore | None = None


LineSource = TextOutput | StoredOutput


class ComparedLine(NamedTuple):
    """One line as compared: its text (cut at LINE_BYTES), its whole size in UTF-8 bytes,
    and for a cut line a digest of all its bytes. Two lines are the same line exactly
    when their ComparedLine tuples are equal."""

    text: str
    size: int
    digest: bytes | None

    @property
    def cut(self) -> bool:
        return self.digest is not None


class OpenedLines:
    """An output's lines, open for reading; close it (or use it as a context manager)."""

    def __init__(
        self, view: View, *, lines: list[str] | None = None, index: TextIndex | None = None
    ) -> None:
        self.view = view
        self._lines = lines
        self.index = index  # the text index a stored output is read through
        self.line_count = len(lines) if lines is not None else index.line_count if index else 0

    def lines(self, first: int) -> Iterator[ComparedLine]:
        """Lines *first*.. (1-based) to the end, read as they are taken."""
        if self._lines is not None:
            return (_line_of(text) for text in islice(self._lines, max(first - 1, 0), None))
        assert self.index is not None
        return self._indexed(self.index, max(first, 1))

    def _indexed(self, index: TextIndex, first: int) -> Iterator[ComparedLine]:
        lines = index.iter_lines(first, index.line_count, max_line_bytes=LINE_BYTES)
        try:
            for line in lines:
                if not line.cut:
                    yield ComparedLine(line.text, line.size, None)
                    continue
                digest = _digest_at(index, line.number, line.size)
                yield ComparedLine(line.text, line.size, digest)
        except UnicodeDecodeError as error:
            raise BlobCorrupt(f"a stored output is not UTF-8 text: {error.reason}") from None

    def close(self) -> None:
        if self.index is not None:
            self.index.close()

    def __enter__(self) -> OpenedLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_pair(a: LineSource, b: LineSource) -> tuple[OpenedLines, OpenedLines]:
    """Both outputs open as lines: a JSON blob as JSON always, a text in memory as JSON
    when both outputs are JSON.
    Raises the store's errors (BlobNotFound, BlobCorrupt, BlobIOError)."""
    a_json, b_json = _json_value(a), _json_value(b)
    if a_json is _NOT_JSON or b_json is _NOT_JSON:  # a text in memory stays a text
        a_json = a_json if isinstance(a_json, _StoredKind) else _NOT_JSON
        b_json = b_json if isinstance(b_json, _StoredKind) else _NOT_JSON
    first = _opened(a, a_json)
    try:
        return first, _opened(b, b_json)
    except BaseException:
        first.close()
        raise


_NOT_JSON = object()


@dataclass(frozen=True, slots=True)
class _StoredKind:
    """What a stored output is: a text blob, or a JSON blob (and its size)."""

    stat: BlobStat


def _json_value(source: LineSource) -> object:
    """A text in memory's JSON value when it is short JSON, else _NOT_JSON; a stored
    output's kind (a JSON blob is JSON; a text blob is not, whatever it holds)."""
    if isinstance(source, StoredOutput):
        stat = source.store.stat_sync(source.blob_id)
        return _StoredKind(stat) if stat.kind == "json" else _NOT_JSON
    text = source.text.lstrip()
    if len(source.text) > SMALL_JSON_TEXT or not text.startswith(("{", "[")):
        return _NOT_JSON
    try:
        return parse_json(text)
    except JsonError:
        return _NOT_JSON


def _opened(source: LineSource, value: object) -> OpenedLines:
    if isinstance(source, TextOutput):
        if value is _NOT_JSON:
            return OpenedLines("text", lines=split_lines(source.text))
        return OpenedLines("json", lines=dumps_indented(value).split("\n"))
    store, blob_id = source.store, source.blob_id
    if not isinstance(value, _StoredKind):
        return OpenedLines("text", index=_text_index(store, blob_id))
    if value.stat.size < RENDERED_FROM_BYTES:
        loaded = store.load_sync(blob_id)
        assert isinstance(loaded, Structured)
        return OpenedLines("json", lines=dumps_indented(loaded.value).split("\n"))
    if source.renderings is not None:
        try:
            return OpenedLines("json", index=_text_index(source.renderings, blob_id))
        except BlobNotFound:
            pass  # not rendered (yet): read raw
    return OpenedLines("json_raw", index=_raw_index(store, blob_id))


def _text_index(store: BlobStore, blob_id: BlobId | str) -> TextIndex:
    """The text blob's index, as its store keeps it (or made in memory from the blob)."""
    index = open_index(store, blob_id, min_bytes=store.index_min_bytes)
    if not isinstance(index, TextIndex):
        if index is not None:
            index.close()
        return _raw_index(store, blob_id)
    return index


def _raw_index(store: BlobStore, blob_id: BlobId | str) -> TextIndex:
    """A text index of the blob's bytes as stored, made in memory in one pass over them."""
    blob = store.open_sync(blob_id)
    try:
        index = BytesReader(text_index_from_file(blob))
        return TextIndex(blob, index, read_header(index, blob_size=blob.size, kinds=(KIND_TEXT,)))
    except BaseException:
        blob.close()
        raise


def _line_of(text: str) -> ComparedLine:
    """A line held in memory, as a stored one with the same bytes is read."""
    if len(text) * 4 <= LINE_BYTES:  # short whatever its characters: no need to encode
        return ComparedLine(text, len(text) if text.isascii() else len(encode_text(text)), None)
    data = encode_text(text)
    if len(data) <= LINE_BYTES:
        return ComparedLine(text, len(data), None)
    return ComparedLine(decode_text(cut_utf8(data, LINE_BYTES)), len(data), _digest(data))


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _digest_at(index: TextIndex, number: int, size: int) -> bytes:
    """The digest of line *number*'s *size* bytes, read from the blob in blocks."""
    digest = hashlib.blake2b(digest_size=16)
    at = index.line_start(number)
    end = at + size
    while at < end:
        block = index.blob.read(at, min(_DIGEST_BLOCK, end - at))
        if not block:
            break
        digest.update(block)
        at += len(block)
    return digest.digest()


def equal_lines_by_bytes(a: OpenedLines, b: OpenedLines, a_first: int, b_first: int) -> int:
    """How many lines from line *a_first* of *a* and *b_first* of *b* on are the same
    bytes, found by comparing blocks of both blobs (C-speed, a block at a time) rather
    than line by line, and counted by the text index (the newlines before the first
    differing byte); 0 unless both are read through a text index. They are whole lines
    (each ends before that byte), so the same lines; those after are compared one by one."""
    if a.index is None or b.index is None:
        return 0
    start = a.index.line_start(a_first)
    a_at, b_at = start, b.index.line_start(b_first)
    block = _FIRST_COMPARE_BLOCK
    while True:
        a_block, b_block = a.index.blob.read(a_at, block), b.index.blob.read(b_at, block)
        if a_block != b_block or not a_block:
            differs_at = a_at + _common_prefix(a_block, b_block)
            return a.index.newlines_before(differs_at) - a.index.newlines_before(start)
        a_at += len(a_block)
        b_at += len(b_block)
        block = min(block * 2, _MAX_COMPARE_BLOCK)


def _common_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix of *a* and *b*, by halving (each step one
    C-speed comparison of slices)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low
