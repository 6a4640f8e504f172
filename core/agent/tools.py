"""Tools an agent can call: the Tool protocol, ToolError, and the `@tool` decorator.

A tool has a name, a description, a JSON-Schema for its arguments, and an async
``execute(args) -> str`` that raises ToolError when it cannot do what was asked. A tool
may also have ``execute_output(args) -> ToolOutput``: the Worker then uses that instead
and skips promotion (the seed's separate trait method).
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, overload, runtime_checkable

from core.agent.tool_schema import docstring_parts, parameters_schema
from core.content import Inline, Stored, Structured, Text, ToolOutput
from core.json_values import dumps_compact

__all__ = [
    "FunctionTool",
    "OutputFunctionTool",
    "OutputTool",
    "Tool",
    "ToolError",
    "output_text",
    "tool",
]


class ToolError(Exception):
    """A tool could not do what was asked; the message goes to the model, so say why."""


@runtime_checkable
class Tool(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...

    async def execute(self, args: dict[str, Any]) -> str: ...


@runtime_checkable
class OutputTool(Tool, Protocol):
    """A tool that decides itself what is Inline and what is Stored."""

    async def execute_output(self, args: dict[str, Any]) -> ToolOutput: ...


def output_text(output: ToolOutput) -> str:
    """The whole text of a ToolOutput: what enters a history that has no blob store."""
    if isinstance(output, Inline):
        return output.text
    content = output.content
    if isinstance(content, Text):
        return content.text
    if isinstance(content, Structured):
        return dumps_compact(content.value)
    raise TypeError(f"not a ToolOutput: {type(output).__name__}")


ToolFunction = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class FunctionTool:
    """A tool made from a typed Python function by :func:`tool`.

    The function may be sync (it then runs in a worker thread, so calls of one turn still
    overlap) or async, and may return a str, or a JSON value that is sent as JSON text.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    function: ToolFunction

    async def execute(self, args: dict[str, Any]) -> str:
        result = await self._call(args)
        if isinstance(result, str):
            return result
        if isinstance(result, Inline | Stored):
            return output_text(result)
        try:
            return dumps_compact(result)
        except (TypeError, ValueError):
            raise TypeError(
                f"tool {self.name} returned {type(result).__name__}; "
                "return a str, a JSON value or a ToolOutput"
            ) from None

    async def _call(self, args: dict[str, Any]) -> Any:
        if inspect.iscoroutinefunction(self.function):
            return await self.function(**args)
        return await asyncio.to_thread(self.function, **args)


@dataclass(frozen=True, slots=True)
class OutputFunctionTool(FunctionTool):
    """A :class:`FunctionTool` whose function returns a ToolOutput (Inline or Stored)."""

    async def execute_output(self, args: dict[str, Any]) -> ToolOutput:
        result = await self._call(args)
        if isinstance(result, Inline | Stored):
            return result
        if isinstance(result, str):
            return Inline(result)
        raise TypeError(f"tool {self.name} returned {type(result).__name__}, not a ToolOutput")


@overload
def tool(function: ToolFunction, /) -> FunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[ToolFunction], FunctionTool]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> FunctionTool | Callable[[ToolFunction], FunctionTool]:
    """Make a tool from a typed function: `@tool` or `@tool(name=..., description=...)`.

    The name defaults to the function's, the description to its docstring before `Args:`,
    and each parameter's schema comes from its type hint and its line under `Args:`.
    A function annotated to return a ToolOutput (or Inline, Stored) becomes a tool with
    ``execute_output``, which the Worker does not promote.
    """

    def make(function: ToolFunction) -> FunctionTool:
        summary, descriptions = docstring_parts(function.__doc__)
        text = description if description is not None else summary
        if not text:
            raise TypeError(f"{function.__name__}: a tool needs a docstring or a description=")
        schema = parameters_schema(function, descriptions=descriptions)
        kind = OutputFunctionTool if _returns_output(function) else FunctionTool
        return kind(name or function.__name__, text, schema, function)

    if function is None:
        return make
    return make(function)


def _returns_output(function: ToolFunction) -> bool:
    returned = typing.get_type_hints(function).get("return")
    members = typing.get_args(returned) or (returned,)
    return any(member in (Inline, Stored) for member in members)
