"""`manage.py blobs copy --from DIR --to s3://…`: a team's data folder moves into object
storage, resumably and idempotently, every object verified (SeaweedFS, tests/s3_server.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from blobviewer.catalog.session_logs import FileSessionLogs, ObjectSessionLogs
from core.content import Structured, Text
from core.store import FsBlobStore, open_store
from core.store.s3 import S3Objects

ROOT = Path(__file__).resolve().parents[3]
BIG = "".join(f"line {n}: a long build log\n" for n in range(50_000))  # over 1 MB: indexed


def make_data_folder(folder: Path, *, blobs: int) -> dict[str, object]:
    """A data folder as a team's server has it: blobs (one big, with its index), session
    logs, a rendering in derived/."""
    store = FsBlobStore(folder / "blobs")
    ids = [store.store_sync(Text(BIG))]
    for n in range(blobs - 1):
        if n % 3:
            ids.append(store.store_sync(Text(f"output {n}\r\nwith a second line\n" * (n % 7 + 1))))
        else:
            ids.append(store.store_sync(Structured({"n": n, "items": list(range(n % 20))})))
    logs = []
    (folder / "sessions").mkdir()
    for n in range(3):
        session_id = uuid.uuid4()
        text = "".join(f'{{"seq": {k}, "session": {n}}}\n' for k in range(50 * (n + 1)))
        (folder / "sessions" / f"{session_id}.jsonl").write_text(text)
        logs.append(session_id)
    (folder / "sessions" / ".upload-abc.part").write_text("a leftover, not a log\n")
    rendered = FsBlobStore(folder / "derived")
    assert rendered.put_sync(ids[1], Text("[\n  rendered\n]\n"))
    return {"ids": ids, "logs": logs, "big": ids[0], "rendered": ids[1]}


def raw(store, blob_id) -> bytes:
    with store.open_sync(blob_id) as reader:
        return b"".join(reader.blocks())


def copy(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("blobs", "copy", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def manage_env(place, tmp_path: Path) -> dict[str, str]:
    inherited = ("DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE", "BLOBVIEWER_BLOBS")
    env = {k: v for k, v in os.environ.items() if k not in inherited}
    return {**env, **place.env, "BLOBVIEWER_DATA": str(tmp_path / "site"), "PYTHONUNBUFFERED": "1"}


def test_a_copy_killed_halfway_resumes_to_a_complete_verified_copy(tmp_path, s3_place, db):
    source = tmp_path / "data"
    made = make_data_folder(source, blobs=1000)
    command = [
        sys.executable,
        "manage.py",
        "blobs",
        "copy",
        "--from",
        str(source),
        "--to",
        s3_place.url,
        "--jobs",
        "2",
        "--progress-every",
        "20",
    ]
    env = manage_env(s3_place, tmp_path)
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen = []
    assert process.stderr is not None
    for line in process.stderr:
        seen.append(line)
        done = re.match(r"blobs: ([\d,]+) of 1,000 done", line)
        if done and int(done[1].replace(",", "")) >= 500:
            process.send_signal(signal.SIGKILL)  # no clean-up of any kind
            break
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, "".join(seen)

    source_store, target = FsBlobStore(source / "blobs"), open_store(s3_place.url)
    halfway = set(target.ids_sync())
    assert 500 <= len(halfway) < 1000
    for blob_id in halfway:  # whatever is there is whole
        assert target.size_sync(blob_id) == source_store.size_sync(blob_id)

    resumed = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    blobs_line = next(line for line in resumed.stdout.splitlines() if "blobs:" in line)
    copied, present = re.search(r"([\d,]+) copied .*?, ([\d,]+) already there", blobs_line).groups()
    assert int(copied.replace(",", "")) == 1000 - len(halfway)
    assert int(present.replace(",", "")) == len(halfway)
    assert "session logs: 3 in the source" in resumed.stdout
    assert "Every object in the destination has the size it has in the source." in resumed.stdout
    assert set(target.ids_sync()) == set(made["ids"])
    bucket = S3Objects.from_url(s3_place.url)
    for blob_id in made["ids"]:  # byte for byte, under the name of its kind
        name = f"{blob_id}.{'txt' if source_store.stat_sync(blob_id).kind == 'text' else 'json'}"
        assert bucket.get(name).data == (source / "blobs" / name).read_bytes()
    index = target.index_reader_sync(str(made["big"]))
    source_index = source_store.index_reader_sync(str(made["big"]))
    assert index is not None and source_index is not None
    assert index.read(0, index.size) == source_index.read(0, source_index.size)
    logs = ObjectSessionLogs(S3Objects.from_url(f"{s3_place.url}/sessions"))
    assert sorted(log.session_id for log in logs.kept()) == sorted(made["logs"])
    for session_id in made["logs"]:
        assert (
            b"".join(logs.open(session_id))
            == (source / "sessions" / f"{session_id}.jsonl").read_bytes()
        )
    assert raw(open_store(f"{s3_place.url}/derived"), made["rendered"]) == b"[\n  rendered\n]\n"

    again = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)

    assert again.returncode == 0, again.stderr
    assert "blobs: 1,000 in the source, 0 copied (0 bytes (0 bytes)), 1,000 already there" in (
        again.stdout
    )
    assert "session logs: 3 in the source, 0 copied" in again.stdout


def test_it_says_its_progress_and_what_it_copied(tmp_path, s3_place, db):
    made = make_data_folder(tmp_path / "data", blobs=30)

    out, err = copy(
        "--from", str(tmp_path / "data"), "--to", s3_place.url, "--progress-every", "10"
    )

    assert "blobs: 10 of 30 done" in err and "blobs: 30 of 30 done" in err
    assert f"Copied {tmp_path / 'data'} to {s3_place.url}:" in out
    assert "blobs: 30 in the source, 30 copied" in out and "1 index copied" in out
    assert "renderings: 1 in the source, 1 copied" in out
    assert "session logs: 3 in the source, 3 copied" in out
    assert len(made["ids"]) == 30


def test_a_destination_blob_that_differs_is_reported_and_fails_the_copy(tmp_path, s3_place, db):
    made = make_data_folder(tmp_path / "data", blobs=5)
    clash = made["ids"][2]
    assert open_store(s3_place.url).put_sync(clash, Text("not the same blob at all"))

    with pytest.raises(CommandError, match="1 object\\(s\\) could not be copied or verified"):
        copy("--from", str(tmp_path / "data"), "--to", s3_place.url)

    target = open_store(s3_place.url)
    assert raw(target, clash) == b"not the same blob at all"  # never overwritten
    assert len(set(target.ids_sync())) == 5


def test_a_log_that_grew_since_the_last_copy_replaces_its_copy(tmp_path, s3_place, db):
    made = make_data_folder(tmp_path / "data", blobs=2)
    copy("--from", str(tmp_path / "data"), "--to", s3_place.url)
    grown, rewritten = made["logs"][0], made["logs"][1]
    local = FileSessionLogs(tmp_path / "data" / "sessions")
    with local.path(grown).open("ab") as log:
        log.write(b'{"seq": 999}\n')
    local.path(rewritten).write_text('{"seq": 0, "session": "another"}\n')

    with pytest.raises(CommandError):
        copy("--from", str(tmp_path / "data"), "--to", s3_place.url)

    logs = ObjectSessionLogs(S3Objects.from_url(f"{s3_place.url}/sessions"))
    assert b"".join(logs.open(grown)) == local.path(grown).read_bytes()
    assert b"".join(logs.open(rewritten)) != local.path(rewritten).read_bytes()


def test_it_refuses_a_destination_that_is_no_object_store(tmp_path, db):
    make_data_folder(tmp_path / "data", blobs=2)

    with pytest.raises(CommandError, match="expected an object store, s3://bucket/prefix"):
        copy("--from", str(tmp_path / "data"), "--to", str(tmp_path / "elsewhere"))
    with pytest.raises(CommandError, match="no such folder"):
        copy("--from", str(tmp_path / "nothing"), "--to", "s3://bucket/prefix")
