"""JSON values: parsing, compact and indented rendering, type names and shapes.

orjson does the work; the standard library takes over where orjson would lose a value
(integers beyond 64 bits, which orjson reads as floats) or refuses one (lone surrogates).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

# 19+ digits may be an integer beyond 64 bits; such texts are parsed by the stdlib.
_LONG_DIGITS = re.compile(r"\d{19,}")


class JsonError(ValueError):
    """The text is not a JSON value."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text} is out of range")
    return value


def parse_json(text: str | bytes) -> Any:
    """Parse a JSON document exactly (no lossy numbers, no NaN); raises JsonError."""
    if not _LONG_DIGITS.search(text if isinstance(text, str) else text.decode("latin-1")):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # the stdlib accepts a few things orjson refuses (lone surrogates)
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as error:
        raise JsonError(str(error)) from None


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
