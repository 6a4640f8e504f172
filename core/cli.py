"""`python -m core`: promote a tool output from the shell, or inspect a stored blob.

    python -m core store [--dir DIR | --store URL] [FILE|-]
    python -m core inspect [--dir DIR | --store URL] BLOB_ID [SELECTOR]
    python -m core mcp serve [--dir DIR]
    python -m core mcp proxy [--dir DIR] [--log-dir SESSIONS] [--upload URL] -- COMMAND ARGS...

Both print exactly what the model would read (on a terminal, followed by a newline when
the text does not end with one). Errors go to stderr, one line, exit status 2; so does a
failed write of the output (a full disk). A reader that stops early (`| head`) ends the
command quietly, with status 141 as SIGPIPE would.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.content import encode_text
from core.inspect_tool import InspectError, inspect_blob
from core.promotion import admit_sync, promote
from core.store import BlobStore, open_store
from core.store.errors import BlobStoreError

EXIT_ERROR = 2
EXIT_BROKEN_PIPE = 128 + 13  # as if SIGPIPE had ended the process, like `cat` in a pipe


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status 2."""


def default_blob_dir() -> Path:
    return Path(os.environ.get("BLOBVIEWER_DATA", "data")) / "blobs"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m core", description="Keep large tool outputs out of an agent's context."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store = commands.add_parser(
        "store", help="promote a tool output and print what would enter the history"
    )
    store.add_argument("file", nargs="?", default="-", help="the output to read (default: stdin)")
    inspect = commands.add_parser("inspect", help="print what the inspect tool returns")
    inspect.add_argument("blob_id")
    inspect.add_argument("selector", nargs="?", help="e.g. lines:20-50, slice:0..5, key:results")
    for command in (store, inspect):
        _add_store_options(command)
    demo = commands.add_parser("demo", help="run the demo agent session into a data directory")
    demo.add_argument(
        "--data",
        type=Path,
        default=None,
        help="data directory (default: $BLOBVIEWER_DATA or ./data)",
    )
    demo.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help="where the demo's blobs go: s3://bucket/prefix (AWS_* from the environment, "
        "as for store and inspect) or a directory (default: <data>/blobs)",
    )
    _add_mcp(commands)
    return parser


def _add_mcp(commands: Any) -> None:
    mcp = commands.add_parser("mcp", help="serve inspect, or stand in front of a server, over MCP")
    modes = mcp.add_subparsers(dest="mcp_command", required=True, metavar="MODE")
    serve = modes.add_parser("serve", help="a stdio MCP server exposing inspect over the store")
    proxy = modes.add_parser(
        "proxy",
        help="run COMMAND as a stdio MCP server and keep its big results out of the context",
        usage="python -m core mcp proxy [--dir DIR] [--log-dir SESSIONS] [--upload URL] "
        "-- COMMAND [ARGS...]",
    )
    proxy.add_argument(
        "--log-dir",
        type=Path,
        default=None,
        metavar="SESSIONS",
        help="write the session log of the run into this folder",
    )
    proxy.add_argument(
        "--upload",
        metavar="URL",
        default=None,
        help="send the session log and its blobs to this blobviewer server "
        "(POST /api/sessions; the token is read from $BLOBVIEWER_TOKEN)",
    )
    for command in (serve, proxy):
        _add_store_options(command)


def _add_store_options(command: argparse.ArgumentParser) -> None:
    """`--dir DIR` or `--store URL`: the blob store a command works on."""
    where = command.add_mutually_exclusive_group()
    where.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="the blob store directory (default: $BLOBVIEWER_DATA/blobs, else ./data/blobs)",
    )
    where.add_argument(
        "--store",
        metavar="URL",
        default=None,
        help="the blob store: s3://bucket/prefix (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY and AWS_REGION from the environment) or a directory",
    )


def _read_input(name: str) -> str:
    try:
        data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    except OSError as error:
        raise CliError(f"cannot read {name}: {error.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        where = "stdin" if name == "-" else name
        raise CliError(f"{where} is not UTF-8 text (bad byte at offset {error.start})") from None


def _open_store(args: argparse.Namespace) -> BlobStore:
    return open_store(args.store or args.dir or default_blob_dir())


def _store(args: argparse.Namespace) -> str:
    output = _read_input(args.file)
    return admit_sync(promote(output), _open_store(args)).text


def _inspect(args: argparse.Namespace) -> str:
    return inspect_blob(_open_store(args), args.blob_id, args.selector)


def _demo(args: argparse.Namespace) -> str:
    from core.demo import demo_main  # imported late: the demo pulls in the Worker and tools

    data_dir = args.data or Path(os.environ.get("BLOBVIEWER_DATA", "data"))
    store = open_store(args.store) if args.store else None
    return demo_main(data_dir, store=store).rstrip("\n") + "\n"  # a report, not a tool output


COMMANDS: dict[str, Callable[[argparse.Namespace], str]] = {
    "store": _store,
    "inspect": _inspect,
    "demo": _demo,
}


# Python 3.11's argparse drops every "--" among the arguments, not only the first one that
# ends the options, so a selector that is itself "--" would vanish. After the first "--"
# each later one is passed as this stand-in and given back: no argument holds a NUL.
_DOUBLE_DASH = "\x00--"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["mcp"] and "--" in argv:
        # The proxy's COMMAND is everything after the first "--", as it is.
        cut = argv.index("--")
        args = _parser().parse_args(argv[:cut])
        args.wrapped = argv[cut + 1 :]
        return args
    if "--" in argv:
        cut = argv.index("--") + 1
        argv[cut:] = [_DOUBLE_DASH if arg == "--" else arg for arg in argv[cut:]]
    args = _parser().parse_args(argv)
    for name, value in vars(args).items():
        if value == _DOUBLE_DASH:
            setattr(args, name, "--")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.command == "mcp":
        return _mcp(args)
    try:
        text = COMMANDS[args.command](args)
    except (CliError, InspectError, BlobStoreError) as error:
        return _fail(str(error))
    try:
        _write(text)
    except BrokenPipeError:
        # The reader has gone (`| head`): it took what it wanted, so stop quietly, with
        # the status a shell gives a program that SIGPIPE ended.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as error:  # e.g. a full disk, or > /dev/full
        _silence_stdout()
        return _fail(f"cannot write the output: {error.strerror or error}")
    return 0


def _mcp(args: argparse.Namespace) -> int:
    """The MCP commands own stdin and stdout (the protocol); they print nothing else there."""
    from core.mcp.cli import run_mcp_command  # imported late: it loads the mcp SDK

    try:
        run_mcp_command(args, _open_store(args))
    except (CliError, BlobStoreError) as error:
        return _fail(str(error))
    return 0


def _write(text: str) -> None:
    out = sys.stdout.buffer
    out.write(encode_text(text))
    if not text.endswith("\n") and sys.stdout.isatty():
        out.write(b"\n")  # for the prompt's sake; a pipe gets the text exactly
    out.flush()


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _silence_stdout() -> None:
    """Point stdout at /dev/null, as Python's documentation advises for SIGPIPE: what is
    still buffered would fail again when the interpreter flushes it at exit, printing a
    traceback-like warning and changing the exit status to 120."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (a test's capture): nothing to flush
        pass
