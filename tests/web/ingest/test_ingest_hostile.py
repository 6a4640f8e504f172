"""Ingest survives hostile and inconsistent input: each bad file is reported and skipped,
nothing half-done is left behind, and one recording cannot take over another's session."""

from __future__ import annotations

import json
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from blobviewer.models import Blob, Item, Session
from importers.recordings import write_json
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

BIG = "".join(f"line {n} of a long tool output\n" for n in range(200))


def ingest(*paths: Path) -> tuple[str, str, bool]:
    out, err = StringIO(), StringIO()
    try:
        call_command("ingest", *[str(p) for p in paths], stdout=out, stderr=err)
    except CommandError:
        return out.getvalue(), err.getvalue(), False
    return out.getvalue(), err.getvalue(), True


def blob_files(data_dir: Path) -> set[str]:
    return {p.name for p in (data_dir / "blobs").iterdir()}


@pytest.mark.parametrize(
    "bad_record",
    [
        {"type": "user", "seq": 10**20, "text": "seq beyond any database integer"},
        {"type": "user", "seq": 2**31, "text": "just past a 32-bit integer"},
    ],
)
def test_a_seq_no_database_can_hold_is_reported_and_the_next_file_still_goes_in(
    write_log, data_dir: Path, bad_record: dict
) -> None:
    bad = write_log([header(), bad_record], name="a-bad.jsonl")
    good = write_log([header(), user_item(1, "fine")], name="b-good.jsonl")

    _, err, ok = ingest(bad, good)

    assert not ok
    assert f"{bad}:2: seq must be an integer from 1 to 2147483647" in err
    assert Session.objects.get().source_path == str(good)


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+01:00"])
def test_a_time_out_of_the_databases_range_is_dropped_not_a_crash(write_log, when: str) -> None:
    path = write_log([header(), {**user_item(1, "x"), "at": when}])
    _, err, ok = ingest(path)
    assert ok, err
    assert Item.objects.get().at is None


def test_a_blob_reference_with_a_crafted_timestamp_is_linked_without_a_crash(
    write_log,
) -> None:
    crafted = "ffffffff-ffff-7fff-bfff-ffffffffffff"
    path = write_log([header(), tool_result_item(1, f"[blob:{crafted}] text | 3 lines")])
    _, err, ok = ingest(path)
    assert ok, err
    blob = Blob.objects.get(id=crafted)
    assert blob.missing and blob.created_at is None


def test_deeply_nested_json_is_reported_not_a_crash(tmp_path: Path, data_dir: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    _, err, ok = ingest(path)
    assert not ok
    assert str(path) in err and "Traceback" not in err


def test_tool_calls_that_are_not_a_list_name_the_message(tmp_path: Path, data_dir: Path) -> None:
    path = write_json(
        tmp_path / "chat.json",
        [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": 5}],
    )
    _, err, ok = ingest(path)
    assert not ok
    assert "messages[1].tool_calls is not a list" in err


def test_a_recording_of_another_format_cannot_claim_a_recorded_session(
    write_log, tmp_path: Path
) -> None:
    session_id = uuid.uuid4()
    ingest(write_log([header(session_id, title="ours"), user_item(1, "hello")]))
    claude = tmp_path / "claude.jsonl"
    claude.write_text(
        json.dumps(
            {
                "type": "user",
                "sessionId": str(session_id),
                "timestamp": "2025-11-29T15:16:58.435Z",
                "message": {"role": "user", "content": "not the same run"},
            }
        )
        + "\n"
    )

    _, err, ok = ingest(claude)

    assert not ok
    assert "already recorded from a blobviewer recording" in err
    assert Session.objects.get(id=session_id).title == "ours"


def test_promoted_blobs_are_discarded_when_the_database_refuses_the_items(
    write_log, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import IntegrityError

    from blobviewer.ingest import writing

    def refuse(*args: object, **kwargs: object) -> None:
        raise IntegrityError("simulated: another ingest of this session won the race")

    monkeypatch.setattr(writing, "_insert_items", refuse)
    path = write_log([header(), tool_result_item(1, BIG)])

    _, err, ok = ingest(path)

    assert not ok
    assert "the database refused it" in err
    assert blob_files(data_dir) == set()
    assert not Blob.objects.exists() and not Session.objects.exists()


def test_a_grown_chat_recording_adds_only_its_new_messages(tmp_path: Path, data_dir: Path) -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "fix it"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": BIG},
    ]
    path = write_json(tmp_path / "run.json", messages)
    ingest(path)
    blobs = blob_files(data_dir)
    write_json(path, [*messages, {"role": "assistant", "content": "done"}])

    out, err, ok = ingest(path)

    assert ok, err
    assert "+1 items (5 in all)" in out
    assert Session.objects.count() == 1
    assert blob_files(data_dir) == blobs


def test_another_log_with_the_same_session_id_cannot_take_it_over(write_log) -> None:
    session_id = uuid.uuid4()
    original = write_log(
        [header(session_id, title="original"), user_item(1, "hello")], name="a.jsonl"
    )
    ingest(original)
    impostor = write_log(
        [header(session_id, title="HIJACKED"), tool_result_item(1, "x"), user_item(999, "y")],
        name="b.jsonl",
    )

    _, err, ok = ingest(impostor)

    assert not ok
    assert "seq 1 differs from session" in err
    session = Session.objects.get(id=session_id)
    assert session.title == "original"
    assert list(session.items.values_list("seq", flat=True)) == [1]


def test_a_log_cannot_claim_how_big_its_outputs_were(write_log) -> None:
    record = {**tool_result_item(1, "small"), "received_bytes": 10**15}
    huge = {**tool_result_item(2, "also small", call_id="d"), "received_bytes": 2**70}
    _, err, ok = ingest(write_log([header(), record, huge]))
    assert ok, err
    session = Session.objects.get()
    assert session.output_bytes_received == len("small") + len("also small")


def test_another_run_with_the_same_opening_is_refused_not_merged(tmp_path: Path) -> None:
    opening = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "looking"},
    ]
    run_a = write_json(
        tmp_path / "a.json",
        [*opening, {"role": "user", "content": "A4"}, {"role": "user", "content": "A5"}],
    )
    run_b = write_json(
        tmp_path / "b.json",
        [*opening, {"role": "user", "content": "B4"}, {"role": "user", "content": "B5"}],
    )
    ingest(run_a)

    _, err, ok = ingest(run_b)

    assert not ok
    assert "seq 4 differs from session" in err
    session = Session.objects.get()
    assert list(session.items.order_by("seq").values_list("text", flat=True))[3:] == ["A4", "A5"]
    assert session.source_path == str(run_a)
