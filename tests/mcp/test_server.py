"""`python -m core mcp serve`: a stdio MCP server exposing `inspect` over a blob store,
driven as a subprocess by the SDK's own client."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, MCPError, StdioServerParameters

from core.content import Structured, Text
from core.inspect_tool import (
    INSPECT_DESCRIPTION,
    INSPECT_NAME,
    INSPECT_PARAMETERS,
    InspectError,
    inspect_blob,
)
from core.store import FsBlobStore, open_store

REPO = Path(__file__).resolve().parents[2]
WAIT = 60  # a deadline against a hung test, never a measure of speed
MISSING = "01890a5d-ac96-774b-bcce-b302099a8057"

TEXT = "".join(f"{number}: a line of the log\n" for number in range(1, 501))
ROWS = [{"id": number, "name": f"row {number}", "tags": ["a", "b"]} for number in range(300)]
OBJECT = {"results": ROWS[:50], "count": 50, "next": None}


class Served:
    def __init__(self, portal: BlockingPortal, client: Client, store: FsBlobStore):
        self.portal = portal
        self.client = client
        self.store = store
        self.text = str(store.store_sync(Text(TEXT)))
        self.array = str(store.store_sync(Structured(ROWS)))
        self.object = str(store.store_sync(Structured(OBJECT)))

    def call(self, arguments: dict[str, Any], name: str = "inspect") -> types.CallToolResult:
        return self.portal.call(self.client.call_tool, name, arguments)


def serve_parameters(blob_dir: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "core", "mcp", "serve", "--dir", str(blob_dir)],
        cwd=REPO,
        env=dict(os.environ),
    )


@contextmanager
def _served(blob_dir: Path, mode: str) -> Iterator[Served]:
    store = FsBlobStore(blob_dir)
    client = Client(serve_parameters(blob_dir), mode=mode, read_timeout_seconds=WAIT)
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(client):
        yield Served(portal, client, store)


@pytest.fixture(scope="module", params=["legacy", "auto"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The server, to a handshake-era (2025-11-25) client and to a 2026-07-28 one."""
    with _served(tmp_path_factory.mktemp("serve") / "blobs", request.param) as served:
        yield served


def _arguments(blob_id: str, selector: str | None) -> dict[str, str]:
    return {"blob_id": blob_id} if selector is None else {"blob_id": blob_id, "selector": selector}


def _text(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def test_it_lists_the_inspect_tool_as_core_defines_it(served: Served):
    (tool,) = served.portal.call(served.client.list_tools).tools
    assert tool.name == INSPECT_NAME
    assert tool.description == INSPECT_DESCRIPTION
    assert tool.input_schema == INSPECT_PARAMETERS
    assert tool.output_schema is None


@pytest.mark.parametrize(
    ("blob", "selector"),
    [
        ("text", None),
        ("text", "lines:20-30"),
        ("text", "lines:1-500"),  # more than 8 KB: cut, with the selector that reads on
        ("text", "grep:^4[0-9]:"),
        ("array", None),
        ("array", "slice:10..13"),
        ("object", None),
        ("object", "key:results | slice:0..2"),
        ("object", "keys:1..3"),
    ],
)
def test_it_returns_exactly_what_the_inspect_tool_returns(
    served: Served, blob: str, selector: str | None
):
    blob_id = getattr(served, blob)
    arguments = (
        {"blob_id": blob_id} if selector is None else {"blob_id": blob_id, "selector": selector}
    )
    result = served.call(arguments)
    assert result.is_error is False
    assert _text(result) == inspect_blob(served.store, blob_id, selector)
    assert result.structured_content is None


@pytest.mark.parametrize(
    ("blob", "selector"),
    [
        ("not a uuid", None),
        (MISSING, None),
        (MISSING, "lines:1-"),
        ("text", "slice:0..3"),  # the wrong kind of step: it names what fits
        ("text", "lines:x"),
        ("array", "keys:0..3"),  # keys: fits objects only
        ("text", "grep:(unclosed"),
    ],
)
def test_a_bad_id_or_selector_is_a_tool_error_with_the_inspect_message(
    served: Served, blob: str, selector: str | None
):
    blob_id = getattr(served, blob, blob)
    arguments = (
        {"blob_id": blob_id} if selector is None else {"blob_id": blob_id, "selector": selector}
    )
    result = served.call(arguments)
    assert result.is_error is True
    with pytest.raises(InspectError) as raised:
        inspect_blob(served.store, blob_id, selector)
    assert _text(result) == str(raised.value)
    assert "\n" not in _text(result)


@pytest.mark.parametrize(
    ("arguments", "name", "message"),
    [
        ({}, "inspect", "inspect needs blob_id"),
        ({"blob_id": 7}, "inspect", "inspect needs blob_id"),
        ({"blob_id": MISSING, "selector": ["lines:1"]}, "inspect", "selector must be a string"),
        ({"blob_id": MISSING}, "cat", "unknown tool 'cat'; this server has only inspect"),
    ],
)
def test_bad_arguments_are_tool_errors_too(
    served: Served, arguments: dict[str, Any], name: str, message: str
):
    result = served.call(arguments, name=name)
    assert result.is_error is True
    assert _text(result).startswith(message)


def test_a_blob_link_reads_as_the_inspect_overview(served: Served):
    read = served.portal.call(served.client.read_resource, f"blob://{served.array}")
    (contents,) = read.contents
    assert contents.uri == f"blob://{served.array}"
    assert contents.text == inspect_blob(served.store, served.array)


@pytest.mark.parametrize("uri", [f"blob://{MISSING}", "blob://nonsense", "file:///etc/passwd"])
def test_reading_anything_else_is_resource_not_found(served: Served, uri: str):
    with pytest.raises(MCPError) as raised:
        served.portal.call(served.client.read_resource, uri)
    assert raised.value.code == -32002


def test_serve_takes_no_command(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "core", "mcp", "serve", "--dir", str(tmp_path), "--", "cat"],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: mcp serve runs no command (to wrap a server, use mcp proxy)\n"


def test_importing_core_and_its_cli_does_not_load_the_mcp_sdk():
    code = "import sys, core, core.cli, core.inspect_tool; print('mcp' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=WAIT
    )
    assert done.stdout == "False\n", done.stderr


def test_it_serves_an_object_store_given_by_store_url(s3_place) -> None:
    """`--store s3://bucket/prefix`: the same tool over blobs in object storage."""
    store = open_store(s3_place.url)
    blob_id = str(store.store_sync(Text(TEXT)))
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "core", "mcp", "serve", "--store", s3_place.url],
        cwd=REPO,
        env=dict(os.environ),
    )
    client = Client(parameters, read_timeout_seconds=WAIT)
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(client):
        result = portal.call(client.call_tool, "inspect", _arguments(blob_id, "lines:20-30"))
    assert not result.is_error
    assert _text(result) == inspect_blob(store, blob_id, "lines:20-30")
    assert "lines 20-30 of 500" in _text(result)


def test_dir_and_store_cannot_both_be_given(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "core", "mcp", "serve", "--dir", str(tmp_path), "--store", "x"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert done.returncode == 2
    assert "not allowed with argument" in done.stderr
