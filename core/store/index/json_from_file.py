"""A JSON blob's index made from the blob itself (the format: core.store.index.json_index),
for a blob stored before indexes existed or whose index was deleted: one pass over it, a
few MB at a time, with the standard library's scanner.
"""

from __future__ import annotations

import codecs
import json
import re
import zlib
from array import array
from json.scanner import make_scanner
from typing import Any, overload

import orjson

from core.content import encode_text
from core.json_values import finite_float, reject_constant
from core.store.base import BlobReader
from core.store.index import json_index
from core.store.index.json_format import (
    ARRAY,
    OBJECT,
    TABLE,
    TableLayout,
    Unindexable,
    key_from_literal,
    kind_count,
    typecode,
    width_for,
)

_BATCH = 1024  # entries whose bytes are compared with orjson's at once


def json_index_from_file(blob: BlobReader) -> bytes | None:
    """The index of the JSON blob that *blob* reads, for blobs stored before indexes existed
    (or whose index was deleted): one pass over it, a few MB at a time, with the standard
    library's scanner, so memory stays bounded by the biggest entry, not the blob. None
    when it is not compact JSON as the store writes it (or not JSON at all)."""
    file = _ReaderFile(blob)
    for width in sorted({width_for(blob.size), 8}):
        file.seek(0)
        try:
            return _FromFile(file, blob.size, width).build()
        except OverflowError:  # a count too big for 4 bytes: 8-byte records
            continue
        except (Unindexable, UnicodeDecodeError, RecursionError):
            return None
    return None


class _ReaderFile:
    """The reads of a file a build makes (read on, tell, seek), over a BlobReader."""

    def __init__(self, blob: BlobReader) -> None:
        self.blob = blob
        self.position = 0

    def read(self, size: int) -> bytes:
        data = self.blob.read(self.position, size)
        self.position += len(data)
        return data

    def tell(self) -> int:
        return self.position

    def seek(self, position: int) -> None:
        self.position = position


# Numbers are read in C; only a text that may hold an out-of-range one (an exponent of three
# digits or more) is read with the check, number by number, that parse_json makes.
_DECODER = json.JSONDecoder(parse_constant=reject_constant)
_CHECKING_DECODER = json.JSONDecoder(parse_constant=reject_constant, parse_float=finite_float)
_SCAN = make_scanner(_DECODER)  # type: ignore[arg-type]  # typeshed: takes a make_scanner
_CHECKED_SCAN = make_scanner(_CHECKING_DECODER)  # type: ignore[arg-type]  # it takes a decoder
_BIG_EXPONENT = re.compile(r"[0-9][eE][+-]?[0-9]{3}")
_CHUNK = 1 << 20
_CUT_TOKEN = 16  # longer than any token the scanner gives up on when it is cut short
_DROP = 4 << 20  # characters already passed that are let go of


class _Window:
    """The blob's text from a byte offset on, decoded as far as it is needed."""

    def __init__(self, file: _ReaderFile, size: int) -> None:
        self.file = file
        self.size = size
        self.text = ""
        self.base = 0  # byte offset of text[0]
        self.eof = False
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.mark = (0, 0)  # a character index in text and its byte offset from base
        self.scan = _SCAN

    def more(self) -> None:
        data = self.file.read(max(_CHUNK, len(self.text)))
        if not data:
            self.text += self.decoder.decode(b"", final=True)
            self.eof = True
            return
        seen = len(self.text)
        self.text += self.decoder.decode(data)
        if self.scan is _SCAN and _BIG_EXPONENT.search(self.text, max(seen - 8, 0)):
            self.scan = _CHECKED_SCAN

    def char(self, at: int) -> str:
        while at >= len(self.text) and not self.eof:
            self.more()
        return self.text[at] if at < len(self.text) else ""

    def byte(self, at: int) -> int:
        """The blob offset of character *at* of the window."""
        if self.text.isascii():
            return self.base + at
        mark_char, mark_byte = self.mark
        if at < mark_char:
            mark_char, mark_byte = 0, 0
        mark_byte += len(encode_text(self.text[mark_char:at]))
        self.mark = (at, mark_byte)
        return self.base + mark_byte

    @overload
    def value(self, at: int) -> tuple[Any, int]: ...

    @overload
    def value(self, at: int, *, unless_longer_than: int) -> tuple[Any, int] | None: ...

    def value(self, at: int, *, unless_longer_than: int | None = None) -> tuple[Any, int] | None:
        """The whole JSON value that starts at character *at*, and where it ends; None
        when it goes on past *unless_longer_than* characters (it is not read to its end)."""
        while True:
            try:
                value, end = self.scan(self.text, at)
            except StopIteration as stop:
                # No value starts where it says (within this one, maybe): a real error
                # unless that is the end of the text read so far (a token cut short).
                where = stop.value if isinstance(stop.value, int) else at
                if self.eof or where < len(self.text) - _CUT_TOKEN:
                    raise Unindexable(f"no JSON value at byte {self.byte(where)}") from None
            except ValueError:
                if self.eof:
                    raise Unindexable(f"no JSON value at byte {self.byte(at)}") from None
            else:
                if end < len(self.text) or self.eof:
                    return value, end
                # else a number may go on in the next chunk
            if unless_longer_than is not None and len(self.text) - at > unless_longer_than:
                return None
            self.more()

    def drop(self, at: int) -> int:
        """Let go of the text before *at* once it is long; returns how far positions moved."""
        if at < _DROP:
            return 0
        self.base = self.byte(at)
        self.text = self.text[at:]
        self.mark = (0, 0)
        return at

    def bytes_of(self, start: int, end: int) -> bytes:
        return encode_text(self.text[start:end])


class _FromFile:
    def __init__(self, file: _ReaderFile, size: int, width: int) -> None:
        self.window = _Window(file, size)
        self.layout = TableLayout(width, [])
        self.size = size
        self.file = file
        self.raw = True  # until a span differs from what orjson writes for its value

    def build(self) -> bytes:
        window = self.window
        children: list[tuple[int, int]] = []
        first = window.char(0)
        if first == "[":
            end, table = self.scan_array(0)
            root = ARRAY
        elif first == "{":
            end, table = self.scan_object(0, children)
            root = OBJECT
        else:
            value, end = window.value(0)
            self.check_raw(value, 0, end)
            root, _ = kind_count(value)
            table = 0
        if window.char(end) != "" or window.byte(end) != self.size:
            raise Unindexable("more than one JSON value")
        return self.layout.finish(self.size, root, table, children, self.raw)

    def check_raw(self, value: Any, start: int, end: int, *, brackets: bool = False) -> None:
        """Clear RAW unless characters start..end are what orjson writes for *value*
        (with *brackets*, a list of entries and the text from the "[" or "," before the
        first to the "," or "]" after the last)."""
        if self.raw:
            try:
                written = orjson.dumps(value)
            except TypeError:
                self.raw = False
                return
            text = self.window.bytes_of(start, end)
            if brackets:  # the text between the brackets or separators around it
                opening, closing = (b"{", b"}") if isinstance(value, dict) else (b"[", b"]")
                text = opening + text[1:-1] + closing
            self.raw = written == text

    def scan_array(self, at: int) -> tuple[int, int]:
        """The table of the array at character *at*; returns (its end, its table)."""
        window = self.window
        start = window.byte(at)
        offsets = array(typecode(self.layout.width))
        at += 1
        if window.char(at) == "]":
            return at + 1, self.layout.array_table(start, window.byte(at + 1), offsets)
        batch: list[Any] = []  # entries whose bytes are compared with orjson's, together
        batch_at = at
        while True:
            offsets.append(window.byte(at))
            value, end = window.value(at)
            if self.raw:
                batch.append(value)
            separator = window.char(end)
            if separator != "," or len(batch) >= _BATCH or end + 1 >= _DROP:
                if batch:
                    self.check_raw(batch, batch_at - 1, end + 1, brackets=True)
                batch, batch_at = [], end + 1
            if separator == "]":
                return end + 1, self.layout.array_table(start, window.byte(end + 1), offsets)
            if separator != ",":
                raise Unindexable(f"expected ',' or ']' at byte {window.byte(end)}")
            at = end + 1
            dropped = window.drop(at)
            at -= dropped
            batch_at -= dropped

    def scan_object(self, at: int, children: list[tuple[int, int]] | None) -> tuple[int, int]:
        """The table of the object at *at*; with *children*, big values get their own."""
        window = self.window
        start = window.byte(at)
        records = array(typecode(self.layout.width))
        hashes: list[int] = []
        at += 1
        if window.char(at) == "}":
            return at + 1, self.layout.object_table(start, window.byte(at + 1), records, hashes)
        number = 0
        # Keys and values compared with orjson's bytes together, as one object.
        batch: list[tuple[str, Any]] = []
        batch_at = at
        while True:
            if window.char(at) != '"':
                raise Unindexable(f"expected a key at byte {window.byte(at)}")
            key_at = window.byte(at)
            key_char = at
            key, end = window.value(at)
            if window.char(end) != ":":
                raise Unindexable(f"expected ':' at byte {window.byte(end)}")
            at = end + 1
            value_at = window.byte(at)
            opening = window.char(at)
            small = None
            big = False
            if children is not None and opening in ("[", "{"):
                small = window.value(at, unless_longer_than=json_index.CHILD_MIN)
                big = small is None or window.byte(small[1]) - value_at >= json_index.CHILD_MIN
            if big:
                # One level down: the value's own entries or keys, each parsed alone.
                if batch:
                    self.check_raw(dict(batch), batch_at - 1, key_char, brackets=True)
                batch = []
                self.check_raw(key, key_char, at - 1)
                if opening == "[":
                    end, table = self.scan_array(at)
                else:
                    end, table = self.scan_object(at, None)
                kind = ARRAY if opening == "[" else OBJECT
                count = TABLE.unpack_from(self.layout.parts[-1])[2]
                assert children is not None
                children.append((number, table))
                batch_at = end + 1
            else:
                value, end = small if small is not None else window.value(at)
                if self.raw:
                    batch.append((key, value))
                kind, count = kind_count(value)
            records.extend((key_at, value_at, count << 3 | kind))
            hashes.append(zlib.crc32(key.encode("utf-8", "surrogatepass")))  # name_hash
            number += 1
            separator = window.char(end)
            if separator != "," or len(batch) >= _BATCH or end + 1 >= _DROP:
                if batch:
                    self.check_raw(dict(batch), batch_at - 1, end + 1, brackets=True)
                batch, batch_at = [], end + 1
            if separator == "}":
                end_at = window.byte(end + 1)
                self.no_duplicates(records, hashes)
                return end + 1, self.layout.object_table(start, end_at, records, hashes)
            if separator != ",":
                raise Unindexable(f"expected ',' or '}}' at byte {window.byte(end)}")
            at = end + 1
            dropped = window.drop(at)
            at -= dropped
            batch_at -= dropped

    def no_duplicates(self, records: array[int], hashes: list[int]) -> None:
        """A JSON text may repeat a key, which its parsed value keeps once; such an object
        is not indexed (its keys would not be the value's)."""
        seen: dict[int, int] = {}
        collisions: dict[int, list[int]] = {}
        for number, crc in enumerate(hashes):
            if crc in seen:
                collisions.setdefault(crc, [seen[crc]]).append(number)
            else:
                seen[crc] = number
        for numbers in collisions.values():
            names = [self.key_name(records, number) for number in numbers]
            if len(set(names)) != len(names):
                raise Unindexable("an object repeats a key")

    def key_name(self, records: array[int], number: int) -> str:
        key_at, value_at = records[3 * number], records[3 * number + 1]
        position = self.file.tell()
        self.file.seek(key_at)
        literal = self.file.read(value_at - 1 - key_at)
        self.file.seek(position)
        return key_from_literal(literal)
