"""OpenHands recordings: the V0 event list, the evaluation output (one session per run),
the V1 conversation folder and the V0 file-store folder (built here from the event list).

Counts are computed from the raw files in each test, beside what the fixtures' README
states (the evaluation output: 3 runs, 105 tool outputs)."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from blobviewer.data_dir import blob_store
from blobviewer.ingest.errors import IngestError
from blobviewer.ingest.finding import recording_paths
from blobviewer.ingest.importers import (
    Recording,
    RecordingError,
    UnknownFormat,
    detect,
    folder_layout,
    load_recording,
    load_runs,
    openhands,
)
from blobviewer.ingest.sessions import ingest_file, ingest_recordings
from blobviewer.models import IngestedFile, Item, Session
from importers.read_back import assert_big_outputs_read_back
from importers.recordings import FIXTURES

OPENHANDS = FIXTURES / "openhands"
EVENTS = OPENHANDS / "basic_gui_mode.json"
EVALUATION = OPENHANDS / "multi_swe_bench_output.jsonl"
V1 = OPENHANDS / "v1-conversation-cd94562403b9487ebdd4018e3f531dfd"
DROPPED_ACTIONS = {"system", "recall", "change_agent_state", "null"}
DROPPED_OBSERVATIONS = {"agent_state_changed", "null", "recall"}


# --- the raw files, read independently of the importer -----------------------------------


def raw_runs() -> list[dict[str, Any]]:
    return [json.loads(line) for line in EVALUATION.read_text(encoding="utf-8").splitlines()]


def kept(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The V0 events that are conversation, in order."""
    return [
        e
        for e in events
        if e.get("action") not in DROPPED_ACTIONS
        and e.get("observation") not in DROPPED_OBSERVATIONS
    ]


def observations(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in kept(events) if "observation" in e]


def v1_events() -> list[dict[str, Any]]:
    files = sorted((V1 / "events").glob("event-*.json"))
    return [json.loads(f.read_text(encoding="utf-8")) for f in files]


def results(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == "tool_result"]


def calls(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for r in records if r["type"] == "assistant" for c in r["tool_calls"]]


def runs_of(path: Path) -> list[Recording]:
    loaded = load_runs(path, path.read_bytes())
    assert all(isinstance(run, Recording) for _, run in loaded), loaded
    return [run for _, run in loaded]  # type: ignore[misc]


def expected_type(event: dict[str, Any]) -> str:
    if "observation" in event:
        return "tool_result"
    if event["action"] == "message" and event["source"] == "user":
        return "user"
    return "assistant"


def ingest(*paths: Path) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ingest", *[str(p) for p in paths], stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


# --- the evaluation output --------------------------------------------------------------


def test_the_evaluation_output_is_three_runs_of_105_tool_outputs(fixtures_dir) -> None:
    runs = runs_of(EVALUATION)
    raw = raw_runs()
    assert len(runs) == len(raw) == 3
    assert [len(results(r.records)) for r in runs] == [len(observations(x["history"])) for x in raw]
    assert sum(len(results(r.records)) for r in runs) == 105
    assert [r.header["meta"]["instance_id"] for r in runs] == [x["instance_id"] for x in raw]
    assert len({r.header["id"] for r in runs}) == 3


def test_each_run_keeps_its_events_in_order_and_its_outputs_exactly(fixtures_dir) -> None:
    for run, raw in zip(runs_of(EVALUATION), raw_runs(), strict=True):
        events = kept(raw["history"])
        assert [r["type"] for r in run.records] == [expected_type(e) for e in events]
        assert [r["seq"] for r in run.records] == list(range(1, len(events) + 1))
        for record, event in zip(run.records, events, strict=True):
            if record["type"] == "tool_result":
                assert record["output"] == event["content"]
        assert run.header["created_at"].startswith(events[0]["timestamp"])


def test_results_answer_the_call_their_cause_names(fixtures_dir) -> None:
    orphans = 0
    for run, raw in zip(runs_of(EVALUATION), raw_runs(), strict=True):
        events = kept(raw["history"])
        by_event = dict(zip((e["id"] for e in events), run.records, strict=True))
        for event, record in zip(events, run.records, strict=True):
            if "observation" not in event:
                continue
            if "cause" in event:
                (call,) = by_event[event["cause"]]["tool_calls"]
                assert record["call_id"] == call["id"]
                assert record["tool"] == call["name"]
                assert call["id"] == event["tool_call_metadata"]["tool_call_id"]
            else:  # an error about a call the model sent malformed: no action to answer
                orphans += 1
                assert record["is_error"] and record["call_id"] == f"event-{event['id']}"
                assert record["call_id"] not in {c["id"] for c in calls(run.records)}
    assert orphans == 2


def test_model_response_copies_are_never_stored(fixtures_dir) -> None:
    for run, raw in zip(runs_of(EVALUATION), raw_runs(), strict=True):
        response_ids = {
            e["tool_call_metadata"]["model_response"]["id"]
            for e in raw["history"]
            if e.get("tool_call_metadata")
        }
        assert response_ids
        stored = json.dumps([[r.get("output"), r.get("text")] for r in run.records])
        assert not any(response_id in stored for response_id in response_ids)
        assert '"choices"' not in stored


def test_calls_carry_the_models_own_arguments(fixtures_dir) -> None:
    raw = raw_runs()[0]
    run = runs_of(EVALUATION)[0]
    for event in kept(raw["history"]):
        metadata = event.get("tool_call_metadata")
        if "action" not in event or not metadata:
            continue
        (sent,) = [
            c
            for choice in metadata["model_response"]["choices"]
            for c in choice["message"]["tool_calls"]
            if c["id"] == metadata["tool_call_id"]
        ]
        (call,) = [c for c in calls(run.records) if c["id"] == metadata["tool_call_id"]]
        assert call["arguments"] == json.loads(sent["function"]["arguments"])
        assert call["name"] == metadata["function_name"]


def test_each_model_responses_tokens_count_once_on_its_first_item(fixtures_dir) -> None:
    for run, raw in zip(runs_of(EVALUATION), raw_runs(), strict=True):
        usages: dict[str, dict[str, int]] = {}
        for event in raw["history"]:
            response = (event.get("tool_call_metadata") or {}).get("model_response")
            if response and "action" in event:
                usages.setdefault(response["id"], response["usage"])
        turns = [r for r in run.records if "context_tokens" in r]
        assert len(turns) == len(usages)
        assert [t["context_tokens"] for t in turns] == [u["prompt_tokens"] for u in usages.values()]
        assert sum(t["output_tokens"] for t in turns) == sum(
            u["completion_tokens"] for u in usages.values()
        )


def test_a_runs_status_model_and_title_come_from_its_line(fixtures_dir) -> None:
    runs = runs_of(EVALUATION)
    raw = raw_runs()
    assert [r.header["title"] for r in runs] == [x["instance_id"] for x in raw]
    assert {r.header["model"] for r in runs} == {x["metadata"]["llm_config"]["model"] for x in raw}
    assert [r.header["status"] for r in runs[:2]] == ["finished", "finished"]
    assert runs[2].header["status"].startswith("error: RuntimeError: Agent reached maximum")
    assert len(runs[2].header["status"]) <= 100
    assert runs[2].header["meta"]["error"] == raw[2]["error"]


@pytest.mark.django_db
def test_every_run_is_a_session_and_its_big_outputs_read_back_from_blobs(
    fixtures_dir, data_dir: Path
) -> None:
    out, err = ingest(EVALUATION)
    assert err == ""
    assert out.count(f"{EVALUATION} [line ") == 3
    assert "1 of 1 files ingested, 3 of 3 evaluation runs" in out
    big = 0
    for run in runs_of(EVALUATION):
        session = Session.objects.get(id=run.header["id"])
        assert session.source_format == "openhands"
        assert session.source_path == str(EVALUATION)
        assert [(i.seq, i.type) for i in session.items.order_by("seq")] == [
            (r["seq"], r["type"]) for r in run.records
        ]
        big += assert_big_outputs_read_back(run.records, session)
        assert session.step_count == len(results(run.records)) - sum(
            1 for r in results(run.records) if r["call_id"].startswith("event-")
        )
    blobs = [p for p in (data_dir / "blobs").iterdir() if p.is_file()]
    assert big == len(blobs) > 0  # one blob per big output: no copies
    assert Item.objects.filter(type=Item.Type.TOOL_RESULT).count() == 105

    IngestedFile.objects.all().delete()  # read again: ingest itself must add nothing
    again, _ = ingest(EVALUATION)
    assert "+0 items" in again and "+1" not in again
    assert len([p for p in (data_dir / "blobs").iterdir() if p.is_file()]) == len(blobs)


@pytest.mark.django_db
def test_a_grown_evaluation_output_keeps_its_runs_sessions(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    lines = EVALUATION.read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "output.jsonl"
    path.write_text("".join(lines[:2]), encoding="utf-8")
    store = blob_store()
    first = [outcome for _, outcome in ingest_recordings(path, store=store)]
    assert len(first) == 2

    path.write_text("".join(lines), encoding="utf-8")
    grown = [outcome for _, outcome in ingest_recordings(path, store=store)]

    assert [r.session_id for r in grown[:2]] == [r.session_id for r in first]
    assert [r.new_items for r in grown] == [0, 0, len(runs_of(EVALUATION)[2].records)]
    assert Session.objects.count() == 3


@pytest.mark.django_db
def test_the_same_run_elsewhere_is_the_same_session_and_another_run_of_a_task_is_another(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    first_run = EVALUATION.read_text(encoding="utf-8").splitlines()[0]
    copy = tmp_path / "output.swebench_eval.jsonl"  # the same runs, more fields
    run = json.loads(first_run)
    copy.write_text(json.dumps({**run, "report": {"resolved": True}}) + "\n", encoding="utf-8")
    again = tmp_path / "another-evaluation" / "output.jsonl"
    again.parent.mkdir()
    history = [dict(e) for e in run["history"]]
    history[0]["timestamp"] = "2025-05-01T09:00:00.000000"  # the same task run again
    again.write_text(json.dumps({**run, "history": history}) + "\n", encoding="utf-8")
    store = blob_store()

    ((_, original),) = ingest_recordings(EVALUATION, store=store)[:1]
    ((_, copied),) = ingest_recordings(copy, store=store)
    ((_, rerun),) = ingest_recordings(again, store=store)

    assert copied.session_id == original.session_id and copied.new_items == 0
    assert rerun.session_id != original.session_id
    assert Session.objects.filter(title=run["instance_id"]).count() == 2


@pytest.mark.django_db
def test_a_damaged_run_skips_that_run_only(fixtures_dir, data_dir: Path, tmp_path: Path) -> None:
    lines = EVALUATION.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "output.jsonl"
    path.write_text("\n".join([lines[0], lines[1][:5000], lines[2]]) + "\n", encoding="utf-8")

    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 path"):
        call_command("ingest", str(path), stdout=out, stderr=err)

    assert re.match(rf"^{re.escape(str(path))}:2: not JSON", err.getvalue())
    assert len(err.getvalue().splitlines()) == 1
    assert "0 of 1 files ingested, 2 of 3 evaluation runs" in out.getvalue()
    ids = {str(r.header["id"]) for r in runs_of(EVALUATION)}
    assert {str(s) for s in Session.objects.values_list("id", flat=True)} < ids
    assert Session.objects.count() == 2
    titles = set(Session.objects.values_list("title", flat=True))
    assert titles == {json.loads(lines[0])["instance_id"], json.loads(lines[2])["instance_id"]}


def test_a_damaged_first_run_still_reads_the_others(fixtures_dir, tmp_path: Path) -> None:
    lines = EVALUATION.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "output.jsonl"
    path.write_text("\n".join([lines[0][:3000], lines[1]]) + "\n", encoding="utf-8")
    assert detect(path, path.read_bytes()) == "openhands"
    loaded = load_runs(path, path.read_bytes())
    assert isinstance(loaded[0][1], RecordingError) and str(loaded[0][1]).startswith(f"{path}:1:")
    assert isinstance(loaded[1][1], Recording)


def test_a_run_without_history_is_reported_by_its_line(fixtures_dir, tmp_path: Path) -> None:
    lines = EVALUATION.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "output.jsonl"
    path.write_text(lines[0] + "\n" + json.dumps({"instance_id": "x"}) + "\n", encoding="utf-8")
    (_, good), (_, bad) = load_runs(path, path.read_bytes())
    assert isinstance(good, Recording)
    assert str(bad) == f"{path}:2: not an OpenHands evaluation run: no instance_id and history"


@pytest.mark.django_db
def test_a_run_still_being_written_is_ingested_once_complete(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    lines = EVALUATION.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "output.jsonl"
    path.write_text(lines[0] + "\n" + lines[1][:1000], encoding="utf-8")
    store = blob_store()
    assert len(ingest_recordings(path, store=store)) == 1
    path.write_text(lines[0] + "\n" + lines[1] + "\n", encoding="utf-8")
    outcomes = ingest_recordings(path, store=store)
    assert [o.new_items for _, o in outcomes] == [0, len(runs_of(EVALUATION)[1].records)]


@pytest.mark.django_db
def test_ingest_file_refuses_a_file_of_runs_in_one_line(fixtures_dir, data_dir: Path) -> None:
    with pytest.raises(IngestError, match=r"holds 3 sessions \(an evaluation output"):
        ingest_file(EVALUATION, store=blob_store())
    assert Session.objects.count() == 0


# --- the V0 event list --------------------------------------------------------------------


def test_the_event_list_keeps_its_conversation_in_order(fixtures_dir) -> None:
    raw = json.loads(EVENTS.read_text(encoding="utf-8"))
    recording = load_recording(EVENTS)
    events = kept(raw)
    assert detect(EVENTS, EVENTS.read_bytes()) == "openhands"
    assert [r["type"] for r in recording.records] == [expected_type(e) for e in events]
    assert len(results(recording.records)) == len(observations(raw)) == 4
    for record, event in zip(recording.records, events, strict=True):
        if "cause" in event:
            (call,) = [c for c in calls(recording.records) if c["id"] == record["call_id"]]
            assert call["id"] == event["tool_call_metadata"]["tool_call_id"]
            assert record["output"] == event["content"]
    assert (
        recording.header["status"]
        == [e for e in raw if e.get("observation")][-1]["extras"]["agent_state"]
    )
    assert recording.header["model"] == "claude-3-5-sonnet-20241022"


def test_an_exit_code_marks_the_step_and_minus_one_says_it_was_still_running(
    fixtures_dir,
) -> None:
    raw = json.loads(EVENTS.read_text(encoding="utf-8"))
    codes = {
        e["tool_call_metadata"]["tool_call_id"]: e["extras"]["metadata"]["exit_code"]
        for e in raw
        if e.get("observation") == "run"
    }
    assert sorted(codes.values()) == [-1, 0]
    recording = load_recording(EVENTS)
    for record in results(recording.records):
        if record["call_id"] in codes:
            assert record["is_error"] is (codes[record["call_id"]] != 0)
            assert ("note" in record) is (codes[record["call_id"]] == -1)
    (noted,) = [r for r in recording.records if r.get("note")]
    assert noted["note"] == openhands.STILL_RUNNING_NOTE
    assert "exit code" not in noted["output"]  # the note is not in the output


@pytest.mark.django_db
def test_the_event_lists_big_outputs_read_back_and_the_note_is_stored(
    fixtures_dir, data_dir: Path
) -> None:
    recording = load_recording(EVENTS)
    ingest_file(EVENTS, store=blob_store())
    session = Session.objects.get(id=recording.header["id"])
    assert assert_big_outputs_read_back(recording.records, session) == 2
    assert session.items.get(note=openhands.STILL_RUNNING_NOTE).is_error
    assert session.status == "awaiting_user_input"


def v0(event_id: int, **fields: Any) -> dict[str, Any]:
    return {"id": event_id, "timestamp": f"2025-01-20T20:29:{event_id:02d}", **fields}


def test_without_call_metadata_results_pair_with_their_cause(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    events = [
        v0(1, source="user", action="message", args={"content": "fix it"}),
        v0(2, source="agent", action="run", args={"command": "ls", "thought": "look"}),
        v0(3, source="agent", action="read", args={"path": "a.py", "thought": ""}),
        v0(4, source="agent", observation="read", cause=3, content="print(1)", extras={}),
        v0(5, source="agent", observation="run", cause=2, content="a.py", extras={"exit_code": 2}),
        v0(6, source="agent", action="condensation", args={"summary": "earlier work"}),
    ]
    path.write_text(json.dumps(events), encoding="utf-8")
    records = load_recording(path).records
    assert [r["type"] for r in records] == [
        "user",
        "assistant",
        "assistant",
        "tool_result",
        "tool_result",
        "user",
    ]
    assert records[1]["text"] == "look"
    assert records[1]["tool_calls"] == [
        {"id": "event-2", "name": "run", "arguments": {"command": "ls"}}
    ]
    assert [(r["call_id"], r["tool"], r["is_error"]) for r in results(records)] == [
        ("event-3", "read", False),
        ("event-2", "run", True),
    ]
    assert records[5]["role"] == "compacted" and "earlier work" in records[5]["text"]


def test_two_calls_of_one_model_response_count_its_tokens_once(tmp_path: Path) -> None:
    response = {
        "id": "resp-1",
        "model": "m",
        "choices": [
            {
                "message": {
                    "content": "both",
                    "tool_calls": [
                        {"id": "c1", "function": {"name": "bash", "arguments": '{"command": "a"}'}},
                        {"id": "c2", "function": {"name": "bash", "arguments": '{"command": "b"}'}},
                    ],
                }
            }
        ],
        "usage": {"prompt_tokens": 900, "completion_tokens": 40},
    }

    def metadata(call_id: str) -> dict[str, Any]:
        return {"function_name": "bash", "tool_call_id": call_id, "model_response": response}

    events = [
        v0(
            1,
            source="agent",
            action="run",
            args={"thought": "both"},
            tool_call_metadata=metadata("c1"),
        ),
        v0(
            2, source="agent", action="run", args={"thought": ""}, tool_call_metadata=metadata("c2")
        ),
        v0(
            3,
            source="agent",
            observation="run",
            cause=1,
            content="A",
            tool_call_metadata=metadata("c1"),
        ),
        v0(
            4,
            source="agent",
            observation="run",
            cause=2,
            content="B",
            tool_call_metadata=metadata("c2"),
        ),
    ]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    records = load_recording(path).records
    assert [r.get("context_tokens") for r in records] == [900, None, None, None]
    assert records[0]["output_tokens"] == 40
    assert [c["arguments"] for c in calls(records)] == [{"command": "a"}, {"command": "b"}]
    assert [r["output"] for r in results(records)] == ["A", "B"]
    assert "resp-1" not in json.dumps(records)


def test_an_event_that_is_not_an_object_is_reported_with_its_place(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    events = [v0(n, source="agent", observation="null", content="") for n in range(25)]
    path.write_text(json.dumps([*events, "oops"]), encoding="utf-8")
    with pytest.raises(RecordingError, match=r"event 25: an event must be a JSON object"):
        load_recording(path)


def v0_folder(root: Path) -> Path:
    """The event list as OpenHands' file store keeps it: one event a file, and a page of
    its event cache (itself an event list, which must not become a session of its own)."""
    events = json.loads(EVENTS.read_text(encoding="utf-8"))
    folder = root / "sessions" / "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    (folder / "events").mkdir(parents=True)
    (folder / "event_cache").mkdir()
    for event in events:
        (folder / "events" / f"{event['id']}.json").write_text(json.dumps(event), "utf-8")
    (folder / "event_cache" / "0-18.json").write_text(json.dumps(events), "utf-8")
    (folder / "metadata.json").write_text(json.dumps({"title": "Todo app"}), "utf-8")
    return folder


@pytest.mark.django_db
def test_a_v0_file_store_folder_is_one_recording_and_the_same_session_as_its_list(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    folder = v0_folder(tmp_path)
    assert folder_layout(folder) == "v0"
    assert recording_paths([tmp_path]) == [(folder, False)]
    listed = load_recording(EVENTS)
    stored = load_recording(folder)
    assert stored.header["id"] == listed.header["id"]
    assert stored.header["title"] == "Todo app"
    assert [r["source_digest"] for r in stored.records] == [
        r["source_digest"] for r in listed.records
    ]

    out, err = ingest(tmp_path, EVENTS)
    assert err == "" and Session.objects.count() == 1
    assert "+0 items" in out.splitlines()[1]  # the list after the folder adds nothing


# --- the V1 conversation folder ----------------------------------------------------------


def test_the_v1_folder_keeps_its_events_in_order_and_pairs_by_tool_call_id(fixtures_dir) -> None:
    raw = [e for e in v1_events() if e["kind"] != "SystemPromptEvent"]
    recording = load_recording(V1)
    kinds = {"MessageEvent", "ActionEvent", "ObservationEvent"}
    assert {e["kind"] for e in raw} <= kinds
    assert len(recording.records) == len(raw) == 7
    for record, event in zip(recording.records, raw, strict=True):
        if event["kind"] == "ObservationEvent":
            assert record["type"] == "tool_result"
            assert record["call_id"] == event["tool_call_id"]
            text = "\n".join(part["text"] for part in event["observation"]["content"])
            assert record["output"] == text
            (action,) = [e for e in raw if e["id"] == event["action_id"]]
            assert action["tool_call_id"] == record["call_id"]
        elif event["kind"] == "ActionEvent":
            (call,) = record["tool_calls"]
            assert call == {
                "id": event["tool_call_id"],
                "name": event["tool_call"]["name"],
                "arguments": json.loads(event["tool_call"]["arguments"]),
            }
        else:
            assert record["type"] == ("user" if event["source"] == "user" else "assistant")
    assert recording.header["id"] == str(uuid.UUID("cd94562403b9487ebdd4018e3f531dfd"))
    assert recording.header["status"] == "finished"
    assert recording.header["model"] == "openai/gpt-4o-mini"


def test_the_v1_folders_tokens_come_from_its_base_state(fixtures_dir) -> None:
    state = json.loads((V1 / "base_state.json").read_text(encoding="utf-8"))
    usages = {
        u["response_id"]: u for u in state["stats"]["usage_to_metrics"]["agent"]["token_usages"]
    }
    recording = load_recording(V1)
    raw = [e for e in v1_events() if e["kind"] != "SystemPromptEvent"]
    seen = set()
    for record, event in zip(recording.records, raw, strict=True):
        response = event.get("llm_response_id")
        if response and response not in seen:
            seen.add(response)
            assert record["context_tokens"] == usages[response]["prompt_tokens"]
            assert record["output_tokens"] == usages[response]["completion_tokens"]
        else:
            assert "context_tokens" not in record
    assert seen == set(usages)


def test_a_v1_event_file_alone_is_not_a_recording(fixtures_dir) -> None:
    event = next((V1 / "events").glob("event-00002-*.json"))
    with pytest.raises(UnknownFormat):
        detect(event, event.read_bytes())


@pytest.mark.django_db
def test_a_folder_scan_ingests_the_v1_folder_once_not_its_files(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    root = tmp_path / "conversations"
    shutil.copytree(V1, root / V1.name)
    assert recording_paths([root]) == [(root / V1.name, False)]
    assert recording_paths([root / V1.name]) == [(root / V1.name, True)]

    out, err = ingest(root)
    assert err == "" and "1 of 1 files ingested" in out
    session = Session.objects.get()
    assert session.item_count == 7 and session.step_count == 2 and session.error_count == 0
    assert session.source_path == str(root / V1.name)
    assert session.started_at is not None and session.status == "finished"


@pytest.mark.django_db
def test_a_v1_event_still_being_written_is_read_once_complete(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / V1.name
    shutil.copytree(V1, folder)
    last = next((folder / "events").glob("event-00007-*.json"))
    whole = last.read_text(encoding="utf-8")
    last.write_text(whole[:50], encoding="utf-8")
    store = blob_store()
    assert ingest_file(folder, store=store).new_items == 6
    last.write_text(whole, encoding="utf-8")
    assert ingest_file(folder, store=store).new_items == 1


@pytest.mark.django_db
def test_a_damaged_v1_event_is_reported_by_its_file(
    fixtures_dir, data_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / V1.name
    shutil.copytree(V1, folder)
    broken = next((folder / "events").glob("event-00003-*.json"))
    broken.write_text("{oops", encoding="utf-8")
    with pytest.raises(IngestError, match=rf"^{re.escape(str(broken))}: not JSON"):
        ingest_file(folder, store=blob_store())
    assert Session.objects.count() == 0


@pytest.mark.django_db
def test_a_v1_folder_is_rebuilt_from_its_folder(
    fixtures_dir, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / V1.name
    shutil.copytree(V1, folder)
    ingest(folder)
    before = list(Item.objects.order_by("seq").values_list("seq", "digest"))
    monkeypatch.setattr(openhands, "IMPORTER_VERSION", openhands.IMPORTER_VERSION + 1)

    out, _ = StringIO(), None
    call_command("ingest", "--rebuild", "--all", stdout=out)

    assert f"{folder}: rebuilt: 7 items re-derived" in out.getvalue()
    assert list(Item.objects.order_by("seq").values_list("seq", "digest")) == before
    assert Session.objects.get().importer_version == openhands.IMPORTER_VERSION
