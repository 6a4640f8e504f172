from __future__ import annotations

import json
from pathlib import Path

from blobviewer.ingest.importers import load_recording
from importers.recordings import SWE_AGENT_CLASSIC, write_json


def test_the_classic_fixture_turns_each_step_into_a_call_and_its_observation(
    fixtures_dir: Path,
) -> None:
    document = json.loads(SWE_AGENT_CLASSIC.read_text())
    recording = load_recording(SWE_AGENT_CLASSIC)
    assert recording.header["meta"]["form"] == "classic"
    results = [r for r in recording.records if r["type"] == "tool_result"]
    calls = [r for r in recording.records if r["type"] == "assistant"]
    steps = document["trajectory"]
    assert len(results) == len(calls) == len(steps) == 12
    for step, call, result in zip(steps, calls, results, strict=True):
        assert call["tool_calls"][0]["arguments"] == {"command": step["action"]}
        assert result["output"] == step["observation"]
        assert result["call_id"] == call["tool_calls"][0]["id"]
    # the opening messages (system prompt, demonstration, issue) come first, in order
    opening = recording.records[: recording.records.index(calls[0])]
    assert [r.get("role") for r in opening] == ["system", "demonstration", None]


def test_the_function_calling_form(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "fc.traj",
        {
            "trajectory": [{"action": "ls", "observation": "a.py", "thought": ""}],
            "history": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": [{"type": "text", "text": "fix it"}]},
                {
                    "role": "assistant",
                    "content": "looking",
                    "tool_calls": [
                        {"id": "c1", "function": {"name": "bash", "arguments": '{"command":"ls"}'}}
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_ids": ["c1"],
                    "content": [{"type": "text", "text": "a.py"}],
                },
            ],
        },
    )
    recording = load_recording(path)
    assert recording.format == "swe_agent"
    assert recording.header["meta"]["form"] == "function_calling"
    assert [r["type"] for r in recording.records] == ["user", "user", "assistant", "tool_result"]
    assert recording.records[3]["output"] == "a.py"
    assert recording.records[3]["tool"] == "bash"
