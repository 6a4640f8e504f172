"""Reading a JSON blob through its index (the format: core.store.index.json_index): the
spans of an array's entries and of an object's keys, a key found by name in a few reads,
and values read, parsed or shown from their spans only.
"""

from __future__ import annotations

import itertools
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from core.content import cut_utf8, decode_text, encode_text
from core.json_values import JsonError, dumps_compact, parse_json
from core.store.base import BlobReader
from core.store.errors import IndexUnusable
from core.store.index.index_file import KIND_JSON, Header, read_header, unpack_numbers
from core.store.index.json_format import (
    ARRAY,
    CHILD,
    FLAG_RAW,
    KINDS,
    OBJECT,
    PAIR,
    TABLE,
    key_from_literal,
    name_hash,
    typecode,
)


class Table(NamedTuple):  # a NamedTuple: made by the thousand while a page is read
    """A container's table: where it is in the index, and the container's own span."""

    at: int
    kind: int  # ARRAY or OBJECT
    count: int  # type: ignore[assignment]  # the entries; hides tuple.count, never called
    start: int  # the blob offset of its "[" or "{"
    end: int  # just past its "]" or "}"


class Node(NamedTuple):
    """A JSON value in the blob: its kind, size (entries, keys, characters; 0 for other
    kinds and for a top-level scalar) and span; *table* when its parts are indexed."""

    kind: str
    count: int  # type: ignore[assignment]  # entries, keys, characters; hides tuple.count
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
        self.code = typecode(width)
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
        return unpack_numbers(self.index.exact(at, size * count), code)

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
            lambda first, count: self._numbers(pairs_at + PAIR * first, count, "Q"),
            table.count,
            crc << 32,
        )
        while number < table.count:
            candidates = self._numbers(pairs_at + PAIR * number, min(8, table.count - number), "Q")
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
            lambda first, count: self._numbers(self.children_at + CHILD * first, 2 * count, "Q")[
                ::2
            ],
            self.children,
            number,
        )
        if found >= self.children:
            return None
        key, at = self._numbers(self.children_at + CHILD * found, 2, "Q")
        return self.table(at) if key == number else None

    # -- values -------------------------------------------------------------------------

    def read(self, node: Node) -> bytes:
        return self.blob.exact(node.start, node.end - node.start)

    def value(self, node: Node) -> Any:
        """The value itself, parsed from its span."""
        return _value_of(self.blob.exact(node.start, node.end - node.start))

    def compact(self, start: int, end: int, limit: int) -> Shown:
        """The value at start..end as one compact JSON line (dumps_compact), or its first
        *limit* bytes when longer; only those bytes are read when the index is RAW."""
        if self.raw:
            size = end - start
            if size <= limit:
                return Shown(decode_text(self.blob.exact(start, size)), size, False)
            head = cut_utf8(self.blob.exact(start, min(limit + 4, size)), limit)
            return Shown(decode_text(head), size, True)
        line = dumps_compact(_value_of(self.blob.exact(start, end - start)))
        data = encode_text(line)
        if len(data) <= limit:
            return Shown(line, len(data), False)
        return Shown(decode_text(cut_utf8(data, limit)), len(data), True)


# Names closer than this (their values smaller) are read together, in one read.
NAME_GAP = 256


def _value_of(data: bytes) -> Any:
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
