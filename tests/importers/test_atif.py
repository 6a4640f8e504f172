"""ATIF trajectories (blobviewer.ingest.importers.atif) on the real ones Harbor wrote, and
hand-made ones for what those do not have."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from blobviewer.ingest.importers import load_recording, load_sessions, sniff
from blobviewer.ingest.importers.atif import PartOfRecording, part_of
from importers.recordings import FIXTURES, write_json

ATIF = FIXTURES / "atif"
PASS = ATIF / "claude-code" / "trajectory_pass.json"
FAIL = ATIF / "claude-code" / "trajectory_fail.json"
LINEAR = ATIF / "terminus-2-linear-history" / "agent"
SUMMARIZED = ATIF / "terminus-2-summarization" / "agent"


def sessions_of(path: Path):
    data = path.read_bytes()
    kind, document = sniff(path, data)
    assert kind == "atif"
    return load_sessions(path, data, kind, document)


def trajectory(steps: list[dict], **root: object) -> dict:
    return {
        "schema_version": "ATIF-v1.7",
        "session_id": "run-1",
        "agent": {"name": "tester", "version": "1", "model_name": "gpt-4o"},
        "steps": steps,
        **root,
    }


@pytest.mark.parametrize("path", [PASS, FAIL])
def test_every_call_of_a_real_claude_code_trajectory_meets_its_result(path: Path) -> None:
    document = json.loads(path.read_text())
    (recording,) = sessions_of(path)
    records = recording.records
    calls = [c for s in document["steps"] for c in s.get("tool_calls", [])]
    results = {
        r["source_call_id"]: r["content"]
        for s in document["steps"]
        for r in s.get("observation", {}).get("results", [])
    }
    recorded_calls = [c for r in records if r["type"] == "assistant" for c in r["tool_calls"]]
    assert [(c["id"], c["name"], c["arguments"]) for c in recorded_calls] == [
        (c["tool_call_id"], c["function_name"], c["arguments"]) for c in calls
    ]
    outputs = {r["call_id"]: r["output"] for r in records if r["type"] == "tool_result"}
    assert outputs == results
    # Each result comes after the turn that called it, and turns keep the steps' order.
    seen_calls: set[str] = set()
    for record in records:
        if record["type"] == "assistant":
            seen_calls.update(c["id"] for c in record["tool_calls"])
        elif record["type"] == "tool_result":
            assert record["call_id"] in seen_calls
            assert record["tool"] == next(
                c["function_name"] for c in calls if c["tool_call_id"] == record["call_id"]
            )
    turns = [r for r in records if r["type"] == "assistant"]
    agent_steps = [s for s in document["steps"] if s["source"] == "agent"]
    assert len(turns) == len(agent_steps)
    for turn, step in zip(turns, agent_steps, strict=True):
        metrics = step["metrics"]
        assert turn["input_tokens"] == turn["context_tokens"] == metrics["prompt_tokens"]
        assert turn["output_tokens"] == metrics["completion_tokens"]
        assert turn["cache_read_tokens"] == metrics["cached_tokens"]
        if step.get("reasoning_content"):
            assert turn["text"].startswith(f"(reasoning) {step['reasoning_content']}")
    header = recording.header
    assert header["model"] == "claude-opus-4-6"
    assert header["meta"]["agent"] == "claude-code"
    assert (
        header["meta"]["final_metrics"]["total_cost_usd"]
        == document["final_metrics"]["total_cost_usd"]
    )
    # No step gives its own cost: the trajectory's total is the session's.
    assert header["cost_usd"] == document["final_metrics"]["total_cost_usd"]
    assert header["title"] == document["steps"][0]["message"].strip().splitlines()[0][:119] + "…"


def test_a_continuation_is_joined_and_its_copied_steps_are_marked() -> None:
    main = json.loads((LINEAR / "trajectory.json").read_text())
    continued = json.loads((LINEAR / "trajectory.cont-1.json").read_text())
    (recording,) = sessions_of(LINEAR / "trajectory.json")
    records = recording.records
    copied = [r for r in records if r.get("role") == "copied context"]
    assert len(copied) == sum(bool(s.get("is_copied_context")) for s in continued["steps"]) == 4
    # The copied steps' turns are not turns again: no calls, no tokens.
    turns = [r for r in records if r["type"] == "assistant"]
    fresh_agent_steps = [
        s
        for s in [*main["steps"], *continued["steps"]]
        if s["source"] == "agent" and not s.get("is_copied_context")
    ]
    assert [t.get("cost_usd") for t in turns] == [
        s["metrics"]["cost_usd"] for s in fresh_agent_steps
    ]
    compacted = [r for r in records if r.get("role") == "compacted"]
    assert len(compacted) == 1 and compacted[0]["text"].startswith("(context compacted)")
    # Terminus-2 answers with its terminal's output, not tool calls: a call of its own.
    results = [r for r in records if r["type"] == "tool_result"]
    assert len(results) == len(fresh_agent_steps)
    assert {r["tool"] for r in results} == {"observation"}
    assert results[-1]["output"] == continued["steps"][-1]["observation"]["results"][0]["content"]
    assert recording.header["meta"]["parts"] == 2
    assert part_of(LINEAR / "trajectory.cont-1.json") == LINEAR / "trajectory.json"
    assert part_of(LINEAR / "trajectory.json") is None
    with pytest.raises(PartOfRecording, match="part of trajectory.json"):
        load_recording(LINEAR / "trajectory.cont-1.json")


def test_a_subagent_named_by_path_is_a_session_naming_its_parent() -> None:
    main, summary = sessions_of(SUMMARIZED / "trajectory.json")
    assert summary.header["meta"]["parent_session_id"] == main.header["id"]
    assert summary.header["meta"]["agent"] == "terminus-2-summarization-summary"
    assert summary.label == "sub-agent terminus-2-summarization-summary"
    document = json.loads((SUMMARIZED / "trajectory.summarization-1-summary.json").read_text())
    assert len(summary.records) == 5 == len(document["steps"])
    # The two other files it names are not beside it: said, not an error.
    assert main.header["meta"]["missing_subagents"] == [
        "trajectory.summarization-1-questions.json",
        "trajectory.summarization-1-answers.json",
    ]
    # A result without source_call_id answers the step's call still unanswered.
    complete = [
        r for r in main.records if r["type"] == "tool_result" and r["tool"] == "mark_task_complete"
    ]
    assert [r["call_id"] for r in complete] == ["call_5_task_complete", "call_6_task_complete"]
    assert part_of(SUMMARIZED / "trajectory.summarization-1-summary.json") is not None


def test_embedded_subagents_are_found_by_trajectory_id(tmp_path: Path) -> None:
    child = trajectory(
        [{"step_id": 1, "source": "user", "message": "count the files"}],
        trajectory_id="child-1",
        agent={"name": "counter", "version": "1"},
    )
    parent = trajectory(
        [
            {"step_id": 1, "source": "user", "message": "delegate"},
            {
                "step_id": 2,
                "source": "agent",
                "message": "",
                "tool_calls": [{"tool_call_id": "c1", "function_name": "task", "arguments": {}}],
                "observation": {
                    "results": [
                        {
                            "source_call_id": "c1",
                            "subagent_trajectory_ref": [{"trajectory_id": "child-1"}],
                        }
                    ]
                },
            },
        ],
        subagent_trajectories=[child],
    )
    main, sub = sessions_of(write_json(tmp_path / "t.json", parent))
    assert sub.header["meta"]["parent_session_id"] == main.header["id"]
    assert [r["text"] for r in sub.records] == ["count the files"]
    (result,) = [r for r in main.records if r["type"] == "tool_result"]
    assert result["output"] == "(sub-agent child-1)"
    # The same file read again gives the same ids.
    again = sessions_of(tmp_path / "t.json")
    assert [r.header["id"] for r in again] == [main.header["id"], sub.header["id"]]


def test_arguments_kept_raw_errors_notes_images_and_a_reference_loop(tmp_path: Path) -> None:
    steps = [
        {"step_id": 1, "source": "system", "message": "be brief"},
        {
            "step_id": 2,
            "source": "user",
            "message": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"media_type": "image/png", "path": "images/a.png"}},
            ],
        },
        {
            "step_id": 3,
            "source": "agent",
            "message": "running",
            "tool_calls": [
                {
                    "tool_call_id": "c1",
                    "function_name": "sh",
                    "arguments": {},
                    "extra": {"raw_arguments": "ls -la"},
                }
            ],
            "observation": {
                "results": [
                    {
                        "source_call_id": "c1",
                        "content": "boom",
                        "extra": {"is_error": True, "note": "exit 2"},
                    }
                ]
            },
            "metrics": {
                "prompt_tokens": 10,
                "completion_tokens": 2,
                "cost_usd": 0.5,
                "extra": {"cache_creation_input_tokens": 7},
            },
        },
    ]
    write_json(tmp_path / "a.json", trajectory(steps, continued_trajectory_ref="a.more.json"))
    write_json(tmp_path / "a.more.json", trajectory([], continued_trajectory_ref="a.json"))
    (recording,) = sessions_of(tmp_path / "a.json")
    system, user, turn, result = recording.records
    assert system["role"] == "system" and system["text"] == "be brief"
    assert user["text"] == "look\n[image]"
    assert turn["tool_calls"] == [{"id": "c1", "name": "sh", "arguments": "ls -la"}]
    assert (turn["cost_usd"], turn["cache_write_tokens"]) == (0.5, 7)
    assert "cost_usd" not in recording.header  # the turns give theirs
    assert (result["output"], result["is_error"], result["note"]) == ("boom", True, "exit 2")
    assert recording.header["meta"]["parts"] == 2


def test_a_continuation_that_is_not_there_is_said(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "t.json",
        trajectory(
            [{"step_id": 1, "source": "user", "message": "hi"}],
            continued_trajectory_ref="t.cont-1.json",
        ),
    )
    (recording,) = sessions_of(path)
    assert recording.records[-1]["role"] == "missing"
    assert "t.cont-1.json" in recording.records[-1]["text"]


def test_only_atif_is_read_as_atif(tmp_path: Path) -> None:
    shutil.copyfile(PASS, tmp_path / "t.json")
    assert sniff(tmp_path / "t.json", (tmp_path / "t.json").read_bytes())[0] == "atif"
    other = write_json(tmp_path / "o.json", {"schema_version": "2.0", "steps": []})
    with pytest.raises(Exception, match="unknown recording format"):
        sniff(other, other.read_bytes())


def test_files_that_name_each_other_or_themselves_are_read_once(tmp_path: Path) -> None:
    """A sub-agent file naming the trajectory that names it (or its siblings) is read once:
    a small file cannot make sessions without end."""
    step = {"step_id": 1, "source": "user", "message": "hi"}

    def naming(*names: str) -> dict:
        refs = [{"trajectory_path": name} for name in names]
        return {
            "step_id": 2,
            "source": "system",
            "message": "",
            "observation": {"results": [{"subagent_trajectory_ref": refs}]},
        }

    subs = [f"sub{n}.json" for n in range(3)]
    for name in subs:
        write_json(
            tmp_path / name,
            trajectory([step, naming("run.json", *subs)], agent={"name": name, "version": "1"}),
        )
    embedded = [
        trajectory(
            [step, naming("run.json")],
            trajectory_id=f"e{n}",
            agent={"name": f"e{n}", "version": "1"},
        )
        for n in range(6)
    ]
    write_json(
        tmp_path / "run.json", trajectory([step, naming(*subs)], subagent_trajectories=embedded)
    )
    sessions = sessions_of(tmp_path / "run.json")
    assert len(sessions) == 1 + 6 + 3  # itself, its embedded sub-agents, each file once
    assert len({s.header["id"] for s in sessions}) == len(sessions)


def test_numbers_a_float_cannot_hold_and_bad_references_lose_nothing(tmp_path: Path) -> None:
    step = {"step_id": 1, "source": "user", "message": "hi"}
    huge = trajectory([step], final_metrics={"total_cost_usd": 10**400, "total_prompt_tokens": 5})
    (recording,) = sessions_of(write_json(tmp_path / "huge.json", huge))
    assert recording.header["meta"]["final_metrics"] == {"total_prompt_tokens": 5}
    assert "cost_usd" not in recording.header
    path = tmp_path / "nan.json"
    path.write_text(
        json.dumps(
            trajectory(
                [step],
                final_metrics={
                    "total_cost_usd": float("nan"),
                    "total_completion_tokens": float("inf"),
                },
            )
        )
    )
    (recording,) = sessions_of(path)
    assert "final_metrics" not in recording.header["meta"]
    for ref in ("/", ".", ".."):
        (recording,) = sessions_of(
            write_json(tmp_path / "ref.json", trajectory([step], continued_trajectory_ref=ref))
        )
        assert recording.records[-1]["role"] == "missing"
