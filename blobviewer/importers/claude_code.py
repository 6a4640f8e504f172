"""Claude Code session JSONL: one JSON object per line.

Assistant lines carry `message.content[]` blocks (`text`, `thinking`, `tool_use`); user
lines carry a string or blocks (`text`, `tool_result` with `tool_use_id`). Sub-agent
(sidechain) lines are kept, marked `sidechain`. The top-level `toolUseResult` is a second,
richer copy of a result already in the `tool_result` block, so it is ignored: one output,
one blob. Lines of other types (summaries, file snapshots) are not history items.

Claude Code writes one API message over several lines (one per content block), each with
the same `message.id` and a copy of the message's `usage`: the usage counts once, on the
item of the message's first line (output tokens: the largest any of its lines recorded).
The session's status is the `stop_reason` of the last main-chain assistant message, where
one of its lines records it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from blobviewer.importers.recording import (
    RecordBuilder,
    Recording,
    RecordingError,
    first_line,
    header,
    iso_time,
    parse_arguments,
    text_of,
    token_count,
)

FORMAT = "claude_code"
# Bump when what this importer derives from a recording changes; sessions recorded by an
# older version are re-derived by `manage.py ingest --rebuild` (see blobviewer.ingest).
IMPORTER_VERSION = 1
_ENTRY_TYPES = {"user", "assistant", "summary", "system", "file-history-snapshot"}


def looks_like(first: Any) -> bool:
    return (
        isinstance(first, dict)
        and first.get("type") in _ENTRY_TYPES
        and ("sessionId" in first or first.get("type") in ("summary", "file-history-snapshot"))
    )


def load(path: Path, data: bytes) -> Recording:
    builder = RecordBuilder()
    session_id = title = model = None
    usage = _Usage(builder)
    last_message: dict[str, Any] | None = None  # of the main chain
    stop_reasons: dict[str, str] = {}  # message id -> the stop_reason a line recorded
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError) as error:
            if number == len(lines) and not data.endswith(b"\n"):
                break  # a torn last line: the recorder was still writing
            raise RecordingError(path, number, f"not JSON: {error}") from None
        if not isinstance(entry, dict):
            raise RecordingError(path, number, "each line must be a JSON object")
        kind = entry.get("type")
        if kind == "summary" and title is None and isinstance(entry.get("summary"), str):
            title = entry["summary"]
        session_id = session_id or entry.get("sessionId")
        message = entry.get("message")
        if kind not in ("user", "assistant", "system"):
            continue
        builder.from_source(entry)
        at = iso_time(entry.get("timestamp"))
        extra = {"sidechain": True if entry.get("isSidechain") else None}
        if entry.get("isMeta"):
            extra["role"] = "meta"
        if kind == "system":
            builder.user(text_of(entry.get("content")), at=at, role="system", **extra)
            continue
        if not isinstance(message, dict):
            raise RecordingError(path, number, f"a {kind} line without a message")
        if kind == "assistant":
            model = model or message.get("model")
            _assistant(builder, path, number, message, at, extra)
            usage.add(message)
            message_id = message.get("id")
            if isinstance(message_id, str) and isinstance(message.get("stop_reason"), str):
                stop_reasons.setdefault(message_id, message["stop_reason"])
            if not entry.get("isSidechain"):
                last_message = message
        else:
            _user(builder, path, number, message, at, extra)
    if not isinstance(session_id, str):
        raise RecordingError(path, None, "no sessionId: not a Claude Code session")
    first_user = next(
        (r["text"] for r in builder.records if r["type"] == "user" and "role" not in r), ""
    )
    return Recording(
        FORMAT,
        header(
            session_id,
            title=title or first_line(first_user) or path.stem,
            model=model if isinstance(model, str) else "",
            created_at=next((r["at"] for r in builder.records if r.get("at")), None),
            path=path,
            format=FORMAT,
            status=_status(last_message, stop_reasons),
        ),
        builder.records,
    )


def _status(last: dict[str, Any] | None, stop_reasons: dict[str, str]) -> str | None:
    if last is None:
        return None
    if isinstance(last.get("stop_reason"), str):
        return last["stop_reason"]
    message_id = last.get("id")
    return stop_reasons.get(message_id) if isinstance(message_id, str) else None


class _Usage:
    """Puts each API message's `usage` on the item of its first line, once."""

    def __init__(self, builder: RecordBuilder) -> None:
        self.builder = builder
        self.first_item: dict[str, dict[str, Any]] = {}  # message id -> its first item

    def add(self, message: dict[str, Any]) -> None:
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        record = self.builder.records[-1]  # the assistant item this line just added
        message_id = message.get("id")
        if isinstance(message_id, str):
            record = self.first_item.setdefault(message_id, record)
        fresh = token_count(usage.get("input_tokens"))
        if fresh is None:
            return
        # The whole context the turn read: new input plus what the cache supplied.
        context = fresh + sum(
            token_count(usage.get(key)) or 0
            for key in ("cache_read_input_tokens", "cache_creation_input_tokens")
        )
        record["input_tokens"] = record["context_tokens"] = context
        output = token_count(usage.get("output_tokens"))
        if output is not None:
            record["output_tokens"] = max(output, record.get("output_tokens") or 0)


def _blocks(path: Path, number: int, message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise RecordingError(path, number, "message.content must be a string or a list of blocks")
    return content


def _assistant(builder, path, number, message, at, extra) -> None:  # noqa: ANN001
    texts, calls = [], []
    for block in _blocks(path, number, message):
        kind = block.get("type")
        if kind == "text":
            texts.append(text_of(block.get("text")))
        elif kind == "thinking" and block.get("thinking"):
            texts.append(f"(thinking) {block['thinking']}")
        elif kind == "tool_use":
            calls.append(
                {
                    "id": str(block.get("id") or ""),
                    "name": str(block.get("name") or ""),
                    "arguments": parse_arguments(block.get("input")),
                }
            )
    builder.assistant("\n".join(texts), calls, at=at, **extra)


def _user(builder, path, number, message, at, extra) -> None:  # noqa: ANN001
    texts = []
    for block in _blocks(path, number, message):
        if block.get("type") == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise RecordingError(path, number, "a tool_result without tool_use_id")
            builder.tool_result(
                call_id,
                text_of(block.get("content")),
                is_error=block.get("is_error") is True,
                at=at,
                **extra,
            )
        else:
            texts.append(text_of(block.get("text") if block.get("type") == "text" else [block]))
    if texts:
        builder.user("\n".join(texts), at=at, **extra)
