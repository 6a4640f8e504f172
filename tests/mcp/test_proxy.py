"""`python -m core mcp proxy`: driven as a subprocess by the SDK's own client over stdio,
in front of small real MCP servers written with the SDK (tests/mcp/fake_servers/).

What the agent receives through the proxy is compared with what the same server returns
when called directly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, MCPError, StdioServerParameters

from core.agent.session_log import read_session_log
from core.content import Structured, Text, utf8_size
from core.inspect_tool import (
    INSPECT_DESCRIPTION,
    INSPECT_PARAMETERS,
    InspectError,
    inspect_blob,
)
from core.json_values import parse_json
from core.mcp.result_promotion import promote_result
from core.store import FsBlobStore
from core.store.blob_id import parse_blob_id
from core.summary import summarize

REPO = Path(__file__).resolve().parents[2]
SERVERS = Path(__file__).resolve().parent / "fake_servers"
RESULTS = SERVERS / "results_server.py"
# Generous: a deadline against a hung test, never a measure of speed.
WAIT = 60


def server_parameters(script: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=[str(script)], cwd=REPO, env=dict(os.environ)
    )


def proxy_parameters(
    blob_dir: Path, script: Path, *, log_dir: Path | None = None
) -> StdioServerParameters:
    args = ["-m", "core", "mcp", "proxy", "--dir", str(blob_dir)]
    if log_dir is not None:
        args += ["--log-dir", str(log_dir)]
    args += ["--", sys.executable, str(script)]
    return StdioServerParameters(command=sys.executable, args=args, cwd=REPO, env=dict(os.environ))


@asynccontextmanager
async def proxied(
    tmp_path: Path, script: Path, *, mode: str = "auto", log_dir: Path | None = None, **options: Any
) -> AsyncIterator[Client]:
    parameters = proxy_parameters(tmp_path / "blobs", script, log_dir=log_dir)
    async with Client(parameters, mode=mode, read_timeout_seconds=WAIT, **options) as client:
        yield client


class Session:
    """A client of the proxy and one of the same server directly, called from plain test
    code (their loop runs on a portal thread): one proxy serves the module's tests."""

    def __init__(self, portal: BlockingPortal, proxy: Client, direct: Client, blobs: Path):
        self.portal = portal
        self.proxy = proxy
        self.direct = direct
        self.store = FsBlobStore(blobs)
        self.blobs = blobs

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        return self.portal.call(self.proxy.call_tool, name, arguments or {})

    def call_direct(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        return self.portal.call(self.direct.call_tool, name, arguments or {})

    def blob_files(self) -> set[str]:
        return {path.name for path in self.blobs.glob("*.*") if not path.name.startswith(".")}


@contextmanager
def _entered(portal: BlockingPortal, client: Client) -> Iterator[Client]:
    with portal.wrap_async_context_manager(client) as entered:
        yield entered


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    blobs = tmp_path_factory.mktemp("proxy") / "blobs"
    proxy = Client(proxy_parameters(blobs, RESULTS), read_timeout_seconds=WAIT)
    direct = Client(server_parameters(RESULTS), read_timeout_seconds=WAIT)
    with start_blocking_portal() as portal, _entered(portal, proxy), _entered(portal, direct):
        yield Session(portal, proxy, direct, blobs)


def _dump(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude={"meta"})


def _texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def _links(result: types.CallToolResult) -> list[types.ResourceLink]:
    return [block for block in result.content if isinstance(block, types.ResourceLink)]


def _blob_of(summary: str) -> str:
    assert summary.startswith("[blob:"), summary
    return summary[len("[blob:") : summary.index("]")]


# -- listing ------------------------------------------------------------------------------


def test_it_lists_the_servers_tools_without_output_schemas_and_adds_inspect(results: Session):
    direct = results.portal.call(results.direct.list_tools).tools
    listed = results.portal.call(results.proxy.list_tools).tools
    assert [tool.name for tool in listed] == [tool.name for tool in direct] + ["inspect"]
    assert any(tool.output_schema is not None for tool in direct)
    for mine, theirs in zip(listed, direct, strict=False):
        assert mine.description == theirs.description
        assert mine.input_schema == theirs.input_schema
        assert mine.output_schema is None
    inspect = listed[-1]
    assert inspect.description == INSPECT_DESCRIPTION
    assert inspect.input_schema == INSPECT_PARAMETERS


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_it_serves_agents_of_either_protocol_era(tmp_path: Path, mode: str):
    async def scenario() -> tuple[str, list[str], str]:
        async with proxied(tmp_path, RESULTS, mode=mode) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            small = await client.call_tool("small", {"text": "hi"})
            big = await client.call_tool("big_text", {"kb": 5})
            return client.protocol_version, names, _texts(small)[0] + "|" + _texts(big)[0]

    version, names, texts = anyio.run(scenario)
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert "inspect" in names and "big_text" in names
    small, big = texts.split("|", 1)
    assert small == "hi"
    assert big.startswith("[blob:") and " text | " in big.splitlines()[0]


# -- small results ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("small", {"text": 'héllo ✓\n\ttabs, "quotes" and a trailing space '}),
        ("small", {"text": "x" * 800}),  # exactly the limit: still inline
        ("listing", {"count": 3}),  # a small structured result, with its structuredContent
        ("image", {}),
        ("fail", {"message": "the disk is on fire"}),
    ],
)
def test_a_small_result_reaches_the_agent_as_the_server_sent_it(
    results: Session, tool: str, arguments: dict[str, Any]
):
    before = results.blob_files()
    through_proxy = results.call(tool, arguments)
    assert _dump(through_proxy) == _dump(results.call_direct(tool, arguments))
    assert results.blob_files() == before


def test_an_error_stays_an_error(results: Session):
    result = results.call("fail", {"message": "no such file"})
    assert result.is_error is True
    assert _texts(result) == ["Error executing tool fail: no such file"]


def test_an_unknown_tool_is_answered_as_the_server_answers_it(results: Session):
    assert _dump(results.call("no_such_tool")) == _dump(results.call_direct("no_such_tool"))


# -- promotion ----------------------------------------------------------------------------


def test_a_big_text_result_becomes_a_text_blob_and_its_summary(results: Session):
    original = _texts(results.call_direct("big_text", {"kb": 50}))[0]
    assert utf8_size(original) > 50_000
    result = results.call("big_text", {"kb": 50})

    summary, link = _texts(result), _links(result)
    assert len(summary) == 1 and len(link) == 1 and len(result.content) == 2
    blob_id = _blob_of(summary[0])
    # The summary of docs/promotion.md#summaries, byte for byte, and within its 400 bytes.
    assert summary[0] == summarize(parse_blob_id(blob_id), Text(original))
    assert utf8_size(summary[0]) <= 400
    assert result.structured_content is None and result.is_error is False
    # The blob file is the original output.
    assert (results.blobs / f"{blob_id}.txt").read_bytes() == original.encode()
    assert link[0].uri == f"blob://{blob_id}"
    assert link[0].mime_type == "text/plain"
    assert link[0].size == len(original.encode())


def test_inspect_through_the_proxy_reads_the_blob_back(results: Session):
    original = _texts(results.call_direct("big_text", {"kb": 20}))[0]
    blob_id = _blob_of(_texts(results.call("big_text", {"kb": 20}))[0])

    overview = results.call("inspect", {"blob_id": blob_id})
    assert overview.is_error is False
    assert _texts(overview) == [inspect_blob(results.store, blob_id)]
    lines = results.call("inspect", {"blob_id": blob_id, "selector": "lines:3-4"})
    body = _texts(lines)[0].split("\n", 1)[1]
    assert body == "\n".join(original.splitlines()[2:4])
    assert lines.structured_content is None and not _links(lines)


def test_a_big_structured_result_becomes_one_json_blob(results: Session):
    direct = results.call_direct("listing", {"count": 30_000})
    assert utf8_size(_texts(direct)[0]) > 2_000_000  # the SDK's indented copy of it
    before = results.blob_files()
    result = results.call("listing", {"count": 30_000})

    new = results.blob_files() - before
    assert len(new) == 1 and new.pop().endswith(".json")  # stored once, not twice
    # The summary is the only text block, and there is no structuredContent.
    (summary,) = _texts(result)
    blob_id = _blob_of(summary)
    assert summary == summarize(parse_blob_id(blob_id), Structured(direct.structured_content))
    assert utf8_size(summary) <= 400
    assert result.structured_content is None
    stored = parse_json((results.blobs / f"{blob_id}.json").read_bytes())
    assert stored == direct.structured_content
    (link,) = _links(result)
    assert (link.uri, link.mime_type) == (f"blob://{blob_id}", "application/json")

    page = results.call("inspect", {"blob_id": blob_id, "selector": "key:entries | slice:7..9"})
    assert _texts(page)[0].splitlines()[1:] == [
        '{"path":"/srv/data/dir7/file-0000007.bin","size":259,"kind":"file"}',
        '{"path":"/srv/data/dir8/file-0000008.bin","size":296,"kind":"file"}',
    ]


def test_text_that_is_json_becomes_a_json_blob(results: Session):
    original = _texts(results.call_direct("json_text", {"count": 200}))[0]
    (summary,) = _texts(results.call("json_text", {"count": 200}))
    blob_id = _blob_of(summary)
    assert summary.splitlines()[0] == f"[blob:{blob_id}] json_array | 200 entries"
    assert summary == summarize(parse_blob_id(blob_id), Structured(parse_json(original)))
    assert parse_json((results.blobs / f"{blob_id}.json").read_bytes()) == parse_json(original)


def test_an_image_passes_untouched_beside_a_promoted_text(results: Session):
    direct = results.call_direct("picture_with_log", {"kb": 10})
    result = results.call("picture_with_log", {"kb": 10})
    image, summary, link = result.content
    assert image == direct.content[0]
    assert isinstance(summary, types.TextContent) and summary.text.startswith("[blob:")
    original = direct.content[1].text
    blob_id = _blob_of(summary.text)
    assert (results.blobs / f"{blob_id}.txt").read_text() == original
    assert isinstance(link, types.ResourceLink) and link.uri == f"blob://{blob_id}"


def test_a_result_that_cannot_be_stored_is_a_tool_error_and_the_proxy_goes_on(tmp_path: Path):
    (tmp_path / "a-file").write_text("not a folder")
    parameters = proxy_parameters(tmp_path / "a-file" / "blobs", RESULTS)

    async def scenario() -> tuple[types.CallToolResult, types.CallToolResult]:
        async with Client(parameters, read_timeout_seconds=WAIT) as client:
            big = await client.call_tool("big_text", {"kb": 5})
            return big, await client.call_tool("small", {"text": "still here"})

    big, small = anyio.run(scenario)
    assert big.is_error is True
    (message,) = _texts(big)
    assert message.startswith("the result of big_text could not be stored: ")
    assert "\n" not in message
    assert _texts(small) == ["still here"]


# -- inspect and blob:// resources --------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"blob_id": "not-an-id"}, "not a blob id: 'not-an-id' (expected a UUID)"),
        ({"blob_id": "01890a5d-ac96-774b-bcce-b302099a8057"}, "not found"),
        ({}, "inspect needs blob_id"),
    ],
)
def test_inspect_errors_are_tool_errors(results: Session, arguments: dict, message: str):
    result = results.call("inspect", arguments)
    assert result.is_error is True
    (text,) = _texts(result)
    assert message in text and "\n" not in text


def test_a_bad_selector_is_a_tool_error_naming_what_fits(results: Session):
    blob_id = _blob_of(_texts(results.call("big_text", {"kb": 2}))[0])
    result = results.call("inspect", {"blob_id": blob_id, "selector": "slice:0..3"})
    assert result.is_error is True
    with pytest.raises(InspectError) as raised:
        inspect_blob(results.store, blob_id, "slice:0..3")
    assert _texts(result) == [str(raised.value)]
    assert "this blob is text" in str(raised.value)


def test_reading_a_blob_link_gives_the_inspect_overview(results: Session):
    result = results.call("listing", {"count": 5_000})
    (link,) = _links(result)
    blob_id = link.uri.removeprefix("blob://")
    read = results.portal.call(results.proxy.read_resource, link.uri)
    (contents,) = read.contents
    assert contents.text == inspect_blob(results.store, blob_id)
    assert contents.mime_type == "text/plain"
    assert utf8_size(contents.text) <= 8000  # never the whole blob


def test_reading_an_unknown_blob_is_resource_not_found(results: Session):
    with pytest.raises(MCPError) as raised:
        results.portal.call(
            results.proxy.read_resource, "blob://01890a5d-ac96-774b-bcce-b302099a8057"
        )
    assert raised.value.code == -32002


def test_blob_inspect_when_the_server_has_its_own_inspect(tmp_path: Path):
    async def scenario() -> tuple[list[types.Tool], str, str, str]:
        async with proxied(tmp_path, SERVERS / "inspect_server.py") as client:
            tools = (await client.list_tools()).tools
            own = await client.call_tool("inspect", {"thing": "the moon"})
            big = await client.call_tool("big", {"lines": 2000})
            blob_id = _blob_of(_texts(big)[0])
            read = await client.call_tool(
                "blob_inspect", {"blob_id": blob_id, "selector": "lines:7"}
            )
            return tools, _texts(own)[0], blob_id, _texts(read)[0]

    tools, own, blob_id, read = anyio.run(scenario)
    assert [tool.name for tool in tools] == ["inspect", "big", "blob_inspect"]
    assert tools[0].description == "Inspect a thing (this server's own tool)."
    blob_inspect = tools[2].description
    assert blob_inspect.startswith(INSPECT_DESCRIPTION)
    assert "called blob_inspect here because the wrapped server has its own tool" in blob_inspect
    assert own == "the server's own inspect looked at the moon"
    assert read == f"[blob:{blob_id}] lines 7-7 of 2000\nrow 7"


# -- concurrency and the session log ------------------------------------------------------


def test_twenty_concurrent_calls_get_distinct_blobs_and_a_well_formed_log(tmp_path: Path):
    sessions = tmp_path / "sessions"

    async def scenario() -> dict[int, str]:
        summaries: dict[int, str] = {}
        async with proxied(tmp_path, RESULTS, log_dir=sessions) as client:

            async def call(number: int) -> None:
                result = await client.call_tool("big_text", {"kb": 4, "tag": f"#{number}"})
                summaries[number] = _texts(result)[0]

            async with anyio.create_task_group() as group:
                for number in range(20):
                    group.start_soon(call, number)
        return summaries

    summaries = anyio.run(scenario)
    store = FsBlobStore(tmp_path / "blobs")
    ids = {number: _blob_of(summary) for number, summary in summaries.items()}
    assert len(set(ids.values())) == 20
    for number, blob_id in ids.items():
        text = (tmp_path / "blobs" / f"{blob_id}.txt").read_text()
        assert text.startswith(f"line 1#{number}: ")
        assert summaries[number] == summarize(parse_blob_id(blob_id), Text(text))
    assert len(list(store.ids_sync())) == 20

    (log_file,) = sessions.glob("*.jsonl")
    log = read_session_log(log_file)
    results_logged = [item for item in log.items() if getattr(item, "output", None) is not None]
    assert sorted(item.output for item in results_logged) == sorted(summaries.values())


# -- what the proxy passes on besides results ---------------------------------------------

EVENTS = SERVERS / "events_server.py"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_progress_of_a_call_reaches_the_agent(tmp_path: Path, mode: str):
    async def scenario() -> tuple[list[tuple], str]:
        seen: list[tuple] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        async with proxied(tmp_path, EVENTS, mode=mode) as client:
            result = await client.call_tool("count", {"steps": 4}, progress_callback=on_progress)
        return seen, _texts(result)[0]

    seen, text = anyio.run(scenario)
    assert text == "counted to 4"
    assert seen == [(step, 4, f"step {step} of 4") for step in range(1, 5)]


def test_a_tool_list_change_reaches_the_agent(tmp_path: Path):
    async def scenario() -> list[str]:
        changed = anyio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                changed.set()

        async with proxied(tmp_path, EVENTS, mode="legacy", message_handler=on_message) as client:
            assert client.server_capabilities.tools.list_changed is True
            await client.call_tool("grow", {"name": "sprout"})
            with anyio.fail_after(WAIT):
                await changed.wait()
            return [tool.name for tool in (await client.list_tools()).tools]

    names = anyio.run(scenario)
    assert "sprout" in names and names[-1] == "inspect"


def test_a_tool_list_change_reaches_a_listening_2026_agent(tmp_path: Path):
    async def scenario() -> list[str]:
        async with proxied(tmp_path, EVENTS) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                await client.call_tool("grow", {"name": "shoot"})
                with anyio.fail_after(WAIT):
                    async for _event in subscription:
                        break
            return [tool.name for tool in (await client.list_tools()).tools]

    assert "shoot" in anyio.run(scenario)


def test_cancelling_a_call_cancels_it_in_the_server(tmp_path: Path):
    marker = tmp_path / "marker"

    async def scenario() -> None:
        async with proxied(tmp_path, EVENTS, mode="legacy") as client:
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "wait", {"marker": str(marker)})
                with anyio.fail_after(WAIT):
                    while not marker.exists():
                        await anyio.sleep(0.05)
                group.cancel_scope.cancel()
            with anyio.fail_after(WAIT):
                while marker.read_text() != "cancelled":
                    await anyio.sleep(0.05)
            # The proxy still serves after the cancellation.
            assert _texts(await client.call_tool("count", {"steps": 1})) == ["counted to 1"]

    anyio.run(scenario)
    assert marker.read_text() == "cancelled"


def test_prompts_and_resources_are_the_servers(tmp_path: Path):
    async def scenario() -> tuple[Any, ...]:
        async with Client(server_parameters(EVENTS)) as direct:
            expected = (
                await direct.list_prompts(),
                await direct.get_prompt("review", {"code": "x = 1"}),
                await direct.read_resource("notes://readme"),
            )
        async with proxied(tmp_path, EVENTS) as client:
            got = (
                await client.list_prompts(),
                await client.get_prompt("review", {"code": "x = 1"}),
                await client.read_resource("notes://readme"),
            )
            resources = await client.list_resources()
        return expected, got, resources

    expected, got, resources = anyio.run(scenario)
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.model_dump(exclude={"meta"}) == theirs.model_dump(exclude={"meta"})
    assert [resource.uri for resource in resources.resources] == ["notes://readme"]
    assert got[1].messages[0].content.text == "Please review this code:\nx = 1"


ROOTS = SERVERS / "roots_server.py"


def test_the_servers_roots_requests_get_the_agents_roots(tmp_path: Path):
    roots = [types.Root(uri="file:///work/project", name="project"), types.Root(uri="file:///tmp")]

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=roots)

    async def scenario() -> types.CallToolResult:
        async with proxied(
            tmp_path, ROOTS, mode="legacy", list_roots_callback=list_roots
        ) as client:
            return await client.call_tool("show_roots", {})

    result = anyio.run(scenario)
    assert result.is_error is False
    assert _texts(result) == ["file:///work/project\nfile:///tmp"]


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")  # roots, in MCP 2026-07-28
def test_the_agents_roots_changes_reach_the_server(tmp_path: Path, monkeypatch):
    noted = tmp_path / "roots-changed"
    monkeypatch.setenv("ROOTS_CHANGED_FILE", str(noted))

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv")])

    async def scenario() -> None:
        options = {"mode": "legacy", "list_roots_callback": list_roots}
        async with proxied(tmp_path, ROOTS, **options) as client:
            await client.session.send_roots_list_changed()
            with anyio.fail_after(WAIT):
                while not noted.exists():
                    await anyio.sleep(0.05)

    anyio.run(scenario)
    assert noted.read_text() == "changed\n"


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("legacy", "the agent has no roots"),
        ("auto", "the agent speaks MCP 2026-07-28, where roots cannot be asked for"),
    ],
)
def test_without_the_agents_roots_the_servers_request_is_refused(
    tmp_path: Path, mode: str, why: str
):
    async def scenario() -> None:
        async with proxied(tmp_path, ROOTS, mode=mode) as client:
            # This server lets the refusal of its roots request end its call.
            with pytest.raises(MCPError, match=why):
                await client.call_tool("show_roots", {})

    anyio.run(scenario)


# -- the command --------------------------------------------------------------------------


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "core", "mcp", *args],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=env,
    )


def test_a_proxy_without_a_command_says_so(tmp_path: Path):
    done = _run("proxy", "--dir", str(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr
        == "error: mcp proxy needs the server's command after --, e.g. -- npx server-x\n"
    )


def test_a_command_that_cannot_start_is_one_clear_error(tmp_path: Path):
    done = _run("proxy", "--dir", str(tmp_path), "--", str(tmp_path / "no-such-server"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"error: cannot start {tmp_path / 'no-such-server'}: ")
    assert "Traceback" not in done.stderr


def test_a_server_that_exits_at_once_is_one_clear_error(tmp_path: Path):
    done = _run("proxy", "--dir", str(tmp_path), "--", sys.executable, "-c", "pass")
    assert done.returncode == 2
    assert done.stderr.startswith("error: cannot start ")
    assert "Traceback" not in done.stderr


def test_upload_needs_a_token(tmp_path: Path):
    env = {key: value for key, value in os.environ.items() if key != "BLOBVIEWER_TOKEN"}
    done = _run("proxy", "--upload", "http://127.0.0.1:9/", "--", "true", env=env)
    assert (done.returncode, done.stderr) == (
        2,
        "error: --upload needs a blobviewer API token in $BLOBVIEWER_TOKEN\n",
    )


INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
    b'"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
)


def test_when_the_server_dies_the_agent_hears_it_and_the_proxy_ends(tmp_path: Path):
    parameters = proxy_parameters(tmp_path / "blobs", EVENTS)
    proxy = subprocess.Popen(
        [parameters.command, *parameters.args],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        proxy.stdin.write(INITIALIZE)
        proxy.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        proxy.stdin.write(
            b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exit_now"}}\n'
        )
        proxy.stdin.flush()
        assert b'"serverInfo"' in proxy.stdout.readline()
        answer = proxy.stdout.readline()
        assert b'"id":2,"error":{"code":-32000,"message":"Connection closed"}' in answer
        assert proxy.wait(timeout=WAIT) == 2
        assert proxy.stdout.read() == b""
        stderr = proxy.stderr.read().decode()
        assert stderr.endswith(f"error: the wrapped server exited: {sys.executable} {EVENTS}\n")
    finally:
        proxy.kill()
        proxy.wait()


@pytest.mark.parametrize("how", ["stdin closes", "SIGTERM"])
def test_the_proxy_ends_with_its_server(tmp_path: Path, how: str):
    marker = tmp_path / "ended"
    # A wrapped "server" that notes its own end: the proxy must not leave it behind.
    script = tmp_path / "server.py"
    script.write_text(
        "import atexit, pathlib, runpy, sys\n"
        f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'ended')\n"
        f"sys.argv = [{str(RESULTS)!r}]\n"
        f"runpy.run_path({str(RESULTS)!r}, run_name='__main__')\n"
    )
    parameters = proxy_parameters(tmp_path / "blobs", script)
    proxy = subprocess.Popen(
        [parameters.command, *parameters.args],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # The handshake answered means both processes are up.
        proxy.stdin.write(INITIALIZE)
        proxy.stdin.flush()
        assert b'"serverInfo"' in proxy.stdout.readline()
        if how == "SIGTERM":
            proxy.send_signal(signal.SIGTERM)
        else:
            proxy.stdin.close()
        assert proxy.wait(timeout=WAIT) == 0
    finally:
        proxy.kill()
        proxy.wait()
    assert marker.read_text() == "ended"


# -- the promotion rules, on results as the wire carries them -----------------------------

BIG = "".join(f"entry {number}: some output of a tool\n" for number in range(200))
ROWS = {"rows": [{"id": number, "name": f"row {number}"} for number in range(100)], "n": 100}


def _promote(tmp_path: Path, raw: dict[str, Any]) -> tuple[Any, FsBlobStore]:
    store = FsBlobStore(tmp_path / "blobs")
    return promote_result(raw, store), store


def _summary_and_blob(promoted: Any, store: FsBlobStore) -> tuple[str, Any]:
    (blob_id,) = promoted.blob_ids
    return promoted.result["content"][0]["text"], store.load_sync(blob_id)


def test_a_result_with_nothing_to_promote_is_returned_as_it_is(tmp_path: Path):
    raw = {"content": [{"type": "text", "text": "small"}], "structuredContent": {"a": 1}}
    promoted, _ = _promote(tmp_path, raw)
    assert promoted.result is raw and promoted.blob_ids == () and promoted.text == "small"


def test_text_blocks_are_joined_by_newlines_into_one_blob(tmp_path: Path):
    half = BIG[: len(BIG) // 2]
    raw = {"content": [{"type": "text", "text": half}, {"type": "text", "text": half}]}
    promoted, store = _promote(tmp_path, raw)
    summary, blob = _summary_and_blob(promoted, store)
    assert blob == Text(f"{half}\n{half}")
    assert [block["type"] for block in promoted.result["content"]] == ["text", "resource_link"]
    assert promoted.text == summary


def test_the_sdks_json_copy_of_big_structured_content_is_not_stored_twice(tmp_path: Path):
    raw = {
        "content": [{"type": "text", "text": json.dumps(ROWS, indent=2)}],
        "structuredContent": ROWS,
    }
    promoted, store = _promote(tmp_path, raw)
    summary, blob = _summary_and_blob(promoted, store)
    assert blob == Structured(ROWS)
    assert "structuredContent" not in promoted.result
    assert [block["type"] for block in promoted.result["content"]] == ["text", "resource_link"]


def test_a_different_small_text_beside_big_structured_content_is_kept(tmp_path: Path):
    note = {"type": "text", "text": "100 rows, from the cache"}
    promoted, store = _promote(tmp_path, {"content": [note], "structuredContent": ROWS})
    summary, blob = _summary_and_blob(promoted, store)
    assert blob == Structured(ROWS)
    assert promoted.result["content"][:2] == [{"type": "text", "text": summary}, note]


def test_small_structured_content_beside_a_big_text_is_kept(tmp_path: Path):
    raw = {"content": [{"type": "text", "text": BIG}], "structuredContent": {"lines": 200}}
    promoted, store = _promote(tmp_path, raw)
    _, blob = _summary_and_blob(promoted, store)
    assert blob == Text(BIG)
    assert promoted.result["structuredContent"] == {"lines": 200}


@pytest.mark.parametrize("key", ["result", "content"])
def test_structured_content_that_wraps_the_text_is_stored_as_that_text(tmp_path: Path, key: str):
    raw = {"content": [{"type": "text", "text": BIG}], "structuredContent": {key: BIG}}
    promoted, store = _promote(tmp_path, raw)
    summary, blob = _summary_and_blob(promoted, store)
    assert blob == Text(BIG)
    assert summary.splitlines()[0].endswith("] text | 200 lines")
    assert "structuredContent" not in promoted.result


@pytest.mark.parametrize(
    "wrapped",
    [json.dumps([{"text": BIG, "type": "text"}]), json.dumps({"content": BIG})],
    ids=["encoded blocks", "one-key object"],
)
def test_a_text_block_that_holds_text_in_a_wrapper_is_stored_as_that_text(
    tmp_path: Path, wrapped: str
):
    raw = {"content": [{"type": "text", "text": wrapped}]}
    promoted, store = _promote(tmp_path, raw)
    summary, blob = _summary_and_blob(promoted, store)
    assert blob == Text(BIG)
    assert summary.splitlines()[0].endswith("] text | 200 lines")


def test_other_blocks_keep_their_places_and_an_error_stays_an_error(tmp_path: Path):
    audio = {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
    embedded = {
        "type": "resource",
        "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": BIG},
    }
    raw = {
        "content": [audio, {"type": "text", "text": BIG}, embedded],
        "isError": True,
        "_meta": {"vendor": 1},
    }
    promoted, store = _promote(tmp_path, raw)
    (blob_id,) = promoted.blob_ids
    assert store.load_sync(blob_id) == Text(BIG)
    content = promoted.result["content"]
    assert content[0] is audio and content[2] is embedded
    assert content[1]["text"].startswith("[blob:") and content[3]["type"] == "resource_link"
    assert promoted.result["isError"] is True and promoted.result["_meta"] == {"vendor": 1}


def test_secrets_in_a_result_are_redacted_before_the_agent_the_store_or_the_log_sees_them(
    tmp_path: Path,
):
    key = "sk-ant-api03-" + "x9Y_" * 24 + "AA"
    big = "\n".join(f"row {n}" for n in range(300))
    raw = {
        "content": [{"type": "text", "text": f"ANTHROPIC_API_KEY={key}\n{big}"}],
        "structuredContent": {"rows": big, "auth": {"password": "hunter2hunter2"}},
    }

    promoted, store = _promote(tmp_path, raw)

    assert promoted.redactions == 2
    kept = json.dumps([promoted.result, promoted.text]) + "".join(
        json.dumps(getattr(store.load_sync(blob_id), "value", None))
        + str(getattr(store.load_sync(blob_id), "text", ""))
        for blob_id in promoted.blob_ids
    )
    assert key not in kept and "hunter2hunter2" not in kept
    assert "[redacted:anthropic_key]" in kept and "[redacted:named_secret]" in kept
    small = {"content": [{"type": "text", "text": "no secrets here"}]}
    assert _promote(tmp_path, small)[0].result is small  # nothing redacted: the same dict
