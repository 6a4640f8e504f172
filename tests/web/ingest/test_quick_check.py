"""`manage.py ingest` with nothing to do is answered before Django starts
(blobviewer.ingest.quick_check): the same lines as the command, no Django imported, and
in every case it cannot vouch for, nothing said and the command run as usual."""

from __future__ import annotations

import io
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from blobviewer.ingest.quick_check import answered_before_django
from importers.recordings import CLAUDE_CODE, FIXTURES

REPO = Path(__file__).resolve().parents[3]
RECORDINGS = [CLAUDE_CODE, FIXTURES / "codex" / "codex_golden.jsonl"]


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(recordings folder, data folder), the recordings ingested once by the real command
    on the data folder's own SQLite database; this process's environment as a shell's."""
    folder, data = tmp_path / "recordings", tmp_path / "data"
    folder.mkdir()
    for source in RECORDINGS:
        shutil.copy2(source, folder / source.name)
    monkeypatch.setenv("BLOBVIEWER_DATA", str(data))
    for name in ("DATABASE_URL", "BLOBVIEWER_BLOBS", "BLOBVIEWER_SEARCH_BLOB_BYTES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "blobviewer.settings")
    first = manage("ingest", str(folder))
    assert first.returncode == 0, first.stderr
    assert "2 of 2 files ingested, " in first.stdout
    return folder, data


def manage(*args: str, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, *(["-X", "importtime"] if importtime else []), "manage.py", *args]
    return subprocess.run(command, cwd=REPO, env=dict(os.environ), capture_output=True, text=True)


def _timeless(text: str) -> str:
    return re.sub(r"in \d+\.\ds$", "in -s", text, flags=re.MULTILINE)


def test_an_ingest_of_unchanged_files_says_what_the_command_says_without_django(setup):
    folder, _ = setup

    quick = manage("ingest", str(folder), importtime=True)
    # --follow-links changes nothing for a folder without links, but is not the plain
    # command: Django runs it.
    full = manage("ingest", str(folder), "--follow-links", importtime=True)

    assert quick.returncode == full.returncode == 0
    assert "2 of 2 files ingested (2 unchanged, not read), 0 new items" in quick.stdout
    assert _timeless(quick.stdout) == _timeless(full.stdout)
    imported = re.compile(r"\| +django(\.|$)", re.MULTILINE)
    assert not imported.search(quick.stderr)  # importtime's lines: no Django module
    assert imported.search(full.stderr)


def ask(*args: str) -> tuple[bool, str]:
    out = io.StringIO()
    return answered_before_django(list(args), out=out), out.getvalue()


def test_a_changed_file_is_left_to_the_command_and_nothing_is_said(setup):
    folder, _ = setup
    assert ask(str(folder))[0]

    recording = folder / RECORDINGS[1].name
    with recording.open("a") as file:
        file.write("\n")

    assert ask(str(folder)) == (False, "")
    again = manage("ingest", str(folder))
    assert "1 unchanged, not read" in again.stdout  # the command read the grown one
    assert ask(str(folder))[0]  # and its mark is kept again


def _database(data: Path) -> sqlite3.Connection:
    return sqlite3.connect(data / "db.sqlite3", isolation_level=None)


@pytest.mark.parametrize(
    "change",
    ["a session deleted", "a migration not applied", "a killed ingest's journal", "a new file"],
)
def test_what_the_command_must_do_is_left_to_it(setup, change):
    folder, data = setup
    assert ask(str(folder))[0]

    if change == "a session deleted":
        with _database(data) as connection:
            connection.execute("DELETE FROM blobviewer_session WHERE source_path LIKE '%codex%'")
    elif change == "a migration not applied":
        with _database(data) as connection:
            connection.execute(
                "DELETE FROM django_migrations WHERE name = '0016_session_started_index'"
            )
    elif change == "a killed ingest's journal":
        (data / "ingest-journal").mkdir(exist_ok=True)
        (data / "ingest-journal" / "1234-abcd.ids").write_text("header\n")
    else:
        shutil.copy2(FIXTURES / "django__django-12708.traj.json", folder)

    assert ask(str(folder)) == (False, "")


@pytest.mark.parametrize(
    "args", [("--force",), ("--max-record", "1M"), ("--watch",), ("-v", "2"), ()]
)
def test_any_other_flag_is_the_commands(setup, args):
    folder, _ = setup
    assert ask(*args, str(folder))[0] is (args == ())


@pytest.mark.parametrize(
    "name", ["DATABASE_URL", "BLOBVIEWER_BLOBS", "BLOBVIEWER_SEARCH_BLOB_BYTES"]
)
def test_a_setting_that_shapes_the_ingest_is_left_to_django(setup, monkeypatch, name):
    folder, _ = setup
    monkeypatch.setenv(name, "s3://bucket/x" if name == "BLOBVIEWER_BLOBS" else "1")
    assert ask(str(folder)) == (False, "")


def test_a_path_that_is_not_there_is_the_commands_to_report(setup, tmp_path):
    folder, _ = setup
    assert ask(str(folder), str(tmp_path / "missing.jsonl")) == (False, "")


def test_what_it_copies_of_the_settings_and_apps_is_what_django_has():
    from django.conf import settings
    from django.db.migrations.loader import MigrationLoader

    from blobviewer.ingest import quick_check
    from blobviewer.ingest.marks import DEFAULT_BLOB_BYTES
    from blobviewer.search.indexing import blob_bytes_limit

    loader = MigrationLoader(None, ignore_no_migrations=True)  # from the files alone
    assert set(quick_check._MIGRATED) == set(loader.migrated_apps)
    if "BLOBVIEWER_SEARCH_BLOB_BYTES" not in os.environ:
        assert blob_bytes_limit() == settings.BLOBVIEWER_SEARCH_BLOB_BYTES == DEFAULT_BLOB_BYTES


def test_django_refusing_to_start_is_left_to_django(setup, monkeypatch):
    folder, _ = setup
    monkeypatch.setenv("DEBUG", "false")
    monkeypatch.delenv("SECRET_KEY", raising=False)
    assert ask(str(folder)) == (False, "")
    monkeypatch.setenv("SECRET_KEY", "a-key-for-the-test")
    assert ask(str(folder))[0]


def test_a_journal_folder_it_cannot_list_is_the_commands_to_report(setup):
    folder, data = setup
    shutil.rmtree(data / "ingest-journal", ignore_errors=True)
    (data / "ingest-journal").write_text("not a folder")
    assert ask(str(folder)) == (False, "")
