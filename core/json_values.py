"""JSON values: parsing, compact and indented rendering, type names and shapes.

orjson does the work; the standard library takes over where orjson would lose a value
(integers beyond 64 bits, which orjson 3.x reads as floats without a word) or refuses one
(lone surrogates).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any

import orjson
import re2

# 19+ digits in a row may be an integer beyond 64 bits; such texts are parsed by the
# standard library. orjson gives no sign of the loss, so the text is looked at first, by
# RE2 over the bytes: 0.33 s on 100 MB where Python's re took 3.2-5.6 s (orjson.loads of
# the same bytes: 4.6 s on the same, busy, machine).
_LONG_DIGITS_OPTIONS = re2.Options()
_LONG_DIGITS_OPTIONS.log_errors = False
_LONG_DIGITS = re2._re2.RE2(b"[0-9]{19}", _LONG_DIGITS_OPTIONS)
_UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
_SCAN_CHARS = 1 << 20


class JsonError(ValueError):
    """The text is not a JSON value."""


def reject_constant(name: str) -> Any:
    """JSON has no NaN or Infinity: the standard library's parse_constant that says so."""
    raise ValueError(f"{name} is not valid JSON")


def finite_float(text: str) -> float:
    """A JSON number as a float, refused when out of range (JSON has no infinity)."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text} is out of range")
    return value


def parse_json(text: str | bytes) -> Any:
    """Parse a JSON document exactly (no lossy numbers, no NaN); raises JsonError."""
    if not _may_hold_a_long_integer(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # the stdlib accepts a few things orjson refuses (lone surrogates)
    try:
        return json.loads(text, parse_constant=reject_constant, parse_float=finite_float)
    except (ValueError, RecursionError) as error:
        raise JsonError(str(error)) from None


def _may_hold_a_long_integer(text: str | bytes) -> bool:
    """Whether *text* has 19 digits in a row (a str is scanned a chunk at a time, so it is
    never encoded whole; chunks overlap by 18 characters so no run is missed)."""
    if isinstance(text, bytes | bytearray | memoryview):
        found: int = _LONG_DIGITS.Match(_UNANCHORED, text, 0, len(text))[0][0]
        return found >= 0
    for start in range(0, len(text), _SCAN_CHARS):
        chunk = text[start : start + _SCAN_CHARS + 18].encode("utf-8", "surrogatepass")
        if _LONG_DIGITS.Match(_UNANCHORED, chunk, 0, len(chunk))[0][0] >= 0:
            return True
    return False


def dumps_compact(value: Any) -> str:
    """One-line JSON without spaces, non-ASCII kept as is."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps_indented(value: Any) -> str:
    """JSON indented by two spaces, as people read it."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)


def dumps_for_storage(value: Any) -> bytes:
    """Bytes that :func:`parse_json` reads back to an equal value; always valid UTF-8."""
    try:
        return orjson.dumps(value)
    except TypeError:
        # ensure_ascii escapes lone surrogates, which UTF-8 cannot hold.
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode()


def every_float(value: Any, test: Callable[[float], bool]) -> bool:
    """Whether *value* is made of JSON's types (dicts, lists and tuples, strings,
    integers, booleans, None, floats) and *test* holds for every float in it. Any other
    type, or a subclass, counts as failing: callers then take json's own way, which
    writes such values as json does. Strings, integers, booleans and None are passed
    over without a call: half the time of a walk that calls itself on every value."""
    kind = type(value)
    if kind is dict:
        values: Iterable[Any] = value.values()
    elif kind is list or kind is tuple:
        values = value
    elif kind is float:
        return test(value)
    else:
        return kind is str or kind is int or kind is bool or value is None
    for item in values:
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if not every_float(item, test):
            return False
    return True


def all_finite(value: Any) -> bool:
    """No NaN or infinity anywhere in *value* (which orjson would write as null)."""
    return every_float(value, math.isfinite)


def json_type(value: Any) -> str:
    """JSON's own name for the type of *value*: string number boolean null array object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def shape(value: Any) -> str:
    """`string(<chars>)`, `array[<n>]`, `object{<n>}`, or the bare type name."""
    kind = json_type(value)
    if kind == "string":
        return f"string({len(value)})"
    if kind == "array":
        return f"array[{len(value)}]"
    if kind == "object":
        return f"object{{{len(value)}}}"
    return kind


def display_key(key: str) -> str:
    """A key as shown on one line: as is, or JSON-quoted when it could break the line."""
    if key == "" or any(ch < " " or ch == "\x7f" for ch in key) or key != key.strip():
        return json.dumps(key, ensure_ascii=False)
    return key
