"""`mcp proxy --upload` to a server that takes the upload and never answers, or answers a
byte every two seconds (a real HTTP server on the loopback, written here): the proxy
still exits within 5 s of its stdin closing or SIGTERM, the session log keeps what was
not sent, and the next upload sends it (docs/mcp.md#where-the-runs-go)."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from core.agent.history import ToolResult
from core.agent.session_log import read_session_log
from core.mcp import recording
from core.mcp.recording import ProxyRecorder
from core.promotion import admit_sync, promote
from core.store import FsBlobStore

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "fake_servers" / "results_server.py"
# Generous: a deadline against a hung test, never a measure of speed.
WAIT = 60
EXIT_WITHIN = 5.0
TRICKLE_EVERY = 2.0
BIG_TEXT = "".join(f"line {n}: the quick brown fox\n" for n in range(1, 2001))


class UploadServer(ThreadingHTTPServer):
    """`POST /api/sessions` on the loopback, answering each upload as *modes* say in turn
    (the last mode for every later one): `accept` (201), `silent` (never a byte) or
    `trickle` (a status line and a header that never end, a byte every TRICKLE_EVERY s)."""

    daemon_threads = True

    def __init__(self, *modes: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.modes = list(modes)
        self.bodies: list[bytes] = []
        self.received = threading.Event()
        self.stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api/sessions"

    def next_mode(self) -> str:
        return self.modes.pop(0) if len(self.modes) > 1 else self.modes[0]


class _Handler(BaseHTTPRequestHandler):
    server: UploadServer

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.bodies.append(body)
        self.server.received.set()
        mode = self.server.next_mode()
        if mode == "accept":
            self.send_response(201)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
        elif mode == "trickle":
            for byte in itertools.chain(b"HTTP/1.1 200 OK\r\nX-Wait: ", itertools.repeat(46)):
                if self.server.stopping.wait(TRICKLE_EVERY):
                    return
                self.wfile.write(bytes([byte]))
        else:
            self.server.stopping.wait()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (its name)
        pass


@contextmanager
def serving(*modes: str) -> Iterator[UploadServer]:
    server = UploadServer(*modes)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(params=["silent", "trickle"])
def hostile(request: pytest.FixtureRequest) -> Iterator[UploadServer]:
    with serving(request.param) as server:
        yield server


def message(request_id: int | None, method: str, params: dict) -> bytes:
    body: dict = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        body["id"] = request_id
    return json.dumps(body).encode() + b"\n"


@pytest.mark.parametrize("how", ["stdin closes", "SIGTERM"])
def test_the_proxy_exits_within_5_s_whatever_the_upload_server_does(
    tmp_path: Path, hostile: UploadServer, how: str
):
    proxy = subprocess.Popen(
        [
            *(sys.executable, "-m", "core", "mcp", "proxy", "--dir", str(tmp_path / "blobs")),
            *("--upload", hostile.url, "--", sys.executable, str(RESULTS)),
        ],
        cwd=REPO,
        env={**os.environ, "BLOBVIEWER_TOKEN": "secret"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proxy.stdin is not None and proxy.stdout is not None
        client = {"name": "t", "version": "1"}
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
        proxy.stdin.write(message(1, "initialize", hello))
        proxy.stdin.write(message(None, "notifications/initialized", {}))
        call = {"name": "big_text", "arguments": {"kb": 50}}
        proxy.stdin.write(message(2, "tools/call", call))
        proxy.stdin.flush()
        assert b'"serverInfo"' in proxy.stdout.readline()
        summary = json.loads(proxy.stdout.readline())["result"]["content"][0]["text"]
        assert hostile.received.wait(WAIT)  # the upload is under way, and stays so
        time.sleep(0.5)

        stopped = time.monotonic()
        if how == "SIGTERM":
            proxy.send_signal(signal.SIGTERM)
        else:
            proxy.stdin.close()
        assert proxy.wait(timeout=WAIT) == 0
        took = time.monotonic() - stopped
    finally:
        proxy.kill()
        proxy.wait()
    assert took < EXIT_WITHIN
    assert proxy.stderr is not None
    stderr = proxy.stderr.read().decode()
    assert f"the last upload to {hostile.url} did not finish within 3 s" in stderr
    kept = re.search(r"the session log stays in (\S+\.jsonl)", stderr)
    assert kept is not None, stderr
    items = read_session_log(Path(kept[1])).items()
    assert items[1] == ToolResult("mcp-1", "big_text", summary)
    blob_id = summary.removeprefix("[blob:").split("]", 1)[0]
    assert (tmp_path / "blobs" / f"{blob_id}.txt").exists()


def test_an_upload_given_up_goes_with_the_next_one(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setattr(recording, "UPLOAD_ROUND_SECONDS", 1.0)
    store = FsBlobStore(tmp_path / "blobs")
    blobs = []
    for text in (BIG_TEXT, BIG_TEXT.upper()):
        admitted = admit_sync(promote(text), store)
        blobs.append((admitted.text, str(admitted.blob_id)))

    with serving("silent", "accept") as server:
        recorder = ProxyRecorder(
            store, tmp_path / "sessions", server.url, "secret", ["node", "server.js"]
        )
        recorder.record_call("read_file", {"path": "one"}, blobs[0][0], [blobs[0][1]], False)
        assert server.received.wait(WAIT)
        deadline = time.monotonic() + WAIT
        while "did not finish within 1 s" not in capsys.readouterr().err:
            assert time.monotonic() < deadline, "the first upload was never given up"
            time.sleep(0.1)
        server.received.clear()

        recorder.record_call("read_file", {"path": "two"}, blobs[1][0], [blobs[1][1]], False)
        assert server.received.wait(WAIT)
        recorder.close()

        first, second = server.bodies
        log = recorder.log_path.read_bytes()
        assert b"one" in first and blobs[0][1].encode() in first
        assert log in second  # both calls
        for _, blob_id in blobs:  # the blob the first upload lost, and the new one
            assert f'filename="{blob_id}.txt"'.encode() in second
