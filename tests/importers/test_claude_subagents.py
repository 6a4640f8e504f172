"""Claude Code sub-agent logs (`<session>/subagents/agent-<id>.jsonl`) are sessions of their
own, naming their parent; the parent's page lists them with links, and theirs links back.

The project folder here is built by hand as Claude Code 2.1 lays it out: the session's log,
and beside it a folder of the same name with `subagents/` (and `tool-results/`)."""

from __future__ import annotations

import re
import uuid
from html import unescape
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from blobviewer.ingest.finding import recording_paths
from blobviewer.ingest.importers import claude_code, load_recording
from blobviewer.ingest.importers.recording import IMPORT_NAMESPACE
from blobviewer.models import IngestedFile, Item, Session
from importers.recordings import claude_line, write_jsonl

PARENT = "6f1d2c3b-4a59-4e87-b6a5-c4d3e2f1a0b9"
HOSTILE = '<script>alert("x")</script> & <b>'


def line(kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {**claude_line(kind, content), "sessionId": PARENT, **extra}


def agent_line(agent: str, kind: str, content: Any) -> dict[str, Any]:
    return line(kind, content, isSidechain=True, agentId=agent)


def tool_use(call_id: str, name: str, **arguments: Any) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}]


def tool_result(call_id: str, text: str) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": call_id, "content": text}]


def project(root: Path) -> Path:
    """A project folder: the parent session ran two sub-agents through the Task tool."""
    folder = root / "projects" / "-home-someone-app"
    subagents = folder / PARENT / "subagents"
    subagents.mkdir(parents=True)
    write_jsonl(
        folder / f"{PARENT}.jsonl",
        [
            line("user", "review the app"),
            line("assistant", tool_use("toolu_task1", "Task", prompt="look at the tests")),
            line("assistant", tool_use("toolu_task2", "Task", prompt=HOSTILE)),
            line("user", tool_result("toolu_task1", "agentId: a1b2c3d (tests are fine)")),
            line("user", tool_result("toolu_task2", "agentId: e4f5a6b (done)")),
        ],
    )
    write_jsonl(
        subagents / "agent-a1b2c3d.jsonl",
        [
            agent_line("a1b2c3d", "user", "look at the tests"),
            agent_line("a1b2c3d", "assistant", tool_use("toolu_s1", "Bash", command="pytest")),
            agent_line("a1b2c3d", "user", tool_result("toolu_s1", "3 passed")),
            agent_line("a1b2c3d", "assistant", [{"type": "text", "text": "tests are fine"}]),
        ],
    )
    write_jsonl(
        subagents / "agent-e4f5a6b.jsonl",
        [
            agent_line("e4f5a6b", "user", HOSTILE),
            agent_line("e4f5a6b", "assistant", [{"type": "text", "text": "done"}]),
        ],
    )
    return folder


def subagent_id(agent: str) -> str:
    return str(uuid.uuid5(IMPORT_NAMESPACE, f"claude_code-subagent:{PARENT}:{agent}"))


def ingest(*paths: Path) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ingest", *[str(p) for p in paths], stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def page(client: Any, session_id: str) -> str:
    return client.get(reverse("session_detail", args=[session_id])).content.decode()


def subagent_links(html: str) -> list[tuple[str, str]]:
    return [
        (href, unescape(text))
        for href, text in re.findall(
            r'<a class="subagent-session" href="([^"]+)">([^<]*)</a>', html
        )
    ]


# --- the importer ----------------------------------------------------------------------


def test_a_subagent_log_is_a_session_of_its_own_naming_its_parent(tmp_path: Path) -> None:
    folder = project(tmp_path)
    recording = load_recording(folder / PARENT / "subagents" / "agent-a1b2c3d.jsonl")
    assert recording.header["id"] == subagent_id("a1b2c3d") != PARENT
    assert recording.header["meta"]["parent_session_id"] == PARENT
    assert recording.header["meta"]["agent_id"] == "a1b2c3d"
    assert recording.header["title"] == "Sub-agent: look at the tests"
    # Its own main line: nothing in it is marked as a sidechain of something else.
    assert [r.get("sidechain", False) for r in recording.records] == [False] * 4
    assert [r["type"] for r in recording.records] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
    ]


def test_the_parent_log_is_read_as_before(tmp_path: Path) -> None:
    recording = load_recording(project(tmp_path) / f"{PARENT}.jsonl")
    assert recording.header["id"] == PARENT
    assert "parent_session_id" not in recording.header["meta"]


def test_sidechain_lines_inside_a_main_log_stay_marked(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / f"{PARENT}.jsonl",
        [
            line("user", "go"),
            agent_line("a1", "assistant", [{"type": "text", "text": "inline sub-agent"}]),
        ],
    )
    recording = load_recording(path)
    assert recording.header["id"] == PARENT
    assert [r.get("sidechain", False) for r in recording.records] == [False, True]


def test_a_subagents_persisted_output_is_read_from_its_sessions_tool_results(
    tmp_path: Path,
) -> None:
    folder = project(tmp_path)
    whole = "".join(f"test {n} passed\n" for n in range(400))
    note = (
        "<persisted-output>\nOutput too large (7KB). Full output saved to: /x.txt\n\n"
        f"Preview (first 2KB):\n{whole[:2000]}\n...\n</persisted-output>"
    )
    log = write_jsonl(
        folder / PARENT / "subagents" / "agent-0c0ffee.jsonl",
        [
            agent_line("0c0ffee", "user", "run them all"),
            agent_line("0c0ffee", "assistant", tool_use("toolu_big", "Bash", command="pytest")),
            agent_line("0c0ffee", "user", tool_result("toolu_big", note)),
        ],
    )
    (folder / PARENT / "tool-results").mkdir()
    (folder / PARENT / "tool-results" / "toolu_big.txt").write_text(whole, encoding="utf-8")
    (result,) = [r for r in load_recording(log).records if r["type"] == "tool_result"]
    assert result["output"] == whole
    assert result["note"] == f"{claude_code.FROM_FILE}toolu_big.txt"


# --- ingest and the pages --------------------------------------------------------------


@pytest.mark.django_db
def test_a_project_folder_ingests_the_session_and_each_subagent(
    data_dir: Path, tmp_path: Path
) -> None:
    folder = project(tmp_path)
    assert sorted(p.name for p, _ in recording_paths([folder])) == [
        f"{PARENT}.jsonl",
        "agent-a1b2c3d.jsonl",
        "agent-e4f5a6b.jsonl",
    ]
    out, err = ingest(folder)
    assert err == "" and "3 of 3 files ingested" in out
    assert set(map(str, Session.objects.values_list("id", flat=True))) == {
        PARENT,
        subagent_id("a1b2c3d"),
        subagent_id("e4f5a6b"),
    }
    assert Item.objects.filter(session_id=PARENT).count() == 5
    assert Item.objects.filter(session_id=subagent_id("a1b2c3d")).count() == 4
    assert not Item.objects.filter(sidechain=True).exists()
    IngestedFile.objects.all().delete()  # read again: ingest itself must add nothing
    again, _ = ingest(folder)
    assert again.count("+0 items") == 3


@pytest.mark.django_db
def test_a_subagent_ingested_before_its_parent_never_takes_the_parents_id(
    data_dir: Path, tmp_path: Path
) -> None:
    folder = project(tmp_path)
    ingest(folder / PARENT / "subagents" / "agent-a1b2c3d.jsonl")
    out, err = ingest(folder / f"{PARENT}.jsonl")
    assert err == "" and "+5 items" in out
    assert Session.objects.get(id=PARENT).title == "review the app"


@pytest.mark.django_db
def test_the_parents_page_lists_its_subagents_with_links(
    data_dir: Path, tmp_path: Path, admin_client
) -> None:
    ingest(project(tmp_path))
    html = page(admin_client, PARENT)
    assert "Sub-agents (2)" in html
    assert subagent_links(html) == [
        (reverse("session_detail", args=[subagent_id("a1b2c3d")]), "Sub-agent: look at the tests"),
        (reverse("session_detail", args=[subagent_id("e4f5a6b")]), f"Sub-agent: {HOSTILE}"),
    ]
    assert "<script>alert" not in html  # the sub-agent's title is escaped


@pytest.mark.django_db
def test_a_subagents_page_links_back_to_its_parent(
    data_dir: Path, tmp_path: Path, admin_client
) -> None:
    ingest(project(tmp_path))
    html = page(admin_client, subagent_id("a1b2c3d"))
    link = re.search(r'<a class="parent-session" href="([^"]+)">([^<]*)</a>', html)
    assert link is not None
    assert link.groups() == (reverse("session_detail", args=[PARENT]), "review the app")
    assert "Sub-agents (" not in html


@pytest.mark.django_db
def test_a_subagent_whose_parent_is_not_recorded_says_so(
    data_dir: Path, tmp_path: Path, admin_client
) -> None:
    folder = project(tmp_path)
    ingest(folder / PARENT / "subagents" / "agent-a1b2c3d.jsonl")
    html = page(admin_client, subagent_id("a1b2c3d"))
    assert f"Sub-agent of session <code>{PARENT}</code>" in html
    assert "(not recorded here)" in html


@pytest.mark.django_db
def test_a_session_without_subagents_lists_none(
    data_dir: Path, tmp_path: Path, admin_client
) -> None:
    path = write_jsonl(tmp_path / f"{PARENT}.jsonl", [line("user", "alone")])
    ingest(path)
    html = page(admin_client, PARENT)
    assert "Sub-agents (" not in html and "Sub-agent of" not in html
