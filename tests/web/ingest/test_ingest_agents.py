"""`manage.py ingest --agents`: the folders where the agents keep their recordings, found
under the home directory (a fake one here, laid out like the real ones), said found or
not, and ingested; with --watch, followed."""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from blobviewer.ingest.agent_folders import KNOWN_FOLDERS, RecordingFilter, find_agent_folders
from blobviewer.models import Session
from web.ingest_process import REAL, Watching, expected_items

CLAUDE = REAL / "a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"
CODEX = REAL / "codex" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
CODEX_SMALL = REAL / "codex" / "codex_golden.jsonl"
GEMINI = REAL / "gemini" / "session-2025-12-01T21-45-5b959dae.json"
OPENHANDS = REAL / "openhands" / "v1-conversation-cd94562403b9487ebdd4018e3f531dfd"
GEMINI_HASH = "5b959dae" * 8
NO_OPENHANDS = (
    "no OpenHands folder (~/.openhands/conversations, ~/.openhands/sessions, ~/.openhands/users)"
)


def place(source: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)
    return target


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty home directory; Path.home() reads HOME."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def ingest(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ingest", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_it_finds_ingests_each_agents_folder_and_reports_a_missing_one(
    home: Path, data_dir: Path
) -> None:
    place(CLAUDE, home / ".claude" / "projects" / "-src-deep-manifest")
    place(CODEX, home / ".codex" / "sessions" / "2026" / "05" / "11")
    chats = home / ".gemini" / "tmp" / GEMINI_HASH / "chats"
    place(GEMINI, chats)
    # Gemini's own state beside its chats: not a recording, and not offered as one.
    (chats.parent / "logs.json").write_text('[{"sessionId": "x", "type": "user"}]')

    out, err = ingest("--agents")

    assert err == ""
    lines = out.splitlines()
    assert f"found Claude Code recordings in {home / '.claude' / 'projects'}" in lines
    assert f"found Codex CLI recordings in {home / '.codex' / 'sessions'}" in lines
    assert f"found Gemini CLI recordings in {home / '.gemini' / 'tmp'}" in lines
    assert NO_OPENHANDS in lines
    assert "logs.json" not in out
    assert lines[-1].startswith("3 of 3 files ingested, ")
    for recording in (CLAUDE, CODEX, GEMINI):
        session_id, items = expected_items(recording)
        assert Session.objects.get(id=session_id).item_count == items


@pytest.mark.django_db
def test_it_finds_openhands_conversation_folders_and_passes_over_its_other_state(
    home: Path, data_dir: Path
) -> None:
    openhands = home / ".openhands"
    place(OPENHANDS, openhands / "conversations")
    (openhands / "settings.json").write_text('{"llm_model": "m"}')
    (openhands / "conversations" / "notes.json").write_text("{}")

    out, err = ingest("--agents")

    assert err == ""
    assert f"found OpenHands recordings in {openhands / 'conversations'}" in out
    assert "no Claude Code folder (~/.claude/projects)" in out
    assert "no Codex CLI folder (~/.codex/sessions)" in out
    assert "no Gemini CLI folder (~/.gemini/tmp)" in out
    assert "notes.json" not in out
    assert out.splitlines()[-1].startswith("1 of 1 files ingested, ")
    session_id, items = expected_items(OPENHANDS)
    assert Session.objects.get(id=session_id).item_count == items


@pytest.mark.django_db
def test_it_says_so_when_no_agent_folder_is_there(home: Path, data_dir: Path) -> None:
    out, err = ingest("--agents")

    assert err == ""
    assert out.splitlines() == [
        "no Claude Code folder (~/.claude/projects)",
        "no Codex CLI folder (~/.codex/sessions)",
        "no Gemini CLI folder (~/.gemini/tmp)",
        NO_OPENHANDS,
        out.splitlines()[-1],
    ]
    assert out.splitlines()[-1].startswith("0 of 0 files ingested, 0 new items")
    with pytest.raises(CommandError, match="nothing to watch: no agent folder was found"):
        ingest("--agents", "--watch")


@pytest.mark.django_db
def test_paths_given_besides_agents_are_ingested_too(home: Path, data_dir: Path) -> None:
    place(CODEX_SMALL, home / ".codex" / "sessions" / "2025" / "01" / "04")
    elsewhere = place(GEMINI, home / "downloads")

    out, _ = ingest("--agents", str(elsewhere))

    assert out.splitlines()[-1].startswith("2 of 2 files ingested, ")
    for recording in (CODEX_SMALL, GEMINI):
        session_id, items = expected_items(recording)
        assert Session.objects.get(id=session_id).item_count == items


def test_only_an_agents_recordings_are_offered_from_its_folder(home: Path) -> None:
    found = find_agent_folders()
    assert [entry.path for entry in found] == [home / f.relative for f in KNOWN_FOLDERS]
    gemini = home / ".gemini" / "tmp"
    gemini.mkdir(parents=True)
    accepts = RecordingFilter(find_agent_folders())

    assert accepts(gemini / GEMINI_HASH / "chats" / "session-1.json")
    assert not accepts(gemini / GEMINI_HASH / "logs.json")
    assert accepts(home / "elsewhere" / "logs.json")  # not in an agent's folder: not judged


def test_with_watch_it_follows_the_agents_folders(tmp_path: Path, home: Path) -> None:
    day = home / ".codex" / "sessions" / "2025" / "01" / "04"
    day.mkdir(parents=True)
    lines = CODEX_SMALL.read_bytes().splitlines(keepends=True)
    rollout = day / CODEX_SMALL.name
    rollout.write_bytes(b"".join(lines[:4]))
    session_id, _ = expected_items(CODEX_SMALL)

    watching = Watching(["--agents"], data=tmp_path / "data", logs=tmp_path / "logs")
    try:
        watching.wait_for_output("watching ", bound=180)
        assert watching.items(session_id) == 2
        with rollout.open("ab") as file:
            file.write(b"".join(lines[4:]))
        _, items = expected_items(CODEX_SMALL)
        watching.wait_for_items(session_id, items)
        # A new day's folder and the rollout in it, as Codex starts a session tomorrow.
        tomorrow = home / ".codex" / "sessions" / "2025" / "01" / "05"
        tomorrow.mkdir(parents=True)
        other = tomorrow / "rollout-other.jsonl"
        other.write_bytes(CODEX_SMALL.read_bytes().replace(b"golden-codex-001", b"other-001"))
        other_id, other_items = expected_items(other)
        assert other_id != session_id
        watching.wait_for_items(other_id, other_items)
        assert watching.stop() == 0
    finally:
        watching.kill()
    out = watching.out()
    assert f"found Codex CLI recordings in {home / '.codex' / 'sessions'}" in out
    assert "no Gemini CLI folder (~/.gemini/tmp)" in out
    assert out.splitlines()[-1].startswith("stopped watching after ")
    assert watching.err() == ""
