"""The items of an agent's history, and their JSON records in a session log
(docs/session-log.md#item-lines)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: Any = field(default_factory=dict)  # a JSON object, as the model sent it


@dataclass(frozen=True, slots=True)
class UserMessage:
    text: str


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    tool: str
    output: str
    is_error: bool = False
    redactions: int = 0  # secrets replaced in the output before anyone saw it (core.redaction)


Item = UserMessage | AssistantMessage | ToolResult

ITEM_TYPES = ("user", "assistant", "tool_result")


class RecordError(ValueError):
    """A record does not describe a history item."""


def item_to_record(item: Item) -> dict[str, Any]:
    """The item's fields with its `type`, as one session log line holds them."""
    if isinstance(item, UserMessage):
        return {"type": "user", "text": item.text}
    if isinstance(item, AssistantMessage):
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in item.tool_calls]
        return {"type": "assistant", "text": item.text, "tool_calls": calls}
    if isinstance(item, ToolResult):
        record = {
            "type": "tool_result",
            "call_id": item.call_id,
            "tool": item.tool,
            "output": item.output,
            "is_error": item.is_error,
        }
        return {**record, "redactions": item.redactions} if item.redactions else record
    raise TypeError(f"not a history item: {type(item).__name__}")


def item_from_record(record: dict[str, Any]) -> Item:
    """Inverse of :func:`item_to_record`; raises RecordError naming what is wrong."""
    kind = record.get("type")
    try:
        if kind == "user":
            return UserMessage(_str(record, "text"))
        if kind == "assistant":
            calls = record.get("tool_calls") or []
            if not isinstance(calls, list):
                raise RecordError("tool_calls must be a list")
            return AssistantMessage(
                _str(record, "text", default=""),
                tuple(
                    ToolCall(_str(c, "id"), _str(c, "name"), c.get("arguments", {}))
                    for c in calls
                    if _is_object(c, "tool call")
                ),
            )
        if kind == "tool_result":
            is_error = record.get("is_error", False)
            if not isinstance(is_error, bool):
                raise RecordError("is_error must be true or false")
            redactions = record.get("redactions", 0)
            return ToolResult(
                _str(record, "call_id"),
                _str(record, "tool"),
                _str(record, "output"),
                is_error,
                redactions if isinstance(redactions, int) and redactions > 0 else 0,
            )
    except AttributeError:
        raise RecordError("tool calls must be objects") from None
    raise RecordError(f"unknown item type {kind!r} (expected one of {', '.join(ITEM_TYPES)})")


def _is_object(value: Any, what: str) -> bool:
    if not isinstance(value, dict):
        raise RecordError(f"each {what} must be an object")
    return True


def _str(record: dict[str, Any], key: str, *, default: str | None = None) -> str:
    """The string at *key*; *default*, when given, where it is missing or null."""
    value = record.get(key)
    if value is None and default is not None:
        return default
    if key not in record:
        raise RecordError(f"missing field {key!r}")
    if not isinstance(value, str):
        raise RecordError(f"field {key!r} must be a string")
    return value
