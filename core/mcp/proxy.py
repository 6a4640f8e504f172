"""`python -m core mcp proxy --dir DIR -- COMMAND ARGS…`: an MCP server in front of another.

The proxy starts COMMAND as a stdio MCP server (the *wrapped* server) and serves the agent
on its own stdin/stdout:
- tools/list is the wrapped server's tools (names, descriptions, input schemas, without
  their `outputSchema`: a promoted result has no `structuredContent`, and a client that
  sees a declared output schema rejects a result without it), plus `inspect` (or
  `blob_inspect` when the wrapped server has an `inspect` of its own);
- tools/call is forwarded and its result promoted (core.mcp.result_promotion) before the
  agent sees it. The proxy's own client reads results raw, as dicts: nothing validates
  them against an output schema or cuts them before they are stored;
- prompts, resources and completions are forwarded; `blob://<id>` resources are the
  proxy's own (the inspect overview of the blob);
- the wrapped server's notifications (list changes, resource updates, log messages) reach
  the agent, progress reaches the call it belongs to, an agent's cancellation cancels the
  wrapped call, and the wrapped server's roots requests are answered with the agent's
  roots. Sampling and elicitation requests are refused.

Each call is recorded (core.mcp.recording) by a task of its own, so neither a slow disk
nor an upload holds up the agent's answer; the recorder is closed when stdin closes or
on SIGTERM.
"""

from __future__ import annotations

import functools
import shlex
import signal
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.to_thread
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import event_from_wire
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter

from core.inspect_tool import INSPECT_NAME
from core.mcp.blobs import (
    RESOURCE_NOT_FOUND,
    call_inspect,
    inspect_tool,
    is_blob_uri,
    read_blob_resource,
    tool_error,
)
from core.mcp.result_promotion import PromotedResult, promote_result
from core.mcp.stdin_lines import StdinLines
from core.mcp.wire import NO_CACHING, complete, wire_handler
from core.mcp.worker_threads import run_and_release
from core.mcp.wrapped_server import WrappedServer
from core.store import BlobStore
from core.store.errors import BlobStoreError

PROXY_NAME = "blobviewer-proxy"
RENAMED_INSPECT = "blob_inspect"
_RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
# A wrapped server that pages its tools endlessly must not hang tools/list.
_MAX_TOOL_PAGES = 100
# The progress notifications of a call reach the agent through the call itself.
_NOT_FORWARDED = frozenset({"notifications/progress", "notifications/cancelled"})
# How long the calls a dead server left get to be answered (with its error) before the
# proxy ends, in seconds.
_GRACE = 2.0


class Recorder(Protocol):
    """What the proxy needs of core.mcp.recording.ProxyRecorder."""

    def record_call(
        self,
        tool: str,
        arguments: dict[str, Any],
        agent_text: str,
        blob_ids: list[str],
        is_error: bool,
        redactions: int = 0,
    ) -> None: ...

    def close(self) -> None: ...


class ProxyError(Exception):
    """The wrapped server could not be started, did not answer the handshake, or exited."""


# -- the agent's side ---------------------------------------------------------------------


@dataclass
class _Agent:
    """The agent's connection, as far as requests and notifications that do not answer one
    of its requests need it: the wrapped server's roots requests and notifications.

    On a handshake-era connection (the `initialize` of MCP up to 2025-11-25) the proxy may
    send the agent requests and notifications at any time. A 2026-07-28 connection allows
    neither: list changes go to its `subscriptions/listen` streams, and roots cannot be
    asked for."""

    session: ServerSession | None = None
    connected: anyio.Event = field(default_factory=anyio.Event)
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)

    async def watch(self, ctx: ServerRequestContext[Any], call_next: Any) -> Any:
        """Server middleware: notes when the agent has connected, and in which era."""
        result = await call_next(ctx)
        # Connected: initialized, or a request (from a client that skips initialized).
        if (
            not self.connected.is_set()
            and ctx.method != "initialize"
            and (ctx.method == "notifications/initialized" or ctx.request_id is not None)
        ):
            if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                self.session = ctx.session
            self.connected.set()
        return result

    async def list_roots(self, context: ClientRequestContext) -> types.ListRootsResult | Any:
        """The wrapped server asks for roots: the agent's, once it has connected."""
        await self.connected.wait()
        session = self.session
        if session is None:
            return _refusal("the agent speaks MCP 2026-07-28, where roots cannot be asked for")
        capabilities = session.client_capabilities
        if capabilities is None or capabilities.roots is None:
            return _refusal("the agent has no roots")
        try:
            return await session.list_roots()
        except MCPError as error:
            return error.error

    async def forward(self, message: IncomingMessage) -> None:
        """A notification of the wrapped server, passed on to the agent."""
        if isinstance(message, Exception):
            print(f"blobviewer proxy: the wrapped server: {message}", file=sys.stderr)
            return
        method = message.method
        if method in _NOT_FORWARDED:
            return
        if (event := event_from_wire(method, _params_of(message))) is not None:
            await self.bus.publish(event)
        if self.session is not None:
            try:
                await self.session.send_notification(message)
            except Exception as error:  # noqa: BLE001 (the agent left; nothing to tell)
                print(f"blobviewer proxy: cannot notify the agent: {error}", file=sys.stderr)


def _params_of(message: Any) -> dict[str, Any] | None:
    params = getattr(message, "params", None)
    return params.model_dump(by_alias=True, mode="json", exclude_none=True) if params else None


def _refusal(message: str) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message=message)


# -- recording ----------------------------------------------------------------------------


class _Recording:
    """Calls to record, handed to the recorder one at a time by a task of their own."""

    def __init__(self, recorder: Recorder | None) -> None:
        self._recorder = recorder
        self._send, self._receive = anyio.create_memory_object_stream[tuple[Any, ...]](
            max_buffer_size=float("inf")
        )

    def add(
        self,
        tool: str,
        arguments: dict[str, Any],
        text: str,
        blob_ids: list[str],
        error: bool,
        redactions: int = 0,
    ) -> None:
        if self._recorder is not None:
            self._send.send_nowait((tool, arguments, text, blob_ids, error, redactions))

    async def run(self) -> None:
        if self._recorder is None:
            return
        async for call in self._receive:
            try:
                await anyio.to_thread.run_sync(self._recorder.record_call, *call)
            except Exception as error:  # noqa: BLE001 (it promises not to; the agent goes on)
                print(f"blobviewer proxy: a call was not recorded: {error}", file=sys.stderr)

    def finish(self) -> None:
        """Record what is still queued and close the recorder (blocking: at exit)."""
        if self._recorder is None:
            return
        while True:
            try:
                call = self._receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
            self._recorder.record_call(*call)
        self._recorder.close()


# -- the proxy ----------------------------------------------------------------------------


class Proxy:
    """The handlers of the proxy's server, over a connected client of the wrapped server."""

    def __init__(
        self, wrapped: Client, store: BlobStore, agent: _Agent, recording: _Recording
    ) -> None:
        self._wrapped = wrapped
        self._store = store
        self._agent = agent
        self._recording = recording
        self._capabilities = wrapped.server_capabilities
        self._inspect_name: str | None = None  # known from the wrapped server's tools
        self._in_flight = 0
        self._idle = anyio.Event()
        self._idle.set()

    def build_server(self) -> Server[Any]:
        caps = self._capabilities
        handlers: dict[str, Any] = {}
        if caps.prompts is not None:
            handlers |= {"on_list_prompts": self._list_prompts, "on_get_prompt": self._get_prompt}
        if caps.completions is not None:
            handlers["on_completion"] = self._complete
        if caps.resources is not None and caps.resources.subscribe:
            handlers |= {
                "on_subscribe_resource": self._subscribe,
                "on_unsubscribe_resource": self._unsubscribe,
            }
        server: Server[Any] = Server(
            PROXY_NAME,
            cache_hints=NO_CACHING,
            title=_title(self._wrapped),
            instructions=self._wrapped.instructions,
            on_list_tools=wire_handler(self._list_tools),
            on_call_tool=wire_handler(self._call_tool),
            on_list_resources=wire_handler(self._list_resources),
            on_list_resource_templates=wire_handler(self._list_resource_templates),
            on_read_resource=wire_handler(self._read_resource),
            on_subscriptions_listen=ListenHandler(self._agent.bus),
            **handlers,
        )
        server.add_notification_handler(
            "notifications/roots/list_changed", types.NotificationParams, self._roots_changed
        )
        server.middleware.append(self._agent.watch)
        return server

    def initialization_options(self, server: Server[Any]) -> Any:
        # Whatever the wrapped server declares, the proxy passes on every list change it
        # sends (not every server that sends them declares them).
        everything = NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
        return server.create_initialization_options(everything)

    # -- tools --

    async def _list_tools(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        tools = await self._wrapped_tools()
        assert self._inspect_name is not None  # _wrapped_tools has named it
        listed = [*map(_without_output_schema, tools), inspect_tool(self._inspect_name)]
        return complete({"tools": listed})

    async def _wrapped_tools(self) -> list[dict[str, Any]]:
        """All the wrapped server's tools (every page: the agent gets them on one)."""
        tools: list[dict[str, Any]] = []
        if self._capabilities.tools is not None:
            cursor: str | None = None
            for _ in range(_MAX_TOOL_PAGES):
                page = await self._request(
                    types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=cursor))
                )
                tools.extend(tool for tool in page.get("tools", []) if isinstance(tool, dict))
                cursor = page.get("nextCursor")
                if not cursor:
                    break
        names = {tool.get("name") for tool in tools}
        self._inspect_name = RENAMED_INSPECT if INSPECT_NAME in names else INSPECT_NAME
        return tools

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> dict[str, Any]:
        name, arguments = params.name, params.arguments or {}
        if self._inspect_name is None:
            await self._wrapped_tools()
        if name == self._inspect_name:
            result = await call_inspect(self._store, arguments)
            self._record(name, arguments, PromotedResult(result, _text(result)))
            return result
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=name, arguments=params.arguments)
        )
        try:
            raw = await self._request(request, progress=_progress_of(ctx))
        except MCPError as error:
            self._recording.add(name, arguments, error.message, [], True)
            raise
        try:
            promoted = await run_and_release(functools.partial(promote_result, raw, self._store))
        except BlobStoreError as error:
            # As the Worker does: the agent hears of it, and its run goes on.
            result = tool_error(f"the result of {name} could not be stored: {error}")
            promoted = PromotedResult(result, _text(result))
        self._record(name, arguments, promoted)
        _let_go(raw, promoted.result)
        return promoted.result

    def _record(self, tool: str, arguments: dict[str, Any], promoted: PromotedResult) -> None:
        blob_ids = [str(blob_id) for blob_id in promoted.blob_ids]
        error = promoted.result.get("isError") is True
        self._recording.add(tool, arguments, promoted.text, blob_ids, error, promoted.redactions)

    # -- resources, prompts, completions --

    async def _list_resources(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        if self._capabilities.resources is None:
            # Blobs are many: each is reached from the link beside its summary.
            return complete({"resources": []})
        return await self._request(types.ListResourcesRequest(params=_paging(params)))

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: Any
    ) -> dict[str, Any]:
        if self._capabilities.resources is None:
            return complete({"resourceTemplates": []})
        return await self._request(types.ListResourceTemplatesRequest(params=_paging(params)))

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> dict[str, Any]:
        if is_blob_uri(params.uri):
            return await read_blob_resource(self._store, params.uri)
        if self._capabilities.resources is None:
            raise MCPError(code=RESOURCE_NOT_FOUND, message=f"no such resource: {params.uri}")
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=params.uri))
        return await self._request(request, progress=_progress_of(ctx))

    async def _list_prompts(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        return await self._request(types.ListPromptsRequest(params=_paging(params)))

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> dict[str, Any]:
        request = types.GetPromptRequest(
            params=types.GetPromptRequestParams(name=params.name, arguments=params.arguments)
        )
        return await self._request(request, progress=_progress_of(ctx))

    async def _complete(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> dict[str, Any]:
        forwarded = params.model_copy(update={"meta": None})
        return await self._request(types.CompleteRequest(params=forwarded))

    async def _subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> dict[str, Any]:
        request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=params.uri))
        return await self._request(request)

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> dict[str, Any]:
        request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=params.uri))
        return await self._request(request)

    async def _roots_changed(self, ctx: ServerRequestContext[Any], params: Any) -> None:
        await self._wrapped.session.send_roots_list_changed()

    # -- talking to the wrapped server --

    async def _request(self, request: Any, progress: Any = None) -> dict[str, Any]:
        """Send *request* to the wrapped server; its result as the wire's dict. The agent's
        `_meta` is not passed on: it may hold the agent's protocol envelope, which a
        server of another era refuses, and the progress token is the proxy's own."""
        if self._in_flight == 0:
            self._idle = anyio.Event()
        self._in_flight += 1
        try:
            result = await self._wrapped.session.send_request(  # type: ignore[type-var]  # the SDK takes any TypeAdapter
                request, _RAW, progress_callback=progress
            )
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()
        return complete(result)

    async def idle(self) -> None:
        """Wait until no request to the wrapped server is waiting for its answer."""
        await self._idle.wait()


def _progress_of(ctx: ServerRequestContext[Any]) -> Any:
    """A callback that passes the wrapped server's progress on to the agent, when the
    agent asked for progress of this request (else None: none is asked for)."""
    meta: Any = ctx.meta or {}
    if meta.get("progress_token", meta.get("progressToken")) is None:
        return None
    session = ctx.session

    async def report(progress: float, total: float | None, message: str | None) -> None:
        await session.report_progress(progress, total, message)

    return report


def _paging(params: types.PaginatedRequestParams | None) -> types.PaginatedRequestParams:
    """The agent's paging of a list, without its `_meta`."""
    return types.PaginatedRequestParams(cursor=params.cursor if params else None)


def _let_go(raw: dict[str, Any], promoted: dict[str, Any]) -> None:
    """Empty the parts of the wrapped server's result *raw* that the *promoted* one does
    not share. The SDK's client holds the last message it read until the next one comes:
    else a big result would stay in memory until the server's next message."""
    for key in ("content", "structuredContent"):
        value = raw.get(key)
        if isinstance(value, list | dict) and promoted.get(key) is not value:
            value.clear()


def _without_output_schema(tool: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in tool.items() if key != "outputSchema"}


def _text(result: dict[str, Any]) -> str:
    return "\n".join(
        block["text"]
        for block in result.get("content", [])
        if isinstance(block, dict) and block.get("type") == "text"
    )


def _title(wrapped: Client) -> str:
    info = wrapped.server_info
    name = f"{info.name} {info.version}".strip() if info is not None else ""
    return f"blobviewer proxy for {name or 'an MCP server'}"


# -- running ------------------------------------------------------------------------------


async def run_proxy(command: list[str], store: BlobStore, recorder: Recorder | None = None) -> None:
    """Serve the agent on stdin/stdout in front of *command* until stdin closes or SIGTERM.

    Raises ProxyError when the wrapped server cannot be started, does not answer the MCP
    handshake, or exits while the proxy serves (the agent then sees its server gone, as
    it would without the proxy).
    """
    # The wrapped server gets the proxy's whole environment: an agent's configuration
    # sets the environment of the command it starts, which is the proxy.
    wrapped = WrappedServer(command)
    agent = _Agent()
    recording = _Recording(recorder)
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_stop_on_signal, tasks.cancel_scope)
            tasks.start_soon(recording.run)
            await _serve(wrapped, store, agent, recording)
            tasks.cancel_scope.cancel()
    except* (OSError, MCPError) as group:
        raise ProxyError(f"cannot start {shlex.join(command)}: {_describe(group)}") from None
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(recording.finish)
    if wrapped.gone.is_set():
        raise ProxyError(f"the wrapped server exited: {shlex.join(command)}")


async def _serve(
    wrapped: WrappedServer, store: BlobStore, agent: _Agent, recording: _Recording
) -> None:
    client = Client(
        wrapped,
        mode="legacy",  # every SDK server speaks the handshake; roots and list changes ride it
        cache=None,  # list results are the server's, fetched each time the agent asks
        list_roots_callback=agent.list_roots,
        message_handler=agent.forward,
        client_info=types.Implementation(name=PROXY_NAME, version="1"),
    )
    async with client, anyio.create_task_group() as serving:
        proxy = Proxy(client, store, agent, recording)
        serving.start_soon(_end_when_gone, wrapped, proxy, serving.cancel_scope)
        server = proxy.build_server()
        stdin = StdinLines()  # lines, as the SDK reads them: `async for line in stdin`
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]  # it only iterates stdin
            # Errors of the agent's requests are answered; they do not end the proxy.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await server.run(read_stream, write_stream, proxy.initialization_options(server))
        serving.cancel_scope.cancel()


async def _end_when_gone(wrapped: WrappedServer, proxy: Proxy, scope: anyio.CancelScope) -> None:
    """Stop serving once the wrapped server has exited, when the calls it left unanswered
    have had their error sent to the agent."""
    await wrapped.gone.wait()
    with anyio.move_on_after(_GRACE):
        await proxy.idle()
        await anyio.sleep(_GRACE / 10)  # for the last answer to be written
    scope.cancel()


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            scope.cancel()
            return


def _describe(group: BaseExceptionGroup) -> str:
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):  # the task groups' nesting
        error = error.exceptions[0]
    if isinstance(error, OSError):
        return error.strerror or str(error)
    return str(getattr(error, "message", error))
