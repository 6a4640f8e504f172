"""What `python -m core mcp proxy` records: every call it forwards, in one blobviewer session
log per proxy run (docs/session-log.md), and, with `--upload URL`, that log and its blobs
sent to a blobviewer server through `POST /api/sessions`
(docs/http-api.md#sending-sessions-from-another-machine).

Each call is two items, as the Worker writes them: an assistant item with the tool call
(its name and arguments) and the tool result with the text the agent got (for a promoted
result, the `[blob:<id>] …` summary), so the site ingests an MCP run like any other.

Recording never fails a call: a log that cannot be written or an upload that fails is
said once on stderr (which MCP clients keep in their server logs), and the call goes on.
Uploads run on a thread of their own, so a slow or dead server never holds up the agent:
after each promoted call the grown log is sent with the blobs not yet accepted, and once
more at close. A failed upload is retried at the next one. Timeouts bound each read and
write of an upload, not the upload: a server that answers a byte every few seconds would
hold it forever. So an upload is given up after UPLOAD_ROUND_SECONDS (what it carried goes
with the next one), and the last one, at close, after CLOSE_UPLOAD_SECONDS, so the proxy
exits promptly whatever the server does (the log then stays on disk).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from core.agent.history import AssistantMessage, ToolCall, ToolResult
from core.agent.session_log import SessionLogWriter
from core.content import Content, Text, encode_text
from core.json_values import dumps_for_storage
from core.store import BlobStore
from core.store.blob_id import new_blob_id
from core.store.errors import BlobStoreError

# One upload carries the log and at most this many blobs, and of blobs at most this many
# bytes (the site's defaults are 1,000 files and 50 MB); more go in further uploads, each
# with the log. A blob larger than that goes alone.
UPLOAD_MAX_BLOBS = 100
UPLOAD_BLOB_BYTES = 16 * 1024 * 1024
# How long an upload waits for a server that accepted the connection and says nothing
# (ingesting a big upload takes the server a while); the agent's calls never wait for it.
UPLOAD_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
# Seconds one upload (the log and its blobs, in one or more POSTs) may take while the proxy
# runs, and the last one when it stops: it exits within 5 s of its stdin closing or
# SIGTERM (docs/mcp.md#where-the-runs-go), and stopping the wrapped server comes first.
UPLOAD_ROUND_SECONDS = 120.0
CLOSE_UPLOAD_SECONDS = 3.0
TITLE_MAX_CHARS = 200
_PREFIX = "blobviewer mcp proxy"
# What one POST came to.
_ACCEPTED, _REFUSED, _TOO_LARGE, _UNREACHABLE = "accepted", "refused", "too large", "unreachable"


class ProxyRecorder:
    """Records the calls of one proxy run.

    *log_dir* is where the session log is written (`<session_id>.jsonl`), from the first
    call on (a run without calls leaves no empty session behind); with only *upload_url*,
    the log is kept in a temporary folder, removed at close once everything was uploaded.
    With neither, nothing is recorded. *token* is sent as `Authorization: Bearer <token>`.
    *command* is the wrapped server's command line, which names the session.
    """

    def __init__(
        self,
        store: BlobStore,
        log_dir: Path | None,
        upload_url: str | None,
        token: str | None,
        command: list[str],
    ) -> None:
        self._store = store
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._command = list(command)
        self._lock = threading.Lock()
        self._calls = 0
        self._closed = False
        self._broken = False  # the log could not be written: recording stopped
        self._warned: set[str] = set()
        self._temp_dir: Path | None = None
        self._writer: SessionLogWriter | None = None
        self._uploader: _Uploader | None = None
        self._recording = log_dir is not None or bool(upload_url)
        self.session_id: str | None = str(new_blob_id()) if self._recording else None
        self._upload = (upload_url, token) if upload_url else None

    @property
    def log_path(self) -> Path | None:
        """The session log, once the first call was recorded; None before and without one."""
        return self._writer.path if self._writer else None

    def record_call(
        self,
        tool: str,
        arguments: dict[str, Any],
        agent_text: str,
        blob_ids: list[str],
        is_error: bool,
        redactions: int = 0,
    ) -> None:
        """Record one forwarded call: its tool and arguments, and *agent_text*, what the
        agent got back; *blob_ids* are the blobs the call's result was promoted to (they
        make an upload start); *redactions* the secrets redacted out of it. Never raises."""
        try:
            self._record(tool, arguments, agent_text, blob_ids, is_error, redactions)
        except Exception as error:  # noqa: BLE001 (a recording must never fail the call)
            self._warn(f"cannot record a call of {tool!r}: {error}")

    def _record(
        self,
        tool: str,
        arguments: Any,
        agent_text: str,
        blob_ids: Sequence[str],
        is_error: bool,
        redactions: int,
    ) -> None:
        with self._lock:
            if not self._recording or self._closed or self._broken:
                return
            writer = self._writer or self._open()
            if writer is None:
                return
            self._calls += 1
            call_id = f"mcp-{self._calls}"
            # Both items in one turn of the lock, so concurrent calls never interleave
            # between a call and its result.
            writer.append(AssistantMessage("", (ToolCall(call_id, tool, arguments),)))
            writer.append(
                ToolResult(call_id, tool, agent_text, is_error=is_error, redactions=redactions)
            )
        if self._uploader is not None and blob_ids:
            self._uploader.request(blob_ids)

    def _open(self) -> SessionLogWriter | None:
        """Start the session log (and the uploader), at the first call; None when the log
        cannot be written, which is said once and stops recording."""
        try:
            directory = self._log_dir
            if directory is None:
                self._temp_dir = Path(tempfile.mkdtemp(prefix="blobviewer-mcp-"))
                directory = self._temp_dir
            self._writer = SessionLogWriter(
                directory,
                title=_title(self._command),
                meta={"source": "mcp proxy", "command": self._command, "cwd": os.getcwd()},
                session_id=self.session_id,
            )
        except (OSError, ValueError) as error:
            self._broken = True
            self._warn(f"cannot write the session log, so this run is not recorded: {error}")
            return None
        if self._upload is not None:
            url, token = self._upload
            self._uploader = _Uploader(
                url, token, store=self._store, log_path=self._writer.path, warn=self._warn
            )
        return self._writer

    def close(self) -> None:
        """Stop recording: the log is closed and, with an upload URL, sent once more with
        any blob not yet accepted, waiting at most CLOSE_UPLOAD_SECONDS for the upload
        under way and that last one. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            writer = self._writer
        if writer is None:
            return
        with contextlib.suppress(OSError):
            writer.close()
        uploaded = True
        if self._uploader is not None:
            try:
                uploaded = self._uploader.close(CLOSE_UPLOAD_SECONDS)
            except Exception as error:  # noqa: BLE001 (close runs as the proxy stops)
                self._warn(f"the last upload failed: {error}")
                uploaded = False
        if self._temp_dir is not None:
            if uploaded:
                shutil.rmtree(self._temp_dir, ignore_errors=True)
            else:
                self._warn(
                    f"the session log stays in {writer.path}; send it with its blobs later "
                    "(README, 'Sending sessions from another machine')"
                )

    def _warn(self, message: str) -> None:
        # Each message once: a dead server would otherwise fill the client's log.
        if message in self._warned:
            return
        self._warned.add(message)
        _say(message)


def _say(message: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"{_PREFIX}: {message}", file=sys.stderr, flush=True)


class _Uploader:
    """Sends the session log and the blobs of promoted calls on a thread of its own, one
    upload (a *round*) at a time, each with a client of its own: a round that outlives its
    deadline is left to its thread, and the next round does not wait for it."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        store: BlobStore,
        log_path: Path,
        warn: Callable[[str], None],
    ) -> None:
        self._url = url
        self._store = store
        self._log_path = log_path
        self._warn = warn
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._lock = threading.Lock()
        self._pending: dict[str, None] = {}  # blob ids not yet accepted, in order
        self._accepted_log_bytes = 0  # how much of the log the server has
        self._failure: str | None = None  # what the last upload ran into, while it lasts
        self._wanted = threading.Event()
        self._stopping = False
        self._close_deadline = 0.0  # time.monotonic() by which the last round must end
        self._everything = False  # the last round's outcome
        self._thread = threading.Thread(target=self._run, name="blobviewer-upload", daemon=True)
        self._thread.start()

    def request(self, blob_ids: Sequence[str]) -> None:
        """Ask for an upload of the grown log with *blob_ids* (and any left from before)."""
        with self._lock:
            self._pending.update(dict.fromkeys(str(blob_id) for blob_id in blob_ids))
        self._wanted.set()

    def close(self, within: float) -> bool:
        """Let the round under way finish, then upload what is left, all within *within*
        seconds; True when the server has the whole log and every blob. A round still
        running then is left to its thread (a daemon: it ends with the process)."""
        self._close_deadline = time.monotonic() + within
        self._stopping = True
        self._wanted.set()
        self._thread.join(within)
        if self._thread.is_alive():
            self._warn(f"the last upload to {self._url} did not finish within {within:g} s")
            return False
        return self._everything

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._stopping:
                self._everything = self._round(self._close_deadline)
                return
            self._within(UPLOAD_ROUND_SECONDS)

    def _within(self, seconds: float) -> None:
        """One round on a thread of its own, given up after *seconds*."""
        deadline = time.monotonic() + seconds
        worker = threading.Thread(
            target=self._round, args=(deadline,), name="blobviewer-upload-round", daemon=True
        )
        worker.start()
        worker.join(seconds)
        if worker.is_alive():
            self._failed(f"upload to {self._url} did not finish within {seconds:g} s")

    def _round(self, deadline: float) -> bool:
        try:
            with httpx.Client(headers=self._headers, timeout=UPLOAD_TIMEOUT) as client:
                return self._upload(client, deadline)
        except Exception as error:  # noqa: BLE001 (the thread must outlive any failure)
            self._failed(f"upload failed: {error}")
            return False

    def _upload(self, client: httpx.Client, deadline: float) -> bool:
        """One round: the log as written so far, with every pending blob; True when all
        of it was accepted. No POST starts after *deadline* (a time.monotonic())."""
        try:
            log = self._log_path.read_bytes()
        except FileNotFoundError:
            log = b""  # removed behind the proxy's back
        except OSError as error:
            self._failed(f"cannot read the session log to upload it: {error.strerror}")
            return False
        log = log[: log.rfind(b"\n") + 1]  # whole lines only: a line may be half written
        with self._lock:
            pending = list(self._pending)
        if not log:
            self._failed("the session log is gone, so it cannot be uploaded")
            return False
        everything, posted = True, False

        def post(blobs: list[tuple[str, str, bytes]]) -> str:
            if time.monotonic() >= deadline:
                return _UNREACHABLE  # the round was given up: the next one sends the rest
            return self._post(client, log, blobs)

        for batch in _batches(self._store, pending, self._dropped):
            outcome = post(batch)
            if outcome == _TOO_LARGE:
                # Over the server's upload limit: each blob alone, and one that is
                # refused even alone is left out (it would be refused at every retry,
                # and the log with it); the site shows it missing.
                outcomes = [post([blob]) for blob in batch]
                for blob, alone in zip(batch, outcomes, strict=True):
                    if alone == _TOO_LARGE:
                        self._dropped(blob[0], "larger than the server takes in one upload")
                kept = [alone for alone in outcomes if alone != _TOO_LARGE]
                if not kept:
                    continue
                worst = [o for o in (_UNREACHABLE, _REFUSED) if o in kept]
                outcome = worst[0] if worst else _ACCEPTED
            if outcome == _UNREACHABLE:
                return False  # the next batches would not get through either
            everything = everything and outcome == _ACCEPTED
            posted = True
        if not posted and len(log) > self._accepted_log_bytes:  # no blobs: the log alone
            return post([]) == _ACCEPTED
        return everything

    def _post(self, client: httpx.Client, log: bytes, blobs: list[tuple[str, str, bytes]]) -> str:
        files: list[tuple[str, tuple[str, bytes, str]]] = [
            ("log", ("session.jsonl", log, "application/x-ndjson"))
        ]
        for _, name, data in blobs:
            kind = "application/json" if name.endswith(".json") else "text/plain"
            files.append(("blob", (name, data, kind)))
        try:
            response = client.post(self._url, files=files)
        except httpx.HTTPError as error:
            self._failed(f"upload to {self._url} failed: {error or type(error).__name__}")
            return _UNREACHABLE
        if response.status_code not in (200, 201):
            lines = response.text.strip().splitlines()
            answer = lines[0][:300] if lines else ""
            self._failed(f"upload to {self._url} refused: {response.status_code} {answer}")
            return _TOO_LARGE if response.status_code == 413 else _REFUSED
        with self._lock:
            for blob_id, _, _ in blobs:
                self._pending.pop(blob_id, None)
        self._accepted_log_bytes = max(self._accepted_log_bytes, len(log))
        if self._failure is not None:
            self._failure = None
            _say(f"upload to {self._url} works again")
        return _ACCEPTED

    def _dropped(self, blob_id: str, error: BlobStoreError | str) -> None:
        # A blob the store cannot give back, or the server never takes, is not retried.
        with self._lock:
            self._pending.pop(blob_id, None)
        self._warn(f"blob {blob_id} is not uploaded: {error}")

    def _failed(self, message: str) -> None:
        # Said when it changes, not at every retry against a server that stays down.
        if message != self._failure:
            _say(f"{message}; retried with the next upload")
        self._failure = message


def _batches(
    store: BlobStore, blob_ids: Sequence[str], dropped: Callable[[str, BlobStoreError], None]
) -> Iterator[list[tuple[str, str, bytes]]]:
    """The blobs as `(id, file name, bytes)`, in uploads of at most UPLOAD_MAX_BLOBS blobs
    and UPLOAD_BLOB_BYTES bytes (a bigger blob alone), read one upload at a time."""
    batch: list[tuple[str, str, bytes]] = []
    size = 0
    for blob_id in blob_ids:
        try:
            name, data = _blob_file(store, blob_id)
        except BlobStoreError as error:
            dropped(blob_id, error)
            continue
        if batch and (len(batch) >= UPLOAD_MAX_BLOBS or size + len(data) > UPLOAD_BLOB_BYTES):
            yield batch
            batch, size = [], 0
        batch.append((blob_id, name, data))
        size += len(data)
    if batch:
        yield batch


def _blob_file(store: BlobStore, blob_id: str) -> tuple[str, bytes]:
    """The blob as the site's store keeps it: `<id>.txt` (UTF-8) or `<id>.json`."""
    content: Content = store.load_sync(blob_id)
    if isinstance(content, Text):
        return f"{blob_id}.txt", encode_text(content.text)
    return f"{blob_id}.json", dumps_for_storage(content.value)


def _title(command: Sequence[str]) -> str:
    title = f"MCP: {shlex.join(command)}" if command else "MCP proxy"
    return title if len(title) <= TITLE_MAX_CHARS else title[: TITLE_MAX_CHARS - 1] + "…"
