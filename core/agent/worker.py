"""The Worker: the agent loop that keeps large tool outputs out of the history
(docs/agents.md#the-worker).

Send the history to the model, run the tool calls it asks for, append each result,
repeat until the model answers without tool calls or the turn limit is reached. Every
tool output passes through promotion: with a blob store, a Stored output is saved and
only its summary enters the history, and the `inspect` tool is registered so the model
can read more; without a store, the full output enters the history as before.

Whatever goes wrong in a tool call (an unknown tool, arguments that do not fit the
schema, a ToolError, any other exception) becomes a ToolResult with ``is_error=True``
and a one-line message, and the run goes on: the model can correct itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from core.agent.history import Item, ToolCall, ToolResult, UserMessage
from core.agent.model_clients import ModelClient
from core.agent.policy import DEFAULT_POLICY, Policy
from core.agent.session_log import SessionLogWriter
from core.agent.tool_schema import ArgumentsError, check_arguments
from core.agent.tools import OutputTool, Tool, ToolError, output_text
from core.content import Inline, Stored, Structured, Text, ToolOutput, utf8_size
from core.inspect_tool import INSPECT_NAME, InspectTool
from core.json_values import dumps_for_storage
from core.promotion import admit, promote
from core.redaction import redact_json, redact_text
from core.store import BlobStore
from core.store.blob_id import BlobId
from core.store.errors import BlobStoreError
from core.tool_text import unwrap_text
from core.wording import excerpt, plural

__all__ = ["DEFAULT_MAX_TURNS", "RunResult", "RunStats", "StopReason", "Worker"]

DEFAULT_MAX_TURNS = 25
_MESSAGE_LIMIT = 500  # characters of an error message that reach the model


class StopReason(StrEnum):
    ANSWERED = "answered"  # the model replied without tool calls
    TURN_LIMIT = "turn_limit"  # the model was still calling tools after max_turns


@dataclass(frozen=True, slots=True)
class RunStats:
    """What one run cost: model turns, tool calls, and bytes received vs bytes kept."""

    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    output_bytes: int = 0  # UTF-8 bytes the tools returned (error messages included)
    history_bytes: int = 0  # UTF-8 bytes of tool results that entered the history
    blobs: int = 0  # outputs saved to the blob store

    @property
    def kept_out_bytes(self) -> int:
        return self.output_bytes - self.history_bytes


@dataclass(frozen=True, slots=True)
class RunResult:
    text: str  # the model's last answer ("" when the turn limit stopped the run)
    stop_reason: StopReason
    detail: str  # one sentence on why the run stopped, for people
    items: tuple[Item, ...]  # the items this run added, from its user message on
    stats: RunStats
    blob_ids: tuple[BlobId, ...] = ()


@dataclass(frozen=True, slots=True)
class _Outcome:
    result: ToolResult
    received: int  # bytes the tool returned
    blob_id: BlobId | None = None


class Worker:
    """Runs an agent: *llm* answers, *tools* act, *blob_store* keeps big outputs.

    The history lives on the worker, so a second :meth:`run` continues the conversation.
    With *session_log*, every item is appended to it as soon as it is produced.
    """

    def __init__(
        self,
        llm: ModelClient,
        tools: Iterable[Tool],
        blob_store: BlobStore | None = None,
        *,
        policy: Policy = DEFAULT_POLICY,
        max_turns: int = DEFAULT_MAX_TURNS,
        system: str | None = None,
        session_log: SessionLogWriter | None = None,
    ) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.llm = llm
        self.blob_store = blob_store
        self.policy = policy
        self.max_turns = max_turns
        self.system = system
        self.session_log = session_log
        self.history: list[Item] = []
        all_tools = list(tools)
        if blob_store is not None:
            all_tools.append(InspectTool(blob_store, policy))
        self._tools = _by_name(all_tools)

    @property
    def tools(self) -> tuple[Tool, ...]:
        return tuple(self._tools.values())

    async def run(self, user_text: str) -> RunResult:
        """Run the loop for one user message; ModelError from the client propagates.

        When the model fails mid-run, :attr:`history` and the session log still hold
        every item produced up to that point.
        """
        start = len(self.history)
        run = _Tally()
        self._append(UserMessage(user_text))
        tools = self.tools
        while run.turns < self.max_turns:
            reply = await self.llm.complete(tuple(self.history), tools, system=self.system)
            run.turns += 1
            self._append(reply)
            if not reply.tool_calls:
                detail = f"the model answered after {plural(run.turns, 'turn')}"
                return self._result(start, run, reply.text, StopReason.ANSWERED, detail)
            await self._run_calls(reply.tool_calls, run)
        detail = (
            f"stopped after {plural(run.turns, 'turn')}: the model was still calling tools "
            "(raise max_turns to let it go on)"
        )
        return self._result(start, run, "", StopReason.TURN_LIMIT, detail)

    # -- one turn's tool calls --------------------------------------------------------------

    async def _run_calls(self, calls: Sequence[ToolCall], run: _Tally) -> None:
        # All calls run at once; results are appended in call order, each as soon as it
        # and the ones before it are done.
        tasks = [asyncio.create_task(self._call(tool_call)) for tool_call in calls]
        try:
            for task in tasks:
                outcome = await task
                self._append(outcome.result)
                run.add(outcome)
        finally:
            for task in tasks:
                task.cancel()  # only those still running, when the run itself was cancelled

    async def _call(self, tool_call: ToolCall) -> _Outcome:
        tool = self._tools.get(tool_call.name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return _error(tool_call, f"unknown tool {tool_call.name!r}; available tools: {known}")
        try:
            check_arguments(tool.parameters, tool_call.arguments)
        except ArgumentsError as error:
            return _error(tool_call, f"invalid arguments for {tool.name}: {error}")
        try:
            output, received, redactions = await self._execute(tool, dict(tool_call.arguments))
        except ToolError as error:
            return _error(tool_call, excerpt(str(error), _MESSAGE_LIMIT) or f"{tool.name} failed")
        except Exception as error:  # a tool's bug must not end the run; the model hears of it
            return _error(tool_call, f"{tool.name} failed: {_describe(error)}")
        return await self._admit(tool_call, output, received, redactions)

    async def _execute(self, tool: Tool, args: dict[str, Any]) -> tuple[ToolOutput, int, int]:
        """The tool's output, the bytes it returned, and how many secrets were redacted
        out of it (core.redaction): before the model, the store or the log sees it."""
        if isinstance(tool, OutputTool):
            output = await tool.execute_output(args)
            if not isinstance(output, Inline | Stored):
                raise TypeError(f"execute_output returned {type(output).__name__}")
            received = _size_of(output)
            output, redactions = _redacted(output)
            return output, received, redactions
        text = await tool.execute(args)
        if not isinstance(text, str):
            raise TypeError(f"execute returned {type(text).__name__}, not a str")
        received = utf8_size(text)
        text, redactions = redact_text(_unwrapped(text))
        # Without a store there is nothing to promote to: the output stays whole.
        output = promote(text, self.policy) if self.blob_store is not None else Inline(text)
        return output, received, redactions

    async def _admit(
        self, tool_call: ToolCall, output: ToolOutput, received: int, redactions: int = 0
    ) -> _Outcome:
        if self.blob_store is None:
            result = ToolResult(
                tool_call.id, tool_call.name, output_text(output), redactions=redactions
            )
            return _Outcome(result, received)
        try:
            admitted = await admit(output, self.blob_store, self.policy)
        except BlobStoreError as error:
            message = f"the output of {tool_call.name} ({received} bytes) could not be stored"
            return _error(
                tool_call, f"{message}: {excerpt(str(error), _MESSAGE_LIMIT)}", received=received
            )
        result = ToolResult(tool_call.id, tool_call.name, admitted.text, redactions=redactions)
        return _Outcome(result, received, admitted.blob_id)

    # -- history ------------------------------------------------------------------------

    def _append(self, item: Item) -> None:
        self.history.append(item)
        if self.session_log is not None:
            self.session_log.append(item)

    def _result(
        self, start: int, run: _Tally, text: str, reason: StopReason, detail: str
    ) -> RunResult:
        return RunResult(
            text, reason, detail, tuple(self.history[start:]), run.stats(), tuple(run.blob_ids)
        )


@dataclass(slots=True)
class _Tally:
    """A run's counters while it goes on; frozen into RunStats at the end."""

    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    output_bytes: int = 0
    history_bytes: int = 0
    blob_ids: list[BlobId] = field(default_factory=list)

    def add(self, outcome: _Outcome) -> None:
        self.tool_calls += 1
        self.tool_errors += outcome.result.is_error
        self.output_bytes += outcome.received
        self.history_bytes += utf8_size(outcome.result.output)
        if outcome.blob_id is not None:
            self.blob_ids.append(outcome.blob_id)

    def stats(self) -> RunStats:
        return RunStats(
            turns=self.turns,
            tool_calls=self.tool_calls,
            tool_errors=self.tool_errors,
            output_bytes=self.output_bytes,
            history_bytes=self.history_bytes,
            blobs=len(self.blob_ids),
        )


def _by_name(tools: Iterable[Tool]) -> dict[str, Tool]:
    named: dict[str, Tool] = {}
    for candidate in tools:
        if not isinstance(candidate, Tool):
            hint = " (decorate a function with @tool)" if callable(candidate) else ""
            raise TypeError(
                f"{candidate!r} is not a tool: it needs name, description, parameters and "
                f"async execute(args){hint}"
            )
        if candidate.name in named:
            built_in = candidate.name == INSPECT_NAME and " (inspect is built in with a blob store)"
            raise ValueError(f"two tools are named {candidate.name!r}{built_in or ''}")
        named[candidate.name] = candidate
    return named


def _error(tool_call: ToolCall, message: str, *, received: int | None = None) -> _Outcome:
    result = ToolResult(tool_call.id, tool_call.name, message, is_error=True)
    return _Outcome(result, utf8_size(message) if received is None else received)


def _size_of(output: ToolOutput) -> int:
    if isinstance(output, Inline):
        return utf8_size(output.text)
    content = output.content
    if isinstance(content, Text):
        return utf8_size(content.text)
    assert isinstance(content, Structured)
    return len(dumps_for_storage(content.value))


def _describe(error: BaseException) -> str:
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    name = type(error).__name__
    return excerpt(f"{name}: {first}" if first else name, _MESSAGE_LIMIT)


def _unwrapped(text: str) -> str:
    """A tool's text, or the text it wraps (core.tool_text), with a line naming the
    blocks left out, so the model hears of them."""
    unwrapped = unwrap_text(text)
    if unwrapped is None:
        return text
    if not unwrapped.note:
        return unwrapped.text
    return unwrapped.text.removesuffix("\n") + f"\n[{unwrapped.note}]"


def _redacted(output: ToolOutput) -> tuple[ToolOutput, int]:
    """An OutputTool's output with its secrets redacted, and how many."""
    if isinstance(output, Inline):
        text, redactions = redact_text(output.text)
        return Inline(text), redactions
    content = output.content
    if isinstance(content, Structured):
        value, redactions = redact_json(content.value)
        return Stored(Structured(value)), redactions
    text, redactions = redact_text(content.text)
    return Stored(Text(text)), redactions
