"""SWE-agent trajectories (`*.traj`), in both forms:

- classic: `trajectory[i]` with `thought`, `action` and `observation` — each step becomes
  an assistant call of the action and a tool result holding the observation; the chat's
  opening messages (system prompt, demonstration, issue) come first;
- function calling: `history[]` chat messages with `tool_calls` and `role: "tool"`.

The status is `info.exit_status` (e.g. `submitted`); `info.model_stats` (whole-run token
totals and cost, no per-turn split) is kept in the session's meta. Each item's source is
its `history` message or its `trajectory` step.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from blobviewer.ingest.importers.openai_chat import build_messages
from blobviewer.ingest.importers.recording import (
    RecordBuilder,
    Recording,
    RecordingError,
    dict_field,
    header,
    iso_time,
    list_field,
    stable_session_id,
    str_or_empty,
    text_of,
)

FORMAT = "swe_agent"
# Bump when what this importer derives from a recording changes (see claude_code).
# 2: an output that is text in a wrapper (content blocks) is that text (core.tool_text).
IMPORTER_VERSION = 2


def looks_like(document: Any) -> bool:
    return isinstance(document, dict) and (
        isinstance(document.get("trajectory"), list) or _is_function_calling(document)
    )


def _is_function_calling(document: dict[str, Any]) -> bool:
    history = document.get("history")
    return isinstance(history, list) and any(
        isinstance(m, dict) and (m.get("tool_calls") or m.get("role") == "tool") for m in history
    )


def load(path: Path, document: dict[str, Any]) -> Recording:
    if _is_function_calling(document):
        builder = build_messages(path, document["history"], where="history")
        form = "function_calling"
    else:
        builder = _classic(path, document)
        form = "classic"
    info = dict_field(document, "info")
    model = str_or_empty(info.get("model"))
    stats = info.get("model_stats")
    meta = {
        # SWE-agent names a trajectory after the task instance it ran on.
        "instance_id": path.name.split(".")[0],
        "form": form,
        "exit_status": info.get("exit_status"),
        "has_stats": bool(stats),
        "model_stats": _numbers(stats),
    }
    return Recording(
        FORMAT,
        header(
            stable_session_id(FORMAT, [form, _opening(document)]),
            title=path.name.split(".")[0],
            model=model,
            created_at=next((r["at"] for r in builder.records if r.get("at")), None),
            path=path,
            format=FORMAT,
            meta={k: v for k, v in meta.items() if v is not None},
            status=str_or_empty(info.get("exit_status")) or None,
        ),
        builder.records,
    )


def _numbers(stats: Any) -> dict[str, int | float] | None:
    """The numeric entries of `info.model_stats` (tokens_sent, api_calls, cost, ...)."""
    if not isinstance(stats, dict):
        return None
    numbers = {
        str(key): value
        for key, value in stats.items()
        if isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)  # JSON columns hold no NaN or infinity
    }
    return numbers or None


def _opening(document: dict[str, Any]) -> list[Any]:
    """What stays the same as the trajectory grows: its first messages and first step."""
    history = list_field(document, "history")
    trajectory = document.get("trajectory")
    first_step = trajectory[:1] if isinstance(trajectory, list) else []
    return [history[:3], first_step]


def _classic(path: Path, document: dict[str, Any]) -> RecordBuilder:
    builder = RecordBuilder()
    history = list_field(document, "history")
    for message in history:  # the opening: everything before the first assistant turn
        if not isinstance(message, dict) or message.get("role") == "assistant":
            break
        role = message.get("role")
        builder.from_source(message)
        demo = message.get("is_demo") in (True, "True", "true")
        builder.user(
            text_of(message.get("content")),
            role=None if role == "user" and not demo else ("demonstration" if demo else role),
        )
    for index, step in enumerate(document["trajectory"]):
        if not isinstance(step, dict) or not isinstance(step.get("action"), str):
            raise RecordingError(path, None, f"trajectory[{index}] has no action")
        action = step["action"]
        call_id = f"step-{index + 1}"
        name = action.strip().split(maxsplit=1)[0] if action.strip() else "action"
        thought = step.get("thought") if isinstance(step.get("thought"), str) else ""
        at = iso_time(step.get("timestamp"))
        builder.from_source(step)
        builder.assistant(
            thought or text_of(step.get("response")),
            [{"id": call_id, "name": name, "arguments": {"command": action}}],
            at=at,
        )
        builder.tool_result(call_id, text_of(step.get("observation")), tool=name, at=at)
    return builder
