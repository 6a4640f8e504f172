"""A stdio MCP server for the proxy's tests that asks its client for roots."""

from __future__ import annotations

import warnings

from mcp.server.mcpserver import Context, MCPServer

warnings.simplefilter("ignore")  # roots are deprecated in MCP 2026-07-28, and used here

server = MCPServer("roots")


@server.tool()
async def show_roots(ctx: Context) -> str:
    """The client's roots, one URI per line."""
    result = await ctx.session.list_roots()
    return "\n".join(str(root.uri) for root in result.roots)


if __name__ == "__main__":
    server.run("stdio")
