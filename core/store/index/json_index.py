"""The index of a JSON blob: the byte spans of its top-level entries or keys, and of the
entries or keys of each big top-level value (one level down, for `key:items | slice:`).

Spans point into the stored bytes, which the store writes compact (`dumps_for_storage`):
between tokens there is no whitespace, so an array's entry *i* runs from its offset to
one byte before entry *i+1*'s (the `,`), and an object's value from its own offset to one
byte before the next key's. A container's *table* holds fixed-width records, so finding
entry or key *i* reads one record:

- array table: the offset of every entry, and one more, just past the closing `]`;
- object table: per key, its offset (the `"` of its name), its value's offset, and its
  value's kind and size (`count << 3 | kind`: entries, keys or characters), then a
  *name table*: each key's CRC-32 and number, sorted, so `key:NAME` finds its key in a
  few reads (an interpolation search) instead of reading every name.

Records are 4 bytes wide for blobs under 4 GB (8 above, and when a count does not fit in
29 bits: a value of 512 M characters or entries). A `children` list
names the tables of the top-level values that have one: containers of at least
CHILD_MIN bytes. When every span's bytes are exactly what `dumps_compact` gives for its
value (the store wrote the blob with orjson, which is what it does unless a value needs
the standard library), the flag RAW is set, and an entry can be shown, or its size told,
from its bytes alone.
"""

from __future__ import annotations

import codecs
import itertools
import json
import operator
import re
import struct
import sys
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, overload

import orjson

from core.content import cut_utf8, decode_text, encode_text
from core.json_values import JsonError, dumps_compact, parse_json
from core.store.base import BlobReader
from core.store.index.index_file import (
    HEADER,
    KIND_JSON,
    Header,
    IndexUnusable,
    read_header,
)

KINDS = ("null", "boolean", "number", "string", "array", "object")
NULL, BOOLEAN, NUMBER, STRING, ARRAY, OBJECT = range(6)
FLAG_RAW = 1
CHILD_MIN = 64 * 1024  # a top-level container this big gets its own table
WIDE_FROM = 1 << 32  # blobs this big get 8-byte records (offsets must fit)

TABLE = struct.Struct("<IIQQQ")  # kind, 0, entries, offset of "[" or "{", just past the end
_PAIR = 8  # name table: crc << 32 | key number, as one little-endian 64-bit number
_CHILD = 16  # children: key number, table offset


def _typecode(width: int) -> str:
    return "I" if width == 4 else "Q"


def _pack(numbers: Any, typecode: str) -> bytes:
    table = numbers if isinstance(numbers, array) else array(typecode, numbers)
    if sys.byteorder == "big":
        table = array(typecode, table)
        table.byteswap()
    return table.tobytes()


def _unpack(data: bytes, typecode: str) -> array[int]:
    table = array(typecode)
    table.frombytes(data)
    if sys.byteorder == "big":
        table.byteswap()
    return table


def kind_count(value: Any) -> tuple[int, int]:
    """The kind code of a JSON value and its size: entries, keys or characters."""
    if value is None:
        return NULL, 0
    if isinstance(value, bool):
        return BOOLEAN, 0
    if isinstance(value, int | float):
        return NUMBER, 0
    if isinstance(value, str):
        return STRING, len(value)
    if isinstance(value, list | tuple):
        return ARRAY, len(value)
    if isinstance(value, dict):
        return OBJECT, len(value)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def name_hash(name: str) -> int:
    """The hash the name table sorts by: CRC-32 of the name in UTF-8 (surrogates kept)."""
    return zlib.crc32(encode_text(name))


# -- building ---------------------------------------------------------------------------------


class _Unindexable(Exception):
    """The bytes are not laid out as the index expects (not compact, duplicate keys)."""


@dataclass
class _Layout:
    """The tables of one blob while they are made, with their offsets in the index."""

    width: int
    parts: list[bytes]
    length: int = HEADER.size

    def add(self, data: bytes) -> int:
        at = self.length
        self.parts.append(data)
        self.length += len(data)
        return at

    def array_table(self, start: int, end: int, offsets: array[int]) -> int:
        code = _typecode(self.width)
        n = len(offsets)
        offsets.append(end)
        return self.add(TABLE.pack(ARRAY, 0, n, start, end) + _pack(offsets, code))

    def object_table(self, start: int, end: int, records: array[int], hashes: list[int]) -> int:
        """*records*: key offset, value offset, count << 3 | kind, for each key in turn."""
        data = TABLE.pack(OBJECT, 0, len(hashes), start, end)
        return self.add(data + _pack(records, _typecode(self.width)) + _sorted_pairs(hashes))

    def finish(
        self, size: int, root: int, table: int, children: list[tuple[int, int]], raw: bool
    ) -> bytes:
        children_at = self.add(_pack([n for pair in children for n in pair], "Q"))
        fields = (root, self.width, table, children_at, len(children), 0)
        # The header and the tables in one join: an index can be tens of MB.
        header = Header(KIND_JSON, FLAG_RAW if raw else 0, size, self.length, fields)
        return b"".join([header.pack(), *self.parts])


def _width(size: int) -> int:
    return 4 if size < WIDE_FROM else 8


def _ascii_dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode()


def json_index_from_value(value: Any, data: bytes) -> bytes | None:
    """The index of a JSON blob whose stored bytes *data* hold *value*, made from the value
    (one serialisation of each top-level entry, compared with *data*), so storing a blob
    does not parse it again. None when *data* is not what either of dumps_for_storage's
    serialisers writes for *value* (then the blob's index is made from its file)."""
    for dumps, raw in ((orjson.dumps, True), (_ascii_dumps, False)):
        for width in sorted({_width(len(data)), 8}):
            try:
                return _FromValue(data, dumps, width).build(value, raw)
            except OverflowError:  # a count too big for 4 bytes: 8-byte records
                continue
            except (_Unindexable, TypeError, ValueError, RecursionError):
                break
    return None


class _FromValue:
    def __init__(self, data: bytes, dumps: Callable[[Any], bytes], width: int) -> None:
        self.data = data
        self.dumps = dumps
        self.layout = _Layout(width, [])

    def build(self, value: Any, raw: bool) -> bytes:
        data = self.data
        children: list[tuple[int, int]] = []
        if isinstance(value, list | tuple):
            end, table = self.array(value, 0)
        elif isinstance(value, dict):
            end, table = self.object(value, 0, children)
        else:
            end, table = self.piece(value, 0), 0
        if end != len(data):
            raise _Unindexable("the value does not fill the blob")
        root, _ = kind_count(value)
        return self.layout.finish(len(data), root, table, children, raw)

    def piece(self, value: Any, at: int) -> int:
        """Check that *value* is written at *at*; returns where it ends."""
        piece = self.dumps(value)
        if self.data[at : at + len(piece)] != piece:
            raise _Unindexable("the bytes differ from the value's")
        return at + len(piece)

    def expect(self, at: int, byte: bytes) -> None:
        if self.data[at : at + 1] != byte:
            raise _Unindexable(f"expected {byte!r} at byte {at}")

    def array(self, value: list[Any] | tuple[Any, ...], start: int) -> tuple[int, int]:
        # A batch at a time, so that serialising, measuring and comparing run in C.
        self.expect(start, b"[")
        code = _typecode(self.layout.width)
        offsets = array(code)
        at = start + 1
        for first in range(0, len(value), _BATCH):
            pieces = list(map(self.dumps, value[first : first + _BATCH]))
            joined = b",".join(pieces)
            if self.data[at : at + len(joined)] != joined:
                raise _Unindexable("the bytes differ from the value's")
            steps = map(_after_comma, map(len, pieces[:-1]))  # each entry and its comma
            offsets.extend(itertools.accumulate(steps, initial=at))
            at += len(joined)
            self.expect(at, b"," if first + _BATCH < len(value) else b"]")
            at += 1
        if not value:
            self.expect(at, b"]")
            at += 1
        return at, self.layout.array_table(start, at, offsets)

    def object(
        self, value: dict[str, Any], start: int, children: list[tuple[int, int]] | None
    ) -> tuple[int, int]:
        """The object's table; with *children*, big values get tables of their own."""
        self.expect(start, b"{")
        code = _typecode(self.layout.width)
        records = array(code)
        hashes: list[int] = []
        at = start + 1
        names, items = iter(value.keys()), iter(value.values())
        done = 0
        while keys := list(itertools.islice(names, _BATCH)):
            values = list(itertools.islice(items, len(keys)))
            size = len(keys)
            # `"k1":v1,"k2":v2`: the names' JSON without their quotes, from one list.
            names_json = self.dumps(keys)
            cores = names_json[2:-2].split(b'","')
            if len(cores) != size:
                raise _Unindexable("a name's JSON holds what splits it")
            parts: list[bytes] = [b"", b'":', b"", b',"'] * size
            parts[0::4] = cores
            parts[2::4] = map(self.dumps, values)
            parts[-1] = b'"'  # where the next batch's first name begins
            joined = b"".join(parts)
            if self.data[at : at + len(joined)] != b'"' + joined[:-1]:
                raise _Unindexable("the bytes differ from the value's")
            # Where each part begins in the blob (the batch starts with a name's quote).
            starts = list(itertools.accumulate(map(len, parts), initial=at + 1))
            batch_records = array(code, bytes(3 * size * self.layout.width))
            batch_records[0::3] = array(code, map(_before, starts[0 : 4 * size : 4]))  # quotes
            batch_records[1::3] = array(code, starts[2::4])
            batch_records[2::3] = array(code, _kinds_and_counts(values))
            records.extend(batch_records)
            # A name's JSON without a backslash is its UTF-8 (orjson escapes no other way).
            plain = self.dumps is orjson.dumps and b"\\" not in names_json
            hashes.extend(map(zlib.crc32, cores if plain else map(_UTF8, keys)))
            if children is not None and max(map(len, parts[2::4])) >= CHILD_MIN:
                for number in range(size):
                    item, piece = values[number], parts[4 * number + 2]
                    if isinstance(item, list | tuple | dict) and len(piece) >= CHILD_MIN:
                        value_at = starts[4 * number + 2]
                        if isinstance(item, list | tuple):
                            _, table = self.array(item, value_at)
                        else:
                            _, table = self.object(item, value_at, None)
                        children.append((done + number, table))
            done += size
            at += len(joined)
            self.expect(at, b"," if done < len(value) else b"}")
            at += 1
        if not value:
            self.expect(at, b"}")
            at += 1
        return at, self.layout.object_table(start, at, records, hashes)


_BATCH = 1024
_after_comma = (1).__add__
_before = (-1).__add__
_plus_three = (3).__add__
_plus_four = (4).__add__


_UTF8 = operator.methodcaller("encode", "utf-8", "surrogatepass")  # as encode_text, in C
_KIND_OF_TYPE = {
    type(None): NULL,
    bool: BOOLEAN,
    int: NUMBER,
    float: NUMBER,
    str: STRING,
    list: ARRAY,
    tuple: ARRAY,
    dict: OBJECT,
}


def _kinds_and_counts(values: tuple[Any, ...]) -> list[int]:
    """`count << 3 | kind` of each value (see kind_count), computed in C for the types
    the store writes; length_hint is len() for a string or container and 0 for the rest."""
    kinds = list(map(_KIND_OF_TYPE.get, map(type, values)))
    if None in kinds:
        return [count << 3 | kind for kind, count in map(kind_count, values)]
    counts = map(operator.lshift, map(operator.length_hint, values), itertools.repeat(3))
    return list(map(operator.or_, counts, kinds))


# -- writing: the stored bytes and their index in one pass (core.json_stream) ----------------


class RepeatedKey(Exception):
    """An object names a key twice: its value keeps the first place and the last value,
    which a writer that has already written the first cannot give."""


class JsonWriter:
    """The stored bytes of a big JSON array or object, written a batch of entries at a time
    as `dumps_for_storage` writes the whole value (orjson, no spaces), and their index,
    made from the same batches: each entry is serialised once, its span recorded as it is
    appended, so storing the blob needs no second pass.

    *capacity* is the expected size of the bytes (the output's length in characters, for
    compact ASCII JSON exactly it): the buffer is made that big at once, because growing
    it a batch at a time between the batches' own allocations fragments the heap up to
    twice its size. Spans are kept in 4-byte records; a blob that outgrows them (4 GB, a
    count beyond 29 bits) is still written, without an index (readers then make it from
    the blob)."""

    def __init__(self, kind: str, capacity: int = 0) -> None:
        self.is_array = kind == "array"
        self.data = bytearray(max(capacity, 2))
        self.size = 0
        self.write(b"[" if self.is_array else b"{")
        self.layout: _Layout | None = _Layout(4, [])
        self.spans = array("I")  # an array's offsets, or an object's records (3 a key)
        self.crcs = array("I")  # an object's name hashes, in key order
        self.children: list[tuple[int, int]] = []
        self.count = 0

    def write(self, chunk: bytes) -> None:
        end = self.size + len(chunk)
        if end > len(self.data):  # more than expected: grow by an eighth at least
            self.data += bytes(max(end - len(self.data), len(self.data) >> 3))
        self.data[self.size : end] = chunk
        self.size = end

    def add_entries(self, entries: list[Any]) -> None:
        """Append an array's next entries."""
        if not entries:
            return
        pieces = list(map(orjson.dumps, entries))
        at = self.size
        pieces.append(b"")  # a comma after the last one too
        self.write(b",".join(pieces))
        self.count += len(pieces) - 1
        if self.layout is not None:
            steps = map(_after_comma, map(len, pieces[:-2]))  # each entry and its comma
            self._record(list(itertools.accumulate(steps, initial=at)))

    def add_items(self, keys: list[str], values: list[Any]) -> None:
        """Append an object's next keys and their values (as many of each)."""
        if not keys:
            return
        dumps = orjson.dumps
        size = len(keys)
        # `"k1":v1,"k2":v2,`: the names' JSON without their quotes, from one list. Without
        # a backslash no name holds a quote, so `","` only comes between names, and each
        # name's JSON is its UTF-8.
        names = dumps(keys)
        plain = b"\\" not in names
        if plain:
            cores = names[2:-2].split(b'","')
            crcs = map(zlib.crc32, cores)  # name_hash, in C
        else:
            cores = [dumps(key)[1:-1] for key in keys]
            crcs = map(zlib.crc32, map(_UTF8, keys))
        parts: list[bytes] = [b'"', b"", b'":', b""] * size
        parts[1::4] = cores
        parts[3::4] = pieces = list(map(dumps, values))
        parts[4::4] = [b',"'] * (size - 1)
        parts.append(b",")
        at = self.size
        self.write(b"".join(parts))
        self.crcs.extend(crcs)
        done = self.count
        self.count += size
        # Key offsets are kept even without an index: a repeated name is found by them.
        # An entry is `"name":value,`, 4 bytes more than its name's and value's JSON.
        name_sizes = list(map(len, cores))
        sizes = map(operator.add, name_sizes, map(len, pieces))
        quotes = list(itertools.accumulate(map(_plus_four, sizes), initial=at))
        flat = [0] * (3 * size)
        flat[0::3] = quotes[:-1]
        flat[1::3] = values_at = list(map(operator.add, quotes, map(_plus_three, name_sizes)))
        flat[2::3] = _kinds_and_counts(values)
        self._record(flat)
        if self.layout is not None and max(map(len, pieces)) >= CHILD_MIN:
            for number in range(size):
                item, piece = values[number], pieces[number]
                if isinstance(item, list | dict) and len(piece) >= CHILD_MIN:
                    self._child(done + number, item, values_at[number])

    def _record(self, numbers: list[int]) -> None:
        kept = len(self.spans)
        try:
            self.spans.extend(numbers)
        except OverflowError:  # an offset or count beyond 4-byte records
            del self.spans[kept:]  # what extend took before it failed
            self._drop_index()
            self.spans.extend(numbers)

    def _drop_index(self) -> None:
        self.layout = None
        if self.spans.typecode != "Q":
            self.spans = array("Q", self.spans)

    def _child(self, number: int, value: list[Any] | dict[str, Any], at: int) -> None:
        """The table of a big top-level value (one level down), checked against its bytes."""
        if self.layout is None:
            return
        builder = _FromValue(self.data, orjson.dumps, 4)  # type: ignore[arg-type]
        builder.layout = self.layout
        try:
            if isinstance(value, list):
                _, table = builder.array(value, at)
            else:
                _, table = builder.object(value, at, None)
        except (OverflowError, _Unindexable):
            self._drop_index()
            return
        self.children.append((number, table))

    def finish(self) -> tuple[bytearray, bytes | None]:
        """The stored bytes, closed, and their index (None when it could not be kept).
        Raises RepeatedKey when an object names a key twice."""
        closing = b"]" if self.is_array else b"}"
        if self.count:
            self.size -= 1  # the comma after the last entry
        self.write(closing)
        data = self.data
        del data[self.size :]
        names = None if self.is_array else self._sorted_names()
        self.crcs = array("I")
        layout, spans = self.layout, self.spans
        self.spans = array("I")
        if layout is None or len(data) >= WIDE_FROM:
            return data, None
        end = len(data)
        if self.is_array:
            table = layout.array_table(0, end, spans)
            del spans
            return data, layout.finish(end, ARRAY, table, [], True)
        assert names is not None
        table = layout.add(TABLE.pack(OBJECT, 0, self.count, 0, end))
        layout.add(_pack(spans, "I"))
        del spans
        layout.add(names)
        return data, layout.finish(end, OBJECT, table, self.children, True)

    def _sorted_names(self) -> bytes:
        """The name table (see _sorted_pairs), after making sure that no two keys with the
        same CRC share a name."""
        table = _sorted_pairs(self.crcs)
        ordered = _unpack(table, "Q")
        crcs = array("I", map(operator.rshift, ordered, itertools.repeat(32)))
        # Keys that share a CRC (about n * n / 2**33 pairs of them) are read by name.
        same = map(operator.eq, crcs, itertools.islice(crcs, 1, None))
        runs: dict[int, dict[int, str]] = {}  # crc: {key number: name}
        for at in itertools.compress(itertools.count(), same):
            names = runs.setdefault(crcs[at], {})
            for pair in (ordered[at], ordered[at + 1]):
                number = pair & 0xFFFFFFFF
                if number not in names:
                    names[number] = self._name(number)
        if any(len(set(names.values())) < len(names) for names in runs.values()):
            raise RepeatedKey("an object repeats a key")
        return table

    def _name(self, number: int) -> str:
        key_at, value_at = self.spans[3 * number], self.spans[3 * number + 1]
        return key_from_literal(bytes(self.data[key_at : value_at - 1]))


_SORT_CHUNK = 1 << 16
_BUCKET_BITS = 4


def _sorted_pairs(crcs: array[int] | list[int]) -> bytes:
    """The name table of an object: `crc << 32 | key number` for each key, sorted, packed.

    Sorted a bucket at a time (by the CRC's top bits, a chunk of keys at a time), so that
    no more than a chunk's or a bucket's numbers are Python ints at once: sorting the
    pairs of a million keys as one list takes about 50 MB."""
    if len(crcs) <= _SORT_CHUNK:  # one chunk: sorted at once
        shifted = map(operator.lshift, crcs, itertools.repeat(32))
        return _pack(array("Q", sorted(map(operator.or_, shifted, range(len(crcs))))), "Q")
    buckets = [array("Q") for _ in range(1 << _BUCKET_BITS)]
    shift = 64 - _BUCKET_BITS
    bounds = [b << shift for b in range(1, 1 << _BUCKET_BITS)]
    for first in range(0, len(crcs), _SORT_CHUNK):
        chunk = crcs[first : first + _SORT_CHUNK]
        shifted = map(operator.lshift, chunk, itertools.repeat(32))
        pairs = sorted(map(operator.or_, shifted, range(first, first + len(chunk))))
        cuts = [0, *(bisect_left(pairs, bound) for bound in bounds), len(pairs)]
        for bucket, low, high in zip(buckets, cuts, cuts[1:], strict=False):
            bucket.extend(pairs[low:high])
    table = array("Q")
    for bucket in buckets:
        table.extend(sorted(bucket))  # runs already sorted: timsort merges them
        del bucket[:]
    return _pack(table, "Q")


def json_index_from_file(blob: BlobReader) -> bytes | None:
    """The index of the JSON blob that *blob* reads, for blobs stored before indexes existed
    (or whose index was deleted): one pass over it, a few MB at a time, with the standard
    library's scanner, so memory stays bounded by the biggest entry, not the blob. None
    when it is not compact JSON as the store writes it (or not JSON at all)."""
    file = _ReaderFile(blob)
    for width in sorted({_width(blob.size), 8}):
        file.seek(0)
        try:
            return _FromFile(file, blob.size, width).build()
        except OverflowError:  # a count too big for 4 bytes: 8-byte records
            continue
        except (_Unindexable, UnicodeDecodeError, RecursionError):
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


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} is out of range")
    return number


# Numbers are read in C; only a text that may hold an out-of-range one (an exponent of three
# digits or more) is read with the check, number by number, that parse_json makes.
_SCAN = json.scanner.make_scanner(  # type: ignore[attr-defined]
    json.JSONDecoder(parse_constant=_reject_constant)
)
_CHECKED_SCAN = json.scanner.make_scanner(  # type: ignore[attr-defined]
    json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
)
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
                    raise _Unindexable(f"no JSON value at byte {self.byte(where)}") from None
            except ValueError:
                if self.eof:
                    raise _Unindexable(f"no JSON value at byte {self.byte(at)}") from None
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
        self.layout = _Layout(width, [])
        self.size = size
        self.file = file
        self.raw = True  # until a span differs from what orjson writes for its value

    def build(self) -> bytes:
        window = self.window
        children: list[tuple[int, int]] = []
        first = window.char(0)
        if first == "[":
            end, table = self.array(0)
            root = ARRAY
        elif first == "{":
            end, table = self.object(0, children)
            root = OBJECT
        else:
            value, end = window.value(0)
            self.check_raw(value, 0, end)
            root, _ = kind_count(value)
            table = 0
        if window.char(end) != "" or window.byte(end) != self.size:
            raise _Unindexable("more than one JSON value")
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

    def array(self, at: int) -> tuple[int, int]:
        """The table of the array at character *at*; returns (its end, its table)."""
        window = self.window
        start = window.byte(at)
        offsets = array(_typecode(self.layout.width))
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
                raise _Unindexable(f"expected ',' or ']' at byte {window.byte(end)}")
            at = end + 1
            dropped = window.drop(at)
            at -= dropped
            batch_at -= dropped

    def object(self, at: int, children: list[tuple[int, int]] | None) -> tuple[int, int]:
        """The table of the object at *at*; with *children*, big values get their own."""
        window = self.window
        start = window.byte(at)
        records = array(_typecode(self.layout.width))
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
                raise _Unindexable(f"expected a key at byte {window.byte(at)}")
            key_at = window.byte(at)
            key_char = at
            key, end = window.value(at)
            if window.char(end) != ":":
                raise _Unindexable(f"expected ':' at byte {window.byte(end)}")
            at = end + 1
            value_at = window.byte(at)
            opening = window.char(at)
            small = None
            big = False
            if children is not None and opening in ("[", "{"):
                small = window.value(at, unless_longer_than=CHILD_MIN)
                big = small is None or window.byte(small[1]) - value_at >= CHILD_MIN
            if big:
                # One level down: the value's own entries or keys, each parsed alone.
                if batch:
                    self.check_raw(dict(batch), batch_at - 1, key_char, brackets=True)
                batch = []
                self.check_raw(key, key_char, at - 1)
                if opening == "[":
                    end, table = self.array(at)
                else:
                    end, table = self.object(at, None)
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
                raise _Unindexable(f"expected ',' or '}}' at byte {window.byte(end)}")
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
                raise _Unindexable("an object repeats a key")

    def key_name(self, records: array[int], number: int) -> str:
        key_at, value_at = records[3 * number], records[3 * number + 1]
        position = self.file.tell()
        self.file.seek(key_at)
        literal = self.file.read(value_at - 1 - key_at)
        self.file.seek(position)
        return key_from_literal(literal)


def key_from_literal(literal: bytes) -> str:
    """The name a key's JSON string (its bytes in the blob, quotes included) holds."""
    if b"\\" not in literal:
        return literal[1:-1].decode("utf-8")
    name = json.loads(literal)
    if not isinstance(name, str):
        raise IndexUnusable("a key that is not a string")
    return name


# -- reading ----------------------------------------------------------------------------------


class Table(NamedTuple):  # a NamedTuple: made by the thousand while a page is read
    """A container's table: where it is in the index, and the container's own span."""

    at: int
    kind: int  # ARRAY or OBJECT
    count: int
    start: int  # the blob offset of its "[" or "{"
    end: int  # just past its "]" or "}"


class Node(NamedTuple):
    """A JSON value in the blob: its kind, size (entries, keys, characters; 0 for other
    kinds and for a top-level scalar) and span; *table* when its parts are indexed."""

    kind: str
    count: int
    start: int
    end: int
    table: Table | None = None

    @property
    def shape(self) -> str:
        """As core.json_values.shape names it."""
        if self.kind == "string":
            return f"string({self.count})"
        if self.kind == "array":
            return f"array[{self.count}]"
        if self.kind == "object":
            return f"object{{{self.count}}}"
        return self.kind


@dataclass(frozen=True, slots=True)
class Shown:
    """A value as one compact line, or its start when it is longer than asked for."""

    text: str
    size: int  # bytes of the whole line
    cut: bool


class JsonIndex:
    """Spans of a JSON blob read through its index; see the module docstring."""

    def __init__(self, blob: BlobReader, index: BlobReader, header: Header) -> None:
        self.blob = blob
        self.index = index
        root, width, table_at, children_at, children, _ = header.fields
        if width not in (4, 8) or root >= len(KINDS):
            raise IndexUnusable("malformed JSON index")
        self.size = header.blob_size
        self.raw = bool(header.flags & FLAG_RAW)
        self.width = width
        self.code = _typecode(width)
        self.root_kind = KINDS[root]
        self.root_table = self.table(table_at) if table_at else None
        self.children_at = children_at
        self.children = children

    @classmethod
    def open(cls, blob: BlobReader, index: BlobReader) -> JsonIndex:
        return cls(blob, index, read_header(index, blob_size=blob.size, kinds=(KIND_JSON,)))

    def close(self) -> None:
        self.blob.close()
        self.index.close()

    def __enter__(self) -> JsonIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tables -------------------------------------------------------------------------

    def table(self, at: int) -> Table:
        kind, _, count, start, end = TABLE.unpack(self.index.exact(at, TABLE.size))
        if kind not in (ARRAY, OBJECT) or not start < end <= self.size:
            raise IndexUnusable("malformed JSON index table")
        return Table(at, kind, count, start, end)

    def root(self) -> Node:
        table = self.root_table
        if table is None:
            return Node(self.root_kind, 0, 0, self.size)
        return Node(self.root_kind, table.count, table.start, table.end, table)

    def _numbers(self, at: int, count: int, code: str) -> array[int]:
        size = 4 if code == "I" else 8
        return _unpack(self.index.exact(at, size * count), code)

    def offsets(self, table: Table, first: int, count: int) -> array[int]:
        """Offsets of entries first.. of an array table (entry `count` is its end)."""
        return self._numbers(table.at + TABLE.size + self.width * first, count, self.code)

    def records(self, table: Table, first: int, count: int) -> list[tuple[int, int, int, int]]:
        """(key offset, value offset, kind, count) of keys first..first+count-1."""
        flat = self._numbers(table.at + TABLE.size + 3 * self.width * first, 3 * count, self.code)
        return [
            (flat[i], flat[i + 1], flat[i + 2] & 7, flat[i + 2] >> 3)
            for i in range(0, len(flat), 3)
        ]

    def spans(self, table: Table, start: int, stop: int) -> Iterator[tuple[int, int]]:
        """(start, end) of entries start..stop-1 of an array, reading offsets in batches."""
        batch = 64
        while start < stop:
            count = min(batch, stop - start)
            offsets = self.offsets(table, start, count + 1)
            for i in range(count):
                yield offsets[i], offsets[i + 1] - 1
            start += count

    def key_spans(
        self, table: Table, start: int, stop: int, *, tables: bool = False
    ) -> Iterator[tuple[Node, int]]:
        """(value node, key offset) of keys start..stop-1 of an object, in batches; with
        *tables*, a value's node carries its table when the index has one."""
        batch = 64
        while start < stop:
            count = min(batch, stop - start)
            more = 1 if start + count < table.count else 0
            records = self.records(table, start, count + more)
            for i in range(count):
                key_at, value_at, kind, size = records[i]
                end = records[i + 1][0] - 1 if i + 1 < len(records) else table.end - 1
                child = self.child_table(table, start + i) if tables else None
                yield Node(KINDS[kind], size, value_at, end, child), key_at
            start += count

    def key_names(
        self, table: Table, start: int, stop: int, *, tables: bool = False
    ) -> Iterator[tuple[str, Node]]:
        """(name, value node) of keys start..stop-1, reading the names' bytes: a few keys
        at a time, with one read for names only a small value apart."""
        spans = self.key_spans(table, start, stop, tables=tables)
        batch = 8
        while keys := list(itertools.islice(spans, batch)):
            batch = min(batch * 2, 64)
            first = 0
            for last in range(len(keys)):
                following = keys[last + 1][1] if last + 1 < len(keys) else None
                end = keys[last][0].start - 1  # just past this name's closing quote
                if following is not None and following - end <= NAME_GAP:
                    continue
                begin = keys[first][1]
                data = self.blob.exact(begin, end - begin)
                for node, key_at in keys[first : last + 1]:
                    literal = data[key_at - begin : node.start - 1 - begin]
                    yield key_from_literal(literal), node
                first = last + 1

    def find(self, table: Table, name: str) -> Node | None:
        """The value of key *name* in an object table, or None: an interpolation search in
        the sorted name table, then the candidates' names compared (CRCs may collide)."""
        crc = name_hash(name)
        pairs_at = table.at + TABLE.size + 3 * self.width * table.count
        number = _lower_bound(
            lambda first, count: self._numbers(pairs_at + _PAIR * first, count, "Q"),
            table.count,
            crc << 32,
        )
        while number < table.count:
            candidates = self._numbers(pairs_at + _PAIR * number, min(8, table.count - number), "Q")
            for pair in candidates:
                if pair >> 32 != crc:
                    return None
                key = pair & 0xFFFFFFFF
                for found, node in self.key_names(table, key, key + 1, tables=True):
                    if found == name:
                        return node
            number += len(candidates)
        return None

    def child_table(self, table: Table, number: int) -> Table | None:
        """The table of key *number*'s value, when the index has one (top-level only)."""
        if table != self.root_table or not self.children:
            return None
        found = _lower_bound(
            lambda first, count: self._numbers(self.children_at + _CHILD * first, 2 * count, "Q")[
                ::2
            ],
            self.children,
            number,
        )
        if found >= self.children:
            return None
        key, at = self._numbers(self.children_at + _CHILD * found, 2, "Q")
        return self.table(at) if key == number else None

    # -- values -------------------------------------------------------------------------

    def read(self, node: Node) -> bytes:
        return self.blob.exact(node.start, node.end - node.start)

    def value(self, node: Node) -> Any:
        """The value itself, parsed from its span."""
        return _parse(self.blob.exact(node.start, node.end - node.start))

    def compact(self, start: int, end: int, limit: int) -> Shown:
        """The value at start..end as one compact JSON line (dumps_compact), or its first
        *limit* bytes when longer; only those bytes are read when the index is RAW."""
        if self.raw:
            size = end - start
            if size <= limit:
                return Shown(decode_text(self.blob.exact(start, size)), size, False)
            head = cut_utf8(self.blob.exact(start, min(limit + 4, size)), limit)
            return Shown(decode_text(head), size, True)
        line = dumps_compact(_parse(self.blob.exact(start, end - start)))
        data = encode_text(line)
        if len(data) <= limit:
            return Shown(line, len(data), False)
        return Shown(decode_text(cut_utf8(data, limit)), len(data), True)


# Names closer than this (their values smaller) are read together, in one read.
NAME_GAP = 256


def _parse(data: bytes) -> Any:
    try:
        return parse_json(data)
    except JsonError:
        raise IndexUnusable("a span of the blob is not JSON") from None


def _lower_bound(read: Callable[[int, int], Any], count: int, target: int) -> int:
    """The first position in a sorted table of *count* numbers holding one >= *target*.

    *read(first, n)* returns numbers first..first+n-1. Guesses by interpolation (the
    numbers are hashes, spread evenly), reading a window around each guess, and halves
    the range instead when guessing stops paying; a few reads for any table size.
    """
    window = 64
    low, high = 0, count  # the answer is in low..high
    low_value, high_value = 0, 1 << 64
    guesses = 0
    while high - low > window:
        if guesses < 4 and high_value > low_value:
            guess = low + (target - low_value) * (high - low) // (high_value - low_value)
        else:
            guess = (low + high) // 2
        guesses += 1
        first = min(max(guess - window // 2, low), high - window)
        numbers = read(first, window)
        if numbers[-1] < target:
            low, low_value = first + window, numbers[-1]
        elif numbers[0] >= target:
            high, high_value = first, numbers[0]
        else:
            return first + bisect_left(numbers, target)
    if high == low:
        return low
    return low + bisect_left(read(low, high - low), target)
