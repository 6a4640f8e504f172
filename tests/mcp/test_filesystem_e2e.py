"""End to end: `python -m core mcp proxy` in front of the reference filesystem server
(@modelcontextprotocol/server-filesystem, pinned in package-lock.json, installed by
`make test` with npm ci), driven by the SDK's own client over stdio.

Nothing here skips: without node or the installed server the tests fail, saying how to
install them.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import socketserver
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from django.core.management import call_command
from django.urls import reverse
from live_upload import wait_for
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from blobviewer.data_dir import blob_store
from blobviewer.models import ApiToken, Item, Session
from core.agent.session_log import read_session_log
from core.content import Text
from core.inspect_tool import inspect_blob
from core.store import FsBlobStore
from core.store.blob_id import parse_blob_id
from core.summary import summarize

REPO = Path(__file__).resolve().parents[2]
FS_SERVER = REPO / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist"
FS_SERVER_JS = FS_SERVER / "index.js"
SUMMARY_LIMIT = 400

BIG = "".join(f"line {n:05}: the quick brown fox jumps over the lazy dog\n" for n in range(1, 1501))
SMALL = "hello\nthis file is small: it passes through byte for byte\n"


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if found is None or not FS_SERVER_JS.exists():
        pytest.fail(
            "The filesystem MCP server is not installed: run `make node` (npm ci, with "
            "nodejs and npm from apt). These tests never skip.",
            pytrace=False,
        )
    return found


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The folder the filesystem server may read."""
    files = tmp_path / "files"
    files.mkdir()
    (files / "big.txt").write_text(BIG, encoding="utf-8")
    (files / "small.txt").write_text(SMALL, encoding="utf-8")
    return files


class SyncClient:
    """The SDK's client, called from plain test code (its loop runs on a portal thread),
    so that the tests can query the database between calls."""

    def __init__(self, portal: BlockingPortal, client: Client) -> None:
        self._portal = portal
        self._client = client

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return self._portal.call(self._client.call_tool, name, arguments)

    def list_tools(self) -> Any:
        return self._portal.call(self._client.list_tools)


@contextmanager
def connected(command: str, args: list[str], *, errlog: Path, env: dict | None = None):
    params = StdioServerParameters(command=command, args=args, cwd=REPO, env=env)
    with (
        errlog.open("a", encoding="utf-8") as err,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(stdio_client(params, errlog=err))) as client,
    ):
        yield SyncClient(portal, client)


def proxy_args(folder: Path, node: str, *options: str) -> list[str]:
    return ["-m", "core", "mcp", "proxy", *options, "--", node, str(FS_SERVER_JS), str(folder)]


@contextmanager
def proxy(folder: Path, node: str, *options: str, errlog: Path, env: dict | None = None):
    """The proxy in front of the filesystem server, until the client disconnects (then
    the proxy has stopped: its stdin closed, it finished recording and exited)."""
    with connected(sys.executable, proxy_args(folder, node, *options), errlog=errlog, env=env) as c:
        yield c


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content if block.type == "text"]


def blob_id_of(summary: str) -> str:
    assert summary.startswith("[blob:"), summary
    return str(parse_blob_id(summary[len("[blob:") : summary.index("]")]))


def dump(result: Any) -> dict[str, Any]:
    """The result as the wire carries it, less the server info that the SDK's server
    layer adds to every result's _meta (the proxy's own name, not the wrapped server's)."""
    wire = result.model_dump(by_alias=True, exclude_none=True)
    meta = wire.pop("_meta", {})
    meta.pop("io.modelcontextprotocol/serverInfo", None)
    return wire | ({"_meta": meta} if meta else {})


# --- what the agent gets -------------------------------------------------------------------


def test_a_big_file_reaches_the_agent_as_a_summary_and_its_blob_holds_the_output(
    tmp_path, folder, node
):
    blobs = tmp_path / "blobs"
    with proxy(folder, node, "--dir", str(blobs), errlog=tmp_path / "err") as client:
        tools = {tool.name: tool for tool in client.list_tools().tools}
        result = client.call("read_text_file", {"path": str(folder / "big.txt")})

    # The wrapped server's tools, listed without their output schemas, and inspect.
    assert "read_text_file" in tools
    assert "inspect" in tools
    assert tools["read_text_file"].output_schema is None
    assert "path" in tools["read_text_file"].input_schema["properties"]

    assert result.is_error is False
    # The server sends the file twice: as a text block and as {"content": <the text>}
    # under its output schema. Both are the file, stored once, as text (lines:, grep:).
    assert result.structured_content is None
    [summary] = texts(result)
    blob_id = blob_id_of(summary)
    assert summary == summarize(parse_blob_id(blob_id), Text(BIG))
    assert len(summary.encode()) <= SUMMARY_LIMIT
    links = [block for block in result.content if block.type == "resource_link"]
    assert [str(link.uri) for link in links] == [f"blob://{blob_id}"]
    assert FsBlobStore(blobs).load_sync(blob_id) == Text(BIG)
    [blob_file] = (path for path in blobs.iterdir() if path.is_file())
    assert blob_file.read_bytes() == (folder / "big.txt").read_bytes()


def test_inspect_through_the_proxy_reads_the_blob_back(tmp_path, folder, node):
    blobs = tmp_path / "blobs"
    selectors = [None, "lines:700-702", "grep:line 0123[0-4]", "lines:1000- | grep:7$"]
    with proxy(folder, node, "--dir", str(blobs), errlog=tmp_path / "err") as client:
        summary = texts(client.call("read_text_file", {"path": str(folder / "big.txt")}))[0]
        blob_id = blob_id_of(summary)
        views = {
            selector: client.call(
                "inspect", {"blob_id": blob_id} | ({"selector": selector} if selector else {})
            )
            for selector in selectors
        }
        bad_selector = client.call("inspect", {"blob_id": blob_id, "selector": "slice:0..2"})
        unknown = client.call("inspect", {"blob_id": "01234567-89ab-7def-8123-456789abcdef"})

    store = FsBlobStore(blobs)
    for selector, result in views.items():
        assert result.is_error is False
        assert texts(result) == [inspect_blob(store, blob_id, selector)]
    lines = texts(views["lines:700-702"])[0].split("\n")
    assert lines == [
        f"[blob:{blob_id}] lines 700-702 of 1500",
        *(BIG.split("\n")[n] for n in (699, 700, 701)),
    ]
    assert "1234: line 01234:" in texts(views["grep:line 0123[0-4]"])[0]
    for error in (bad_selector, unknown):
        assert error.is_error is True
        [message] = texts(error)
        assert "\n" not in message
    assert "this blob is text" in texts(bad_selector)[0]  # slice: applies to arrays


def test_small_results_and_errors_pass_byte_for_byte(tmp_path, folder, node):
    calls = [
        ("read_text_file", {"path": str(folder / "small.txt")}),
        ("list_directory", {"path": str(folder)}),
        ("read_text_file", {"path": "/etc/passwd"}),  # outside the folder: an error
        ("read_text_file", {"path": str(folder / "missing.txt")}),
    ]
    direct_args = [str(FS_SERVER_JS), str(folder)]
    with connected(node, direct_args, errlog=tmp_path / "err") as client:
        direct = [dump(client.call(name, arguments)) for name, arguments in calls]
    blobs = tmp_path / "blobs"
    with proxy(folder, node, "--dir", str(blobs), errlog=tmp_path / "err") as client:
        proxied = [dump(client.call(name, arguments)) for name, arguments in calls]

    assert proxied == direct
    assert direct[0]["content"] == [{"type": "text", "text": SMALL}]
    assert [result["isError"] for result in proxied] == [False, False, True, True]
    assert not blobs.exists() or not any(path.is_file() for path in blobs.iterdir())


# --- the session log, on the site ----------------------------------------------------------


def test_the_session_log_ingests_and_the_session_page_shows_the_calls(
    tmp_path, folder, node, data_dir, client, django_user_model
):
    # docs/mcp.md's recipe: --dir is the site's blob store, --log-dir its sessions folder.
    options = ("--dir", str(data_dir / "blobs"), "--log-dir", str(data_dir / "sessions"))
    with proxy(folder, node, *options, errlog=tmp_path / "err") as agent:
        summary = texts(agent.call("read_text_file", {"path": str(folder / "big.txt")}))[0]
        blob_id = blob_id_of(summary)
        inspected = texts(agent.call("inspect", {"blob_id": blob_id, "selector": "keys:0..1"}))
        agent.call("read_text_file", {"path": str(folder / "small.txt")})

    [log_path] = (data_dir / "sessions").glob("*.jsonl")
    log = read_session_log(log_path)
    calls = [(item.tool_calls[0].name, item.tool_calls[0].arguments) for item in log.items()[::2]]
    assert calls == [
        ("read_text_file", {"path": str(folder / "big.txt")}),
        ("inspect", {"blob_id": blob_id, "selector": "keys:0..1"}),
        ("read_text_file", {"path": str(folder / "small.txt")}),
    ]
    outputs = [item.output for item in log.items()[1::2]]
    assert outputs == [summary, inspected[0], SMALL]

    call_command("ingest", str(log_path), verbosity=0)

    session = Session.objects.get(id=log.id)
    assert session.item_count == 6
    assert session.blob_refs.filter(blob_id=blob_id).exists()
    assert session.output_bytes_received > len(BIG)  # counted from the stored blob
    client.force_login(django_user_model.objects.create_user("bob", password="x-y-z-w-v"))
    html = client.get(reverse("session_detail", args=[session.id])).content.decode()
    assert html.count('<code class="tool">read_text_file</code>') == 2
    assert reverse("blob_detail", args=[blob_id]) in html
    assert "kept out" in html


# --- uploads to a blobviewer server ----------------------------------------------------------


@pytest.fixture
def token(django_user_model: Any, transactional_db: None) -> tuple[ApiToken, str]:
    user = django_user_model.objects.create_user("alice", password="correct-horse-battery")
    return ApiToken.objects.issue(user=user, name="mcp proxy")


def test_upload_sends_the_session_and_its_blobs_to_a_live_server(
    tmp_path, folder, node, live_server, data_dir, token
):
    agent_blobs = tmp_path / "agent" / "blobs"  # another machine's store, not the site's
    options = ("--dir", str(agent_blobs), "--upload", f"{live_server.url}/api/sessions")
    env = {"BLOBVIEWER_TOKEN": token[1]}
    with proxy(folder, node, *options, errlog=tmp_path / "err", env=env) as agent:
        summary = texts(agent.call("read_text_file", {"path": str(folder / "big.txt")}))[0]
        blob_id = blob_id_of(summary)
        # Sent after the promoted call, while the proxy runs.
        wait_for(lambda: Item.objects.filter(blob_refs__blob_id=blob_id).exists(), what="upload")
        agent.call("read_text_file", {"path": str(folder / "small.txt")})

    session = Item.objects.filter(blob_refs__blob_id=blob_id).get().session
    assert session.owner == token[0].user
    assert session.item_count == 4  # and the rest at close
    assert blob_store().load_sync(blob_id) == Text(BIG)
    assert blob_store().load_sync(blob_id) == FsBlobStore(agent_blobs).load_sync(blob_id)


class Relay(socketserver.ThreadingTCPServer):
    """A port that is dead until the relay starts, then forwards to *target*: a server
    that was down and came back."""

    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.target = target
        super().__init__(("127.0.0.1", port), _Pipe)


class _Pipe(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        with socket.create_connection(self.server.target) as upstream:  # type: ignore[attr-defined]
            ends = {self.request: upstream, upstream: self.request}
            while True:
                readable, _, _ = select.select(list(ends), [], [], 30)
                if not readable:
                    return
                for end in readable:
                    data = end.recv(65536)
                    if not data:
                        return
                    ends[end].sendall(data)


@contextmanager
def relay(port: int, target_url: str) -> Iterator[None]:
    parts = urlsplit(target_url)
    server = Relay(port, (parts.hostname or "localhost", parts.port or 80))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def test_a_dead_upload_url_never_breaks_a_call_and_is_retried_later(
    tmp_path, folder, node, live_server, data_dir, token
):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (folder / "other.txt").write_text(BIG.upper(), encoding="utf-8")
    options = (
        "--dir",
        str(tmp_path / "blobs"),
        "--upload",
        f"http://127.0.0.1:{port}/api/sessions",
    )
    errlog = tmp_path / "err"
    with proxy(folder, node, *options, errlog=errlog, env={"BLOBVIEWER_TOKEN": token[1]}) as agent:
        first = agent.call("read_text_file", {"path": str(folder / "big.txt")})
        small = agent.call("read_text_file", {"path": str(folder / "small.txt")})
        wait_for(lambda: "failed" in errlog.read_text(), what="the failed upload said")
        first_blob = blob_id_of(texts(first)[0])
        assert not Session.objects.exists()

        with relay(port, live_server.url):  # the server is back
            second = agent.call("read_text_file", {"path": str(folder / "other.txt")})
            second_blob = blob_id_of(texts(second)[0])
            # Both blobs arrive with the log of all three calls.
            wait_for(lambda: Item.objects.count() == 6, what="the retried upload")
            assert blob_store().exists_sync(first_blob)
            assert blob_store().exists_sync(second_blob)

    # The calls made while the server was down got their answers whole.
    assert first.is_error is False and texts(small) == [SMALL]
    assert blob_store().load_sync(first_blob) == Text(BIG)
    assert blob_store().load_sync(second_blob) == Text(BIG.upper())
    assert "works again" in errlog.read_text()


def proxy_pid(marker: Path) -> int:
    """The pid of the proxy started with *marker* (a unique path) among its arguments."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or not ours to read
        if b"proxy" in words and str(marker).encode() in words:
            return int(entry.name)
    raise AssertionError(f"no proxy process with {marker} in its arguments")


def test_sigterm_sends_what_the_last_upload_lacked(
    tmp_path, folder, node, live_server, data_dir, token
):
    agent_blobs = tmp_path / "agent" / "blobs"
    options = ("--dir", str(agent_blobs), "--upload", f"{live_server.url}/api/sessions")
    env = {"BLOBVIEWER_TOKEN": token[1]}
    small = {"path": str(folder / "small.txt")}
    with proxy(folder, node, *options, errlog=tmp_path / "err", env=env) as agent:
        # Small calls start no upload: only the last one, as the proxy stops, sends them.
        for _ in range(3):
            assert texts(agent.call("read_text_file", small)) == [SMALL]
        assert not Session.objects.exists()
        pid = proxy_pid(agent_blobs)
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: Item.objects.count() == 6, what="the upload at SIGTERM")

    session = Session.objects.get()
    assert session.owner == token[0].user
    assert session.tool_result_count == 3
