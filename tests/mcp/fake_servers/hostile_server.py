"""A stdio MCP server for the proxy's tests that answers in ways a well-behaved server
never does, written as raw JSON-RPC lines (no SDK) so that every byte is the test's:

- `not_utf8` answers with a line holding the raw bytes 0xFF 0xFE inside its text;
- `big` answers with a one-line text of `mb` megabytes (no newline in the text), written
  in `pieces` writes `pause` seconds apart, so that a test can call meanwhile;
- `echo` answers with its `text`.

Run: python tests/mcp/fake_servers/hostile_server.py
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

TOOLS = [
    {"name": "not_utf8", "inputSchema": {"type": "object"}},
    {
        "name": "big",
        "inputSchema": {
            "type": "object",
            "properties": {
                "mb": {"type": "number"},
                "pieces": {"type": "integer"},
                "pause": {"type": "number"},
            },
        },
    },
    {
        "name": "echo",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
]
# Printable ASCII that JSON carries as it is, so the line is as long as the text.
PATTERN = b"the quick brown fox jumps over the lazy dog 0123456789 "


def big_text(size: int) -> bytes:
    return (PATTERN * (size // len(PATTERN) + 1))[:size]


def send(data: bytes | memoryview) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def answer(request_id: Any, result: dict[str, Any]) -> None:
    send(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n")


def text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def call(request_id: Any, name: str, arguments: dict[str, Any]) -> None:
    if name == "not_utf8":
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode()
        send(head + b',"result":{"content":[{"type":"text","text":"before \xff\xfe after"}]}}\n')
    elif name == "big":
        text = big_text(int(float(arguments.get("mb", 1)) * 2**20))
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": text_result("")})
        head, _, tail = line.encode().rpartition(b'""')
        data = memoryview(head + b'"' + text + b'"' + tail + b"\n")
        pieces = max(1, int(arguments.get("pieces", 1)))
        step = len(data) // pieces + 1
        for start in range(0, len(data), step):
            if start:
                time.sleep(float(arguments.get("pause", 0)))
            send(data[start : start + step])
    elif name == "echo":
        answer(request_id, text_result(str(arguments.get("text", ""))))
    else:
        answer(request_id, {**text_result(f"no tool {name}"), "isError": True})


def main() -> None:
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            answer(
                request_id,
                {
                    "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"},
                },
            )
        elif method == "tools/list":
            answer(request_id, {"tools": TOOLS})
        elif method == "tools/call":
            call(request_id, params.get("name", ""), params.get("arguments") or {})
        elif method == "ping":
            answer(request_id, {})
        else:
            error = {"code": -32601, "message": f"no method {method}"}
            send(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode() + b"\n")


if __name__ == "__main__":
    main()
