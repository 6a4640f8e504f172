"""A wrapped server that misbehaves, as a real process (tests/mcp/fake_servers/
hostile_server.py): an answer that is not UTF-8, a one-line result of megabytes. The proxy
answers every call, and reads each line in time linear in its length
(docs/mcp.md#a-server-that-misbehaves)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import anyio
import mcp_types as types
import pytest
from fake_servers.hostile_server import big_text  # pytest puts tests/mcp on sys.path
from mcp import Client, StdioServerParameters

from core.mcp.line_splitter import LineSplitter
from core.mcp.server_lines import server_message
from core.mcp.wrapped_server import WrappedServer

REPO = Path(__file__).resolve().parents[2]
HOSTILE = Path(__file__).resolve().parent / "fake_servers" / "hostile_server.py"

# Generous: a deadline against a hung test, never a measure of speed.
WAIT = 60
MB = 2**20


def proxy_command(blob_dir: Path) -> list[str]:
    return [
        *(sys.executable, "-m", "core", "mcp", "proxy", "--dir", str(blob_dir)),
        *("--", sys.executable, str(HOSTILE)),
    ]


def request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return json.dumps(message).encode() + b"\n"


INITIALIZE = request(
    1,
    "initialize",
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
)
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


def read_answers(stdout: IO[bytes], count: int) -> list[dict[str, Any]]:
    """The next *count* messages the proxy writes, or those written within WAIT."""
    lines: list[bytes] = []

    def read() -> None:
        for _ in range(count):
            lines.append(stdout.readline())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(WAIT)
    return [json.loads(line) for line in list(lines) if line]


def test_an_answer_that_is_not_utf8_is_an_error_for_its_call_and_the_next_call_is_answered(
    tmp_path: Path,
):
    proxy = subprocess.Popen(
        proxy_command(tmp_path / "blobs"),
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proxy.stdin is not None and proxy.stdout is not None
        proxy.stdin.write(INITIALIZE + INITIALIZED)
        proxy.stdin.write(request(2, "tools/call", {"name": "not_utf8", "arguments": {}}))
        proxy.stdin.write(request(3, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
        proxy.stdin.flush()
        answers = read_answers(proxy.stdout, 3)
        proxy.stdin.close()
        assert proxy.wait(timeout=WAIT) == 0
    finally:
        proxy.kill()
        proxy.wait()
    assert len(answers) == 3, "the proxy stopped answering"
    refused, echoed = answers[1], answers[2]
    assert refused["id"] == 2
    assert refused["error"]["code"] == types.INTERNAL_ERROR
    assert refused["error"]["message"] == (
        "the proxy refused the wrapped server's answer: "
        "byte 0xff at offset 75 of its line is not UTF-8"
    )
    assert echoed["id"] == 3
    assert echoed["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert "Traceback" not in proxy.stderr.read().decode()


def test_a_notification_that_is_not_utf8_is_passed_on_with_replacements(capsys):
    line = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"a\xffb"}}\n'
    message = server_message(line)
    assert not isinstance(message, Exception)
    assert message.message == types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"data": "a\ufffdb"}
    )
    assert capsys.readouterr().err == (
        "blobviewer proxy: the wrapped server's notifications/message is passed on with "
        "U+FFFD in place of what UTF-8 cannot carry: "
        "byte 0xff at offset 69 of its line is not UTF-8\n"
    )


def test_an_answer_escaping_half_a_surrogate_pair_is_an_error_for_its_call():
    line = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a\\ud800"}]}}'
    message = server_message(bytearray(line))
    assert not isinstance(message, Exception)
    assert message.message == types.JSONRPCError(
        jsonrpc="2.0",
        id=7,
        error=types.ErrorData(
            code=types.INTERNAL_ERROR,
            message="the proxy refused the wrapped server's answer: "
            "it escapes half a surrogate pair ('\\ud800'), which is not UTF-8",
        ),
    )


def test_an_escaped_surrogate_pair_is_one_character():
    line = b'{"jsonrpc":"2.0","id":7,"result":{"text":"\\ud83d\\ude00 \\u00e9"}}\n'
    message = server_message(line)
    assert not isinstance(message, Exception)
    assert message.message == types.JSONRPCResponse(
        jsonrpc="2.0", id=7, result={"text": "\U0001f600 \u00e9"}
    )


def test_a_line_that_is_neither_utf8_nor_json_is_an_error_the_session_is_told():
    message = server_message(b'{"id": 4, "res\xff\n')
    assert isinstance(message, ValueError)
    assert str(message) == (
        "the wrapped server wrote a line that is not JSON-RPC: "
        "byte 0xff at offset 14 of its line is not UTF-8"
    )


def test_a_big_line_is_let_go_once_decoded():
    line = bytearray(b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + b"x" * 1000 + b'"}}\n')
    message = server_message(line)
    assert not isinstance(message, Exception)
    assert line == bytearray()  # emptied: its text and the line are never both held


def test_a_one_line_result_of_megabytes_is_scanned_once():
    size = 4 * MB

    async def scenario() -> tuple[str, int]:
        wrapped = WrappedServer([sys.executable, str(HOSTILE)])
        async with Client(wrapped, mode="legacy", read_timeout_seconds=WAIT) as client:
            result = await client.call_tool("big", {"mb": size / MB, "pieces": 16})
        (block,) = result.content
        assert isinstance(block, types.TextContent)
        return block.text, wrapped.scanned

    text, scanned = anyio.run(scenario)
    assert text == big_text(size).decode()
    # Every byte the server wrote is searched for a newline once: the result and a few
    # small messages. A reader that re-scans what it holds at each chunk of 64 KB would
    # scan 32 times the result.
    assert size < scanned < 3 * size


def test_a_small_call_is_answered_while_a_big_result_is_being_read(tmp_path: Path):
    command = proxy_command(tmp_path / "blobs")
    parameters = StdioServerParameters(
        command=command[0], args=command[1:], cwd=REPO, env=dict(os.environ)
    )

    async def scenario() -> tuple[types.CallToolResult, bool, types.CallToolResult]:
        async with Client(parameters, read_timeout_seconds=WAIT) as client:
            big: list[types.CallToolResult] = []

            async def call_big() -> None:
                # About 2.5 s of writing: the server pauses between its pieces.
                arguments = {"mb": 4, "pieces": 10, "pause": 0.25}
                big.append(await client.call_tool("big", arguments))

            async with anyio.create_task_group() as calls:
                calls.start_soon(call_big)
                await anyio.sleep(0.5)
                small = await client.call_tool("inspect", {"blob_id": "nope", "selector": ""})
                big_done_first = bool(big)
        return small, big_done_first, big[0]

    small, big_done_first, big = anyio.run(scenario)
    assert small.is_error and not big_done_first
    summary = big.content[0]
    assert isinstance(summary, types.TextContent) and summary.text.startswith("[blob:")
    blob_id = summary.text.removeprefix("[blob:").split("]", 1)[0]
    assert (tmp_path / "blobs" / f"{blob_id}.txt").read_bytes() == big_text(4 * MB)


@pytest.mark.parametrize("chunks", [[b"a\nb", b"c\n\nd"], [b"abc", b"", b"\n"], [b"\n" * 3]])
def test_the_splitter_cuts_lines_where_the_stream_has_newlines(chunks: list[bytes]):
    splitter = LineSplitter()
    lines = [line for chunk in chunks for line in splitter.feed(chunk)]
    lines.append(splitter.rest())
    assert b"".join(lines) == b"".join(chunks)
    assert all(line.endswith(b"\n") for line in lines[:-1])
    assert b"\n" not in lines[-1]
    assert splitter.scanned == sum(map(len, chunks))
