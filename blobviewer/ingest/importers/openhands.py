"""OpenHands recordings, in the three shapes OpenHands writes them:

- **V0 events** (the OpenHands app before the software-agent SDK): a JSON list of events
  (a downloaded or saved trajectory), or the file store's conversation folder
  `sessions/<id>/events/<n>.json` with one event a file. An event is an action
  (`action`, `args`) or an observation (`observation`, `content`, `extras`, and `cause`:
  the id of the action it answers). Actions the model called carry `tool_call_metadata`
  (`function_name`, `tool_call_id`, and the whole `model_response`, copied onto every
  event of that response and onto its observations too).
- **evaluation output** (`output.jsonl` of `evaluation/benchmarks/*`): one run a line,
  `{instance_id, instruction, metadata, history, metrics, error, ...}`, the V0 events
  under `history`. Each line is a session of its own (see :func:`load_evaluation_runs`).
- **V1 conversation folder** (the software-agent SDK, `~/.openhands/conversations/<id>/`):
  `base_state.json` (the agent, its model, token usage per response, the execution
  status) and `events/event-NNNNN-<uuid>.json`, one event a file, each with a `kind`.

What becomes an item. V0: a `message` action is a user or assistant item (by its
`source`); any other action is an assistant item holding one call (its `thought` is the
item's text: OpenHands puts the model's text on the first action of a response; `think`
keeps its thought as the call's argument) whose id is the `tool_call_id`, else
`event-<id>`; an observation is that call's result (paired by `cause`), its output the
observation's `content`, whole. The call's arguments are the model's own (the function
arguments in `model_response`), else the action's `args`. The `model_response` copies are
read for arguments, model and tokens only, never stored as outputs or text. Dropped, as
OpenHands' own UI state and not the conversation: `agent_state_changed` (its last state is
the session's status), `change_agent_state`, `null`, `recall` and `system` events. A
`condensation` is a user item with role `compacted`. An observation is an error when it is
an `error` or `user_rejected` observation, says `success: false`, or its `extras` give an
exit code other than 0; exit code -1 (the command had not finished when its output was
returned) is said in the item's note.

V1: `MessageEvent` is a user or assistant item; `ActionEvent` an assistant item with its
`tool_call` (arguments parsed), its `thought` as text; `ObservationEvent` the result of
its `tool_call_id` (else of its `action_id`'s call), output its `observation.content`
text, an error when `is_error` or a non-zero `exit_code`; `AgentErrorEvent` and
`UserRejectObservation` are failed results; `Condensation` and `CondensationSummaryEvent`
user items with role `compacted`, `ConversationErrorEvent` one with role `error`. The
system prompt, state updates, pauses and token events are dropped.

Tokens: each model response's usage (V0: `model_response.usage`; V1: `base_state.json`'s
`token_usages` by `response_id`) goes on the first item of that response: `prompt_tokens`
(which counts cached input too) as the context read, `completion_tokens` as written.
OpenHands writes times without a zone; they are read as UTC.

This module reads V0 events, evaluation outputs and V0 folders, and what V0 and V1 share;
V1 conversation folders are read by blobviewer.ingest.importers.openhands_v1.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

from blobviewer.ingest.importers.json_lines import RecordingText
from blobviewer.ingest.importers.recording import (
    IMPORT_NAMESPACE,
    RecordBuilder,
    Recording,
    RecordingError,
    canonical_digest,
    dict_field,
    first_line,
    header,
    iso_time,
    parse_call_arguments,
    stable_session_id,
    str_or_empty,
    text_of,
    token_count,
)

FORMAT = "openhands"
# Bump when what this importer derives from a recording changes (see claude_code).
# 2: an output that is text in a wrapper (content blocks) is that text (core.tool_text).
# 3: a model response's cache reads and writes (docs/cost.md).
IMPORTER_VERSION = 3

# V0 events that are the app's own state, not the conversation.
_DROPPED_ACTIONS = {"system", "recall", "change_agent_state", "null"}
_DROPPED_OBSERVATIONS = {"agent_state_changed", "null", "recall"}
_FAILED_OBSERVATIONS = {"error", "user_rejected"}
_V0_EVENT_FILE = re.compile(r"(\d+)\.json")
STILL_RUNNING_NOTE = "exit code -1: the command had not finished when its output was returned"


# --- recognising ------------------------------------------------------------------------


def looks_like_events(document: Any) -> bool:
    """A V0 event list: a JSON list of objects with an `id` and an `action` or an
    `observation`."""
    return (
        isinstance(document, list)
        and bool(document)
        and all(_is_v0_event(event) for event in document[:20])
    )


def _is_v0_event(event: Any) -> bool:
    return (
        isinstance(event, dict) and "id" in event and ("action" in event or "observation" in event)
    )


def looks_like_run(first: Any) -> bool:
    """The first line of an evaluation output: a run with `instance_id` and `history`."""
    return (
        isinstance(first, dict)
        and isinstance(first.get("instance_id"), str)
        and isinstance(first.get("history"), list)
    )


def looks_like_damaged_run(first_line: bytes) -> bool:
    """A first line that does not parse but opens as OpenHands writes a run
    (`EvalOutput`'s first field is `instance_id`): the file is still an evaluation output,
    and only that run is damaged."""
    return first_line.lstrip().startswith(b'{"instance_id":')


def conversation_layout(path: Path) -> str | None:
    """`v1` for a V1 conversation folder (`base_state.json` holding a conversation `id`,
    beside `events/`), `v0` for a V0 file-store conversation folder (`events/0.json` is a
    V0 event), else None. Reads at most one small file; never raises."""
    try:
        events = path / "events"
        if not events.is_dir():
            return None
        base_state = path / "base_state.json"
        if base_state.is_file():
            state = json.loads(base_state.read_bytes())
            return "v1" if isinstance(state, dict) and isinstance(state.get("id"), str) else None
        first = events / "0.json"
        if first.is_file() and _is_v0_event(json.loads(first.read_bytes())):
            return "v0"
    except (OSError, ValueError, RecursionError):
        return None
    return None


# --- loading ----------------------------------------------------------------------------


def load_events(path: Path, document: Any) -> Recording:
    """The recording of a V0 event list (as :func:`detect.sniff` parsed it)."""
    if not isinstance(document, list):
        raise RecordingError(path, None, "not an OpenHands event list")
    events = _V0(path)
    for index, event in enumerate(document):
        events.add(event, where=f"event {index}")
    return events.recording(
        stable_session_id("openhands", document[:3]), layout="v0", title="", meta={}
    )


def load_evaluation_runs(
    path: Path, data: bytes | RecordingText
) -> list[tuple[int, Recording | RecordingError]]:
    """Each run of an evaluation output with its line number: its recording, or the
    RecordingError (naming `path:line`) that skips that run only. A last line without its
    newline that does not parse is a run still being written: left out for now.

    A run's session id is derived from its `instance_id` and a digest of its `history`:
    the run itself, not the file. So the file growing by more runs, or the same run
    appearing again in a copy or a derived file (OpenHands writes the evaluated runs again
    into `output.swebench_eval.jsonl`), finds the same session, while the same task run
    again — in another evaluation, or in this one — has another history (its events carry
    their times) and is another session."""
    runs: list[tuple[int, Recording | RecordingError]] = []
    for line in RecordingText.of(path, data).lines(parse=_json_loads):
        number = line.number
        if line.error is not None:
            if line.unterminated:  # no newline after it: still being written
                break
            runs.append((number, RecordingError(path, number, f"not JSON: {line.error}")))
            continue
        try:
            runs.append((number, _run(path, number, line.value)))
        except RecordingError as error:
            runs.append((number, error))
    return runs


def _json_loads(raw: bytes) -> tuple[Any, bool]:
    # A run is read as json reads it (NaN, integers of any size), as it always was.
    return json.loads(raw), False


def _run(path: Path, number: int, run: Any) -> Recording:
    if not looks_like_run(run):
        raise RecordingError(
            path, number, "not an OpenHands evaluation run: no instance_id and history"
        )
    instance_id = run["instance_id"]
    events = _V0(path, line=number)
    for index, event in enumerate(run["history"]):
        events.add(event, where=f"history[{index}]")
    metadata = dict_field(run, "metadata")
    llm = dict_field(metadata, "llm_config")
    error = run.get("error")
    run_id = f"openhands-run:{instance_id}:{canonical_digest(run['history'])}"
    recording = events.recording(
        str(uuid.uuid5(IMPORT_NAMESPACE, run_id)),
        layout="evaluation",
        title=instance_id,
        meta={"instance_id": instance_id, "agent_class": metadata.get("agent_class")},
        model=str_or_empty(llm.get("model")),
    )
    if isinstance(error, str) and error.strip():
        recording.header["status"] = f"error: {first_line(error, 93)}"
        recording.header["meta"]["error"] = error[:2000]
    return recording


def event_files(folder: Path, pattern: re.Pattern[str]) -> list[Path]:
    """The event files of *folder* whose names *pattern* numbers, in that order."""
    try:
        entries = list(folder.iterdir())
    except OSError as error:
        raise RecordingError(folder, None, f"cannot read: {error.strerror}") from None
    numbered = [
        (int(match.group(1)), entry)
        for entry in entries
        if (match := pattern.fullmatch(entry.name)) is not None
    ]
    return [entry for _, entry in sorted(numbered, key=lambda pair: (pair[0], pair[1].name))]


def read_events(files: list[Path]) -> list[tuple[Path, Any]]:
    """Each file's event, parsed; the last file is left out while it does not parse (it
    is still being written), any other that does not raises RecordingError."""
    events = []
    for index, file in enumerate(files):
        try:
            events.append((file, json.loads(file.read_bytes())))
        except OSError as error:
            raise RecordingError(file, None, f"cannot read: {error.strerror}") from None
        except (ValueError, RecursionError) as error:
            if index == len(files) - 1:  # the newest event, still being written
                break
            raise RecordingError(file, None, f"not JSON: {error}") from None
    return events


def load_v0_folder(path: Path) -> Recording:
    """The recording of a V0 file-store conversation folder (see conversation_layout)."""
    events = read_events(event_files(path / "events", _V0_EVENT_FILE))
    reader = _V0(path)
    for file, event in events:
        reader.add(event, where=file.name)
    title = str_or_empty(json_object_file(path / "metadata.json").get("title"))
    return reader.recording(
        # As for the event list, so a conversation saved both ways is one session.
        stable_session_id("openhands", [event for _, event in events[:3]]),
        layout="v0-folder",
        title=title,
        meta={"conversation_id": path.name},
    )


def json_object_file(path: Path) -> dict[str, Any]:
    """The JSON object in *path*; {} when it cannot be read or holds something else."""
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


# --- V0 events ----------------------------------------------------------------------------


class _V0:
    """V0 events in order, into items (see the module docstring)."""

    def __init__(self, path: Path, *, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.builder = RecordBuilder()
        self.call_ids: dict[Any, str] = {}  # action event id -> its call id
        self.responses: dict[str, dict[str, Any]] = {}  # model response id -> its first item
        self.model = ""
        self.state: str | None = None  # the last agent state recorded
        self.finished = False

    def fail(self, where: str, message: str) -> RecordingError:
        return RecordingError(self.path, self.line, f"{where}: {message}")

    def add(self, event: Any, *, where: str) -> None:
        if not isinstance(event, dict):
            raise self.fail(where, "an event must be a JSON object")
        if "action" in event:
            self.action(event, where)
        elif "observation" in event:
            self.observation(event, where)
        # Anything else (a bare message, a stream marker) is not part of the history.

    def action(self, event: dict[str, Any], where: str) -> None:
        kind = event.get("action")
        if not isinstance(kind, str):
            raise self.fail(where, "an action must be named")
        if kind in _DROPPED_ACTIONS:
            return
        args = dict_field(event, "args")
        at = iso_time(event.get("timestamp"))
        builder = self.builder
        builder.from_source(event)
        metadata = event.get("tool_call_metadata")
        metadata = metadata if isinstance(metadata, dict) else None
        if kind == "message":
            text = str_or_empty(args.get("content")) or str_or_empty(event.get("message"))
            images = args.get("image_urls")
            if isinstance(images, list) and images:
                text += "".join("\n[image]" for _ in images)
            if event.get("source") == "user":
                builder.user(text, at=at)
            else:
                builder.assistant(text, [], at=at)
                self.tokens(metadata)
            return
        if kind == "condensation":
            add_condensation(builder, str_or_empty(args.get("summary")), at)
            return
        if kind == "finish" and metadata is None:  # no call: the agent's last word
            text = str_or_empty(args.get("final_thought")) or str_or_empty(event.get("message"))
            builder.assistant(text, [], at=at)
            self.finished = True
            return
        self.finished = self.finished or kind == "finish"
        call_id = str_or_empty(metadata.get("tool_call_id")) if metadata else ""
        call_id = call_id or f"event-{event.get('id')}"
        self.call_ids[event.get("id")] = call_id
        name = str_or_empty(metadata.get("function_name")) if metadata else ""
        arguments = _model_arguments(metadata, call_id)
        if arguments is None:
            arguments = {key: value for key, value in args.items() if key != "thought"}
        text = "" if kind == "think" else str_or_empty(args.get("thought"))
        builder.assistant(
            text, [{"id": call_id, "name": name or kind, "arguments": arguments}], at=at
        )
        self.tokens(metadata)

    def observation(self, event: dict[str, Any], where: str) -> None:
        kind = event.get("observation")
        if not isinstance(kind, str):
            raise self.fail(where, "an observation must be named")
        extras = dict_field(event, "extras")
        if kind == "agent_state_changed":
            state = extras.get("agent_state")
            self.state = state if isinstance(state, str) and state else self.state
        if kind in _DROPPED_OBSERVATIONS:
            return
        metadata = event.get("tool_call_metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        cause = event.get("cause")
        call_id = self.call_ids.get(cause) if cause is not None else None
        call_id = (
            call_id or str_or_empty(metadata.get("tool_call_id")) or f"event-{event.get('id')}"
        )
        content = event.get("content")
        output = content if isinstance(content, str) else text_of(content)
        code = _exit_code(extras)
        is_error = (
            kind in _FAILED_OBSERVATIONS
            or event.get("success") is False
            or (code is not None and code != 0)
        )
        tool = (
            None
            if call_id in self.builder.tool_names
            else (str_or_empty(metadata.get("function_name")) or kind)
        )
        self.builder.from_source(event)
        self.builder.tool_result(
            call_id,
            output,
            tool=tool,
            is_error=is_error,
            at=iso_time(event.get("timestamp")),
            note=STILL_RUNNING_NOTE if code == -1 else None,
        )

    def tokens(self, metadata: dict[str, Any] | None) -> None:
        """The usage of the model response this item came from, on the response's first
        item (every action of a response carries a copy of it)."""
        response = metadata.get("model_response") if metadata else None
        if not isinstance(response, dict):
            return
        if not self.model and isinstance(response.get("model"), str):
            self.model = response["model"]
        record = self.builder.records[-1]
        response_id = response.get("id")
        if isinstance(response_id, str) and response_id:
            if response_id in self.responses:
                return
            self.responses[response_id] = record
        put_response_tokens(record, response.get("usage"))

    def recording(
        self, session_id: str, *, layout: str, title: str, meta: dict[str, Any], model: str = ""
    ) -> Recording:
        records = self.builder.records
        first_user = next(
            (r["text"] for r in records if r["type"] == "user" and "role" not in r), ""
        )
        status = self.state or ("finished" if self.finished else None)
        return Recording(
            FORMAT,
            header(
                session_id,
                title=title or first_line(first_user) or self.path.stem,
                model=model or self.model,
                created_at=next((r["at"] for r in records if r.get("at")), None),
                path=self.path,
                format=FORMAT,
                meta={
                    "layout": layout,
                    **{k: v for k, v in meta.items() if isinstance(v, str) and v},
                },
                status=status,
            ),
            records,
        )


def _model_arguments(metadata: dict[str, Any] | None, call_id: str) -> Any:
    """The arguments the model sent for *call_id*, from the response copy; None when the
    copy does not hold them."""
    response = metadata.get("model_response") if metadata else None
    choices = response.get("choices") if isinstance(response, dict) else None
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and call.get("id") == call_id:
                function = call.get("function")
                if isinstance(function, dict) and "arguments" in function:
                    return parse_call_arguments(function["arguments"])
    return None


def _exit_code(extras: dict[str, Any]) -> int | None:
    metadata = extras.get("metadata")
    for value in (
        metadata.get("exit_code") if isinstance(metadata, dict) else None,
        extras.get("exit_code"),
    ):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def put_response_tokens(record: dict[str, Any], usage: Any) -> None:
    """Put a model response's *usage* on *record*, the response's first item."""
    if not isinstance(usage, dict):
        return
    context = token_count(usage.get("prompt_tokens"))
    output = token_count(usage.get("completion_tokens"))
    if context is not None:
        record["input_tokens"] = record["context_tokens"] = context
    if output is not None:
        record["output_tokens"] = output
    # The cache's parts of the prompt: the SDK's own names (V1), else LiteLLM's (V0).
    details = dict_field(usage, "prompt_tokens_details")
    read = _first_count(
        usage.get("cache_read_tokens"),
        details.get("cached_tokens"),
        usage.get("cache_read_input_tokens"),
    )
    written = _first_count(
        usage.get("cache_write_tokens"), usage.get("cache_creation_input_tokens")
    )
    for key, value in (("cache_read_tokens", read), ("cache_write_tokens", written)):
        if value is not None:
            record[key] = value


def _first_count(*values: Any) -> int | None:
    """The first of *values* that is a token count."""
    return next((count for count in map(token_count, values) if count is not None), None)


def add_condensation(builder: RecordBuilder, summary: str, at: str | None) -> None:
    """OpenHands dropped older events to fit the context: the summary it kept, as a
    user message of the role `compacted`, as Codex compactions are."""
    builder.user(
        "(context condensed)" + (f"\n\n{summary}" if summary else ""), at=at, role="compacted"
    )
