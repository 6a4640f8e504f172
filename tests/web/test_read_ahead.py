"""`manage.py ingest` reads the next recordings in a worker process while it writes the
current one (blobviewer.read_ahead, issue 9): what it records, what it says and the
errors it reports are those of reading each file in the command's own process."""

from __future__ import annotations

import re
import shutil
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from blobviewer import read_ahead
from blobviewer.ingest import ingest_recordings
from blobviewer.models import Blob, BlobRef, Item, Session
from blobviewer.read_ahead import RecordingReader
from importers.recordings import FIXTURES, require_fixtures

pytestmark = pytest.mark.django_db

BLOB_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    """Every real recording that is a file, copied into one folder."""
    require_fixtures()
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
                "id", "title", "model", "meta", "item_count", "blob_count", "step_count"
            )
        ),
        "items": plain(
            Item.objects.values_list(
                "session_id", "seq", "type", "at", "text", "tool_calls", "output", "digest"
            )
        ),
        "blobs": plain(Blob.objects.values_list("kind", "size", "count", "made_by_title")),
        "refs": BlobRef.objects.count(),
    }


def test_a_folder_read_ahead_records_what_reading_each_file_here_records(
    recordings: Path, store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    read_in_worker = []
    take = RecordingReader.take

    def counted(self: RecordingReader, path: Path) -> Any:
        opened = take(self, path)
        read_in_worker.append(opened is not None)
        return opened

    monkeypatch.setattr(RecordingReader, "take", counted)
    monkeypatch.setattr(read_ahead, "cores", lambda: 2)
    out = StringIO()
    call_command("ingest", str(recordings), stdout=out, stderr=StringIO())
    ahead = recorded()
    lines = [BLOB_ID.sub("<id>", line) for line in out.getvalue().splitlines()[:-1]]

    Session.objects.all().delete()
    Blob.objects.all().delete()
    for path in sorted(recordings.iterdir()):
        ingest_recordings(path, store=store)

    assert recorded() == ahead
    assert len(read_in_worker) == len(list(recordings.iterdir())) > 5
    assert all(read_in_worker), read_in_worker
    # A line for each file (an evaluation output's, one per run), in order.
    numbers = [int(line.split("/")[0][1:]) for line in lines]
    assert numbers == sorted(numbers)
    assert set(numbers) == set(range(1, len(read_in_worker) + 1))
    assert connection.cursor().execute("SELECT 1").fetchone() == (1,)  # still ours


def test_a_damaged_file_read_ahead_is_reported_as_when_read_here(
    recordings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_ahead, "cores", lambda: 2)
    claude = next(
        p
        for p in recordings.iterdir()
        if p.name.endswith("a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl")
    )
    lines = claude.read_text().splitlines()
    claude.write_text("\n".join([*lines[:10], "{oops", *lines[10:]]) + "\n")
    (recordings / "99-unknown.json").write_text('{"neither": "a recording"}')

    def errors() -> list[str]:
        err = StringIO()
        with pytest.raises(CommandError):
            call_command("ingest", str(recordings), stdout=StringIO(), stderr=err)
        Session.objects.all().delete()
        return err.getvalue().splitlines()

    ahead = errors()
    monkeypatch.setattr(read_ahead, "cores", lambda: 1)  # everything read here
    here = errors()

    assert ahead == here
    assert f"{claude}:11: not JSON" in "\n".join(ahead)


def test_runs_it_cannot_send_back_are_read_here(tmp_path: Path, store: Any) -> None:
    require_fixtures()
    output = FIXTURES / "openhands" / "multi_swe_bench_output.jsonl"
    damaged = tmp_path / "output.jsonl"
    damaged.write_bytes(output.read_bytes() + b"{oops\n")
    other = tmp_path / "other.jsonl"
    shutil.copyfile(output, other)

    with RecordingReader([damaged, other]) as reader:
        assert reader.take(damaged) is None  # a damaged run's error does not pickle
        sent = reader.take(other)

    assert sent is not None and sent.runs and sent.travels()


def test_it_reads_ahead_sixteen_small_files_but_few_big_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_ahead, "cores", lambda: 2)
    small = [tmp_path / f"small-{n}.jsonl" for n in range(40)]
    for path in small:
        path.write_bytes(b"{}\n")
    with RecordingReader(small) as reader:
        assert reader.ahead == read_ahead.AHEAD_FILES
        reader.take(small[0])
        assert reader.ahead == read_ahead.AHEAD_FILES  # one taken, the next one asked for

    big = [tmp_path / f"big-{n}.jsonl" for n in range(6)]
    for path in big:
        with path.open("wb") as file:
            file.truncate(12 * 1024 * 1024)  # sparse: its size is what counts
    with RecordingReader(big) as reader:
        assert reader.ahead == 3  # 36 MB: the third makes it pass 32 MB
        reader.take(big[0])
        assert reader.ahead == 3

    huge = [tmp_path / "huge.jsonl", *small[:3]]
    with huge[0].open("wb") as file:
        file.truncate(read_ahead.AHEAD_BYTES + 1)
    with RecordingReader(huge) as reader:
        assert reader.ahead == 1  # a file bigger than the budget is still read ahead
