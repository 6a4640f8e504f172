"""OpenTelemetry spans and log events of one conversation, as the OTLP receiver keeps them
(blobviewer.otlp), turned into a session: tool spans into steps, chat spans into turns.

The kept file is JSON Lines: a header `{"type": "otlp", "id": <session id>,
"conversation": <key>}`, then one line per span or log record as received (see
blobviewer.otlp.decoding: ids in hex, times in nanoseconds, attributes as plain JSON).
A span or log record sent again is one line still: the receiver appends only ids it does
not hold. Items are in time order whatever order the lines arrived in, and each keeps a
`source_digest` made from its span's id, so a span sent again, or a later request that
grows the conversation, never doubles an item (docs/otlp.md).

Conventions read: the GenAI semantic conventions (`gen_ai.operation.name` `chat` and
`execute_tool`, `gen_ai.tool.call.arguments` / `.result`, `gen_ai.usage.*`,
`gen_ai.input.messages` / `gen_ai.output.messages`), OpenInference
(`openinference.span.kind` `LLM` / `TOOL`, `input.value` / `output.value`,
`llm.token_count.*`, `llm.output_messages.*`), and Codex's and Claude Code's log events
(`codex.tool_result`, `claude_code.tool_result`, their user prompts). Plain Python.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from blobviewer.ingest.importers.recording import Recording, RecordingError

FORMAT = "otlp"
IMPORTER_VERSION = 2  # 2: messages over the threshold are promoted too
HEADER_TYPE = "otlp"
# Our own attribute for outputs an agent already stored in a blobviewer store.
BLOB_IDS = "blobviewer.blob_ids"

_ERROR = 2  # Status.STATUS_CODE_ERROR
_TOOL_OPS = frozenset({"execute_tool"})
_CHAT_OPS = frozenset({"chat", "text_completion", "generate_content"})
_AGENTS = frozenset({"codex", "claude_code"})  # the prefixes of their log events


def looks_like(first: Any) -> bool:
    return isinstance(first, dict) and first.get("type") == HEADER_TYPE and "id" in first


def load(path: Path) -> Recording:
    """The session that the kept file at *path* holds; raises RecordingError."""
    header, lines = read_kept(path)
    return recording_of(header, lines)


def read_kept(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the span and log lines of a kept file; raises RecordingError."""
    header: dict[str, Any] | None = None
    lines: list[dict[str, Any]] = []
    with path.open("rb") as file:
        for number, raw in enumerate(file, start=1):
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError as error:
                if not raw.endswith(b"\n"):  # a line still being written
                    break
                raise RecordingError(path, number, f"not JSON: {error}") from None
            if not isinstance(value, dict):
                raise RecordingError(path, number, "not a JSON object")
            if header is None:
                if not looks_like(value):
                    raise RecordingError(path, 1, "not a kept OTLP conversation")
                header = value
            else:
                lines.append(value)
    if header is None:
        raise RecordingError(path, None, "empty file")
    return header, lines


def line_id(line: Mapping[str, Any]) -> str:
    """What tells a span or log record sent again from another: a span's id; a log
    record's digest (log records have no id of their own)."""
    if line.get("kind") == "span":
        return f"span:{line.get('trace_id', '')}:{line.get('span_id', '')}"
    canonical = orjson.dumps(line, option=orjson.OPT_SORT_KEYS)
    return "log:" + hashlib.sha256(canonical).hexdigest()


# --- mapping -----------------------------------------------------------------------------


@dataclass
class _Session:
    """What the lines say of the session as a whole, gathered while they are mapped."""

    title: str = ""
    model: str = ""
    services: set[str] = field(default_factory=set)


def recording_of(header: Mapping[str, Any], lines: list[dict[str, Any]]) -> Recording:
    """The session of a conversation's lines, its items in time order."""
    about = _Session()
    # Sorted by time; at the same time by line (its digest: the same whatever order the
    # lines came in), then in the order the line gives them (a call before its result).
    items: list[tuple[int, str, int, dict[str, Any]]] = []
    for line in lines:
        digest = _digest(line)
        for part, record in enumerate(_items_of(line, about)):
            items.append((record.pop("_time"), digest, part, record))
    items.sort(key=lambda entry: entry[:3])
    records = [{**entry[3], "seq": seq} for seq, entry in enumerate(items, start=1)]
    start = min((_time(line, "start") for line in lines), default=0)
    first_user = next((r["text"] for r in records if r["type"] == "user"), "")
    meta: dict[str, Any] = {"conversation": header.get("conversation", "")}
    if about.services:
        meta["service"] = ", ".join(sorted(about.services))
    return Recording(
        format=FORMAT,
        header={
            "id": str(header["id"]),
            "created_at": _iso(start) if start else "",
            "title": about.title or first_user[:200],
            "model": about.model,
            "meta": meta,
        },
        records=records,
    )


def _items_of(line: Mapping[str, Any], about: _Session) -> Iterator[dict[str, Any]]:
    attributes = line.get("attributes") or {}
    if service := (line.get("resource") or {}).get("service.name"):
        about.services.add(str(service))
    if line.get("kind") == "log":
        yield from _log_items(line, attributes)
        return
    operation = str(attributes.get("gen_ai.operation.name", ""))
    kind = str(attributes.get("openinference.span.kind", "")).upper()
    if operation in _TOOL_OPS or kind in ("TOOL", "RETRIEVER"):
        yield from _tool_items(line, attributes)
    elif operation in _CHAT_OPS or kind == "LLM":
        yield from _chat_items(line, attributes, about)
    elif operation == "invoke_agent" or kind == "AGENT":
        about.title = about.title or str(attributes.get("gen_ai.agent.name", ""))


def _tool_items(line: Mapping[str, Any], attributes: Mapping[str, Any]) -> Iterator[dict]:
    """A tool span (or a retriever's: its documents are its output): the call, at its
    start, and its output, at its end."""
    name = str(attributes.get("gen_ai.tool.name") or attributes.get("tool.name") or line["name"])
    call_id = str(attributes.get("gen_ai.tool.call.id") or line["span_id"])
    arguments = _first(attributes, "gen_ai.tool.call.arguments", "input.value", "tool.parameters")
    output = _first(attributes, "gen_ai.tool.call.result", "output.value")
    if output is None and (
        documents := _indexed(attributes, "retrieval.documents", "document.content")
    ):
        output = [documents[index] for index in sorted(documents)]  # a retriever's, as JSON
    status = line.get("status") or {}
    failed = status.get("code") == _ERROR
    if output is None:
        output = str(status.get("message") or "") if failed else ""
    digest = _digest(line)
    yield _call(digest, _time(line, "start"), call_id, name, arguments)
    yield {
        "type": "tool_result",
        "_time": _time(line, "end"),
        "at": _iso(_time(line, "end")),
        "source_digest": _digest_of(digest, "result"),
        "call_id": call_id,
        "tool": name,
        "output": _with_blob_ids(_text(output), attributes),
        "is_error": failed,
    }


def _chat_items(
    line: Mapping[str, Any], attributes: Mapping[str, Any], about: _Session
) -> Iterator[dict]:
    """A model call: the turn the model answered with, at the span's end, with its model
    and tokens; the user's last message before it, at its start."""
    model = str(
        attributes.get("gen_ai.response.model")
        or attributes.get("gen_ai.request.model")
        or attributes.get("llm.model_name")
        or ""
    )
    about.model = about.model or model
    attributes = {**_event_messages(line), **attributes}
    digest = _digest(line)
    if prompt := _last_user_text(attributes):
        yield {
            "type": "user",
            "_time": _time(line, "start"),
            "at": _iso(_time(line, "start")),
            "source_digest": _digest_of(digest, "user"),
            "text": prompt,
            "promote_text": True,
        }
    turn: dict[str, Any] = {
        "type": "assistant",
        "_time": _time(line, "end"),
        "at": _iso(_time(line, "end")),
        "source_digest": _digest_of(digest, "turn"),
        "text": _with_blob_ids(_answer_text(attributes), attributes),
        "tool_calls": [],
        "promote_text": True,
    }
    for field_name, names in _TOKENS.items():
        value = _first(attributes, *names)
        if isinstance(value, int) and not isinstance(value, bool):
            turn[field_name] = value
    yield turn


_TOKENS = {
    "input_tokens": ("gen_ai.usage.input_tokens", "llm.token_count.prompt"),
    "output_tokens": ("gen_ai.usage.output_tokens", "llm.token_count.completion"),
    "cache_read_tokens": (
        "gen_ai.usage.cache_read.input_tokens",
        "llm.token_count.prompt_details.cache_read",
    ),
}


def _log_items(line: Mapping[str, Any], attributes: Mapping[str, Any]) -> Iterator[dict]:
    """Codex's and Claude Code's events: a tool's result becomes a step, a prompt a turn."""
    event = _event_name(line, attributes)
    time = _time(line, "time")
    digest = _digest(line)
    if event == "user_prompt":
        prompt = attributes.get("prompt")
        if isinstance(prompt, str) and prompt:
            yield {
                "type": "user",
                "_time": time,
                "at": _iso(time),
                "source_digest": _digest_of(digest, "user"),
                "text": prompt,
                "promote_text": True,
            }
        return
    if event != "tool_result":
        return
    name = str(attributes.get("tool_name") or attributes.get("tool.name") or "tool")
    call_id = str(attributes.get("call_id") or attributes.get("tool_use_id") or digest[:16])
    arguments = _first(attributes, "arguments", "tool_parameters")
    output = _first(attributes, "output", "tool_output", "result")
    body = line.get("body")
    if output is None and body not in (None, "") and not str(body).endswith(event):
        output = body  # a body that is more than the event's name
    failed = str(attributes.get("success", "true")).lower() == "false"
    if output is None:
        output = _output_not_sent(attributes)
    # The event is sent when the tool is done: the call was its duration before.
    duration = str(attributes.get("duration_ms", ""))
    started = time - int(duration) * 1_000_000 if duration.isdigit() else time
    yield _call(digest, started, call_id, name, arguments)
    yield {
        "type": "tool_result",
        "_time": time,
        "at": _iso(time),
        "source_digest": _digest_of(digest, "result"),
        "call_id": call_id,
        "tool": name,
        "output": _with_blob_ids(_text(output), attributes),
        "is_error": failed,
    }


def _event_name(line: Mapping[str, Any], attributes: Mapping[str, Any]) -> str:
    """`tool_result`, `user_prompt` or another of Codex's or Claude Code's events, from the
    record's event name, its `event.name` or its body (Claude Code names it in the body,
    `claude_code.tool_result`, and may leave the prefix out of `event.name`)."""
    for name in (line.get("event"), attributes.get("event.name"), line.get("body")):
        if isinstance(name, str) and name:
            prefix, _, bare = name.rpartition(".")
            if prefix in _AGENTS or (not prefix and bare in ("tool_result", "user_prompt")):
                return bare
    return ""


def _output_not_sent(attributes: Mapping[str, Any]) -> str:
    """The step's text when the event carries only sizes (Claude Code without
    OTEL_LOG_TOOL_CONTENT): what is known, and how to get the output next time."""
    size = _first(attributes, "tool_result_size_bytes", "output_size", "result_size_bytes")
    error = attributes.get("error")
    said = f"{size} bytes" if size is not None else "its size not said either"
    text = f"(output not sent: {said}; the agent sends it with OTEL_LOG_TOOL_CONTENT=1)"
    return f"{text}\n{error}" if error else text


def _call(digest: str, time: int, call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {
        "type": "assistant",
        "_time": time,
        "at": _iso(time),
        "source_digest": _digest_of(digest, "call"),
        "text": "",
        "tool_calls": [{"id": call_id, "name": name, "arguments": _arguments(arguments)}],
    }


# --- values --------------------------------------------------------------------------------


def _first(attributes: Mapping[str, Any], *names: str) -> Any:
    """The value of the first of *names* the attributes have."""
    for name in names:
        if name in attributes and attributes[name] is not None:
            return attributes[name]
    return None


def _arguments(value: Any) -> Any:
    """A call's arguments: the JSON object a string holds, else the value as it is."""
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return {} if value is None else value


def _text(value: Any) -> str:
    """An output as the text that enters the history; JSON values as JSON (so that
    promotion stores them as JSON blobs)."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def _with_blob_ids(text: str, attributes: Mapping[str, Any]) -> str:
    """*text* with a `[blob:<id>]` line for each id of `blobviewer.blob_ids` it does not
    mention yet, so that ingest links the span's item to those blobs."""
    ids = attributes.get(BLOB_IDS)
    if isinstance(ids, str):
        ids = [part.strip() for part in ids.split(",")]
    if not isinstance(ids, list):
        return text
    extra = [f"[blob:{blob_id}]" for blob_id in ids if blob_id and str(blob_id) not in text]
    return "\n".join([text, *extra]) if text and extra else text or "\n".join(extra)


def _messages(value: Any) -> list[Any]:
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return []
    return value if isinstance(value, list) else []


def _message_text(message: Any) -> str:
    """The text of one GenAI message (`parts` of type text) or a chat API message."""
    if not isinstance(message, dict):
        return ""
    parts = message.get("parts")
    if isinstance(parts, list):
        texts = [p.get("content") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(text for text in texts if isinstance(text, str))
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _event_messages(line: Mapping[str, Any]) -> dict[str, Any]:
    """The messages of a model call in their event form, as the attributes they are in the
    span form: the `gen_ai.client.inference.operation.details` event's, or the older
    `gen_ai.user.message` and `gen_ai.choice` events' (`content`, `message`)."""
    found: dict[str, Any] = {}
    users, choices = [], []
    for event in line.get("events") or ():
        name, attributes = event.get("name"), event.get("attributes") or {}
        if name == "gen_ai.client.inference.operation.details":
            found.update(attributes)
        elif name == "gen_ai.user.message" and isinstance(attributes.get("content"), str):
            users.append({"role": "user", "content": attributes["content"]})
        elif name == "gen_ai.choice":
            message = attributes.get("message")
            if isinstance(message, str):  # JSON of the message; not JSON: no message
                message = next(iter(_messages(f"[{message}]")), None)
            if isinstance(message, dict):
                choices.append(message)
    if users:
        found.setdefault("gen_ai.input.messages", users)
    if choices:
        found.setdefault("gen_ai.output.messages", choices)
    return found


def _last_user_text(attributes: Mapping[str, Any]) -> str:
    """The user's message a model call answers: its input's last message when that is the
    user's ("" when it is a tool's result, as in an agent's later calls, whose input
    repeats the history)."""
    messages = _messages(attributes.get("gen_ai.input.messages"))
    if messages:
        last = messages[-1]
        return _message_text(last) if isinstance(last, dict) and last.get("role") == "user" else ""
    roles = _indexed(attributes, "llm.input_messages", "message.role")
    if not roles or roles[max(roles)] != "user":
        return ""
    content = _indexed(attributes, "llm.input_messages", "message.content").get(max(roles))
    return content if isinstance(content, str) else ""


def _answer_text(attributes: Mapping[str, Any]) -> str:
    messages = _messages(attributes.get("gen_ai.output.messages"))
    if messages:
        return "\n".join(filter(None, map(_message_text, messages)))
    contents = _indexed(attributes, "llm.output_messages", "message.content")
    if contents:
        return "\n".join(str(contents[i]) for i in sorted(contents))
    output = attributes.get("output.value")
    return output if isinstance(output, str) else ""


def _indexed(attributes: Mapping[str, Any], prefix: str, suffix: str) -> dict[int, Any]:
    """OpenInference's flattened lists: `<prefix>.<n>.<suffix>` by n."""
    found = {}
    for name, value in attributes.items():
        if name.startswith(prefix + ".") and name.endswith("." + suffix):
            index = name[len(prefix) + 1 : -len(suffix) - 1]
            if index.isdigit():
                found[int(index)] = value
    return found


def _time(line: Mapping[str, Any], name: str) -> int:
    value = line.get(name) or line.get("start") or line.get("time") or 0
    return int(value) if isinstance(value, int | str) and str(value).isdigit() else 0


def _iso(nanoseconds: int) -> str:
    moment = datetime.fromtimestamp(nanoseconds / 1e9, tz=UTC)
    return moment.isoformat(timespec="milliseconds")


def _digest(line: Mapping[str, Any]) -> str:
    return hashlib.sha256(line_id(line).encode()).hexdigest()


def _digest_of(digest: str, part: str) -> str:
    """The source digest of one of a line's items: its line's, and which item it is."""
    return hashlib.sha256(f"{digest}:{part}".encode()).hexdigest()
