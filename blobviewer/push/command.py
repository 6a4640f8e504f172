"""The `blobviewer` command of the installed package (pyproject.toml's console script) and
its `blobviewer push [--to URL] [--agents] [--watch] [--dry-run] [PATH…]`, which sends
this machine's agent recordings to a team server (docs/push.md). Plain Python: no Django
settings, no database, no Node.js. The site itself runs from a checkout (README.md)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from blobviewer.ingest.agent_folders import RecordingFilter, describe_search, find_agent_folders
from blobviewer.ingest.finding import Links, recording_paths
from blobviewer.ingest.watch import WatchError, WatchRoot, follow, stop_on_signals
from blobviewer.push.sending import (
    Pusher,
    PushState,
    TokenRefused,
    default_state_file,
    folder_mark,
    said_redacted,
)


def command_line(argv: Sequence[str] | None = None) -> int:
    """`blobviewer COMMAND ...`; its exit status."""
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
    _add_arguments(push)
    options = parser.parse_args(argv)
    try:
        return push_command(options)
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once, quietly
        return 130


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="*", type=Path, metavar="PATH", help="recordings or folders of them"
    )
    parser.add_argument("--to", metavar="URL", help="the server (default: $BLOBVIEWER_URL)")
    parser.add_argument(
        "--agents",
        action="store_true",
        help="the agents' own folders (~/.claude/projects, ~/.codex/sessions, ...)",
    )
    parser.add_argument(
        "--watch", action="store_true", help="keep running and send what changes, within seconds"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list what would be sent, and send nothing"
    )
    parser.add_argument(
        "--state",
        type=Path,
        default=None,
        help="where what was sent is kept (default: ~/.local/state/blobviewer/push.json)",
    )


def push_command(
    options: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    """Run `blobviewer push`; the exit status (0: everything sent or unchanged)."""
    url = options.to or os.environ.get("BLOBVIEWER_URL", "")
    token = os.environ.get("BLOBVIEWER_TOKEN", "").strip()
    if any(char.isspace() or not char.isprintable() for char in token):
        err.write(
            "blobviewer push: BLOBVIEWER_TOKEN holds spaces or line breaks: give the token alone\n"
        )
        return 2
    if not url:
        err.write("blobviewer push: give the server: --to URL, or BLOBVIEWER_URL\n")
        return 2
    if not url.startswith(("http://", "https://")):
        err.write(f"blobviewer push: {url!r}: give the server's URL, with http:// or https://\n")
        return 2
    if not token and not options.dry_run:
        err.write(
            "blobviewer push: set BLOBVIEWER_TOKEN to an API token (make one on the "
            "server's /tokens/ page)\n"
        )
        return 2
    roots = list(options.paths)
    accepts = None
    if options.agents:
        found = find_agent_folders()
        for line in describe_search(found):
            out.write(line + "\n")
        accepts = RecordingFilter(found)
        roots += [entry.path for entry in found if entry.exists]
    if not roots:
        err.write("blobviewer push: give the recordings to send: PATH... or --agents\n")
        return 2
    missing = [path for path in roots if not path.exists()]
    for path in missing:
        err.write(f"{path}: no such file or directory\n")
    roots = [path for path in roots if path.exists()]
    state = PushState(options.state or default_state_file(), url.rstrip("/"))
    stop = threading.Event()
    pusher = Pusher(url, token, state, wait=None if options.watch else 60.0, stop=stop)
    links = Links(roots)
    run = _Run(pusher, accepts, out, err, stop)
    try:
        with stop_on_signals(stop):
            if options.dry_run:
                return _dry_run(pusher, run.accepted(recording_paths(roots, links=links)), out)
            if options.watch:
                follow(
                    [WatchRoot.of(path) for path in roots],
                    stop=stop,
                    on_ready=lambda: run.push_all(recording_paths(roots, links=links)),
                    on_changes=run.push_all,
                    links=links,
                )
                out.write("stopped watching\n")
                return 0
            run.push_all(recording_paths(roots, links=links))
        return 1 if run.failed or missing or stop.is_set() else 0
    except (WatchError, TokenRefused) as error:
        err.write(f"blobviewer push: {error}\n")
        return 1
    finally:
        pusher.close()


def _dry_run(pusher: Pusher, files: list[Path], out: TextIO) -> int:
    for path in files:
        if path.is_dir():
            held = pusher.state.get(path)
            changed = held is None or held.mark != folder_mark(path)
            out.write(f"{path}: {'would send the folder whole' if changed else 'unchanged'}\n")
            continue
        try:
            planned = pusher.plan(path)
        except OSError as error:
            out.write(f"{path}: would not be sent: {error}\n")
            continue
        if planned is None:
            out.write(f"{path}: unchanged since it was sent\n")
            continue
        mark, offset = planned
        parts = list(pusher.parts(path, mark, offset))
        start = f" from byte {offset:,}" if offset else ""
        size = sum(part.end - part.start for part in parts)
        redacted = sum((part.redacted for part in parts), Counter[str]())
        secrets = f"; {said_redacted(redacted)}" if redacted else ""
        out.write(f"{path}: would send {size:,} bytes{start}{secrets}\n")
    return 0


@dataclass
class _Run:
    """A run of the command: whom to send to, which files count, where to say what."""

    pusher: Pusher
    accepts: RecordingFilter | None
    out: TextIO
    err: TextIO
    stop: threading.Event
    failed: int = 0

    def accepted(self, found: list[tuple[Path, bool]]) -> list[Path]:
        """The recordings found (blobviewer.ingest.finding) that are the agents' own."""
        accepts = self.accepts
        return [path for path, named in found if named or accepts is None or accepts(path)]

    def push_all(self, found: list[tuple[Path, bool]]) -> None:
        """Push each recording found (path, named), counting in `failed` those that
        failed or were refused (a file found in a folder that is no recording is passed
        over)."""
        named = {path for path, is_named in found if is_named}
        files = self.accepted(found)
        progress = self.err.isatty()
        counts = dict.fromkeys(("sent", "unchanged", "refused", "skipped", "failed"), 0)
        started = time.monotonic()
        for number, path in enumerate(files, start=1):
            if self.stop.is_set():
                break
            if progress:
                self.err.write(f"\r\x1b[K[{number}/{len(files)}] {path.name}")
                self.err.flush()
            outcome = self.pusher.push(path)
            if outcome.kind == "skipped" and path in named:
                outcome.kind = "refused"
            counts[outcome.kind] += 1
            if progress:
                self.err.write("\r\x1b[K")
            if outcome.kind in ("sent", "skipped"):
                self.out.write(outcome.line() + "\n")
            elif outcome.kind != "unchanged":
                self.err.write(outcome.line() + "\n")
        took = time.monotonic() - started
        self.out.write(
            f"{counts['sent']} sent, {counts['unchanged']} unchanged, "
            f"{counts['skipped']} not recordings, {counts['refused']} refused, "
            f"{counts['failed']} not sent, in {took:.1f}s\n"
        )
        self.out.flush()
        self.failed += counts["refused"] + counts["failed"]


if __name__ == "__main__":
    sys.exit(command_line())
