"""Claude Code session JSONL: one JSON object per line.

Assistant lines carry `message.content[]` blocks (`text`, `thinking`, `tool_use`); user
lines carry a string or blocks (`text`, `tool_result` with `tool_use_id`). Sub-agent
(sidechain) lines inside a session's log are kept, marked `sidechain`. The top-level
`toolUseResult` is a second, richer copy of a result already in the `tool_result` block, so
it is ignored (one output, one blob) — except for a persisted output, below. Lines of other
types (summaries, file snapshots, progress) are not history items.

Persisted outputs. Claude Code 2.1 replaces a big result in the `tool_result` block with a
`<persisted-output>` note (the file it saved the output to, and a 2 KB preview). The item's
output is then the full output: the line's `toolUseResult` (`stdout`, and `stderr` after
it on a line of its own when there is any), else `<session>/tool-results/<tool_use_id>.txt`
beside the log, when it is there and begins as the preview does. The item's `note` says
which ("persisted by Claude Code; full output recovered from toolUseResult" / "... from
tool-results/<id>.txt"); when neither has it, the output stays as recorded (the note and
its preview) and the note says the full output was not in the recording. Never a path the
recording names: only the folder beside the log is read.

Sub-agent logs. Claude Code 2.1 writes each sub-agent's conversation to
`<session>/subagents/agent-<agentId>.jsonl` (older versions: `agent-<agentId>.jsonl` beside
the session), every line `isSidechain` with its `agentId` and the parent's `sessionId`. Such
a log (recognised by its first conversation line, not its name) is a session of its own:
its id derived from the parent's session id and the agent id, its meta naming both
(`parent_session_id`, `agent_id`), its items not marked sidechain (they are its main line).

Claude Code writes one API message over several lines (one per content block), each with
the same `message.id` and a copy of the message's `usage`: the usage counts once, on the
item of the message's first line (output tokens: the largest any of its lines recorded;
the cache's reads and writes as `cache_read_tokens` and `cache_write_tokens`, besides being
part of the context read; a line's `costUSD`, where older versions record it, as its
`cost_usd`).
The session's status is the `stop_reason` of the last main-chain assistant message, where
one of its lines records it.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

from blobviewer.ingest.importers.json_lines import RecordingText
from blobviewer.ingest.importers.recording import (
    IMPORT_NAMESPACE,
    Carried,
    RecordBuilder,
    Recording,
    RecordingError,
    first_line,
    header,
    iso_time,
    load_json_record,
    parse_call_arguments,
    step_output_text,
    str_or_empty,
    text_of,
    token_count,
)

FORMAT = "claude_code"
# Bump when what this importer derives from a recording changes; sessions recorded by an
# older version are re-derived by `manage.py ingest --rebuild` (see blobviewer.ingest.sessions).
# 2: persisted outputs recovered whole (with a note); sub-agent logs are sessions of their own.
# 3: an output that is text in a wrapper (content blocks) is that text (core.tool_text).
# 4: a turn's cache reads and writes, and the line's `costUSD` (docs/cost.md).
IMPORTER_VERSION = 4
# Sub-agent logs become sessions naming their parent (the session page lists them).
SUBAGENTS = True
_ENTRY_TYPES = {"user", "assistant", "summary", "system", "file-history-snapshot"}
_PERSISTED = re.compile(
    r"\A\s*<persisted-output>\n.*?\nPreview \([^)\n]*\):\n(?P<preview>.*)</persisted-output>\s*\Z",
    re.DOTALL,
)
# A tool_use_id that names a file in tool-results/ (never a path of the recording's).
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")
FROM_TOOL_USE_RESULT = "persisted by Claude Code; full output recovered from toolUseResult"
FROM_FILE = "persisted by Claude Code; full output recovered from tool-results/"
NOT_RECORDED = (
    "persisted by Claude Code; the full output was not in the recording "
    "(its preview is what is stored)"
)


def looks_like(first: Any) -> bool:
    return (
        isinstance(first, dict)
        and first.get("type") in _ENTRY_TYPES
        and ("sessionId" in first or first.get("type") in ("summary", "file-history-snapshot"))
    )


def load(path: Path, data: bytes | RecordingText, carry: dict[str, Any] | None = None) -> Recording:
    """The recording of a Claude Code log. With *carry* (the Recording.carry of the read
    that ended where *data* resumes), only the lines after that read: see Carried."""
    text = RecordingText.of(path, data)
    reader = _Reader(path, Carried(carry))
    known = text.resume[1] if text.resume is not None and carry is not None else 0
    for line in text.lines(parse=load_json_record):
        if line.number <= known:
            continue  # the first line, read again to recognise the file
        if line.error is not None:
            if line.unterminated:
                break  # a torn last line: the recorder was still writing
            raise RecordingError(path, line.number, f"not JSON: {line.error}")
        if not isinstance(line.value, dict):
            raise RecordingError(path, line.number, "each line must be a JSON object")
        reader.entry(line.number, line.value, line.plain_floats)
    return reader.recording(resumed=carry is not None)


class _Reader:
    """The state of a read, line by line; what a read that resumes needs of it is its
    carry (a message's first item, the last message's stop reason, the calls awaiting
    their results, what the header is made of)."""

    def __init__(self, path: Path, carried: Carried) -> None:
        self.path = path
        self.carried = carried
        self.builder = RecordBuilder(carried)
        self.session_id: str | None = carried.get("session_id")
        self.title: str | None = carried.get("title")
        self.model: str | None = carried.get("model")
        self.agent_id: str | None = carried.get("agent_id")  # a sub-agent's log: its agent id
        self.started: bool = carried.get("started", False)  # the first conversation line read
        self.first_user: str | None = carried.get("first_user")  # its first line
        self.created_at: str | None = carried.get("created_at")
        self.cwd: str | None = carried.get("cwd")  # the folder it worked in (its first line's)
        self.usage = _Usage(self.builder)
        for message_id, item in carried.get("messages", {}).items():
            self.usage.first_item[message_id] = carried.restored(item)
        # Of the main chain: the last message's id and stop_reason.
        self.last_message: dict[str, Any] | None = carried.get("last_message")
        self.stop_reasons: dict[str, str] = dict(carried.get("stop_reasons", {}))

    def entry(self, number: int, entry: dict[str, Any], plain_floats: bool) -> None:
        builder = self.builder
        kind = entry.get("type")
        if kind == "summary" and self.title is None and isinstance(entry.get("summary"), str):
            self.title = entry["summary"]
        self.session_id = self.session_id or entry.get("sessionId")
        if self.cwd is None and isinstance(entry.get("cwd"), str):
            self.cwd = entry["cwd"]
        message = entry.get("message")
        if kind not in ("user", "assistant", "system"):
            return
        if not self.started:  # a sub-agent's own log opens with a sidechain line
            self.started = True
            if entry.get("isSidechain") is True and isinstance(entry.get("agentId"), str):
                self.agent_id = entry["agentId"]
        builder.from_source(entry, plain_floats=plain_floats)
        at = iso_time(entry.get("timestamp"))
        sidechain = entry.get("isSidechain") and self.agent_id is None
        extra: dict[str, Any] = {"sidechain": True if sidechain else None}
        if entry.get("isMeta"):
            extra["role"] = "meta"
        if kind == "system":
            builder.user(text_of(entry.get("content")), at=at, role="system", **extra)
        elif not isinstance(message, dict):
            raise RecordingError(self.path, number, f"a {kind} line without a message")
        elif kind == "assistant":
            self.model = self.model or message.get("model")
            _assistant(builder, self.path, number, message, at, extra)
            self.usage.add(message, entry.get("costUSD"))
            message_id = message.get("id")
            if isinstance(message_id, str) and isinstance(message.get("stop_reason"), str):
                self.stop_reasons.setdefault(message_id, message["stop_reason"])
            if not sidechain:
                self.last_message = {"id": message_id, "stop_reason": message.get("stop_reason")}
        else:
            _user(builder, self.path, number, entry, at, extra)
        record = builder.records[-1] if builder.records else {}
        self.created_at = self.created_at or record.get("at")
        if self.first_user is None and record.get("type") == "user" and "role" not in record:
            self.first_user = first_line(record["text"])

    def recording(self, *, resumed: bool) -> Recording:
        session_id, title = self.session_id, self.title
        if not isinstance(session_id, str):
            raise RecordingError(self.path, None, "no sessionId: not a Claude Code session")
        meta: dict[str, Any] = {"cwd": self.cwd} if self.cwd else {}
        if self.agent_id is not None:
            parent = _uuid_text(session_id)
            meta.update(parent_session_id=parent, agent_id=self.agent_id)
            session_id = str(
                uuid.uuid5(IMPORT_NAMESPACE, f"claude_code-subagent:{parent}:{self.agent_id}")
            )
            title = title or f"Sub-agent: {self.first_user or self.agent_id}"
        return Recording(
            FORMAT,
            header(
                session_id,
                title=title or self.first_user or self.path.stem,
                model=self.model if isinstance(self.model, str) else "",
                created_at=self.created_at,
                path=self.path,
                format=FORMAT,
                meta=meta,
                status=_status(self.last_message, self.stop_reasons),
            ),
            self.builder.records,
            carry=self.carry(),
            earlier=self.carried.earlier() if resumed else None,
        )

    def carry(self) -> dict[str, Any]:
        # The messages whose later lines may still come: the last few (Claude Code writes
        # a message's lines together; sub-agents' may come between them).
        messages = list(self.usage.first_item.items())[-_CARRIED_MESSAGES:]
        return {
            **self.builder.carry(),
            "session_id": self.session_id,
            "title": self.title,
            "model": self.model,
            "agent_id": self.agent_id,
            "started": self.started,
            "first_user": self.first_user,
            "created_at": self.created_at,
            "cwd": self.cwd,
            "messages": {key: Carried.item(record) for key, record in messages},
            "last_message": self.last_message,
            "stop_reasons": {
                key: self.stop_reasons[key]
                for key in [*(key for key, _ in messages), (self.last_message or {}).get("id")]
                if key in self.stop_reasons
            },
        }


# How many of the last API messages a carry keeps (see _Reader.carry).
_CARRIED_MESSAGES = 16


def _uuid_text(value: str) -> str:
    """A session id as the site spells it (a UUID's canonical text), so a sub-agent's
    `parent_session_id` finds its parent; any other text as it is."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return value


def _status(last: dict[str, Any] | None, stop_reasons: dict[str, str]) -> str | None:
    if last is None:
        return None
    if isinstance(last.get("stop_reason"), str):
        return last["stop_reason"]
    message_id = last.get("id")
    return stop_reasons.get(message_id) if isinstance(message_id, str) else None


class _Usage:
    """Puts each API message's `usage` (and the line's `costUSD`, which older Claude Code
    versions record) on the item of its first line, once."""

    def __init__(self, builder: RecordBuilder) -> None:
        self.builder = builder
        self.first_item: dict[str, dict[str, Any]] = {}  # message id -> its first item

    def add(self, message: dict[str, Any], cost: Any) -> None:
        usage = message.get("usage")
        if not isinstance(usage, dict) and not _is_cost(cost):
            return
        record = self.builder.records[-1]  # the assistant item this line just added
        message_id = message.get("id")
        if isinstance(message_id, str):
            record = self.first_item.setdefault(message_id, record)
        if _is_cost(cost):
            record["cost_usd"] = cost  # the message's own: each of its lines repeats it
        if isinstance(usage, dict):
            _put_usage(record, usage)


def _is_cost(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _put_usage(record: dict[str, Any], usage: dict[str, Any]) -> None:
    """The turn's tokens from an API message's *usage*: the whole context it read (new
    input plus what the cache supplied and what was written to it), each cache part on
    its own, and the output (the largest any of the message's lines recorded)."""
    fresh = token_count(usage.get("input_tokens"))
    if fresh is None:
        return
    read = token_count(usage.get("cache_read_input_tokens"))
    written = token_count(usage.get("cache_creation_input_tokens"))
    record["input_tokens"] = record["context_tokens"] = fresh + (read or 0) + (written or 0)
    for key, value in (("cache_read_tokens", read), ("cache_write_tokens", written)):
        if value is not None:
            record[key] = value
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
                    "arguments": parse_call_arguments(block.get("input")),
                }
            )
    builder.assistant("\n".join(texts), calls, at=at, **extra)


def _user(builder, path, number, entry, at, extra) -> None:  # noqa: ANN001
    texts = []
    for block in _blocks(path, number, entry["message"]):
        if block.get("type") == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise RecordingError(path, number, "a tool_result without tool_use_id")
            text, left_out = step_output_text(block.get("content"))
            output, note = _whole_output(path, entry, call_id, text)
            builder.tool_result(
                call_id,
                output,
                is_error=block.get("is_error") is True,
                at=at,
                note="; ".join(filter(None, [note, left_out])) or None,
                **extra,
            )
        else:
            texts.append(text_of(block.get("text") if block.get("type") == "text" else [block]))
    if texts:
        builder.user("\n".join(texts), at=at, **extra)


def _whole_output(
    path: Path, entry: dict[str, Any], call_id: str, text: str
) -> tuple[str, str | None]:
    """(output, note) of a result whose text is *text*: the text itself (no note), unless
    Claude Code persisted it (see the module docstring)."""
    match = _PERSISTED.match(text)
    if match is None:
        return text, None
    preview = match.group("preview")
    whole = _tool_use_output(entry.get("toolUseResult"))
    if whole is not None and _begins_with(whole, preview):
        return whole, FROM_TOOL_USE_RESULT
    if _SAFE_ID.fullmatch(call_id):
        for folder in _tool_results_folders(path, entry.get("sessionId")):
            file = folder / f"{call_id}.txt"
            try:
                whole = file.read_bytes().decode("utf-8", errors="replace")
            except OSError:
                continue  # not there (or unreadable): the next place, or the preview
            if _begins_with(whole, preview):
                return whole, f"{FROM_FILE}{file.name}"
    return text, NOT_RECORDED


def _tool_use_output(result: Any) -> str | None:
    """The whole output a Bash `toolUseResult` holds: `stdout`, then `stderr` on a line of
    its own when there is any (as the result text shows them); None for other shapes."""
    if not isinstance(result, dict) or not isinstance(result.get("stdout"), str):
        return None
    stdout = result["stdout"]
    stderr = str_or_empty(result.get("stderr"))
    if not stderr.strip():
        return stdout
    if not stdout:
        return stderr
    return stdout + ("" if stdout.endswith("\n") else "\n") + stderr


def _begins_with(whole: str, preview: str) -> bool:
    """Whether *whole* is what *preview* was cut from: it begins with the preview's text
    (Claude Code drops leading blank lines and ends the preview with `...`; the preview's
    last character may be half of one)."""
    shown = preview.strip()
    if shown.endswith("..."):
        shown = shown[:-3].rstrip()
    return whole.lstrip().startswith(shown[:-1])


def _tool_results_folders(path: Path, session_id: Any) -> list[Path]:
    """Where Claude Code keeps a session's persisted outputs: `<session>/tool-results/`
    beside the log (`<session>.jsonl`), or, for a sub-agent's log in
    `<session>/subagents/`, that session's folder."""
    names = [path.stem]
    if isinstance(session_id, str) and _SAFE_ID.fullmatch(session_id) and session_id != path.stem:
        names.append(session_id)
    folders = [path.parent / name / "tool-results" for name in names]
    if path.parent.name == "subagents":
        folders.append(path.parent.parent / "tool-results")
    return folders
