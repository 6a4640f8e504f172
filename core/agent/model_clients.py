"""Model clients behind one small async protocol (docs/agents.md#model-clients).

``complete(history, tools, system=...)`` sends the history and the tools a model may call
and returns its next AssistantMessage. Shipped: :class:`OpenAIChatClient` for
OpenAI-compatible Chat Completions endpoints (OpenAI, vLLM, Ollama, llama.cpp server) and
:class:`ScriptedClient`, which replays given turns for demos and tests.

A tool call whose arguments the model sent as text that is not JSON keeps that text as its
``arguments``: the Worker answers it with an invalid-arguments error, and the history
shows what the model really sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, Self, runtime_checkable

import httpx

from core.agent.history import AssistantMessage, Item, ToolCall, ToolResult, UserMessage
from core.agent.tools import Tool
from core.json_values import JsonError, parse_json
from core.wording import excerpt

__all__ = [
    "ModelClient",
    "ModelError",
    "ModelRequest",
    "OpenAIChatClient",
    "ScriptedClient",
    "call",
    "chat_messages",
    "chat_tools",
    "parse_chat_response",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_EXCERPT = 200


class ModelError(Exception):
    """The model could not be asked: HTTP error, timeout, unreadable answer, empty script.

    *status* is the HTTP status when the endpoint answered with an error.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@runtime_checkable
class ModelClient(Protocol):
    @property
    def model(self) -> str: ...

    async def complete(
        self, history: Sequence[Item], tools: Sequence[Tool], *, system: str | None = None
    ) -> AssistantMessage: ...


# -- the scripted client ----------------------------------------------------------------------

Turn = AssistantMessage | Callable[[Sequence[Item]], AssistantMessage]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What a ScriptedClient was asked: the history, the tool names and the system prompt."""

    history: tuple[Item, ...]
    tool_names: tuple[str, ...]
    system: str | None


def call(name: str, /, **arguments: Any) -> ToolCall:
    """A tool call for a script; the ScriptedClient numbers it (`call_1`, `call_2`, ...)."""
    return ToolCall("", name, arguments)


class ScriptedClient:
    """Replays *turns* in order, one per request.

    A turn is an AssistantMessage, or a function that computes one from the history so
    far (e.g. to inspect the blob of an earlier result). Tool calls without an id get
    `call_<n>`, numbered across the whole script. Asking for more turns than the script
    has raises ModelError.
    """

    def __init__(self, turns: Iterable[Turn], *, model: str = "scripted") -> None:
        self._turns = list(turns)
        self._model = model
        self._calls = 0
        self.requests: list[ModelRequest] = []

    @property
    def model(self) -> str:
        return self._model

    async def complete(
        self, history: Sequence[Item], tools: Sequence[Tool], *, system: str | None = None
    ) -> AssistantMessage:
        index = len(self.requests)
        self.requests.append(ModelRequest(tuple(history), tuple(t.name for t in tools), system))
        if index >= len(self._turns):
            raise ModelError(
                f"the script has {len(self._turns)} turns and was asked for turn {index + 1}"
            )
        turn = self._turns[index]
        message = turn if isinstance(turn, AssistantMessage) else turn(tuple(history))
        return replace(message, tool_calls=tuple(self._numbered(c) for c in message.tool_calls))

    def _numbered(self, tool_call: ToolCall) -> ToolCall:
        self._calls += 1
        return tool_call if tool_call.id else replace(tool_call, id=f"call_{self._calls}")


# -- the OpenAI-compatible client ---------------------------------------------------------------


class OpenAIChatClient:
    """A client for `POST <base_url>/chat/completions`, the OpenAI Chat Completions API.

    *model*, *base_url* and *api_key* default to BLOBVIEWER_MODEL, OPENAI_BASE_URL
    (else OpenAI's) and OPENAI_API_KEY (else none, as local servers want) from *environ*
    (os.environ unless given). *transport* replaces the network, for tests.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        temperature: float | None = None,
        environ: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        environ = os.environ if environ is None else environ
        model = model or environ.get("BLOBVIEWER_MODEL", "")
        if not model:
            raise ValueError("no model given: pass model= or set BLOBVIEWER_MODEL")
        self._model = model
        self.base_url = (base_url or environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.timeout = timeout
        self.temperature = temperature
        api_key = api_key if api_key is not None else environ.get("OPENAI_API_KEY", "")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._transport = transport
        self._http: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"OpenAIChatClient(model={self._model!r}, base_url={self.base_url!r})"

    @property
    def model(self) -> str:
        return self._model

    async def complete(
        self, history: Sequence[Item], tools: Sequence[Tool], *, system: str | None = None
    ) -> AssistantMessage:
        body: dict[str, Any] = {"model": self._model, "messages": chat_messages(history, system)}
        if tools:
            body["tools"] = chat_tools(tools)
        if self.temperature is not None:
            body["temperature"] = self.temperature
        try:
            response = await self._client().post(self.url, json=body)
        except httpx.TimeoutException:
            raise ModelError(f"{self.url} did not answer within {self.timeout:g}s") from None
        except httpx.HTTPError as error:
            raise ModelError(f"cannot reach {self.url}: {error or type(error).__name__}") from None
        if response.status_code >= 400:
            raise ModelError(
                f"{self.url} answered HTTP {response.status_code}{_hint(response.status_code)}: "
                f"{_error_excerpt(response)}",
                status=response.status_code,
            )
        try:
            data = parse_json(response.content)
        except JsonError:
            raise ModelError(
                f"{self.url} answered with something that is not JSON: {_excerpt(response.text)}",
                status=response.status_code,
            ) from None
        return parse_chat_response(data, source=self.url)

    def _client(self) -> httpx.AsyncClient:
        # A connection pool belongs to one event loop; each asyncio.run() gets a new pool
        # (the old one went away with its loop), so the client works across runs.
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._http = httpx.AsyncClient(
                headers=self._headers, timeout=self.timeout, transport=self._transport
            )
            self._loop = loop
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


def chat_messages(history: Sequence[Item], system: str | None = None) -> list[dict[str, Any]]:
    """The history as Chat Completions messages."""
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    for item in history:
        if isinstance(item, UserMessage):
            messages.append({"role": "user", "content": item.text})
        elif isinstance(item, AssistantMessage):
            message: dict[str, Any] = {"role": "assistant", "content": item.text or None}
            if item.tool_calls:
                message["tool_calls"] = [_chat_tool_call(c) for c in item.tool_calls]
            messages.append(message)
        elif isinstance(item, ToolResult):
            # Chat Completions has no error flag on a tool message; the text has to say it.
            content = f"Error: {item.output}" if item.is_error else item.output
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": content})
        else:
            raise TypeError(f"not a history item: {type(item).__name__}")
    return messages


def _chat_tool_call(tool_call: ToolCall) -> dict[str, Any]:
    arguments = tool_call.arguments
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {
        "id": tool_call.id,
        "type": "function",
        "function": {"name": tool_call.name, "arguments": text},
    }


def chat_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """The tools as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
            },
        }
        for t in tools
    ]


def parse_chat_response(data: Any, *, source: str = "the model") -> AssistantMessage:
    """The AssistantMessage in a Chat Completions response body; raises ModelError."""
    try:
        message = data["choices"][0]["message"]
        if not isinstance(message, dict):
            raise TypeError
    except (KeyError, IndexError, TypeError):
        raise ModelError(
            f"{source} answered without choices[0].message: {_excerpt(data)}"
        ) from None
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ModelError(f"{source} answered with tool_calls that are not a list")
    return AssistantMessage(
        _content_text(message.get("content")),
        tuple(_tool_call(c, index, source) for index, c in enumerate(calls, start=1)),
    )


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers send content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _tool_call(data: Any, index: int, source: str) -> ToolCall:
    function = data.get("function") if isinstance(data, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise ModelError(f"{source} sent tool call {index} without a function name")
    # Some local servers leave out ids; the history needs a unique one to pair the result.
    call_id = data.get("id") or f"call_{uuid.uuid4().hex[:24]}"
    return ToolCall(str(call_id), function["name"], _arguments(function.get("arguments")))


def _arguments(raw: Any) -> Any:
    if raw is None:
        return {}
    if not isinstance(raw, str):  # a server that sends the object itself
        return raw
    if not raw.strip():
        return {}
    try:
        return parse_json(raw)
    except JsonError:
        return raw  # kept as sent; the Worker reports it as invalid arguments


def _hint(status: int) -> str:
    if status == 401:
        return " (check OPENAI_API_KEY)"
    if status == 404:
        return " (check OPENAI_BASE_URL and the model name)"
    return ""


def _error_excerpt(response: httpx.Response) -> str:
    """The message of an OpenAI-style `{"error": {"message", "code"}}` body, else its start."""
    try:
        error = parse_json(response.content).get("error")
    except (JsonError, AttributeError):
        error = None
    if isinstance(error, str):
        return _excerpt(error)
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        code = error.get("code") or error.get("type")
        return _excerpt(f"{error['message']} ({code})" if code else error["message"])
    return _excerpt(response.text)


def _excerpt(value: Any) -> str:
    return excerpt(value if isinstance(value, str) else repr(value), _EXCERPT)
