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

This module makes the index from a value (as a blob is stored) and batch by batch as a
big output is written (:class:`JsonWriter`); CHILD_MIN, the size from which a top-level
value gets a table, is read from here by every maker. The layout's constants and tables:
core.store.index.json_format; made from a blob's bytes: core.store.index.json_from_file;
read: core.store.index.json_reader (JsonIndex, Node, re-exported here).
"""

from __future__ import annotations

import itertools
import json
import operator
import zlib
from array import array
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from core.store.index.index_file import pack_numbers, unpack_numbers
from core.store.index.json_format import (
    ARRAY,
    BOOLEAN,
    FLAG_RAW,
    KINDS,
    NULL,
    NUMBER,
    OBJECT,
    STRING,
    TABLE,
    WIDE_FROM,
    TableLayout,
    Unindexable,
    key_from_literal,
    kind_count,
    name_hash,
    sorted_pairs,
    typecode,
    width_for,
)
from core.store.index.json_reader import NAME_GAP, JsonIndex, Node, Shown, Table

__all__ = [
    "CHILD_MIN",
    "FLAG_RAW",
    "KINDS",
    "NAME_GAP",
    "JsonIndex",
    "JsonWriter",
    "Node",
    "RepeatedKey",
    "Shown",
    "Table",
    "json_index_from_value",
    "key_from_literal",
    "kind_count",
    "name_hash",
]

CHILD_MIN = 64 * 1024  # a top-level container this big gets its own table


def _ascii_dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode()


def json_index_from_value(value: Any, data: bytes) -> bytes | None:
    """The index of a JSON blob whose stored bytes *data* hold *value*, made from the value
    (one serialisation of each top-level entry, compared with *data*), so storing a blob
    does not parse it again. None when *data* is not what either of dumps_for_storage's
    serialisers writes for *value* (then the blob's index is made from its file)."""
    for dumps, raw in ((orjson.dumps, True), (_ascii_dumps, False)):
        for width in sorted({width_for(len(data)), 8}):
            try:
                return _FromValue(data, dumps, width).build(value, raw)
            except OverflowError:  # a count too big for 4 bytes: 8-byte records
                continue
            except (Unindexable, TypeError, ValueError, RecursionError):
                break
    return None


class _FromValue:
    def __init__(self, data: bytes | bytearray, dumps: Callable[[Any], bytes], width: int) -> None:
        self.data = data
        self.dumps = dumps
        self.layout = TableLayout(width, [])

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
            raise Unindexable("the value does not fill the blob")
        root, _ = kind_count(value)
        return self.layout.finish(len(data), root, table, children, raw)

    def piece(self, value: Any, at: int) -> int:
        """Check that *value* is written at *at*; returns where it ends."""
        piece = self.dumps(value)
        if self.data[at : at + len(piece)] != piece:
            raise Unindexable("the bytes differ from the value's")
        return at + len(piece)

    def expect(self, at: int, byte: bytes) -> None:
        if self.data[at : at + 1] != byte:
            raise Unindexable(f"expected {byte!r} at byte {at}")

    def array(self, value: list[Any] | tuple[Any, ...], start: int) -> tuple[int, int]:
        # A batch at a time, so that serialising, measuring and comparing run in C.
        self.expect(start, b"[")
        code = typecode(self.layout.width)
        offsets = array(code)
        at = start + 1
        for first in range(0, len(value), _BATCH):
            pieces = list(map(self.dumps, value[first : first + _BATCH]))
            joined = b",".join(pieces)
            if self.data[at : at + len(joined)] != joined:
                raise Unindexable("the bytes differ from the value's")
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
        code = typecode(self.layout.width)
        records = array(code)
        hashes: list[int] = []
        at = start + 1
        names, items = iter(value.keys()), iter(value.values())
        done = 0
        while keys := list(itertools.islice(names, _BATCH)):
            values = list(itertools.islice(items, len(keys)))
            size = len(keys)
            # `"k1":v1,"k2":v2`: the names' JSON without their quotes, from one list, unless
            # a name holds a quote, whose escape can look like the list's `","`.
            names_json = self.dumps(keys)
            if b'\\"' in names_json:
                cores = [self.dumps(key)[1:-1] for key in keys]
            else:
                cores = names_json[2:-2].split(b'","')
            if len(cores) != size:
                raise Unindexable("a name's JSON holds what splits it")
            parts: list[bytes] = [b"", b'":', b"", b',"'] * size
            parts[0::4] = cores
            parts[2::4] = map(self.dumps, values)
            parts[-1] = b'"'  # where the next batch's first name begins
            joined = b"".join(parts)
            if self.data[at : at + len(joined)] != b'"' + joined[:-1]:
                raise Unindexable("the bytes differ from the value's")
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


def _kinds_and_counts(values: Sequence[Any]) -> list[int]:
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
        self.layout: TableLayout | None = TableLayout(4, [])
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
        builder = _FromValue(self.data, orjson.dumps, 4)
        builder.layout = self.layout
        try:
            if isinstance(value, list):
                _, table = builder.array(value, at)
            else:
                _, table = builder.object(value, at, None)
        except (OverflowError, Unindexable):
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
        layout.add(pack_numbers(spans, "I"))
        del spans
        layout.add(names)
        return data, layout.finish(end, OBJECT, table, self.children, True)

    def _sorted_names(self) -> bytes:
        """The name table (see _sorted_pairs), after making sure that no two keys with the
        same CRC share a name."""
        table = sorted_pairs(self.crcs)
        ordered = unpack_numbers(table, "Q")
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
