"""A stdio MCP server for the proxy's tests, written with the SDK's MCPServer as server
authors write them: big and small text results, a big structured result with an output
schema (which MCPServer also serializes into a text block), an image, a failing tool.

Run: python tests/mcp/fake_servers/results_server.py
"""

from __future__ import annotations

import base64
import json

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

server = MCPServer("results")


class Entry(BaseModel):
    path: str
    size: int
    kind: str


class Listing(BaseModel):
    root: str
    entries: list[Entry]


def big_text_of(kb: int, tag: str = "") -> str:
    """Numbered lines, *kb* KB in all; *tag* makes outputs of different calls differ."""
    lines = []
    size = 0
    number = 0
    while size < kb * 1024:
        number += 1
        line = f"line {number}{tag}: the quick brown fox jumps over the lazy dog ✓"
        lines.append(line)
        size += len(line.encode()) + 1
    return "\n".join(lines) + "\n"


def listing_of(count: int) -> Listing:
    return Listing(
        root="/srv/data",
        entries=[
            Entry(path=f"/srv/data/dir{i % 97}/file-{i:07d}.bin", size=i * 37, kind="file")
            for i in range(count)
        ],
    )


@server.tool()
def small(text: str) -> str:
    """Echo the text back as it is."""
    return text


@server.tool()
def big_text(kb: int = 50, tag: str = "") -> str:
    """About kb kilobytes of numbered lines."""
    return big_text_of(kb, tag)


@server.tool()
def json_text(count: int) -> str:
    """A JSON array of count objects, as text."""
    return json.dumps([{"id": i, "name": f"item {i}"} for i in range(count)], indent=1)


@server.tool()
def listing(count: int) -> Listing:
    """A structured listing of count entries (with an output schema)."""
    return listing_of(count)


@server.tool()
def image() -> Image:
    """A tiny PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def picture_with_log(kb: int = 10) -> list:
    """A PNG and a big text log."""
    return [Image(data=PNG, format="png"), big_text_of(kb)]


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ToolError(message)


if __name__ == "__main__":
    server.run("stdio")
