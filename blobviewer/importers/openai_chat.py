"""OpenAI chat messages: a JSON list of messages, or an object with `messages` (as
mini-swe-agent writes). `assistant.tool_calls[]` are the calls; `role: "tool"` messages
with `tool_call_id` are their results.

A tool result's output is its `content`: what the recorded model read. mini-swe-agent
also keeps the command's untrimmed output in `extra.raw_output` (its `content` wraps it
in `<returncode>`/`<output>` tags, and head/tail-trims outputs over 10,000 characters);
that copy is not what entered the history, so it is left aside, as Claude Code's
`toolUseResult` is.
"""

from __future__ import annotations

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
    stable_session_id,
    text_of,
)

FORMAT = "openai_chat"


def looks_like(document: Any) -> bool:
    messages = document.get("messages") if isinstance(document, dict) else document
    return (
        isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, dict) and "role" in m for m in messages[:20])
    )


def build_messages(path: Path, messages: list[Any], *, where: str = "messages") -> RecordBuilder:
    """Records for a list of chat messages; shared with SWE-agent's function-calling form."""
    builder = RecordBuilder()
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RecordingError(path, None, f"{where}[{index}] is not a chat message")
        role = message["role"]
        extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
        at = iso_time(extra.get("timestamp") or message.get("timestamp"))
        if role == "assistant":
            calls = []
            tool_calls = message.get("tool_calls") or []
            if not isinstance(tool_calls, list):
                raise RecordingError(path, None, f"{where}[{index}].tool_calls is not a list")
            for position, call in enumerate(tool_calls):
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict):
                    raise RecordingError(
                        path, None, f"{where}[{index}].tool_calls[{position}] has no function"
                    )
                calls.append(
                    {
                        "id": str(call.get("id") or f"call-{index}-{position}"),
                        "name": str(function.get("name") or ""),
                        "arguments": parse_arguments(function.get("arguments")),
                    }
                )
            builder.assistant(text_of(message.get("content")), calls, at=at)
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id is None and isinstance(message.get("tool_call_ids"), list):
                call_id = (message["tool_call_ids"] or [None])[0]
            if not isinstance(call_id, str):
                raise RecordingError(
                    path, None, f"{where}[{index}] is a tool result without tool_call_id"
                )
            builder.tool_result(
                call_id,
                text_of(message.get("content")),
                tool=message.get("name") if isinstance(message.get("name"), str) else None,
                at=at,
            )
        else:
            builder.user(
                text_of(message.get("content")), at=at, role=None if role == "user" else role
            )
    return builder


def load(path: Path, document: Any) -> Recording:
    messages = document.get("messages") if isinstance(document, dict) else document
    builder = build_messages(path, messages)
    info = document.get("info") if isinstance(document, dict) else None
    info = info if isinstance(info, dict) else {}
    instance = document.get("instance_id") if isinstance(document, dict) else None
    first_user = next(
        (r["text"] for r in builder.records if r["type"] == "user" and "role" not in r), ""
    )
    model = ""
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    if isinstance(config.get("model"), dict):
        model = str(config["model"].get("model_name") or "")
    if not model:
        model = next(
            (
                str(m["extra"]["response"].get("model"))
                for m in messages
                if isinstance(m, dict)
                and isinstance(m.get("extra"), dict)
                and isinstance(m["extra"].get("response"), dict)
                and m["extra"]["response"].get("model")
            ),
            "",
        )
    created = next((r["at"] for r in builder.records if r.get("at")), None)
    meta = {"instance_id": instance} if isinstance(instance, str) else {}
    return Recording(
        FORMAT,
        header(
            stable_session_id(FORMAT, [instance, model, messages[:3]]),
            title=instance if isinstance(instance, str) else first_line(first_user) or path.stem,
            model=model,
            created_at=created,
            path=path,
            format=FORMAT,
            meta=meta,
        ),
        builder.records,
    )
