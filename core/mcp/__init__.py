"""blobviewer over MCP: any MCP agent gets promotion and `inspect` (docs/mcp.md).

- core.mcp.blobs: what an MCP peer reads of the blob store: the `inspect` tool and
  `blob://<id>` resources.
- core.mcp.result_promotion: a tool result from an MCP server, promoted as the Worker
  promotes a tool output (docs/promotion.md).
- core.mcp.wire: results as the wire's dicts, valid in both protocol eras.
- core.mcp.server: `python -m core mcp serve`, a stdio server exposing `inspect`.
- core.mcp.proxy: `python -m core mcp proxy`, a stdio server in front of another one.
- core.mcp.wrapped_server: the proxy's transport to that other one (its process), reading
  its lines with core.mcp.line_splitter and core.mcp.server_lines; core.mcp.stdin_lines
  reads the agent's; core.mcp.worker_threads runs their blocking work.
- core.mcp.recording: the session log of a proxy run, and its upload.
- core.mcp.cli: the `mcp` command of `python -m core`.

Only these modules import the `mcp` SDK, and nothing in `core` imports them but the
`mcp` command (core.cli), so `import core` stays light.
"""
