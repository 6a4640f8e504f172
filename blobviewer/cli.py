"""The `blobviewer` command of the installed package (pyproject.toml's console script):
`blobviewer push` sends this machine's agent recordings to a team server (docs/push.md).
The site itself runs from a checkout (`make run`, `make serve`: README.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from blobviewer.push.command import add_arguments, push_command


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="blobviewer", description="Keep big tool outputs out of an agent's context."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    push = commands.add_parser(
        "push",
        help="send this machine's agent recordings to a team server",
        description="Send agent recordings (Claude Code, Codex, Gemini CLI, OpenHands, "
        "SWE-agent, blobviewer's own logs) to a blobviewer server, as they are; a grown "
        "recording sends only its new bytes. The token is read from BLOBVIEWER_TOKEN.",
    )
    add_arguments(push)
    options = parser.parse_args(argv)
    try:
        return push_command(options)
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once, quietly
        return 130


if __name__ == "__main__":
    sys.exit(main())
