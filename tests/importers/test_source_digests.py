"""Each item an importer emits carries the digest of the source record it came from, so
ingest recognises items it recorded even when an importer changes what it derives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blobviewer.ingest.importers import load_recording
from blobviewer.ingest.importers.recording import canonical_digest
from importers.recordings import (
    CLAUDE_CODE,
    MINI_SWE_AGENT,
    SWE_AGENT_CLASSIC,
    claude_line,
    write_json,
    write_jsonl,
)


@pytest.mark.parametrize(
    "fixture", [CLAUDE_CODE, MINI_SWE_AGENT, SWE_AGENT_CLASSIC], ids=lambda p: p.name
)
def test_every_item_of_a_fixture_has_its_own_source_digest(fixture: Path, fixtures_dir) -> None:
    records = load_recording(fixture).records
    digests = [r["source_digest"] for r in records]
    assert len(set(digests)) == len(digests)
    assert all(len(d) == 64 and int(d, 16) >= 0 for d in digests)


def test_a_line_with_two_results_and_a_text_gives_three_items_with_distinct_digests(
    tmp_path: Path,
) -> None:
    line = claude_line(
        "user",
        [
            {"type": "tool_result", "tool_use_id": "a", "content": "one"},
            {"type": "tool_result", "tool_use_id": "b", "content": "two"},
            {"type": "text", "text": "and a remark"},
        ],
    )
    records = load_recording(write_jsonl(tmp_path / "s.jsonl", [line, line])).records

    assert len(records) == 6
    # A repeated line is a repeat, not the same items again.
    assert len({r["source_digest"] for r in records}) == 6


def test_the_digest_is_over_the_source_not_its_key_order_or_what_is_made_of_it(
    tmp_path: Path,
) -> None:
    line = claude_line("user", "hello there")
    reordered = dict(reversed(list(line.items())))
    first = load_recording(write_jsonl(tmp_path / "a.jsonl", [line])).records[0]
    second = load_recording(write_jsonl(tmp_path / "b.jsonl", [reordered])).records[0]
    changed = load_recording(
        write_jsonl(tmp_path / "c.jsonl", [{**line, "uuid": "another line"}])
    ).records[0]

    assert first["source_digest"] == second["source_digest"] != changed["source_digest"]
    assert canonical_digest(line) == canonical_digest(reordered)


def test_a_grown_document_keeps_the_digests_of_its_earlier_messages(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "looking"},
    ]
    before = load_recording(write_json(tmp_path / "run.json", messages)).records
    grown = [*messages, {"role": "user", "content": "more"}]
    after = load_recording(write_json(tmp_path / "run.json", grown)).records

    assert [r["source_digest"] for r in after[:3]] == [r["source_digest"] for r in before]
    assert after[3]["source_digest"] not in {r["source_digest"] for r in before}


def test_a_swe_agent_steps_items_change_digest_only_when_that_step_changes(
    fixtures_dir, tmp_path: Path
) -> None:
    document = json.loads(SWE_AGENT_CLASSIC.read_text())
    before = load_recording(write_json(tmp_path / "a.traj", document)).records
    document["trajectory"][2]["observation"] += "\n(one more line)"
    after = load_recording(write_json(tmp_path / "b.traj", document)).records

    changed = [b["seq"] for b, a in zip(before, after, strict=True) if b != a]
    steps_start = len(before) - 2 * len(document["trajectory"])
    third_step = [steps_start + 5, steps_start + 6]  # its call and its result
    assert changed == third_step
    assert [r["type"] for r in before if r["seq"] in third_step] == ["assistant", "tool_result"]
