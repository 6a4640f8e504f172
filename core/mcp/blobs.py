"""What an MCP peer reads of the blob store: the `inspect` tool and `blob://<id>` resources.

The tool is core's own `inspect` (core.inspect_tool): the same name, description,
parameters and result text. A bad id or selector is a tool result with ``isError``, so
the agent reads the one-line message and goes on; it is never a protocol error.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from mcp import MCPError

from core.inspect_tool import (
    INSPECT_DESCRIPTION,
    INSPECT_NAME,
    INSPECT_PARAMETERS,
    InspectError,
    inspect_blob,
)
from core.mcp.wire import complete
from core.store import BlobStore
from core.store.errors import BlobStoreError

BLOB_SCHEME = "blob://"
# The code the MCP specification gives a resource that does not exist.
RESOURCE_NOT_FOUND = -32002
# Said after the inspect description when the proxy's tool cannot be called `inspect`.
RENAMED_NOTE = (
    "This tool is called {name} here because the wrapped server has its own tool named "
    "inspect: wherever this description or a summary says inspect, call {name}."
)


def inspect_tool(name: str = INSPECT_NAME) -> dict[str, Any]:
    """The `inspect` tool as tools/list shows it; another *name* says why in its description."""
    description = INSPECT_DESCRIPTION
    if name != INSPECT_NAME:
        description = f"{description}\n{RENAMED_NOTE.format(name=name)}"
    return {"name": name, "description": description, "inputSchema": dict(INSPECT_PARAMETERS)}


async def call_inspect(store: BlobStore, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """The CallToolResult of `inspect` with *arguments*: its text, or the error as isError."""
    arguments = arguments or {}
    blob_id, selector = arguments.get("blob_id"), arguments.get("selector")
    if not isinstance(blob_id, str):
        return tool_error("inspect needs blob_id: the id in a [blob:<id>] reference")
    if selector is not None and not isinstance(selector, str):
        return tool_error("selector must be a string, e.g. lines:1-40")
    try:
        text = await anyio.to_thread.run_sync(inspect_blob, store, blob_id, selector)
    except (InspectError, BlobStoreError) as error:
        return tool_error(str(error))
    return complete({"content": [{"type": "text", "text": text}], "isError": False})


def tool_error(message: str) -> dict[str, Any]:
    return complete({"content": [{"type": "text", "text": message}], "isError": True})


def blob_uri(blob_id: object) -> str:
    return f"{BLOB_SCHEME}{blob_id}"


def is_blob_uri(uri: str) -> bool:
    return uri.startswith(BLOB_SCHEME)


async def read_blob_resource(store: BlobStore, uri: str) -> dict[str, Any]:
    """resources/read of `blob://<id>`: the inspect overview of the blob, never the blob
    itself (which may be gigabytes). A bad or unknown id is a resource-not-found error."""
    try:
        text = await anyio.to_thread.run_sync(inspect_blob, store, uri[len(BLOB_SCHEME) :])
    except (InspectError, BlobStoreError) as error:
        raise MCPError(code=RESOURCE_NOT_FOUND, message=str(error), data={"uri": uri}) from None
    return complete({"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]})
