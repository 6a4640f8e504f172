"""OpenAI chat messages: a JSON list of messages, or an object with `messages` (as
mini-swe-agent writes). `assistant.tool_calls[]` are the calls; `role: "tool"` messages
with `tool_call_id` are their results.

A tool result's output is its `content`: what the recorded model read. mini-swe-agent
also keeps the command's untrimmed output in `extra.raw_output` (its `content` wraps it
in `<returncode>`/`<output>` tags, and head/tail-trims outputs over 10,000 characters);
that copy is not what entered the history, so it is left aside, as Claude Code's
`toolUseResult` is.

Facts, where the recording has them: times from `extra.timestamp` (or `timestamp`); an
assistant turn's tokens from its response's `usage` (`extra.response.usage` in
mini-swe-agent, or the message's own `usage`): `prompt_tokens` is the whole context read,
`completion_tokens` the output, `prompt_tokens_details.cached_tokens` the part of the
context read from the cache; the whole run's cost is mini-swe-agent's
`info.model_stats.instance_cost` when it counted one (above 0); a tool result is an error
when its `extra.returncode` is not 0 or `extra.exception_info` is not empty; the status
is `info.exit_status` (or the `exit` message's `extra.exit_status`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from blobviewer.ingest.importers.recording import (
    RecordBuilder,
    Recording,
    RecordingError,
    dict_field,
    first_line,
    header,
    iso_time,
    parse_call_arguments,
    stable_session_id,
    text_of,
    token_count,
)

FORMAT = "openai_chat"
# Bump when what this importer derives from a recording changes (see claude_code).
# 2: an output that is text in a wrapper (content blocks) is that text (core.tool_text).
# 3: a turn's cached prompt tokens; mini-swe-agent's `instance_cost` (docs/cost.md).
IMPORTER_VERSION = 3


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
        builder.from_source(message)
        extra = dict_field(message, "extra")
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
                        "arguments": parse_call_arguments(function.get("arguments")),
                    }
                )
            builder.assistant(text_of(message.get("content")), calls, at=at, **_tokens(message))
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
                is_error=_failed(extra),
                at=at,
            )
        else:
            builder.user(
                text_of(message.get("content")), at=at, role=None if role == "user" else role
            )
    return builder


def _tokens(message: dict[str, Any]) -> dict[str, int]:
    """The turn's tokens from its response's usage, as item fields (the prompt's cached
    part as `cache_read_tokens`); {} when not recorded."""
    response = dict_field(dict_field(message, "extra"), "response")
    usage = response.get("usage")
    if not isinstance(usage, dict):
        usage = dict_field(message, "usage")
    prompt = token_count(usage.get("prompt_tokens"))
    completion = token_count(usage.get("completion_tokens"))
    cached = token_count(dict_field(usage, "prompt_tokens_details").get("cached_tokens"))
    tokens = {}
    if prompt is not None:  # OpenAI's prompt_tokens include the cached ones
        tokens["input_tokens"] = tokens["context_tokens"] = prompt
    if cached is not None:
        tokens["cache_read_tokens"] = cached
    if completion is not None:
        tokens["output_tokens"] = completion
    return tokens


def _failed(extra: dict[str, Any]) -> bool:
    code = extra.get("returncode")
    failed_code = isinstance(code, int) and not isinstance(code, bool) and code != 0
    return failed_code or bool(extra.get("exception_info"))


def _exit_status(info: dict[str, Any], messages: list[Any]) -> str | None:
    if isinstance(info.get("exit_status"), str):
        return info["exit_status"]
    for message in reversed(messages):
        extra = message.get("extra") if isinstance(message, dict) else None
        if isinstance(extra, dict) and isinstance(extra.get("exit_status"), str):
            return extra["exit_status"]
    return None


def load(path: Path, document: Any) -> Recording:
    messages = document.get("messages") if isinstance(document, dict) else document
    if not isinstance(messages, list):
        raise RecordingError(path, None, "no list of chat messages")
    builder = build_messages(path, messages)
    info = document.get("info") if isinstance(document, dict) else None
    info = info if isinstance(info, dict) else {}
    instance = document.get("instance_id") if isinstance(document, dict) else None
    first_user = next(
        (r["text"] for r in builder.records if r["type"] == "user" and "role" not in r), ""
    )
    model = ""
    config = dict_field(info, "config")
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
    session = header(
        stable_session_id(FORMAT, [instance, model, messages[:3]]),
        title=instance if isinstance(instance, str) else first_line(first_user) or path.stem,
        model=model,
        created_at=created,
        path=path,
        format=FORMAT,
        meta=meta,
        status=_exit_status(info, messages),
    )
    cost = dict_field(info, "model_stats").get("instance_cost")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and cost > 0:
        session["cost_usd"] = cost  # mini-swe-agent's own total (0: it did not count)
    return Recording(FORMAT, session, builder.records)
