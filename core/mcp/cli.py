"""The `mcp` command of `python -m core` (core.cli parses it, then imports this late)."""

from __future__ import annotations

import argparse
import os

import anyio

from core.cli import CliError
from core.mcp.proxy import ProxyError, run_proxy
from core.mcp.recording import ProxyRecorder
from core.mcp.server import serve
from core.store import BlobStore

TOKEN_VARIABLE = "BLOBVIEWER_TOKEN"


def run_mcp_command(args: argparse.Namespace, store: BlobStore) -> None:
    """Run `mcp serve` or `mcp proxy` until the agent closes stdin; raises CliError."""
    wrapped: list[str] = getattr(args, "wrapped", [])
    if args.mcp_command == "serve":
        if wrapped:
            raise CliError("mcp serve runs no command (to wrap a server, use mcp proxy)")
        serve(store)
        return
    if not wrapped:
        raise CliError("mcp proxy needs the server's command after --, e.g. -- npx server-x")
    token = os.environ.get(TOKEN_VARIABLE) or None
    if args.upload and token is None:
        raise CliError(f"--upload needs a blobviewer API token in ${TOKEN_VARIABLE}")
    recorder = ProxyRecorder(store, args.log_dir, args.upload, token, wrapped)
    try:
        anyio.run(run_proxy, wrapped, store, recorder)
    except ProxyError as error:
        raise CliError(str(error)) from None
