"""The Tool protocol and the @tool decorator: a typed function becomes a described tool."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest

from core.agent.tools import FunctionTool, OutputTool, Tool, ToolError, output_text, tool
from core.content import Inline, Stored, Structured, Text, ToolOutput


def test_a_decorated_function_is_a_tool_named_after_it_and_described_by_its_docstring() -> None:
    @tool
    def read_file(path: str, limit: int = 100) -> str:
        """Read a text file.

        Returns its whole text.

        Args:
            path: the file, relative to the root
            limit: at most this many lines;
                more are cut
        """
        return path

    assert isinstance(read_file, Tool)
    assert read_file.name == "read_file"
    assert read_file.description == "Read a text file.\n\nReturns its whole text."
    assert read_file.parameters == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "the file, relative to the root"},
            "limit": {
                "type": "integer",
                "description": "at most this many lines; more are cut",
                "default": 100,
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }


def test_name_and_description_can_be_given() -> None:
    @tool(name="search", description="Search the code.")
    def grep(pattern: str) -> str:
        return pattern

    assert (grep.name, grep.description) == ("search", "Search the code.")


def test_the_sections_after_args_are_not_part_of_any_description() -> None:
    @tool
    def t(a: str) -> str:
        """Do it.

        Args:
            a: the thing

        Raises:
            ToolError: when it cannot
        """
        return a

    assert t.description == "Do it."
    assert t.parameters["properties"]["a"]["description"] == "the thing"


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (list, {"type": "array"}),
        (dict[str, Any], {"type": "object"}),
        (Literal["asc", "desc"], {"enum": ["asc", "desc"]}),
        (int | None, {"type": ["integer", "null"]}),
        (Any, {}),
    ],
)
def test_type_hints_become_json_schema_types(hint: Any, schema: dict[str, Any]) -> None:
    def f(x):  # type: ignore[no-untyped-def]
        """F."""

    f.__annotations__ = {"x": hint, "return": str}
    assert tool(f).parameters["properties"]["x"] == schema


def test_a_parameter_without_a_type_hint_is_refused_by_name() -> None:
    def f(path):  # type: ignore[no-untyped-def]
        """F."""

    with pytest.raises(TypeError, match="f: parameter 'path' needs a type hint"):
        tool(f)


def test_a_type_without_a_json_form_is_refused_by_name() -> None:
    def f(when: complex) -> str:
        """F."""
        return ""

    with pytest.raises(TypeError, match="parameter 'when': .*has no JSON-Schema form"):
        tool(f)


def test_a_tool_needs_a_description() -> None:
    def f(a: str) -> str:
        return a

    with pytest.raises(TypeError, match="needs a docstring or a description="):
        tool(f)


def test_a_sync_function_runs_and_its_string_is_the_output() -> None:
    @tool
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    assert asyncio.run(shout.execute({"text": "hi"})) == "HI"


def test_an_async_function_is_awaited() -> None:
    @tool
    async def shout(text: str) -> str:
        """Shout."""
        await asyncio.sleep(0)
        return text.upper()

    assert asyncio.run(shout.execute({"text": "hi"})) == "HI"


def test_a_json_value_is_returned_as_compact_json_text() -> None:
    @tool
    def packages() -> list[dict[str, str]]:
        """List packages."""
        return [{"name": "Django", "version": "5.2"}]

    assert asyncio.run(packages.execute({})) == '[{"name":"Django","version":"5.2"}]'


def test_a_value_that_is_not_json_is_a_type_error_naming_the_tool() -> None:
    @tool
    def broken() -> str:
        """Broken."""
        return object()  # type: ignore[return-value]

    with pytest.raises(TypeError, match="tool broken returned object"):
        asyncio.run(broken.execute({}))


def test_tool_error_passes_through_to_the_caller() -> None:
    @tool
    def refuse() -> str:
        """Refuse."""
        raise ToolError("not today")

    with pytest.raises(ToolError, match="not today"):
        asyncio.run(refuse.execute({}))


def test_a_function_that_returns_a_tool_output_becomes_an_output_tool() -> None:
    @tool
    def report() -> ToolOutput:
        """Report."""
        return Stored(Structured({"ok": True}))

    @tool
    def plain() -> str:
        """Plain."""
        return "x"

    assert isinstance(report, OutputTool)
    assert not isinstance(plain, OutputTool)
    assert asyncio.run(report.execute_output({})) == Stored(Structured({"ok": True}))
    assert asyncio.run(report.execute({})) == '{"ok":true}'


def test_output_text_is_the_whole_output() -> None:
    assert output_text(Inline("small")) == "small"
    assert output_text(Stored(Text("big text"))) == "big text"
    assert output_text(Stored(Structured([1, {"a": None}]))) == '[1,{"a":null}]'


def test_a_hand_written_class_is_a_tool_too() -> None:
    class Clock:
        name = "clock"
        description = "The time."
        parameters: dict[str, Any] = {"type": "object", "properties": {}}

        async def execute(self, args: dict[str, Any]) -> str:
            return "12:00"

    assert isinstance(Clock(), Tool)
    assert not isinstance(Clock(), OutputTool)


def test_function_tools_are_frozen() -> None:
    @tool
    def t() -> str:
        """T."""
        return ""

    assert isinstance(t, FunctionTool)
    with pytest.raises(AttributeError):
        t.name = "other"  # type: ignore[misc]
