"""Gemini CLI chat sessions (`~/.gemini/tmp/<project hash>/chats/session-*.json`), in both
forms:

- a JSON document `{sessionId, projectHash, startTime, lastUpdated, summary?, messages[]}`,
  which Gemini CLI rewrites whole as the session grows;
- JSON Lines (`session-*.jsonl`): a metadata line, then one message a line. A message is
  appended again, whole, each time it changes (its tool calls finish, its tokens arrive);
  `{"$set": {...}}` lines update the metadata (and may carry the whole `messages` list),
  and `{"$rewindTo": "<message id>"}` marks where the user rewound the conversation.

Messages are `user`, `gemini`, `info`, `error` (and `warning`). A `gemini` message yields
an assistant item for its thoughts and text (empty when it has neither), then for each of
its `toolCalls[]` an assistant item with that call and, once the call has finished, its
result: the text of `result[].functionResponse.response.output`
(or `.error`), an error when the call's `status` is `error`. `resultDisplay` is the UI's
short text, not the output, and is never stored. `info`, `error` and `warning` messages
are user items with that role; a rewind is a user item with role `rewind`.

So that a grown session only adds items, every item's source is a part of a message that
does not change once written: the message without its tool calls and tokens, one call's
name and arguments, one call's result. A message seen again keeps what it first said (a
later copy may mask a big output to spare the model's context; the first is the output);
only its tokens are taken from the latest copy. Items keep the order in which their
messages first appeared, calls the order in which they were added.

Tokens (`tokens.input`: the prompt, cached part included, i.e. the context read;
`output` + `thoughts`: what the turn wrote) go on the message's own item. A
message's time is its `timestamp`; a call is recorded once, when it finished, so its
`timestamp` goes on its result and the call's own item has no time (a step duration from
one time to itself would claim the call took no time at all).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blobviewer.ingest.importers.json_lines import RecordingText, read_json_lines
from blobviewer.ingest.importers.recording import (
    RecordBuilder,
    Recording,
    RecordingError,
    first_line,
    header,
    iso_time,
    session_uuid,
    str_or_empty,
    token_count,
)

FORMAT = "gemini"
# Bump when what this importer derives from a recording changes (see claude_code).
# 2: an output that is text in a wrapper (content blocks) is that text (core.tool_text).
# 3: a message's cached input tokens (docs/cost.md).
IMPORTER_VERSION = 3

_FINISHED = {"success", "error", "cancelled"}
_METADATA_KEYS = ("sessionId", "projectHash", "startTime", "lastUpdated", "summary", "kind")


def looks_like(document: Any) -> bool:
    """A whole Gemini CLI session document."""
    return (
        isinstance(document, dict)
        and isinstance(document.get("sessionId"), str)
        and isinstance(document.get("messages"), list)
    )


def looks_like_first(first: Any) -> bool:
    """The metadata line that opens a Gemini CLI JSON Lines session (or a whole document
    written on one line)."""
    return (
        isinstance(first, dict)
        and "type" not in first
        and isinstance(first.get("sessionId"), str)
        and "projectHash" in first
    )


def load(path: Path, data: bytes | RecordingText, document: Any = None) -> Recording:
    """The recording of a session: *document* when the file is one JSON document (as
    :func:`detect.sniff` parsed it), else the JSON Lines in *data*."""
    if document is not None:
        if not looks_like(document):
            raise RecordingError(path, None, "not a Gemini CLI session: no sessionId and messages")
        entries: list[tuple[int | None, dict[str, Any]]] = [(None, document)]
    else:
        entries = list(read_json_lines(path, data))
        if not entries or not looks_like_first(entries[0][1]):
            raise RecordingError(path, 1, "not a Gemini CLI session: no metadata line first")
    session = _Session(path)
    for number, entry in entries:
        session.add_entry(number, entry)
    return session.recording()


@dataclass
class _Call:
    """One tool call of a message, as first recorded, and its result once it finished."""

    call: dict[str, Any]
    result: dict[str, Any] | None = None


@dataclass
class _Message:
    """A message as first recorded (its tool calls added as they appeared)."""

    number: int | None  # the line it first appeared on (None in a whole document)
    first: dict[str, Any]
    calls: dict[str, _Call] = field(default_factory=dict)
    tokens: Any = None


@dataclass
class _Rewind:
    number: int | None
    record: dict[str, Any]


class _Session:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.metadata: dict[str, Any] = {}
        self.order: list[_Message | _Rewind] = []
        self.messages: dict[str, _Message] = {}

    def add_entry(self, number: int | None, entry: dict[str, Any]) -> None:
        if isinstance(entry.get("$rewindTo"), str):
            self.order.append(_Rewind(number, entry))
        elif isinstance(entry.get("$set"), dict):
            update = entry["$set"]
            self._metadata(update, first=False)
            self._messages(number, update.get("messages"), where="$set.messages")
        elif isinstance(entry.get("id"), str) and "type" in entry:
            self._message(number, entry, where="this message")
        elif isinstance(entry.get("sessionId"), str):
            self._metadata(entry, first=not self.metadata)
            self._messages(number, entry.get("messages"), where="messages")
        else:
            raise RecordingError(
                self.path, number, "neither a message, a metadata update nor a rewind"
            )

    def _metadata(self, values: dict[str, Any], *, first: bool) -> None:
        for key in _METADATA_KEYS:
            # The session id is the first one: a resumed session may be given another.
            if key in values and (first or key != "sessionId" or "sessionId" not in self.metadata):
                self.metadata[key] = values[key]

    def _messages(self, number: int | None, messages: Any, *, where: str) -> None:
        if messages is None:
            return
        if not isinstance(messages, list):
            raise RecordingError(self.path, number, f"{where} is not a list")
        for index, message in enumerate(messages):
            if not isinstance(message, dict):
                raise RecordingError(self.path, number, f"{where}[{index}] is not an object")
            self._message(number, message, where=f"{where}[{index}]", index=index)

    def _message(
        self, number: int | None, message: dict[str, Any], *, where: str, index: int = 0
    ) -> None:
        if not isinstance(message.get("type"), str):
            raise RecordingError(self.path, number, f"{where} has no type")
        # Gemini CLI gives every message an id; a document without them is read in order.
        key = message["id"] if isinstance(message.get("id"), str) else f"#{index}"
        known = self.messages.get(key)
        if known is None:
            known = self.messages[key] = _Message(number, message)
            self.order.append(known)
        if message.get("tokens") is not None:
            known.tokens = message["tokens"]
        calls = message.get("toolCalls")
        if message["type"] != "gemini" or calls is None:
            return
        if not isinstance(calls, list):
            raise RecordingError(self.path, number, f"{where}.toolCalls is not a list")
        for position, call in enumerate(calls):
            if not isinstance(call, dict):
                raise RecordingError(
                    self.path, number, f"{where}.toolCalls[{position}] is not an object"
                )
            given_id = call.get("id")
            call_id = given_id if isinstance(given_id, str) else f"{key}#{position}"
            entry = known.calls.setdefault(call_id, _Call(call))
            if entry.result is None and _finished(call):
                entry.result = call

    def recording(self) -> Recording:
        raw_id = self.metadata.get("sessionId")
        if not isinstance(raw_id, str) or not raw_id:
            raise RecordingError(self.path, None, "no sessionId: not a Gemini CLI session")
        builder = RecordBuilder()
        for part in self.order:
            if isinstance(part, _Rewind):
                builder.from_source(part.record)
                target = part.record["$rewindTo"]
                builder.user(
                    f"(rewound: the conversation went back to before message {target})",
                    role="rewind",
                )
            else:
                _items(builder, part)
        records = builder.records
        summary = self.metadata.get("summary")
        prompt = next((r["text"] for r in records if r["type"] == "user" and "role" not in r), "")
        model = next(
            (
                m.first["model"]
                for m in self.messages.values()
                if isinstance(m.first.get("model"), str) and m.first["model"]
            ),
            "",
        )
        meta = {
            "gemini_id": raw_id,
            "project_hash": self.metadata.get("projectHash"),
            "kind": self.metadata.get("kind"),
            "last_updated": self.metadata.get("lastUpdated"),
        }
        return Recording(
            FORMAT,
            header(
                session_uuid("gemini", raw_id),
                title=(summary if isinstance(summary, str) and summary.strip() else "")
                or first_line(prompt)
                or self.path.stem,
                model=model,
                created_at=iso_time(self.metadata.get("startTime"))
                or next((r["at"] for r in records if r.get("at")), None),
                path=self.path,
                format=FORMAT,
                meta={k: v for k, v in meta.items() if isinstance(v, str) and v},
            ),
            records,
        )


def _finished(call: dict[str, Any]) -> bool:
    return call.get("status") in _FINISHED or bool(call.get("result"))


def _items(builder: RecordBuilder, message: _Message) -> None:
    """The items of one message, see the module docstring."""
    first = message.first
    kind = first["type"]
    at = iso_time(first.get("timestamp"))
    text = _parts_text(first.get("content"))
    if kind != "gemini":
        builder.from_source(first)
        builder.user(text, at=at, role=None if kind == "user" else kind)
        return
    # Always an item of the message's own, even with no text: it holds the turn's time and
    # tokens, and an item that came and went with the message's calls would not be append-only.
    thoughts = _thoughts(first.get("thoughts"))
    builder.from_source({k: v for k, v in first.items() if k not in ("toolCalls", "tokens")})
    builder.assistant("\n".join([*thoughts, text] if text else thoughts), [], at=at)
    builder.records[-1].update(_tokens(message.tokens))
    for call_id, entry in message.calls.items():
        name = entry.call.get("name") if isinstance(entry.call.get("name"), str) else ""
        arguments = entry.call.get("args", {})
        builder.from_source({"message": first.get("id"), "call": [call_id, name, arguments]})
        builder.assistant("", [{"id": call_id, "name": name, "arguments": arguments}])
        if entry.result is not None:
            call = entry.result
            builder.from_source(
                {
                    "message": first.get("id"),
                    "result": [call_id, call.get("status"), call.get("result")],
                }
            )
            builder.tool_result(
                call_id,
                _parts_text(call.get("result")),
                tool=name,
                is_error=call.get("status") == "error",
                at=iso_time(call.get("timestamp")),
            )


def _tokens(tokens: Any) -> dict[str, int]:
    if not isinstance(tokens, dict):
        return {}
    fields = {}
    context = token_count(tokens.get("input"))
    if context is not None:
        fields["input_tokens"] = fields["context_tokens"] = context
    cached = token_count(tokens.get("cached"))  # of the input: Gemini counts it in
    if cached is not None:
        fields["cache_read_tokens"] = cached
    output = token_count(tokens.get("output"))
    if output is not None:
        fields["output_tokens"] = output + (token_count(tokens.get("thoughts")) or 0)
    return fields


def _thoughts(thoughts: Any) -> list[str]:
    if not isinstance(thoughts, list):
        return []
    lines = []
    for thought in thoughts:
        if not isinstance(thought, dict):
            continue
        subject = str_or_empty(thought.get("subject"))
        description = str_or_empty(thought.get("description"))
        body = ": ".join(p for p in (subject, description.strip()) if p)
        if body:
            lines.append(f"(thinking) {body}")
    return lines


def _parts_text(value: Any) -> str:
    """The text of Gemini content (a string, one part, or a list of parts): text parts as
    they are, a function response as its output (or error), inline data and files named,
    never their bytes."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    parts = value if isinstance(value, list) else [value]
    return "\n".join(_part_text(part) for part in parts)


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return json.dumps(part, ensure_ascii=False)
    if isinstance(part.get("text"), str):
        return part["text"]
    response = part.get("functionResponse")
    if isinstance(response, dict):
        body = response.get("response")
        if isinstance(body, dict):
            for key in ("output", "error"):
                if isinstance(body.get(key), str):
                    return body[key]
        return json.dumps(body, ensure_ascii=False)
    inline = part.get("inlineData")
    if isinstance(inline, dict):
        return f"[inline data: {inline.get('mimeType') or 'unknown type'}]"
    file_data = part.get("fileData")
    if isinstance(file_data, dict):
        return f"[file: {file_data.get('fileUri') or ''}]"
    return json.dumps(part, ensure_ascii=False)
