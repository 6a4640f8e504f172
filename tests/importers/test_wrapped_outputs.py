"""Tool outputs that are text in a wrapper (core.tool_text) are stored as that text by
every importer: a Codex rollout's MCP results (content blocks encoded as a JSON string),
Claude Code's `tool_result` content blocks, and no real recording leaves such a blob."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from blobviewer.data_dir import blob_store
from blobviewer.models import Blob, Item
from core.content import Text
from core.store.blob_id import BLOB_REF
from core.tool_text import unwrap_text
from importers.recordings import FIXTURES, claude_line, write_jsonl
from importers.test_codex import line, meta, user, write

BIG = "".join(f'{n:05} | ünïcode \\ "quoted" \t and a tab\n' for n in range(2000))  # 70 KB


def mcp_call(call_id: str, name: str) -> str:
    payload = {"type": "function_call", "name": name, "arguments": "{}", "call_id": call_id}
    return line("response_item", payload)


def mcp_output(call_id: str, *texts: str) -> str:
    blocks = json.dumps([{"text": text, "type": "text"} for text in texts])
    payload = {"type": "function_call_output", "call_id": call_id, "output": blocks}
    return line("response_item", payload)


def ingest(*paths: Path) -> None:
    call_command("ingest", *[str(p) for p in paths], stdout=StringIO(), stderr=StringIO())


def blob_of(item: Item) -> tuple[Blob, object]:
    blob_id = BLOB_REF.match(item.output).group(1)
    return Blob.objects.get(id=blob_id), blob_store().load_sync(blob_id)


@pytest.mark.django_db
def test_a_codex_rollouts_mcp_results_are_stored_as_their_text(data_dir, tmp_path) -> None:
    assert len(BIG.encode()) > 70_000
    path = write(
        tmp_path / "rollout-2026-01-02T10-00-00-0199a8e0-0000-7000-8000-000000000001.jsonl",
        [
            meta(),
            user("read the docs"),
            mcp_call("c1", "mcp__docs__fetch"),
            mcp_output("c1", BIG, "the end"),
            mcp_call("c2", "mcp__docs__status"),
            mcp_output("c2", "ok", "two blocks"),
        ],
    )
    ingest(path)

    big, small = Item.objects.filter(type=Item.Type.TOOL_RESULT).order_by("seq")
    blob, content = blob_of(big)
    assert (blob.kind, content) == ("text", Text(BIG + "\nthe end"))  # byte for byte
    assert big.output.startswith(f"[blob:{blob.id}] text | 2002 lines")
    assert small.output == "ok\ntwo blocks"


@pytest.mark.django_db
def test_claude_code_content_blocks_keep_their_text_and_name_the_rest(data_dir, tmp_path) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "Screenshot", "input": {}}
    blocks = [
        {"type": "text", "text": BIG},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
    ]
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": blocks}
    path = write_jsonl(
        tmp_path / "session.jsonl",
        [
            claude_line("user", "take a screenshot", uuid="u1"),
            claude_line("assistant", [call], uuid="a1"),
            claude_line("user", [result], uuid="u2"),
        ],
    )
    ingest(path)

    step = Item.objects.get(type=Item.Type.TOOL_RESULT)
    blob, content = blob_of(step)
    assert (blob.kind, content) == ("text", Text(BIG))
    assert step.note == "1 image not stored"


@pytest.mark.django_db
def test_no_real_recording_stores_text_in_a_wrapper_as_json(data_dir) -> None:
    ingest(FIXTURES)

    assert Blob.objects.count() > 100
    store = blob_store()
    for blob in Blob.objects.exclude(kind="text"):
        content = store.load_sync(blob.id)
        assert unwrap_text(getattr(content, "value", None)) is None, blob.id
