"""The layout of a JSON blob's index (described in core.store.index.json_index): its
constants, its records, and :class:`TableLayout`, which lays its tables out as they are made.
"""

from __future__ import annotations

import bisect
import itertools
import json
import operator
import struct
import zlib
from array import array
from dataclasses import dataclass
from typing import Any

from core.content import encode_text
from core.store.errors import IndexUnusable
from core.store.index.index_file import HEADER, KIND_JSON, Header, pack_numbers

KINDS = ("null", "boolean", "number", "string", "array", "object")
NULL, BOOLEAN, NUMBER, STRING, ARRAY, OBJECT = range(6)
FLAG_RAW = 1
WIDE_FROM = 1 << 32  # blobs this big get 8-byte records (offsets must fit)

TABLE = struct.Struct("<IIQQQ")  # kind, 0, entries, offset of "[" or "{", just past the end
PAIR = 8  # name table: crc << 32 | key number, as one little-endian 64-bit number
CHILD = 16  # children: key number, table offset


def typecode(width: int) -> str:
    """The array typecode of records *width* bytes wide."""
    return "I" if width == 4 else "Q"


def width_for(size: int) -> int:
    """The width of the records of a blob of *size* bytes (offsets must fit)."""
    return 4 if size < WIDE_FROM else 8


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


def key_from_literal(literal: bytes) -> str:
    """The name a key's JSON string (its bytes in the blob, quotes included) holds."""
    if b"\\" not in literal:
        return literal[1:-1].decode("utf-8")
    name = json.loads(literal)
    if not isinstance(name, str):
        raise IndexUnusable("a key that is not a string")
    return name


class Unindexable(Exception):
    """The bytes are not laid out as the index expects (not compact, duplicate keys)."""


@dataclass
class TableLayout:
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
        code = typecode(self.width)
        n = len(offsets)
        offsets.append(end)
        return self.add(TABLE.pack(ARRAY, 0, n, start, end) + pack_numbers(offsets, code))

    def object_table(self, start: int, end: int, records: array[int], hashes: list[int]) -> int:
        """*records*: key offset, value offset, count << 3 | kind, for each key in turn."""
        data = TABLE.pack(OBJECT, 0, len(hashes), start, end)
        return self.add(data + pack_numbers(records, typecode(self.width)) + sorted_pairs(hashes))

    def finish(
        self, size: int, root: int, table: int, children: list[tuple[int, int]], raw: bool
    ) -> bytes:
        children_at = self.add(pack_numbers([n for pair in children for n in pair], "Q"))
        fields = (root, self.width, table, children_at, len(children), 0)
        # The header and the tables in one join: an index can be tens of MB.
        header = Header(KIND_JSON, FLAG_RAW if raw else 0, size, self.length, fields)
        return b"".join([header.pack(), *self.parts])


_SORT_CHUNK = 1 << 16
_BUCKET_BITS = 4


def sorted_pairs(crcs: array[int] | list[int]) -> bytes:
    """The name table of an object: `crc << 32 | key number` for each key, sorted, packed.

    Sorted a bucket at a time (by the CRC's top bits, a chunk of keys at a time), so that
    no more than a chunk's or a bucket's numbers are Python ints at once: sorting the
    pairs of a million keys as one list takes about 50 MB."""
    if len(crcs) <= _SORT_CHUNK:  # one chunk: sorted at once
        shifted = map(operator.lshift, crcs, itertools.repeat(32))
        return pack_numbers(array("Q", sorted(map(operator.or_, shifted, range(len(crcs))))), "Q")
    buckets = [array("Q") for _ in range(1 << _BUCKET_BITS)]
    shift = 64 - _BUCKET_BITS
    bounds = [b << shift for b in range(1, 1 << _BUCKET_BITS)]
    for first in range(0, len(crcs), _SORT_CHUNK):
        chunk = crcs[first : first + _SORT_CHUNK]
        shifted = map(operator.lshift, chunk, itertools.repeat(32))
        pairs = sorted(map(operator.or_, shifted, range(first, first + len(chunk))))
        cuts = [0, *(bisect.bisect_left(pairs, bound) for bound in bounds), len(pairs)]
        for bucket, low, high in zip(buckets, cuts, cuts[1:], strict=False):
            bucket.extend(pairs[low:high])
    table = array("Q")
    for bucket in buckets:
        table.extend(sorted(bucket))  # runs already sorted: timsort merges them
        del bucket[:]
    return pack_numbers(table, "Q")
