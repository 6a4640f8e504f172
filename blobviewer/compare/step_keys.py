"""A step's key: what two runs must agree on for their steps to be "the same step".

Two runs of one task rarely call a tool with byte-identical arguments: they work in
different folders (`/tmp/run-1/src/a.py`, `/tmp/run-2/src/a.py`), and models space their
commands differently. A key is the tool's name and its arguments normalised so that
those differences vanish: strings under the run's working folder made relative to it,
runs of whitespace collapsed to one space (and trimmed), object keys sorted. Everything
else counts: another file, another command, another argument is another step.

A key is computed for every step of both runs (20,000 a side at most), so it is one walk
over the arguments and one orjson call.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# Between the tool's name and its arguments: no tool name holds a newline.
_SEPARATOR = "\n"


def step_key(tool: str, arguments: Any, workdir: str | None) -> str:
    """The key two runs' steps are matched by: *tool* and its *arguments* (a parsed JSON
    value, usually a dict) normalised. Every string in the arguments, at any depth, that
    starts with *workdir* + "/" loses that prefix (*workdir* itself becomes "."); every
    string has its whitespace runs collapsed to one space and is trimmed; objects are
    written with sorted keys. A *workdir* of None or "" leaves paths as they are."""
    root = (workdir or "").rstrip("/")
    normalised = _normalised(arguments, root + "/" if root else "", root)
    return tool + _SEPARATOR + _dumps_sorted(normalised)


def _normalised(value: Any, prefix: str, root: str) -> Any:
    kind = type(value)
    if kind is str:
        return _string(value, prefix, root)
    if kind is dict:
        # Most arguments are one object of strings and numbers: its strings are done
        # here, without a call each.
        return {
            str(key): _string(item, prefix, root)
            if type(item) is str
            else _normalised(item, prefix, root)
            for key, item in value.items()
        }
    if kind is list or kind is tuple:
        return [_normalised(item, prefix, root) for item in value]
    if isinstance(value, str):  # a str subclass
        return _string(value, prefix, root)
    if isinstance(value, dict):
        return {str(key): _normalised(item, prefix, root) for key, item in value.items()}
    return value


def _string(value: str, prefix: str, root: str) -> str:
    if prefix and value.startswith(prefix):
        value = value[len(prefix) :]
    elif root and value == root:
        value = "."
    return " ".join(value.split())


def _dumps_sorted(value: Any) -> str:
    """Compact JSON with sorted keys: orjson, or the standard library where orjson refuses
    (integers beyond 64 bits, lone surrogates)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
