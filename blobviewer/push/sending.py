"""Sending one recording to a team server's `POST /api/recordings`, as it is, and only what
the server does not hold yet (docs/push.md).

The server holds a copy of each recording a user pushed, keyed by this machine's name for
it (`host:/absolute/path`). A push names the offset it sends from and a digest of the
bytes before it (blobviewer.ingest.marks.prefix_digest, as ingest marks grown files); the
server answers 409 with the offset it holds when that is not where the push began, and
the push goes on from there: so a lost state file, a restart or another machine's push of
the same path cost one round trip, never a line. A JSON Lines recording (`.jsonl`) only
grows, and sends its new bytes; any other is rewritten as it grows, and is sent whole.

What was sent is kept in a state file (the offset the server holds and the file's mark:
size, modification time, inode, edge digest), so an unchanged file costs no request. A
server that is down, slow, or busy is tried again with backoff, for as long as the
sender allows; a refusal (a file that is no recording, a session of another user's) is
kept too, and said again only once the file changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from blobviewer.ingest.folder_tars import folder_tar
from blobviewer.ingest.marks import FileMark, file_mark, prefix_digest
from core.redaction import redact_lines

# What one request sends at most, unless the server's limit is lower (it answers 413:
# the part is halved). The server's own default limit is 50 MB.
PART_BYTES = 16 << 20
# Backoff between tries of a server that is down or busy: doubling, up to this.
MOST_WAIT = 60.0
# The status of a push of a file that is no recording (blobviewer.team.pushed).
NOT_A_RECORDING = 422
# The statuses that say no to the recording as it is: kept, and said again only once the
# file changes (a bad part, another user's session, an outdated or pruned one, no recording).
_REFUSALS = {400, 403, 409, 410, NOT_A_RECORDING}
# The statuses worth trying again: the server is busy, restarting or overloaded.
_AGAIN = {429, 502, 503, 504}
# The smallest part a push halves its parts to when the server says they are too big.
_LEAST_PART = 64 << 10
# How often a push may be answered "send from another offset" before it gives up (the
# file keeps changing under it).
_CONFLICTS = 4


@dataclass
class Outcome:
    """What pushing one recording came to: *kind* is `sent`, `unchanged`, `refused` (the
    server said no; said again once the file changes), `skipped` (no recording, the
    server says; sent again once it changes) or `failed` (not sent this time: sent again
    next time). *sessions* as the server answered them."""

    path: Path
    kind: str
    message: str = ""
    sent_bytes: int = 0
    sessions: list[dict[str, Any]] = field(default_factory=list)
    redacted: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        """The outcome as one line for people."""
        if self.kind == "sent":
            made = ", ".join(
                f"+{session['new_items']} items ({session['items']} in all) {session['url']}"
                for session in self.sessions
            )
            secrets = f"; {said_redacted(self.redacted)}" if self.redacted else ""
            sent = f"{self.path}: sent {self.sent_bytes:,} bytes{secrets}"
            return sent + (f"; {made}" if made else "")
        return f"{self.path}: {self.kind}" + (f": {self.message}" if self.message else "")


def said_redacted(kinds: Counter[str]) -> str:
    """`2 secrets redacted (github_token, openai_key)`."""
    count = sum(kinds.values())
    return f"{count} secret{'s' if count != 1 else ''} redacted ({', '.join(sorted(kinds))})"


class TokenRefused(Exception):
    """The server does not know the token (401): nothing can be sent with it."""


class ServerUnreachable(Exception):
    """The server could not be reached, or stayed busy, for as long as the push may wait."""


@dataclass
class Held:
    """What the state file keeps of a recording: the offset the server holds, the mark of
    the file when that was sent, and the refusal that file got, if any."""

    offset: int
    mark: list[Any]
    refused: str = ""


class PushState:
    """The state file: per server, per recording path, what was sent (Held). Written
    whole, atomically, after each recording."""

    def __init__(self, path: Path, server: str) -> None:
        self.path, self.server = path, server
        try:
            self._all: dict[str, dict[str, Any]] = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            self._all = {}  # none yet, or unreadable: the server says where it stands
        self._mine = self._all.setdefault(server, {})

    def get(self, recording: Path) -> Held | None:
        entry = self._mine.get(str(recording.resolve()))
        return Held(**entry) if isinstance(entry, dict) else None

    def put(self, recording: Path, held: Held) -> None:
        self._mine[str(recording.resolve())] = asdict(held)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self.path.parent, prefix=".push-state-")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(self._all, file)
        os.replace(name, self.path)


def default_state_file() -> Path:
    """`$XDG_STATE_HOME/blobviewer/push.json` (default `~/.local/state/...`)."""
    root = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(root) / "blobviewer" / "push.json"


class Pusher:
    """Pushes recordings to the server at *url* with *token*. *wait*: how long a push
    goes on trying a server that is down or busy (None: for ever, until *stop* is set)."""

    def __init__(
        self,
        url: str,
        token: str,
        state: PushState,
        *,
        wait: float | None = 60.0,
        stop: threading.Event | None = None,
        part_bytes: int = PART_BYTES,
        host: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.endpoint = url.rstrip("/") + "/api/recordings"
        self.state = state
        self.wait, self.part_bytes = wait, part_bytes
        self.stop = stop or threading.Event()
        self.host = host or socket.gethostname()
        self.http = httpx.Client(
            headers={"Authorization": f"Bearer {token}", "User-Agent": "blobviewer-push"},
            timeout=httpx.Timeout(120.0, connect=10.0),
            transport=transport,  # the network's, unless a test gives another
        )

    def close(self) -> None:
        self.http.close()

    def plan(self, path: Path) -> tuple[FileMark, int] | None:
        """The file's mark and the offset a push of it would send from; None when it is
        as last sent (or last refused) and there is nothing to send."""
        mark = file_mark(path)
        if mark is None:
            raise OSError(f"{path}: not a file that can be read")
        held = self.state.get(path)
        if held is not None and held.mark == _as_list(mark):
            return None
        grows = path.suffix == ".jsonl" and held is not None and not held.refused
        offset = held.offset if grows and held and held.offset <= mark.size else 0
        return mark, offset

    def push(self, path: Path) -> Outcome:
        """Send what the server does not hold of the recording at *path*."""
        if path.is_dir():
            return self._push_folder(path)
        try:
            planned = self.plan(path)
        except OSError as error:
            return Outcome(path, "failed", str(error))
        if planned is None:
            return Outcome(path, "unchanged")
        mark, offset = planned
        try:
            return self._send(path, mark, offset)
        except ServerUnreachable as error:
            return Outcome(path, "failed", f"{error}; it is sent next time")
        except OSError as error:
            return Outcome(path, "failed", f"cannot read it: {error.strerror or error}")

    def _send(self, path: Path, mark: FileMark, offset: int) -> Outcome:
        sent, redacted, conflicts = 0, Counter[str](), 0
        # A file sent whole replaces what the server holds; a JSON Lines file goes on from
        # there, unless the server says what it holds is not this file's beginning.
        replace = path.suffix != ".jsonl"
        while True:
            answer = None
            for part in self.parts(path, mark, offset):
                answer = self._post(path, part, replace=replace and part.start == 0)
                if not answer.is_success:
                    break
                sent += part.end - part.start  # of the file (what went is redacted)
                redacted.update(part.redacted)
                offset = part.end
            if answer is None:  # nothing whole to send yet: a line still being written
                return Outcome(path, "unchanged", "waiting for the line being written")
            if answer.status_code == 413 and self.part_bytes > _LEAST_PART:
                self.part_bytes //= 2  # the server takes less at a time
                continue
            if answer.status_code == 409 and "Blobviewer-Offset" in answer.headers:
                conflicts += 1
                if conflicts > _CONFLICTS:
                    return Outcome(path, "failed", "the file kept changing while it was sent")
                held = int(answer.headers["Blobviewer-Offset"])
                offset = held if 0 < held <= mark.size else 0
                replace = replace or offset == 0
                continue
            return self._answered(path, answer, _as_list(mark), sent, redacted)

    def _answered(
        self,
        path: Path,
        answer: httpx.Response,
        mark: list[Any],
        sent: int,
        redacted: Counter[str],
    ) -> Outcome:
        """What the server's last *answer* to a push of *path* (now *mark*) comes to."""
        if answer.is_success:
            try:
                body = answer.json()
                held = int(body["offset"])
            except (ValueError, KeyError, TypeError):
                return Outcome(path, "failed", "the server's answer is not blobviewer's")
            self.state.put(path, Held(held, mark))
            sessions = body.get("sessions", [])
            if not sent and not any(session["new_items"] for session in sessions):
                return Outcome(path, "unchanged", "the server holds it already")
            return Outcome(path, "sent", "", sent, sessions, redacted)
        refusal = answer.text.strip() or f"HTTP {answer.status_code}"
        if answer.status_code == 401:
            raise TokenRefused(refusal)
        if answer.status_code not in _REFUSALS:  # the server's trouble, or not a blobviewer
            return Outcome(path, "failed", f"HTTP {answer.status_code}: {refusal[:200]}")
        self.state.put(path, Held(0, mark, refused=refusal))
        kind = "skipped" if answer.status_code == NOT_A_RECORDING else "refused"
        return Outcome(path, kind, refusal)

    def _push_folder(self, folder: Path) -> Outcome:
        """A conversation folder, sent whole (a tar of its files, each redacted) when any
        of its files changed since it was last sent."""
        try:
            mark = folder_mark(folder)
            held = self.state.get(folder)
            if held is not None and held.mark == mark:
                return Outcome(folder, "unchanged")
            redacted: Counter[str] = Counter()
            data = folder_tar(folder, transform=lambda data: _counted(data, redacted))
            part = Part(0, len(data), data, redacted, final=True)
            answer = self._post(folder, part, layout="folder")
            return self._answered(folder, answer, mark, len(data), redacted)
        except ServerUnreachable as error:
            return Outcome(folder, "failed", f"{error}; it is sent next time")
        except OSError as error:
            return Outcome(folder, "failed", f"cannot read it: {error.strerror or error}")

    def parts(self, path: Path, mark: FileMark, offset: int) -> Iterator[Part]:
        """What a push of *path* from *offset* sends, a part a request, its secrets
        redacted: a JSON Lines recording's whole lines up to its marked size (a line
        still being written waits), a part at most part_bytes (but at least a line);
        any other recording whole, in one part."""
        with path.open("rb") as file:
            if path.suffix != ".jsonl":
                data = file.read(mark.size)
                body, redacted = redact_lines(data)
                yield Part(0, len(data), body, redacted, final=True)
                return
            stop = _whole_lines_end(file, offset, mark.size)
            while offset < stop:
                file.seek(offset)
                data = file.read(min(self.part_bytes, stop - offset))
                whole = data.rfind(b"\n") + 1
                if not whole:  # a line longer than a part: the part is that line
                    data += file.read(stop - offset - len(data))
                    whole = data.find(b"\n", self.part_bytes) + 1
                body, redacted = redact_lines(data[:whole])
                yield Part(offset, offset + whole, body, redacted, final=offset + whole >= stop)
                offset += whole

    def _post(
        self, path: Path, part: Part, *, layout: str = "file", replace: bool = False
    ) -> httpx.Response:
        """One request, tried again with backoff while the server is down or busy."""
        params = {
            "key": f"{self.host}:{path.resolve()}",
            "name": path.name,
            "offset": str(part.start),
            "final": "1" if part.final else "0",
            "layout": layout,
        }
        if layout == "file":
            params.update(end=str(part.end), end_prefix=prefix_digest(path, part.end) or "")
        if part.start:
            params["prefix"] = prefix_digest(path, part.start) or ""
        if replace:
            params["replace"] = "1"
        for delay in self._delays():
            try:
                answer = self.http.post(
                    self.endpoint,
                    params=params,
                    content=part.body,
                    headers={"Content-Type": "application/octet-stream"},
                )
            except (httpx.NetworkError, httpx.TimeoutException, httpx.RemoteProtocolError) as error:
                problem = f"the server cannot be reached ({type(error).__name__})"
            else:
                if answer.status_code not in _AGAIN:
                    return answer
                problem = f"the server is busy (HTTP {answer.status_code})"
            if delay is None or self.stop.wait(delay):
                raise ServerUnreachable(problem)
        raise AssertionError("_delays ends with None")

    def _delays(self) -> Iterator[float | None]:
        """How long to wait after each failed try: doubling from 1 s to MOST_WAIT, until
        *wait* seconds have been spent; then None (give up)."""
        waited, delay = 0.0, 1.0
        while self.wait is None or waited + delay <= self.wait:
            yield delay
            waited += delay
            delay = min(delay * 2, MOST_WAIT)
        yield None


@dataclass(frozen=True)
class Part:
    """One request's worth of a recording: its bytes from *start* to *end* in the file,
    the *body* sent for them (redacted), the kinds of secrets redacted, and whether it is
    the last part."""

    start: int
    end: int
    body: bytes
    redacted: Counter[str]
    final: bool


def folder_mark(folder: Path) -> list[Any]:
    """What a conversation folder is like now: a digest of its files' names, sizes and
    modification times (a file added, removed or changed changes it)."""
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            status = path.stat()
            digest.update(
                f"{path.relative_to(folder)}\0{status.st_size}\0{status.st_mtime_ns}\n".encode()
            )
    return ["folder", digest.hexdigest()]


def _counted(data: bytes, redacted: Counter[str]) -> bytes:
    """*data* redacted (redact_lines), its kinds added to *redacted*."""
    body, kinds = redact_lines(data)
    redacted.update(kinds)
    return body


def _whole_lines_end(file: BinaryIO, start: int, end: int) -> int:
    """Where the last whole line between *start* and *end* ends (*start* if none), read
    from the end back a block at a time."""
    at = end
    while at > start:
        size = min(1 << 16, at - start)
        file.seek(at - size)
        newline = file.read(size).rfind(b"\n")
        if newline >= 0:
            return at - size + newline + 1
        at -= size
    return start


def _as_list(mark: FileMark) -> list[Any]:
    return [mark.device, mark.inode, mark.size, mark.mtime_ns, mark.edges]
