"""A stdio MCP server for the proxy's tests that sends progress, changes its tool list,
has a prompt and a resource, a tool that waits until it is cancelled (it writes
`started`, then `cancelled`, to the file it is given), and one that makes it exit."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("events")


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Counts to steps, reporting progress at each step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"counted to {steps}"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool called name, and says the tool list changed."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"the tool {name}")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
async def wait(marker: str) -> str:
    """Waits until cancelled; writes started, then cancelled, to the file marker."""
    path = Path(marker)
    path.write_text("started")
    try:
        await anyio.sleep_forever()
    finally:
        path.write_text("cancelled")
    return "never"


@server.tool()
def exit_now() -> str:
    """Ends this server at once, as a crash would."""
    os._exit(3)


@server.prompt()
def review(code: str) -> str:
    """Ask for a review of code."""
    return f"Please review this code:\n{code}"


@server.resource("notes://readme", mime_type="text/plain")
def readme() -> str:
    """The server's readme."""
    return "events server readme"


if __name__ == "__main__":
    server.run("stdio")
