"""Roles and sub-agent items from other agents' recordings: kept on ingest, shown on the
timeline (a system prompt is not labelled as the user, a sub-agent's work is set apart)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from blobviewer.models import Item, Session
from importers.recordings import CLAUDE_SESSION, claude_line, write_json, write_jsonl

pytestmark = pytest.mark.django_db


@pytest.fixture
def claude_code_with_a_sub_agent(tmp_path: Path, data_dir: Path) -> Session:
    path = write_jsonl(
        tmp_path / "claude.jsonl",
        [
            claude_line("user", "please look"),
            claude_line(
                "assistant",
                [{"type": "tool_use", "id": "t1", "name": "Task", "input": {"prompt": "go"}}],
            ),
            claude_line("user", "look at the tests", isSidechain=True),
            claude_line(
                "assistant",
                [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}}],
                isSidechain=True,
            ),
            claude_line(
                "user",
                [{"type": "tool_result", "tool_use_id": "t2", "content": "tests/"}],
                isSidechain=True,
            ),
            claude_line("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]),
        ],
    )
    call_command("ingest", str(path))
    return Session.objects.get(id=CLAUDE_SESSION)


@pytest.fixture
def openai_chat_with_a_system_prompt(tmp_path: Path, data_dir: Path) -> Session:
    path = write_json(
        tmp_path / "chat.json",
        [
            {"role": "system", "content": "You are a careful engineer."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "Done."},
        ],
    )
    call_command("ingest", str(path))
    return Session.objects.get(source_path=str(path))


def test_ingest_keeps_which_items_a_sub_agent_made(claude_code_with_a_sub_agent):
    items = claude_code_with_a_sub_agent.items.order_by("seq")

    assert [(i.type, i.sidechain) for i in items] == [
        ("user", False),
        ("assistant", False),
        ("user", True),
        ("assistant", True),
        ("tool_result", True),
        ("tool_result", False),
    ]


def test_ingest_keeps_the_role_of_a_message_that_is_not_the_user(
    openai_chat_with_a_system_prompt,
):
    items = openai_chat_with_a_system_prompt.items.order_by("seq")

    assert [(i.type, i.role) for i in items] == [
        ("user", "system"),
        ("user", ""),
        ("assistant", ""),
    ]


def test_the_timeline_labels_a_system_message_by_its_role(
    logged_in_client, openai_chat_with_a_system_prompt
):
    url = reverse("session_detail", args=[openai_chat_with_a_system_prompt.id])

    html = logged_in_client.get(url).content.decode()

    system = html[html.index('id="item-1"') : html.index('id="item-2"')]
    assert '<span class="type">system</span>' in system
    assert '<span class="type">user</span>' not in system
    user = html[html.index('id="item-2"') : html.index('id="item-3"')]
    assert '<span class="type">user</span>' in user


def test_the_timeline_sets_sub_agent_items_apart(logged_in_client, claude_code_with_a_sub_agent):
    url = reverse("session_detail", args=[claude_code_with_a_sub_agent.id])

    for headers in ({}, {"HX-Request": "true"}):
        html = logged_in_client.get(url, headers=headers).content.decode()

        # The user's message, the Task turn, then the sub-agent's message and its turn
        # (its Bash call with the result, #5, under it).
        articles = html.split("<article ")[1:]
        marked = [n for n, a in enumerate(articles, start=1) if "sub-agent" in a]
        assert marked == [3, 4]
        assert all(" sidechain" in articles[n - 1].split(">", 1)[0] for n in marked)
        assert " sidechain" not in articles[0].split(">", 1)[0]
        assert 'id="step-5"' in articles[3] and 'id="step-6"' in articles[1]


def test_a_role_from_a_hostile_recording_is_cut_and_escaped(logged_in_client, tmp_path, data_dir):
    hostile = '<script>alert(1)</script>"' * 10
    path = write_json(
        tmp_path / "chat.json",
        [{"role": hostile, "content": "x"}, {"role": "user", "content": "y"}],
    )
    call_command("ingest", str(path))
    item = Item.objects.get(seq=1)

    assert item.role == hostile[: Item._meta.get_field("role").max_length]
    html = logged_in_client.get(reverse("session_detail", args=[item.session_id])).content.decode()
    assert "<script>alert" not in html
