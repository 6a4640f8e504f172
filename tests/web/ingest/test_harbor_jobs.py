"""`manage.py ingest` of a Harbor job folder: one session per trial, with its job, task,
agent, model, reward and outcome; a trial's native log read instead of its ATIF
conversion; ATIF outputs over 800 bytes promoted; the list filters by job and outcome."""

from __future__ import annotations

import json
import re
import shutil
from io import StringIO
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command
from django.core.wsgi import get_wsgi_application
from django.db import connection
from django.test.utils import CaptureQueriesContext

from blobviewer.models import Item, Session
from blobviewer.push.sending import Pusher, PushState
from core.store.blob_id import BLOB_REF
from importers.recordings import CLAUDE_CODE, CLAUDE_SESSION, FIXTURES, write_json

pytestmark = pytest.mark.django_db

ATIF = FIXTURES / "atif"


def ingest(*paths: Path) -> str:
    out, err = StringIO(), StringIO()
    call_command("ingest", *[str(p) for p in paths], stdout=out, stderr=err)
    assert err.getvalue() == ""
    return out.getvalue()


def trial(
    job: Path,
    name: str,
    *,
    task: str,
    trajectory: Path | dict | None = None,
    rewards: dict | None = None,
    reward_txt: str | None = None,
    exception: bool = False,
) -> Path:
    folder = job / name
    (folder / "agent").mkdir(parents=True)
    (folder / "verifier").mkdir()
    write_json(
        folder / "config.json",
        {
            "trial_name": name,
            "trials_dir": str(job),
            "task": {"path": f"tasks/{task}"},
            "agent": {"name": "claude-code", "model_name": "anthropic/claude-opus-4-6"},
        },
    )
    if isinstance(trajectory, Path):
        shutil.copyfile(trajectory, folder / "agent" / "trajectory.json")
    elif trajectory is not None:
        write_json(folder / "agent" / "trajectory.json", trajectory)
    if reward_txt is not None:
        (folder / "verifier" / "reward.txt").write_text(reward_txt)
    if rewards is not None or exception:
        result: dict = {
            "id": f"0196a1b2-0000-7000-8000-{abs(hash(name)) % 10**12:012d}",
            "task_name": task,
            "trial_name": name,
            "agent_info": {
                "name": "claude-code",
                "version": "2.1.178",
                "model_info": {"name": "claude-opus-4-6", "provider": "anthropic"},
            },
            "verifier_result": {"rewards": rewards} if rewards is not None else None,
        }
        if exception:
            result["exception_info"] = {
                "exception_type": "AgentTimeoutError",
                "exception_message": "agent ran out of time",
                "exception_traceback": "…",
                "occurred_at": "2026-06-16T12:00:00Z",
            }
        write_json(folder / "result.json", result)
    return folder


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    job = tmp_path / "jobs" / "2026-06-16__12-00-00"
    job.mkdir(parents=True)
    write_json(job / "config.json", {"job_name": job.name})
    (job / "job.log").write_text("started\n")
    trial(
        job,
        "fix-bug__AAA",
        task="fix-bug",
        trajectory=ATIF / "claude-code" / "trajectory_pass.json",
        rewards={"reward": 1.0},
    )
    native = trial(
        job,
        "fix-bug__BBB",
        task="fix-bug",
        trajectory=ATIF / "claude-code" / "trajectory_fail.json",
        reward_txt="0",
    )
    sessions = native / "agent" / "sessions" / "projects" / "-app"
    sessions.mkdir(parents=True)
    shutil.copyfile(CLAUDE_CODE, sessions / CLAUDE_CODE.name)
    big = "\n".join(f"line {n}: " + "x" * 60 for n in range(200))
    steps = [
        {"step_id": 1, "source": "user", "message": "list the files"},
        {
            "step_id": 2,
            "source": "agent",
            "message": "",
            "tool_calls": [
                {"tool_call_id": "c1", "function_name": "bash", "arguments": {"cmd": "ls -R"}}
            ],
            "observation": {"results": [{"source_call_id": "c1", "content": big}]},
        },
    ]
    doc = {
        "schema_version": "ATIF-v1.6",
        "session_id": "s",
        "agent": {"name": "terminus-2", "version": "2"},
        "steps": steps,
    }
    trial(job, "list-files__CCC", task="list-files", trajectory=doc, exception=True)
    return tmp_path / "jobs"


def test_a_job_folder_is_a_session_per_trial_with_its_reward(jobs: Path) -> None:
    out = ingest(jobs)
    assert "3 of 4 files ingested (1 skipped" in out  # the job's own config.json
    sessions = {s.meta["harbor_trial"]: s for s in Session.objects.all()}
    assert set(sessions) == {"fix-bug__AAA", "fix-bug__BBB", "list-files__CCC"}
    passed, native, failed = (
        sessions["fix-bug__AAA"],
        sessions["fix-bug__BBB"],
        sessions["list-files__CCC"],
    )
    assert {s.job for s in sessions.values()} == {"2026-06-16__12-00-00"}
    assert (passed.task, passed.outcome, passed.reward, passed.source_format) == (
        "fix-bug",
        "pass",
        1.0,
        "atif",
    )
    assert passed.meta["harbor_model"] == "claude-opus-4-6" and passed.title == "fix-bug__AAA"
    # The native Claude Code log is read instead of the ATIF conversion beside it.
    assert (native.source_format, str(native.id)) == ("claude_code", CLAUDE_SESSION)
    assert (native.task, native.outcome, native.reward) == ("fix-bug", "fail", 0.0)
    # No reward, and an exception: the trial errored, and says why.
    assert (failed.outcome, failed.reward) == ("error", None)
    assert failed.meta["exception"]["type"] == "AgentTimeoutError"
    (result,) = Item.objects.filter(session=failed, type="tool_result")
    assert BLOB_REF.match(result.output)
    assert result.received_bytes > 800 and len(result.output.encode()) <= 400
    # Again: nothing new, and nothing inside a trial is read on its own.
    again = ingest(jobs)
    assert "0 new items" in again and Session.objects.count() == 3


def test_a_trial_still_running_is_read_again_once_it_has_its_reward(jobs: Path) -> None:
    running = trial(
        jobs / "2026-06-16__12-00-00",
        "later__DDD",
        task="later",
        trajectory=ATIF / "claude-code" / "trajectory_pass.json",
    )
    ingest(running)
    session = Session.objects.get(meta__harbor_trial="later__DDD")
    assert (session.task, session.outcome) == ("later", "")
    (running / "verifier" / "reward.txt").write_text("0.5\n")
    ingest(running)
    session.refresh_from_db()
    assert (session.outcome, session.reward) == ("partial", 0.5)


def test_the_list_filters_by_job_and_outcome_and_shows_the_pass_rate(
    jobs: Path, client, django_user_model
) -> None:
    ingest(jobs)
    other = trial(
        jobs / "other-job",
        "x__EEE",
        task="x",
        trajectory=ATIF / "claude-code" / "trajectory_pass.json",
        rewards={"reward": 1},
    )
    write_json(other.parent / "config.json", {})
    ingest(other)
    client.force_login(django_user_model.objects.create_user("ann", password="pw"))
    job = "2026-06-16__12-00-00"
    page = client.get("/", {"job": job}).content.decode()
    # Three trials ended (one with an error, which did not pass): one passed.
    assert "3 trials, 1 of 3 passed (33%)" in page
    assert page.count('<tr class="session') == 3
    assert "other-job · 1 of 1 passed (100%)" in page  # each job's rate in the filter
    passed = client.get("/", {"outcome": "pass"}).content.decode()
    assert passed.count('<tr class="session') == 2
    assert passed.count("outcome-pass") == 2 and "outcome-fail" not in passed
    both = client.get("/", {"outcome": "pass", "job": job}).content.decode()
    assert both.count('<tr class="session') == 1
    errored = client.get("/", {"outcome": "error"}).content.decode()
    assert errored.count('<tr class="session') == 1 and ">list-files__CCC<" in errored
    bad = client.get("/", {"outcome": "nonsense"})
    assert bad.status_code == 200 and "Outcome: Select a valid choice" in bad.content.decode()
    # The session page says the job (a link to its trials), the task and the reward.
    session = Session.objects.get(meta__harbor_trial="fix-bug__BBB")
    detail = client.get(session.get_absolute_url()).content.decode()
    assert f'href="/?job={job}"' in detail and "reward 0.0" in detail and "outcome-fail" in detail


def test_the_list_htmx_swaps_reads_the_job_rates_only_for_a_job_it_filters_by(
    jobs: Path, client, django_user_model
) -> None:
    """The job filter's choices (each job's pass rate) are not in the list htmx swaps as
    the search is typed: its request reads none, unless the list shows one job's rate."""
    ingest(jobs)
    client.force_login(django_user_model.objects.create_user("ann", password="pw"))

    def job_statements(**params: str) -> tuple[str, int]:
        with CaptureQueriesContext(connection) as queries:
            page = client.get("/", params, HTTP_HX_REQUEST="true").content.decode()
        return page, sum('AS "trials"' in query["sql"] for query in queries)

    page, read = job_statements(q="trial")
    assert read == 0 and 'id="list"' in page and 'id="id_job"' not in page
    page, read = job_statements(job="2026-06-16__12-00-00")
    assert read == 1 and "3 trials, 1 of 3 passed (33%)" in page
    assert job_statements()[1] == 0


@pytest.mark.django_db(transaction=True)
def test_a_trial_pushed_alone_keeps_its_job_and_reward(jobs: Path, api_token, tmp_path) -> None:
    folder = jobs / "2026-06-16__12-00-00" / "fix-bug__AAA"
    state = PushState(tmp_path / "state.json", "http://testserver")
    transport = httpx.WSGITransport(app=get_wsgi_application())
    pusher = Pusher("http://testserver", api_token[1], state, transport=transport)
    try:
        outcome = pusher.push(folder)
    finally:
        pusher.close()
    assert outcome.kind == "sent", outcome.line()
    session = Session.objects.get()
    assert (session.job, session.task, session.outcome) == (
        "2026-06-16__12-00-00",
        "fix-bug",
        "pass",
    )
    assert session.owner == api_token[0].user


def test_a_trajectorys_recorded_totals_are_on_its_page(
    jobs: Path, client, django_user_model
) -> None:
    ingest(jobs)
    client.force_login(django_user_model.objects.create_user("ann", password="pw"))
    session = Session.objects.get(meta__harbor_trial="fix-bug__AAA")
    totals = json.loads((ATIF / "claude-code" / "trajectory_pass.json").read_text())[
        "final_metrics"
    ]
    page = client.get(session.get_absolute_url()).content.decode()
    expected = (
        f"{totals['total_prompt_tokens']:,} in ({totals['total_cached_tokens']:,} cached), "
        f"{totals['total_completion_tokens']:,} out"
    )
    assert expected in re.sub("<[^>]+>", "", page)
