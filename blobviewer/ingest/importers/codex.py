"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`), in both layouts:

- the current one: every line `{timestamp, type, payload}`; the first is `session_meta`
  (its `payload.id` is the session's id), `turn_context` lines name the model,
  `response_item` lines are the history the model saw, `event_msg` lines are what the UI
  was told, and `compacted` lines mark where the context was replaced by a summary;
- the older one without the envelope: a first line `{id, timestamp, instructions, git}`,
  then bare response items and `{"record_type": "state"}` lines, no times.

Each response item becomes one item, so an item's source is its own line and a grown
rollout only adds items: `message` (a user, developer or assistant message; the texts
Codex injects — AGENTS.md, `<environment_context>`, ... — are user items with role
`context`), `reasoning` (its summary, or only that it happened: encrypted reasoning is
never shown), `function_call` / `custom_tool_call` / `local_shell_call` (an assistant item
with that call), `web_search_call` (a call without id and without a result), and
`function_call_output` / `custom_tool_call_output` (the result; an output that is a
JSON-encoded `{output, metadata}`, as apply_patch and the old shell tool write, shows its
`output`, and `metadata.exit_code` gives its error status).

The `event_msg` lines repeat those events for the UI (`user_message`, `agent_message`,
`exec_command_end`, `patch_apply_end`, ...) and never become items or blobs. Only these
add to the history: `token_count` (the tokens of the model response just recorded, put on
its first item: `last_token_usage.input_tokens`, which counts the cached input too, is
the context read, `cached_input_tokens` the part of it read from the cache, `output_tokens`
what it wrote), `turn_aborted` (a user item with role
`aborted`) and `error` (role `error`); `task_complete` / `turn_aborted` give the status.

A result is an error when its output says its exit code was not 0 (`Process exited with
code N`, `Exit code: N`, or `metadata.exit_code`), else when the `exec_command_end` or
`patch_apply_end` of its call id says it failed — except when the call returned while its
command still ran (`Process running with session ID …`): that command's exit, and its
`aggregated_output`, reach the model through the later `write_stdin` polls, each a step
of its own. An output in which Codex says it could not make the call (`write_stdin failed:
stdin is closed …`) is an error too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from blobviewer.ingest.importers.json_lines import RecordingText, read_json_lines
from blobviewer.ingest.importers.recording import (
    Carried,
    RecordBuilder,
    Recording,
    RecordingError,
    dict_field,
    first_line,
    header,
    iso_time,
    parse_call_arguments,
    session_uuid,
    str_or_empty,
    token_count,
)

FORMAT = "codex"
# Bump when what this importer derives from a recording changes (see claude_code).
# 2: an output that is text in a wrapper (content blocks) is that text (core.tool_text).
# 3: a response's cached input tokens (docs/cost.md).
IMPORTER_VERSION = 3

# User messages Codex writes itself around the prompt (instructions, environment).
_CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions",
)
# The IDE extension puts its context (`# Context from my IDE setup:`, `# Files mentioned
# by the user:`, open tabs …) before what the user asked, under this heading.
_REQUEST_HEADING = "## My request for Codex:"
_EXIT_CODE = re.compile(r"^(?:Process exited with code|Exit code:) (-?\d+)\s*$", re.MULTILINE)
# How Codex answers a call it could not make (`write_stdin failed: stdin is closed …`).
_TOOL_FAILED = "write_stdin failed:"
_STILL_RUNNING = re.compile(r"^Process running with session ID (\d+)", re.MULTILINE)
# How far into an output its header lines (chunk id, wall time, exit code) can reach.
_HEADER_CHARS = 400
_CALLS = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
_OUTPUTS = {"function_call_output", "custom_tool_call_output"}
# Response items that are not part of the conversation (undo snapshots).
_NOT_HISTORY = {"ghost_snapshot"}


def looks_like(first: Any) -> bool:
    """Whether a file's first line opens a Codex rollout, in either layout."""
    return _is_session_meta(first) or _is_legacy_header(first)


def _is_session_meta(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.get("type") == "session_meta"
        and isinstance(value.get("payload"), dict)
    )


def _is_legacy_header(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "type" not in value
        and isinstance(value.get("id"), str)
        and "timestamp" in value
        and ("instructions" in value or "git" in value)
    )


def load(path: Path, data: bytes | RecordingText, carry: dict[str, Any] | None = None) -> Recording:
    """The recording of a rollout (a torn last line is left for the next read). With
    *carry* (the Recording.carry of the read that ended where *data* resumes), the first
    line and only the lines after that read: see Carried."""
    entries = read_json_lines(path, data)
    if not entries or not looks_like(entries[0][1]):
        raise RecordingError(path, 1, "not a Codex rollout: no session_meta first")
    reader = _Rollout(path, entries, Carried(carry))
    reader.read()
    return reader.recording(resumed=carry is not None)


class _Rollout:
    """The state of a read, line by line; what a read that resumes needs of it is its
    carry (the calls awaiting their results and exits, the commands still running, the
    response awaiting its tokens, what the header is made of)."""

    def __init__(
        self, path: Path, entries: list[tuple[int, dict[str, Any]]], carried: Carried
    ) -> None:
        self.path = path
        self.entries = entries
        self.carried = carried
        self.legacy = _is_legacy_header(entries[0][1])
        self.builder = RecordBuilder(carried)
        self.meta: dict[str, Any] = entries[0][1] if self.legacy else entries[0][1]["payload"]
        self.model: str = carried.get("model", "")
        # The first thing the user typed, and the first user item's text (their first
        # lines, as the title shows them, once carried).
        self.prompt: str | None = carried.get("prompt")
        self.first_user: str | None = carried.get("first_user")
        self.first_at: str | None = carried.get("first_at")
        self.status: str | None = carried.get("status")
        # The first item of the model response being recorded: its token_count goes there.
        response = carried.get("response")
        self.response = carried.restored(response) if response is not None else None
        exit_codes, patch_results = _ends(entries)
        self.exit_codes = {**carried.get("exit_codes", {}), **exit_codes}
        self.patch_results = {**carried.get("patches", {}), **patch_results}
        # call id -> the call, as recorded; the ids of those with a result.
        self.calls: dict[str, dict[str, Any]] = dict(carried.get("pending", {}))
        self.answered: set[str] = set()
        # Commands still running, by the session id their polls name (see output).
        self.running: dict[Any, _Running] = {
            session: _Running(**{**running, "result": carried.restored(running["result"])})
            for session, running in carried.get("running", {}).items()
        }
        # Results without an exit yet, whose exit a later line may report: by call id.
        self.undecided: dict[str, dict[str, Any]] = {
            call_id: carried.restored(item)
            for call_id, item in carried.get("undecided", {}).items()
        }
        for call_id in [key for key in self.undecided if self.decided(key)]:
            result = self.undecided.pop(call_id)
            result["is_error"] = result["is_error"] or self.failed(call_id)

    def decided(self, call_id: str) -> bool:
        """Whether an `exec_command_end` or `patch_apply_end` reports the call's end."""
        return call_id in self.exit_codes or call_id in self.patch_results

    def failed(self, call_id: str) -> bool:
        """Whether the call's end (see decided) says it failed."""
        end_code = self.exit_codes.get(call_id)
        return (end_code is not None and end_code != 0) or self.patch_results.get(call_id) is False

    def read(self) -> None:
        for number, entry in self.entries[1:]:
            if self.legacy:
                if "record_type" not in entry:
                    self.response_item(number, entry, entry, at=None)
                continue
            kind = entry.get("type")
            payload = entry.get("payload")
            if not isinstance(payload, dict):
                if kind in ("response_item", "event_msg", "compacted", "turn_context"):
                    raise RecordingError(self.path, number, f"a {kind} line without a payload")
                continue
            at = iso_time(entry.get("timestamp"))
            if kind == "response_item":
                self.response_item(number, payload, entry, at=at)
            elif kind == "event_msg":
                self.event(payload, entry, at=at)
            elif kind == "compacted":
                self.compacted(payload, entry, at=at)
            elif kind == "turn_context" and not self.model:
                self.model = str_or_empty(payload.get("model"))

    # --- response items: the history -------------------------------------------------

    def response_item(
        self, number: int, item: dict[str, Any], source: dict[str, Any], *, at: str | None
    ) -> None:
        kind = item.get("type")
        if kind in _NOT_HISTORY or not isinstance(kind, str):
            return
        builder = self.builder
        builder.from_source(source)
        if kind == "message":
            self.message(item, at)
        elif kind == "reasoning":
            self.assistant(_reasoning_text(item), [], at)
        elif kind in _CALLS:
            call = _call(self.path, number, item)
            self.calls[call["id"]] = call
            if call["name"] == "write_stdin" and (running := self.polled(call["arguments"])):
                running.polls += 1
                call["title"] = f"{running.command} · poll {running.polls}"
                call["polls"] = running.call_id
            self.assistant("", [call], at)
        elif kind in _OUTPUTS:
            self.output(number, item, at)

    def message(self, item: dict[str, Any], at: str | None) -> None:
        role = item.get("role")
        text = _content_text(item.get("content"))
        if role == "assistant":
            self.assistant(text, [], at)
            return
        self.response = None  # input to the model: the response before it is over
        if role == "user":
            injected = text.lstrip().startswith(_CONTEXT_PREFIXES)
            self.builder.user(text, at=at, role="context" if injected else None)
        else:
            self.builder.user(text, at=at, role=role if isinstance(role, str) else "unknown")

    def assistant(self, text: str, calls: list[dict[str, Any]], at: str | None) -> None:
        self.builder.assistant(text, calls, at=at)
        if self.response is None:
            self.response = self.builder.records[-1]

    def output(self, number: int, item: dict[str, Any], at: str | None) -> None:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise RecordingError(self.path, number, f"a {item.get('type')} without call_id")
        text, failed, exit_code = _output(item.get("output"))
        undecided = False
        if exit_code is None:
            exit_code = _exit_code_in(text)
        if exit_code is not None:
            is_error = failed or exit_code != 0
        elif text.startswith(_TOOL_FAILED):  # Codex refused the call itself
            is_error = True
        elif failed or _STILL_RUNNING.search(text[:_HEADER_CHARS]):
            is_error = failed
        else:  # its exit, if any, is in the events
            is_error = self.failed(call_id)
            undecided = not self.decided(call_id)
        call = self.calls.get(call_id, {})
        self.answered.add(call_id)
        name, arguments = call.get("name", ""), call.get("arguments")
        note = self.poll(arguments, exit_code) if name == "write_stdin" else None
        title = call.get("title")  # the result's title is its call's (a poll's)
        self.builder.tool_result(call_id, text, is_error=is_error, at=at, note=note, title=title)
        if undecided:
            self.undecided[call_id] = self.builder.records[-1]
        if name != "write_stdin" and (running := _STILL_RUNNING.search(text[:_HEADER_CHARS])):
            command = _command(arguments) or name
            self.running[running.group(1)] = _Running(command, call_id, self.builder.records[-1])
        self.response = None

    def polled(self, arguments: Any) -> _Running | None:
        """The running command a `write_stdin` call with *arguments* polls, if known."""
        session = arguments.get("session_id") if isinstance(arguments, dict) else None
        return self.running.get(str(session)) if session is not None else None

    def poll(self, arguments: Any, exit_code: int | None) -> str | None:
        """The note of a `write_stdin` poll of a command still running (`poll 2 of `npm
        test``); the exit code it reports, when not 0, marks the command's step failed."""
        running = self.polled(arguments)
        if running is None:
            return None
        if exit_code is not None:  # the command ended: its status is the command's
            running.result["is_error"] = running.result["is_error"] or exit_code != 0
            del self.running[str(arguments["session_id"])]
        return f"poll {running.polls} of `{running.command}`"

    # --- events: what the UI was told -----------------------------------------------

    def event(self, payload: dict[str, Any], source: dict[str, Any], *, at: str | None) -> None:
        kind = payload.get("type")
        if kind == "token_count":
            self.tokens(payload)
        elif kind == "user_message" and self.prompt is None:
            if isinstance(payload.get("message"), str) and payload["message"].strip():
                self.prompt = payload["message"]
        elif kind == "task_started":
            self.status = None  # a turn is running: no status until it ends
        elif kind == "task_complete":
            self.status = "task_complete"
        elif kind == "turn_aborted":
            reason = payload.get("reason") if isinstance(payload.get("reason"), str) else ""
            self.status = f"turn_aborted: {reason}" if reason else "turn_aborted"
            self.builder.from_source(source)
            text = f"(turn aborted: {reason})" if reason else "(turn aborted)"
            self.builder.user(text, at=at, role="aborted")
        elif kind == "error":
            message = payload.get("message")
            self.builder.from_source(source)
            self.builder.user(message if isinstance(message, str) else "", at=at, role="error")
        # Every other event repeats something the response items hold.

    def tokens(self, payload: dict[str, Any]) -> None:
        last = dict_field(payload, "info").get("last_token_usage")
        if self.response is None or not isinstance(last, dict):
            return  # a repeat (rate limits only), or no response recorded since the last
        context = token_count(last.get("input_tokens"))
        output = token_count(last.get("output_tokens"))
        cached = token_count(last.get("cached_input_tokens"))
        if context is not None:
            self.response["input_tokens"] = self.response["context_tokens"] = context
        if cached is not None:
            self.response["cache_read_tokens"] = cached
        if output is not None:
            self.response["output_tokens"] = output
        self.response = None

    def compacted(self, payload: dict[str, Any], source: dict[str, Any], *, at: str | None) -> None:
        message = str_or_empty(payload.get("message"))
        text = "(context compacted)" + (f"\n\n{message}" if message.strip() else "")
        self.builder.from_source(source)
        self.builder.user(text, at=at, role="compacted")
        self.response = None

    # --- the session ----------------------------------------------------------------

    def recording(self, *, resumed: bool) -> Recording:
        raw_id = self.meta.get("id")
        if not isinstance(raw_id, str) or not raw_id:
            raise RecordingError(self.path, 1, "the rollout's first line has no session id")
        records = self.builder.records
        prompt = self.prompt or self.user_text() or ""
        git = dict_field(self.meta, "git")
        meta = {
            "layout": "legacy" if self.legacy else "rollout",
            "codex_id": raw_id,
            "cwd": self.meta.get("cwd"),
            "cli_version": self.meta.get("cli_version"),
            "originator": self.meta.get("originator"),
            "model_provider": self.meta.get("model_provider"),
            "git_branch": git.get("branch"),
            "git_commit": git.get("commit_hash"),
        }
        model = self.model or self.meta.get("model")
        return Recording(
            FORMAT,
            header(
                session_uuid("codex", raw_id),
                title=_title(prompt) or self.path.stem,
                model=model if isinstance(model, str) else "",
                created_at=iso_time(self.meta.get("timestamp")) or self.first_time(),
                path=self.path,
                format=FORMAT,
                meta={k: v for k, v in meta.items() if isinstance(v, str) and v},
                status=self.status,
            ),
            records,
            carry=self.carry(),
            earlier=self.carried.earlier() if resumed else None,
        )

    def user_text(self) -> str | None:
        """The first user item's text (its title, once carried), if there is one yet."""
        if self.first_user is not None:  # carried, even when it was empty
            return self.first_user
        records = self.builder.records
        return next((r["text"] for r in records if r["type"] == "user" and "role" not in r), None)

    def first_time(self) -> str | None:
        return self.first_at or next((r["at"] for r in self.builder.records if r.get("at")), None)

    def carry(self) -> dict[str, Any]:
        pending = {key: call for key, call in self.calls.items() if key not in self.answered}
        undecided = list(self.undecided.items())[-_CARRIED_UNDECIDED:]
        user_text = self.user_text()
        return {
            **self.builder.carry(),
            "model": self.model,
            "prompt": _title(self.prompt) if self.prompt is not None else None,
            "first_user": _title(user_text) if user_text is not None else None,
            "first_at": self.first_time(),
            "status": self.status,
            "response": Carried.item(self.response) if self.response is not None else None,
            "exit_codes": {key: code for key, code in self.exit_codes.items() if key in pending},
            "patches": {key: ok for key, ok in self.patch_results.items() if key in pending},
            "pending": pending,
            "running": {
                session: {**vars(running), "result": Carried.item(running.result)}
                for session, running in self.running.items()
            },
            "undecided": {key: Carried.item(result) for key, result in undecided},
        }


# How many results awaiting their exit a carry keeps (see _Rollout.carry): the exit
# follows the output closely.
_CARRIED_UNDECIDED = 64


def _title(text: str) -> str:
    """What a session's title shows of the user's first text."""
    return first_line(_request_in(text))


def _ends(entries: list[tuple[int, dict[str, Any]]]) -> tuple[dict[str, int], dict[str, bool]]:
    """Exit codes (`exec_command_end`) and patch outcomes (`patch_apply_end`) by call id:
    the same events as the call's output, read for its error status only."""
    exit_codes: dict[str, int] = {}
    patches: dict[str, bool] = {}
    for _, entry in entries:
        payload = entry.get("payload")
        if entry.get("type") != "event_msg" or not isinstance(payload, dict):
            continue
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            continue
        code = payload.get("exit_code")
        if payload.get("type") == "exec_command_end" and _is_int(code):
            exit_codes[call_id] = code
        elif payload.get("type") == "patch_apply_end" and isinstance(payload.get("success"), bool):
            patches[call_id] = payload["success"]
    return exit_codes, patches


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _call(path: Path, number: int, item: dict[str, Any]) -> dict[str, Any]:
    """The tool call an assistant item holds, as the importers spell calls."""
    kind = item["type"]
    if kind == "web_search_call":  # no call id and no output: a step without a result
        action = item.get("action")
        call_id = item.get("id")
        return {
            "id": call_id if isinstance(call_id, str) else "",
            "name": "web_search",
            "arguments": action if action is not None else {},
        }
    call_id = item.get("call_id") or item.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise RecordingError(path, number, f"a {kind} without call_id")
    name = "local_shell" if kind == "local_shell_call" else str_or_empty(item.get("name"))
    if kind == "local_shell_call":
        arguments = item.get("action") or {}
    elif kind == "custom_tool_call":  # freeform input (apply_patch's patch): kept as text
        arguments = item.get("input", "")
    else:
        arguments = parse_call_arguments(item.get("arguments"))
    return {"id": call_id, "name": name, "arguments": arguments}


def _output(raw: Any) -> tuple[str, bool, int | None]:
    """(text, failed, exit code) of a call's output: a string, possibly the JSON encoding
    of `{output, metadata}`; or an object with `content` and `success`; or content items."""
    if isinstance(raw, str):
        wrapped = _wrapped_output(raw)
        if wrapped is not None:
            return wrapped
        return raw, False, None
    if isinstance(raw, dict):
        failed = raw.get("success") is False
        if "content" in raw:
            return _content_text(raw["content"]), failed, None
        return json.dumps(raw, ensure_ascii=False), failed, None
    if raw is None:
        return "", False, None
    return _content_text(raw), False, None


def _wrapped_output(raw: str) -> tuple[str, bool, int | None] | None:
    """`{"output": "...", "metadata": {"exit_code": N, ...}}` as a string: its parts."""
    if not raw.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if (
        not isinstance(value, dict)
        or set(value) != {"output", "metadata"}
        or not isinstance(value["output"], str)
        or not isinstance(value["metadata"], dict)
    ):
        return None
    code = value["metadata"].get("exit_code")
    return value["output"], False, code if _is_int(code) else None


def _exit_code_in(text: str) -> int | None:
    match = _EXIT_CODE.search(text[:_HEADER_CHARS])
    return int(match.group(1)) if match else None


def _content_text(content: Any) -> str:
    """The text of a message's content items (`input_text`, `output_text`, images)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    pieces = []
    for part in content:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif isinstance(part, dict) and "image" in str(part.get("type", "")):
            pieces.append("[image]")  # never the image's bytes (a data: URL)
        else:
            pieces.append(json.dumps(part, ensure_ascii=False))
    return "\n".join(pieces)


def _reasoning_text(item: dict[str, Any]) -> str:
    """What the reasoning item lets a reader see: its summary and any plain reasoning
    text; for encrypted reasoning only that it happened."""
    texts = []
    for key in ("summary", "content"):
        parts = item.get(key)
        if isinstance(parts, list):
            texts += [
                p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
    if texts:
        return "(reasoning) " + "\n".join(texts)
    return "(reasoning, encrypted)" if item.get("encrypted_content") else "(reasoning)"


def _request_in(prompt: str) -> str:
    """What the user asked in *prompt*: the text under the IDE extension's request heading
    when it has one, else the whole prompt."""
    _, heading, request = prompt.partition(_REQUEST_HEADING)
    return request if heading and request.strip() else prompt


@dataclass
class _Running:
    """A command that returned while it still ran: its polls (`write_stdin` with its
    session id) read its output, and the one that reports its exit gives its status."""

    command: str
    call_id: str  # of the call that started it
    result: dict[str, Any]  # that call's result
    polls: int = 0


def _command(arguments: Any) -> str:
    """The command an exec_command (or shell) call ran, on one line; "" when none."""
    if not isinstance(arguments, dict):
        return ""
    command = arguments.get("cmd", arguments.get("command"))
    if isinstance(command, list):
        command = " ".join(str(part) for part in command)
    return " ".join(command.split())[:200] if isinstance(command, str) else ""
