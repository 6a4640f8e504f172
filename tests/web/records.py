"""Recorded sessions for the site's tests: a realistic one made through core, and raw
records for damaged or hostile logs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from blobviewer.models import Session
from core.agent.history import AssistantMessage, ToolCall, ToolResult, UserMessage
from core.agent.session_log import SessionLogWriter
from core.inspect_tool import inspect_blob
from core.promotion import admit_sync, promote
from core.store import FsBlobStore
from core.store.blob_id import BlobId

BUILD_LOG = "".join(f"step {n}: compiling module_{n}.py ... ok\n" for n in range(1, 301))
ISSUES = [
    {"id": n, "title": f"issue {n}", "labels": ["bug"] if n % 3 == 0 else []} for n in range(60)
]


@dataclass(frozen=True)
class SampleSession:
    """A recorded run: a promoted text output, an inspect call on it, a promoted JSON array."""

    path: Path
    id: uuid.UUID
    text_blob: BlobId
    json_blob: BlobId

    @property
    def session(self) -> Session:
        return Session.objects.get(id=self.id)


def record_sample_session(
    store: FsBlobStore, sessions: Path, *, title: str = "Fix the build"
) -> SampleSession:
    """Run a small scripted session the way the Worker records one, through core."""
    with SessionLogWriter(sessions, title=title, model="test-model", meta={"repo": "demo"}) as log:
        log.append(UserMessage("The build is failing; find out why."))
        log.append(AssistantMessage("Running the build.", (ToolCall("c1", "run_build", {}),)))
        build = admit_sync(promote(BUILD_LOG), store)
        log.append(ToolResult("c1", "run_build", build.text))
        assert build.blob_id is not None
        log.append(
            AssistantMessage(
                "",
                (
                    ToolCall(
                        "c2", "inspect", {"blob_id": str(build.blob_id), "selector": "lines:2-3"}
                    ),
                ),
            )
        )
        log.append(
            ToolResult("c2", "inspect", inspect_blob(store, str(build.blob_id), "lines:2-3"))
        )
        log.append(AssistantMessage("", (ToolCall("c3", "list_issues", {"repo": "demo"}),)))
        issues = admit_sync(promote(orjson.dumps(ISSUES).decode()), store)
        assert issues.blob_id is not None
        log.append(ToolResult("c3", "list_issues", issues.text))
        log.append(ToolResult("c4", "whoami", "alice", is_error=False))
        log.append(AssistantMessage("The build is fine; step 2 was slow."))
    return SampleSession(log.path, uuid.UUID(log.session_id), build.blob_id, issues.blob_id)


def header(session_id: uuid.UUID | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "type": "session",
        "id": str(session_id or uuid.uuid4()),
        "created_at": "2025-05-01T12:00:00+00:00",
        "title": "a session",
        "model": "m",
        "meta": {},
        **fields,
    }


def user_item(seq: int, text: str) -> dict[str, Any]:
    return {"type": "user", "seq": seq, "at": "2025-05-01T12:00:01+00:00", "text": text}


def tool_result_item(
    seq: int, output: str, *, tool: str = "run", call_id: str = "c"
) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "seq": seq,
        "at": "2025-05-01T12:00:02+00:00",
        "call_id": call_id,
        "tool": tool,
        "output": output,
        "is_error": False,
    }


# Every field an item stores (its row's columns but its pk and session), for tests that
# compare what two ingests of a recording made.
STORED_ITEM_FIELDS = [
    "seq",
    "type",
    "at",
    "text",
    "tool_calls",
    "call_id",
    "tool",
    "output",
    "is_error",
    "role",
    "sidechain",
    "digest",
    "output_bytes",
    "received_bytes",
    "input_tokens",
    "output_tokens",
    "context_tokens",
    "duration",
    "note",
    "title",
    "redactions",
]
