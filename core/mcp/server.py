"""`python -m core mcp serve --dir DIR`: a stdio MCP server exposing `inspect` over DIR.

The tool returns exactly what core's `inspect` tool returns; `blob://<id>` resources (the
links the proxy puts beside its summaries) read as the inspect overview of the blob.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from core.inspect_tool import INSPECT_NAME
from core.mcp.blobs import (
    RESOURCE_NOT_FOUND,
    call_inspect,
    inspect_tool,
    is_blob_uri,
    read_blob_resource,
    tool_error,
)
from core.mcp.wire import NO_CACHING, complete, wire_handler
from core.store import BlobStore

SERVER_NAME = "blobviewer"


def build_server(store: BlobStore) -> Server[Any]:
    """The `inspect` server over *store* (also used in-process by tests and the bench)."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> dict[str, Any]:
        return complete({"tools": [inspect_tool()]})

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> dict[str, Any]:
        if params.name != INSPECT_NAME:
            return tool_error(f"unknown tool {params.name!r}; this server has only inspect")
        return await call_inspect(store, params.arguments)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> dict[str, Any]:
        # Blobs are many: each is reached from the link beside its summary.
        return complete({"resources": []})

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> dict[str, Any]:
        if not is_blob_uri(params.uri):
            raise MCPError(code=RESOURCE_NOT_FOUND, message=f"no such resource: {params.uri}")
        return await read_blob_resource(store, params.uri)

    return Server(
        SERVER_NAME,
        cache_hints=NO_CACHING,
        on_list_tools=wire_handler(list_tools),
        on_call_tool=wire_handler(call_tool),
        on_list_resources=wire_handler(list_resources),
        on_read_resource=wire_handler(read_resource),
    )


async def _serve(store: BlobStore) -> None:
    server = build_server(store)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve(store: BlobStore) -> None:
    """Serve *store*'s blobs until stdin closes."""
    anyio.run(_serve, store)
