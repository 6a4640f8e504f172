"""A line the wrapped server wrote, as the message the SDK's session takes from it
(docs/mcp.md#a-server-that-misbehaves).

What no agent could be sent never stops the proxy: a line that is not UTF-8, or whose
JSON escapes half of a surrogate pair (`\\ud800` alone, which no UTF-8 can carry), is
decoded with U+FFFD in place of each such byte or half. As an answer, it becomes an error
answer to the same request, so that call is answered and the next line is read as any
other; as a request or notification, it is passed on repaired, and stderr says so.

A line is parsed by the standard library, which holds no more than the text and its value
at a time (pydantic's parser holds five times a long string while it works).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage

from core.json_values import reject_constant
from core.mcp.line_splitter import Line

__all__ = ["server_message"]

# `\uD800` to `\uDFFF`: the escapes of the halves of a surrogate pair, whole or not.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def server_message(line: Line) -> SessionMessage | Exception:
    """The message of *line*, or the error saying why it has none (the session hands that
    to its message handler). A bytearray *line* is emptied once decoded, so that a big
    line and its text are never both held."""
    problem: str | None = None
    try:
        text = line.decode()
    except UnicodeDecodeError as error:
        problem = f"byte 0x{line[error.start]:02x} at offset {error.start} of its line"
        problem += " is not UTF-8"
        text = line.decode("utf-8", "replace")
    if isinstance(line, bytearray):
        line.clear()
    try:
        value = json.loads(text, parse_constant=reject_constant)
        if _SURROGATE_ESCAPE.search(text):
            halves: list[str] = []
            value = _whole_characters(value, halves)
            if halves and problem is None:
                problem = f"it escapes half a surrogate pair ({halves[0]!r}), which is not UTF-8"
        del text
        message = types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except (ValueError, RecursionError) as error:  # pydantic's ValidationError is one
        if problem is None:
            return error
        return ValueError(f"the wrapped server wrote a line that is not JSON-RPC: {problem}")
    return SessionMessage(message) if problem is None else _repaired(message, problem)


def _whole_characters(value: Any, halves: list[str]) -> Any:
    """*value* with each half of a surrogate pair in its strings replaced by U+FFFD; each
    string that had one adds its first to *halves*."""
    if isinstance(value, str):
        if value.isascii():
            return value
        try:
            value.encode()
        except UnicodeEncodeError as error:
            halves.append(value[error.start])
            return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return value
    if isinstance(value, list):
        return [_whole_characters(item, halves) for item in value]
    if isinstance(value, dict):
        return {
            _whole_characters(key, halves): _whole_characters(item, halves)
            for key, item in value.items()
        }
    return value


def _repaired(message: types.JSONRPCMessage, problem: str) -> SessionMessage | Exception:
    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
        if message.id is None:
            return ValueError(f"the wrapped server wrote an error without its request: {problem}")
        text = f"the proxy refused the wrapped server's answer: {problem}"
        refused = types.ErrorData(code=types.INTERNAL_ERROR, message=text)
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=message.id, error=refused))
    with contextlib.suppress(OSError, ValueError):
        print(
            f"blobviewer proxy: the wrapped server's {message.method} is passed on with "
            f"U+FFFD in place of what UTF-8 cannot carry: {problem}",
            file=sys.stderr,
        )
    return SessionMessage(message)
