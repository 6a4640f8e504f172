"""A stdio MCP server for the proxy's tests that asks its client for roots, and notes
each roots/list_changed notification in the file named by $ROOTS_CHANGED_FILE."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

warnings.simplefilter("ignore")  # roots are deprecated in MCP 2026-07-28, and used here

server = MCPServer("roots")


@server.tool()
async def show_roots(ctx: Context) -> str:
    """The client's roots, one URI per line."""
    result = await ctx.session.list_roots()
    return "\n".join(str(root.uri) for root in result.roots)


async def roots_changed(ctx: Any, params: Any) -> None:
    with Path(os.environ["ROOTS_CHANGED_FILE"]).open("a") as noted:
        noted.write("changed\n")


server._lowlevel_server.add_notification_handler(
    "notifications/roots/list_changed", types.NotificationParams, roots_changed
)

if __name__ == "__main__":
    server.run("stdio")
