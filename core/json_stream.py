"""Promotion of a big JSON array or object without building its value (docs/promotion.md).

:func:`stream_json` reads a tool output's JSON one top-level entry at a time (ijson's C
backend over the output's UTF-8, encoded a chunk at a time) and hands the entries, a batch
at a time, to core.store.index.json_index.JsonWriter, which writes each with orjson into
one buffer — byte for byte what ``dumps_for_storage`` writes for the whole value — and
records its span for the blob's index as it goes; it keeps what the summary needs (the
count, the first entries, the first keys' shapes). No more than a batch of entries is
alive at a time, so memory stays near the stored bytes, and the summary, the stored bytes
and the index come from one pass.

Chosen by measurement (bench/promotion_bench.py --candidates: 100 MB of small records,
best CPU time of 3 fresh processes against orjson.loads + write in the same run, peak RSS
above the start as a multiple of the output; a shared 2-core machine):

                                              array            object
    orjson.loads + write (the baseline)       3.0 s, 10.3x     3.2 s, 10.4x
    orjson.loads + per-entry dumps            1.17x, 10.3x     1.05x, 10.4x
    pysimdjson DOM + per-entry dumps          0.49x,  5.6x     0.48x,  5.5x
    ijson (yajl2_c) parse alone               0.56x,  0.0x     0.47x,  0.0x
    this module: promote + store + summary,   0.78x,  1.2x     1.12x,  1.6x
      index made and kept

pysimdjson is the fastest parser but holds the whole document (5.5x the output); only
ijson's stream keeps within the goal of twice the output. An object costs more than an
array: its name table (each key's CRC, sorted: ~0.6 s for 1.2M keys) and key records.

Where yajl and orjson disagree, the exact path (parse_json) decides instead: integers
beyond 64 bits (yajl raises "integer overflow", orjson would read a float), escapes of
lone surrogates (yajl reads them as "?"), "\\v" and "\\f" between tokens (yajl takes them as
whitespace), a key repeated at the top level (the value keeps the last), and values
orjson cannot write (deeper than it nests). Any other error from yajl means the text is
not JSON, which orjson and the standard library say too.
"""

from __future__ import annotations

import itertools
import operator
import re
from dataclasses import dataclass
from typing import Any

from core.content import Structured
from core.json_values import parse_json, shape

try:  # the C backend: the pure-Python ones are far slower than orjson
    import ijson

    _IJSON: Any = ijson.get_backend("yajl2_c")
    _JSON_ERROR: type[Exception] = ijson.JSONError
except ImportError:  # pragma: no cover - the wheel ships it on every platform we run
    _IJSON = None
    _JSON_ERROR = Exception

# Outputs smaller than this are parsed whole: the value fits in memory anyway.
STREAM_FROM_CHARS = 1 << 20
BATCH = 1024  # entries serialised and indexed together (core.store.index.json_index)
HEAD_KEPT = 8  # an array's first entries kept for its summary
KEYS_KEPT = 1000  # an object's first key lines kept for its summary
# A surrogate escape (\ud800-\udfff); only a high one followed by a low one is a character.
_LEADING_SPACE = re.compile(r"\s*")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class NotJson(Exception):
    """The output is not a JSON value (yajl's verdict, which orjson shares)."""


@dataclass(frozen=True, slots=True)
class JsonFacts:
    """What a summary needs of a JSON array or object, kept while it was streamed."""

    kind: str  # "array" or "object"
    count: int  # entries or keys
    head: tuple[Any, ...]  # an array's first (up to HEAD_KEPT) entries
    key_shapes: tuple[tuple[str, str], ...]  # an object's first (up to KEYS_KEPT) keys


class PromotedJson(Structured):
    """A Structured array or object promoted from a big output without its value in memory:
    *data* is exactly what ``dumps_for_storage(value)`` writes, *facts* what its summary
    needs, *index* the index of *data* made as it was written (core.store.index.json_index;
    None when it could not be), which the store keeps. ``value`` parses *data* on first
    use (the store and summaries never need to)."""

    __slots__ = ("_parsed", "data", "facts", "index")
    data: bytes | bytearray
    facts: JsonFacts
    index: bytes | None
    _parsed: Any

    def __init__(
        self, data: bytes | bytearray, facts: JsonFacts, index: bytes | None = None
    ) -> None:
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "facts", facts)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "_parsed", None)

    @property
    def value(self) -> Any:
        if self._parsed is None:
            object.__setattr__(self, "_parsed", parse_json(bytes(self.data)))
        return self._parsed

    @property
    def kind(self) -> str:
        return f"json_{self.facts.kind}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PromotedJson):
            return self.data == other.data
        if isinstance(other, Structured):
            return bool(self.value == other.value)
        return NotImplemented

    # Equal to a Structured of the same value, so hashed by neither data nor value.
    __hash__ = None  # type: ignore[assignment]  # None is how Python spells "unhashable"

    def __repr__(self) -> str:
        return f"PromotedJson({self.kind}, {self.facts.count} entries, {len(self.data)} bytes)"


def stream_json(output: str) -> PromotedJson | None:
    """*output* (a JSON array or object, maybe with surrounding whitespace) promoted
    without its value in memory; None when only the exact parser can decide (see the
    module docstring). Raises NotJson when it is not JSON at all."""
    if _IJSON is None or "\x0b" in output or "\x0c" in output:
        return None
    if ("\\ud" in output or "\\uD" in output) and not _surrogates_paired(output):
        return None
    start = _LEADING_SPACE.match(output).end()  # type: ignore[union-attr]  # \s* always matches
    opening = output[start : start + 1]  # no copy of a huge output, unlike lstrip
    try:
        if opening == "[":
            return _array(output)
        if opening == "{":
            return _object(output)
    except _JSON_ERROR as error:
        if "integer overflow" in str(error):
            return None
        raise NotJson(str(error).split("\n", 1)[0]) from None
    except (_Undecidable, UnicodeEncodeError, TypeError, ValueError, RecursionError):
        return None  # ValueError: orjson.JSONEncodeError (too deep) is one
    return None


class _Undecidable(Exception):
    """The exact parser must decide (e.g. a key repeated at the top level)."""


def _surrogates_paired(output: str) -> bool:
    """Whether every surrogate escape is a high one right before a low one."""
    pending_high = -1  # where a high surrogate escape ended, awaiting its low one
    for match in _SURROGATE_ESCAPE.finditer(output):
        low = match.group()[3].lower() in "cdef"
        if pending_high >= 0:
            if not low or match.start() != pending_high:
                return False
            pending_high = -1
        elif low:
            return False
        else:
            pending_high = match.end()
    return pending_high == -1


class _Reader:
    """The UTF-8 of a str, read a chunk at a time (never encoded whole)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.position = 0

    def read(self, size: int = -1) -> bytes:
        if size == 0:
            return b""
        chunk = self.text[self.position : self.position + max(size // 4, 1)]
        self.position += len(chunk)
        return chunk.encode()  # strict: a lone surrogate raises UnicodeEncodeError


def _array(output: str) -> PromotedJson:
    from core.store.index.json_index import JsonWriter  # core.store imports this module

    writer = JsonWriter("array", len(output))
    entries = _IJSON.items(_Reader(output), "item", use_float=True, buf_size=1 << 18)
    head: list[Any] = []
    while batch := list(itertools.islice(entries, BATCH)):
        if len(head) < HEAD_KEPT:
            head += batch[: HEAD_KEPT - len(head)]
        writer.add_entries(batch)
    data, index = writer.finish()
    return PromotedJson(data, JsonFacts("array", writer.count, tuple(head), ()), index)


def _object(output: str) -> PromotedJson:
    from core.store.index.json_index import JsonWriter, RepeatedKey

    writer = JsonWriter("object", len(output))
    items = _IJSON.kvitems(_Reader(output), "", use_float=True, buf_size=1 << 18)
    key_shapes: list[tuple[str, str]] = []
    while batch := list(itertools.islice(items, BATCH)):
        if len(key_shapes) < KEYS_KEPT:
            key_shapes += [
                (key, shape(value)) for key, value in batch[: KEYS_KEPT - len(key_shapes)]
            ]
        writer.add_items(list(map(_FIRST, batch)), list(map(_SECOND, batch)))
    try:
        data, index = writer.finish()
    except RepeatedKey:
        # The value keeps the key's first place and last value, which a stream cannot write.
        raise _Undecidable("a key is repeated") from None
    return PromotedJson(data, JsonFacts("object", writer.count, (), tuple(key_shapes)), index)


_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
