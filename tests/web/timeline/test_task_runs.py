"""Runs of the same task (blobviewer.timeline.tasks): the task each real recording names,
the first message's digest where it names none, the other runs on a session's page, and
the list's `?task=` filter."""

from __future__ import annotations

import json
import re
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from blobviewer.models import Session
from blobviewer.timeline.tasks import PROMPT_TASK, prompt_task
from importers.recordings import (
    CLAUDE_CODE,
    FIXTURES,
    MINI_SWE_AGENT,
    SWE_AGENT_CLASSIC,
    write_json,
    write_jsonl,
)

pytestmark = pytest.mark.django_db

EVALUATION = FIXTURES / "openhands" / "multi_swe_bench_output.jsonl"


def ingest(*paths: Path) -> None:
    out, err = StringIO(), StringIO()
    call_command("ingest", *[str(p) for p in paths], stdout=out, stderr=err)
    assert err.getvalue() == "", err.getvalue()


def test_evaluation_runs_carry_their_instance_ids_as_tasks(tmp_path: Path) -> None:
    for fixture in (EVALUATION, SWE_AGENT_CLASSIC, MINI_SWE_AGENT):
        shutil.copyfile(fixture, tmp_path / fixture.name)
    ingest(tmp_path)
    instances = [json.loads(line)["instance_id"] for line in EVALUATION.read_text().splitlines()]
    assert len(instances) == 3
    by_format = {}
    for session in Session.objects.all():
        by_format.setdefault(session.source_format, []).append(session.task)
    assert sorted(by_format["openhands"]) == sorted(instances)
    assert by_format["swe_agent"] == ["pydicom__pydicom-1458"]
    assert by_format["openai_chat"] == ["django__django-12708"]


def test_a_run_that_names_no_task_is_known_by_its_first_message(
    tmp_path: Path, client, user
) -> None:
    ingest(CLAUDE_CODE)
    (original,) = Session.objects.all()
    assert original.task.startswith(PROMPT_TASK) and len(original.task) == len(PROMPT_TASK) + 16
    # Another run given the same first message: a run of the same task. A third, given
    # another message, is not.
    lines = [json.loads(line) for line in CLAUDE_CODE.read_text().splitlines() if line.strip()]
    again = [{**line, "sessionId": "0196a1b2-0000-7000-8000-000000000001"} for line in lines]
    write_jsonl(tmp_path / "again.jsonl", again)
    other = [{**line, "sessionId": "0196a1b2-0000-7000-8000-000000000002"} for line in lines]
    first_user = next(
        i for i, line in enumerate(other) if line["type"] == "user" and not line.get("isMeta")
    )
    other[first_user] = {
        **other[first_user],
        "message": {"role": "user", "content": "something else"},
    }
    write_jsonl(tmp_path / "other.jsonl", other)
    ingest(tmp_path / "again.jsonl", tmp_path / "other.jsonl")
    tasks = dict(Session.objects.values_list("id", "task"))
    assert len(set(tasks.values())) == 2
    twin = Session.objects.exclude(id=original.id).get(task=original.task)

    client.force_login(user)
    page = client.get(original.get_absolute_url()).content.decode()
    assert "Other runs of the same first message (1)" in re.sub("<[^>]+>", "", page)
    assert f'href="{twin.get_absolute_url()}"' in page
    listed = client.get("/", {"task": original.task}).content.decode()
    assert listed.count('<tr class="session') == 2


def test_the_task_stays_when_a_grown_recording_adds_to_it(tmp_path: Path) -> None:
    lines = [line for line in CLAUDE_CODE.read_text().splitlines() if line.strip()]
    path = tmp_path / "grown.jsonl"
    path.write_text("\n".join(lines[:40]) + "\n")
    ingest(path)
    task = Session.objects.get().task
    path.write_text("\n".join(lines) + "\n")
    ingest(path)
    assert Session.objects.get().task == task != ""


def test_the_first_message_digest_ignores_whitespace_and_other_roles() -> None:
    records = [
        {"type": "user", "seq": 1, "text": "be brief", "role": "system"},
        {"type": "user", "seq": 2, "text": "fix   the\nbug "},
        {"type": "user", "seq": 3, "text": "later"},
    ]
    assert prompt_task(records) == prompt_task([{"type": "user", "seq": 5, "text": "fix the bug"}])
    assert prompt_task(records) != prompt_task([{"type": "user", "seq": 1, "text": "later"}])
    assert prompt_task([{"type": "assistant", "seq": 1, "text": "hi"}]) == ""


def test_a_harbor_trial_and_an_atif_trajectory_of_one_task_meet(tmp_path: Path) -> None:
    trial = tmp_path / "jobs" / "job-1" / "hello__A"
    (trial / "agent").mkdir(parents=True)
    write_json(
        trial / "result.json", {"task_name": "hello", "verifier_result": {"rewards": {"reward": 1}}}
    )
    shutil.copyfile(
        FIXTURES / "atif" / "claude-code" / "trajectory_pass.json",
        trial / "agent" / "trajectory.json",
    )
    second = tmp_path / "jobs" / "job-2" / "hello__B"
    shutil.copytree(trial, second)
    write_json(
        second / "result.json",
        {"task_name": "hello", "verifier_result": {"rewards": {"reward": 0}}},
    )
    write_json(second / "config.json", {"job_id": "0196a1b2-0000-7000-8000-00000000000b"})
    # The same trajectory in two trials: each trial its own session (by its folder).
    ingest(tmp_path / "jobs")
    assert sorted(Session.objects.values_list("task", "outcome")) == [
        ("hello", "fail"),
        ("hello", "pass"),
    ]


def test_the_list_groups_sessions_by_task(tmp_path: Path, client, user) -> None:
    for fixture in (EVALUATION, SWE_AGENT_CLASSIC):
        shutil.copyfile(fixture, tmp_path / fixture.name)
    ingest(tmp_path)
    lines = [json.loads(line) for line in EVALUATION.read_text().splitlines()]
    again = tmp_path / "again.jsonl"  # a second run of the first instance
    write_jsonl(again, [{**lines[0], "history": lines[0]["history"][:-1]}])
    ingest(again)
    client.force_login(user)
    page = client.get("/", {"group": "task"}).content.decode()
    text = re.sub(r"\s+", " ", re.sub("<[^>]+>", " ", page))
    assert "4 tasks" in text
    rows = re.findall(r'<tr class="task-group">(.*?)</tr>', page, re.S)
    runs = {
        re.search(r"\?task=([^\"]+)", row).group(1): re.search(
            r'data-label="Runs">(\d+)<', row
        ).group(1)
        for row in rows
    }
    assert runs[lines[0]["instance_id"]] == "2" and runs["pydicom__pydicom-1458"] == "1"
    # Each task links to its runs.
    listed = client.get("/", {"task": lines[0]["instance_id"]}).content.decode()
    assert listed.count('<tr class="session') == 2


def test_a_run_whose_first_ingest_had_no_user_message_gets_its_task_later(
    tmp_path: Path,
) -> None:
    from core.agent.history import AssistantMessage, UserMessage
    from core.agent.session_log import SessionLogWriter

    with SessionLogWriter(tmp_path, title="late prompt") as log:
        log.append(AssistantMessage("ready when you are", ()))
        ingest(log.path)
        (session,) = Session.objects.all()
        assert session.task == ""
        log.append(UserMessage("fix the flaky test"))
        log.append(UserMessage("and then the docs"))
        ingest(log.path)
    session.refresh_from_db()
    assert session.task == prompt_task([{"type": "user", "seq": 1, "text": "fix the flaky test"}])
