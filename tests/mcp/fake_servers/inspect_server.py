"""A stdio MCP server for the proxy's tests that has a tool named `inspect` of its own,
so the proxy must call its own `blob_inspect`."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("has-inspect")


@server.tool(name="inspect")
def inspect_thing(thing: str) -> str:
    """Inspect a thing (this server's own tool)."""
    return f"the server's own inspect looked at {thing}"


@server.tool()
def big(lines: int = 2000) -> str:
    """Many numbered lines."""
    return "".join(f"row {number}\n" for number in range(1, lines + 1))


if __name__ == "__main__":
    server.run("stdio")
