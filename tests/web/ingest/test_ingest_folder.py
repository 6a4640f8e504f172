"""`manage.py ingest` over a folder of every real recording: it records what ingesting
each file on its own records, says a line per file in order, reports a damaged file and
still records the others, and a second copy of a session stores nothing twice."""

from __future__ import annotations

import re
import shutil
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from blobviewer.ingest.errors import NotARecording
from blobviewer.ingest.sessions import ingest_recordings
from blobviewer.models import Blob, BlobRef, Item, Session
from core.store import FsBlobStore
from importers.recordings import FIXTURES

pytestmark = pytest.mark.django_db

CLAUDE_SESSION = "a7da6a22-facc-4fcd-8bab-f83c87862004"
BLOB_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    """Every real recording that is a file, copied into one folder."""
    folder = tmp_path / "recordings"
    folder.mkdir()
    for path in sorted(FIXTURES.rglob("*")):
        recording = path.is_file() and path.suffix in (".jsonl", ".json", ".traj")
        if recording and "events" not in path.parts and path.name != "base_state.json":
            shutil.copyfile(path, folder / f"{len(list(folder.iterdir())):02d}-{path.name}")
    return folder


def recorded() -> dict[str, Any]:
    """What the database holds, blob ids aside (each ingest stores its own blobs), and
    the times of sessions without one (they sort by when they were ingested)."""

    def plain(rows: Any) -> list[str]:
        return sorted(BLOB_ID.sub("<id>", repr(row)) for row in rows)

    return {
        "sessions": plain(
            Session.objects.values_list(
                "id",
                "title",
                "model",
                "meta",
                "item_count",
                "blob_count",
                "step_count",
                "output_bytes_received",
                "output_bytes_in_history",
            )
        ),
        "items": plain(
            Item.objects.values_list(
                "session_id",
                "seq",
                "type",
                "at",
                "text",
                "tool_calls",
                "output",
                "digest",
                "output_bytes",
                "received_bytes",
            )
        ),
        "blobs": plain(
            Blob.objects.values_list(
                "kind", "size", "count", "preview", "made_by__seq", "made_by_title"
            )
        ),
        "refs": plain(BlobRef.objects.values_list("item__session_id", "item__seq", "blob__size")),
    }


def blob_files(store: FsBlobStore) -> set[str]:
    """Every file in the store's folder (blobs, and temporary files left behind)."""
    return {path.name for path in store.root.iterdir() if path.is_file()}


def test_a_folder_records_what_ingesting_each_file_on_its_own_records(
    recordings: Path, store: Any
) -> None:
    out = StringIO()
    call_command("ingest", str(recordings), stdout=out, stderr=StringIO())
    by_the_command = recorded()
    lines = out.getvalue().splitlines()[:-1]

    Session.objects.all().delete()
    Blob.objects.all().delete()
    for path in sorted(recordings.iterdir()):
        try:
            ingest_recordings(path, store=store)
        except NotARecording:  # a folder scan skips it too
            continue

    assert recorded() == by_the_command
    files = len(list(recordings.iterdir()))
    # A line for each file (an evaluation output's, one per run), in order.
    numbers = [int(line.split("/")[0][1:]) for line in lines]
    assert numbers == sorted(numbers)
    assert set(numbers) == set(range(1, files + 1)) and files > 5
    assert connection.cursor().execute("SELECT 1").fetchone() == (1,)  # still usable


def test_a_damaged_file_in_a_folder_is_reported_and_the_others_are_recorded(
    recordings: Path, store: Any
) -> None:
    claude = next(recordings.glob(f"*{CLAUDE_SESSION}.jsonl"))
    lines = claude.read_text().splitlines()
    claude.write_text("\n".join([*lines[:10], "{oops", *lines[10:]]) + "\n")

    err = StringIO()
    with pytest.raises(CommandError, match="1 path"):
        call_command("ingest", str(recordings), stdout=StringIO(), stderr=err)

    assert f"{claude}:11: not JSON" in err.getvalue()
    assert not Session.objects.filter(id=CLAUDE_SESSION).exists()
    assert Session.objects.count() > 5


def test_a_second_copy_of_a_session_adds_nothing_and_stores_no_blob(
    recordings: Path, store: FsBlobStore
) -> None:
    claude = next(recordings.glob(f"*{CLAUDE_SESSION}.jsonl"))
    shutil.copyfile(claude, recordings / f"zz-{claude.name}")
    out = StringIO()
    call_command("ingest", str(recordings), stdout=out, stderr=StringIO())

    assert ": +0 items (299 in all)" in out.getvalue().splitlines()[-2]
    # Every blob file is a blob the catalog records: the copy stored none of its own.
    assert {name.rsplit(".", 1)[0] for name in blob_files(store)} == {
        str(blob_id) for blob_id in Blob.objects.values_list("id", flat=True)
    }
