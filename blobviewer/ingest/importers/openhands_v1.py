"""OpenHands V1 conversation folders (the software-agent SDK,
`~/.openhands/conversations/<id>/`): `base_state.json` and `events/event-NNNNN-<uuid>.json`,
one event a file, each with a `kind`. What becomes an item is in the docstring of
blobviewer.ingest.importers.openhands, which reads the other shapes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from blobviewer.ingest.importers.openhands import (
    FORMAT,
    STILL_RUNNING_NOTE,
    add_condensation,
    event_files,
    json_object_file,
    put_response_tokens,
    read_events,
)
from blobviewer.ingest.importers.recording import (
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
    text_of,
)

_V1_EVENT_FILE = re.compile(r"event-(\d+)-[^/]*\.json")
# V1 kinds that are state, not conversation.
_V1_DROPPED = {
    "SystemPromptEvent",
    "ConversationStateUpdateEvent",
    "PauseEvent",
    "TokenEvent",
    "CondensationRequest",
}
_RESULTS = ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation")


def load_v1_folder(path: Path) -> Recording:
    """The recording of a V1 conversation folder. An event file that does not parse is
    reported by its path, unless it is the last one (still being written: left for the
    next read)."""
    state = json_object_file(path / "base_state.json")
    events = _V1(_v1_token_usages(state))
    for file, event in read_events(event_files(path / "events", _V1_EVENT_FILE)):
        events.add(file, event)
    raw_id = state.get("id")
    if not isinstance(raw_id, str) or not raw_id:
        raise RecordingError(path / "base_state.json", None, "no conversation id")
    agent = dict_field(state, "agent")
    workspace = dict_field(state, "workspace")
    records = events.builder.records
    first_user = next((r["text"] for r in records if r["type"] == "user" and "role" not in r), "")
    meta = {
        "layout": "v1",
        "conversation_id": raw_id,
        "working_dir": workspace.get("working_dir"),
        "agent": agent.get("kind"),
    }
    return Recording(
        FORMAT,
        header(
            session_uuid("openhands", raw_id),
            title=first_line(first_user) or path.name,
            model=str_or_empty(dict_field(agent, "llm").get("model")),
            created_at=next((r["at"] for r in records if r.get("at")), None),
            path=path,
            format=FORMAT,
            meta={k: v for k, v in meta.items() if isinstance(v, str) and v},
            status=str_or_empty(state.get("execution_status")) or None,
        ),
        records,
    )


class _V1:
    """V1 events in order, into items (see the openhands module's docstring); *usages*:
    each model response's token usage, by response id."""

    def __init__(self, usages: dict[str, dict[str, Any]]) -> None:
        self.usages = usages
        self.builder = RecordBuilder()
        self.call_ids: dict[str, str] = {}  # action event id -> its tool call id
        self.responses: dict[str, dict[str, Any]] = {}  # response id -> its first item

    def add(self, file: Path, event: Any) -> None:
        if not isinstance(event, dict):
            raise RecordingError(file, None, "an event must be a JSON object")
        kind = event.get("kind")
        if not isinstance(kind, str) or kind in _V1_DROPPED:
            return
        at = iso_time(event.get("timestamp"))
        builder = self.builder
        builder.from_source(event)
        if kind == "MessageEvent":
            if not self.message(event, at):
                return
        elif kind == "ActionEvent":
            self.action(file, event, at)
        elif kind in _RESULTS:
            self.result(file, kind, event, at)
            return
        elif kind in ("Condensation", "CondensationSummaryEvent"):
            add_condensation(builder, str_or_empty(event.get("summary")), at)
            return
        elif kind == "ConversationErrorEvent":
            detail = str_or_empty(event.get("detail")) or str_or_empty(event.get("code"))
            builder.user(detail, at=at, role="error")
            return
        else:
            return  # a kind this importer does not know: not shown rather than guessed
        response_id = str_or_empty(event.get("llm_response_id"))
        if response_id and response_id not in self.responses:
            self.responses[response_id] = builder.records[-1]
            put_response_tokens(builder.records[-1], self.usages.get(response_id))

    def message(self, event: dict[str, Any], at: str | None) -> bool:
        """A message; True when it is the model's (whose response's tokens it carries)."""
        message = dict_field(event, "llm_message")
        text = _v1_text(message.get("content"))
        if event.get("source") == "user":
            self.builder.user(text, at=at)
            return False
        reasoning = message.get("reasoning_content")
        self.builder.assistant(_with_reasoning(text, reasoning), [], at=at)
        return True

    def action(self, file: Path, event: dict[str, Any], at: str | None) -> None:
        call = dict_field(event, "tool_call")
        call_id = str_or_empty(event.get("tool_call_id")) or str_or_empty(call.get("id"))
        if not call_id:
            raise RecordingError(file, None, "an ActionEvent without tool_call_id")
        self.call_ids[str_or_empty(event.get("id"))] = call_id
        name = str_or_empty(call.get("name")) or str_or_empty(event.get("tool_name"))
        arguments = parse_call_arguments(call.get("arguments"))
        text = _with_reasoning(_v1_text(event.get("thought")), event.get("reasoning_content"))
        call_made = {"id": call_id, "name": name, "arguments": arguments}
        self.builder.assistant(text, [call_made], at=at)

    def result(self, file: Path, kind: str, event: dict[str, Any], at: str | None) -> None:
        action_call = self.call_ids.get(str_or_empty(event.get("action_id")), "")
        call_id = str_or_empty(event.get("tool_call_id")) or action_call
        if not call_id:
            raise RecordingError(file, None, f"a {kind} without tool_call_id")
        output, is_error, note = _v1_result(kind, event)
        known = call_id in self.builder.tool_names
        self.builder.tool_result(
            call_id,
            output,
            tool=None if known else str_or_empty(event.get("tool_name")),
            is_error=is_error,
            at=at,
            note=note,
        )


def _v1_result(kind: str, event: dict[str, Any]) -> tuple[str, bool, str | None]:
    """(output, is_error, note) of a V1 tool result event."""
    if kind == "AgentErrorEvent":
        return str_or_empty(event.get("error")), True, None
    if kind == "UserRejectObservation":
        reason = str_or_empty(event.get("rejection_reason")) or "User rejected the action"
        return f"Action rejected: {reason}", True, None
    observation = dict_field(event, "observation")
    code = observation.get("exit_code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    is_error = observation.get("is_error") is True or (code is not None and code != 0)
    return (
        _v1_text(observation.get("content")),
        is_error,
        STILL_RUNNING_NOTE if code == -1 else None,
    )


def _v1_text(content: Any) -> str:
    """The text of V1 content (a list of `TextContent` / `ImageContent`, or a string)."""
    if isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif isinstance(part, dict) and "image" in str_or_empty(part.get("type")):
                pieces.append("[image]")  # never an image's bytes
        return "\n".join(pieces)
    return text_of(content)


def _with_reasoning(text: str, reasoning: Any) -> str:
    if isinstance(reasoning, str) and reasoning.strip():
        return f"(reasoning) {reasoning}" + (f"\n{text}" if text else "")
    return text


def _v1_token_usages(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each model response's usage by its id, from `stats.usage_to_metrics.*`."""
    metrics = dict_field(dict_field(state, "stats"), "usage_to_metrics")
    usages: dict[str, dict[str, Any]] = {}
    for metric in metrics.values():
        entries = metric.get("token_usages") if isinstance(metric, dict) else None
        for usage in entries if isinstance(entries, list) else []:
            if isinstance(usage, dict) and isinstance(usage.get("response_id"), str):
                usages.setdefault(usage["response_id"], usage)
    return usages
