"""A record over `--max-record` is skipped with one line naming its file, line and size, and
the rest of its file is still ingested, with and without `--watch`; a long record under
the cap is read a block at a time, to the same items and digests as read whole, in about
its own size of memory (docs/recording.md#options).

Memory is measured, never timed: a real process reads a ~20 MB record and its peak RSS
above what it had before (VmHWM, reset through /proc/<pid>/clear_refs) is compared with
the record's size; a watching process's RSS after the record with its RSS before.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from hypothesis import given
from hypothesis import strategies as st

from blobviewer.ingest.importers import json_lines, load_recording, load_runs, long_lines, recording
from blobviewer.ingest.importers.json_lines import JsonLines, megabytes
from blobviewer.ingest.importers.recording import load_json_record
from blobviewer.models import Item, Session
from importers.recordings import CLAUDE_SESSION, FIXTURES, claude_line
from web.ingest_process import ROOT, Watching, command_env, item_count, run_ingest, wait_until
from web.records import header, tool_result_item, user_item

MB = 1 << 20
OURS_ID = uuid.UUID("0199a8e0-1111-7000-8000-00000000beef")
CODEX_ID = "0199a8e0-0000-7000-8000-000000000001"


def tool_output(size: int, *, plain: bool = False) -> str:
    """A tool output of about *size* characters, as a terminal writes one: lines of text with
    quotes, backslashes, a tab, non-ASCII letters and an emoji (escaped in JSON: `\\n`,
    `\\"`, `\\ud83d\\ude00`), so blocks end inside escapes and characters. *plain*: ASCII
    only, as most outputs are (an emoji makes Python keep 4 bytes for every character)."""
    row = 'row {n:07d}: "quoted" C:\\path\\to\tcafé ─ 😀 ok\n'
    if plain:
        row = 'row {n:07d}: "quoted" C:\\path\\to\tfile.py ok\n'
    count = size // len(row.format(n=0)) + 1
    return "".join(row.format(n=n) for n in range(count))


# --- recordings with one big record, in each JSON Lines format ----------------------------


def codex_line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-01-02T10:00:00.000Z", "type": kind, "payload": payload}


def ours(big: str) -> list[Any]:
    return [
        header(OURS_ID),
        user_item(1, "show me the log"),
        tool_result_item(2, big),
        user_item(3, "thanks"),
    ]


def claude(big: str) -> list[Any]:
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat log"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": big}
    return [
        claude_line("user", "show me the log"),
        claude_line("assistant", [call]),
        claude_line("user", [result]),
        claude_line("assistant", [{"type": "text", "text": "done"}]),
    ]


def codex(big: str) -> list[Any]:
    meta = {"id": CODEX_ID, "timestamp": "2026-01-02T09:59:59.000Z", "cwd": "/work"}
    call = {"type": "function_call", "name": "exec_command", "call_id": "c1"}
    return [
        codex_line("session_meta", meta),
        codex_line("response_item", {**call, "arguments": json.dumps({"cmd": "cat log"})}),
        codex_line(
            "response_item", {"type": "function_call_output", "call_id": "c1", "output": big}
        ),
        codex_line("response_item", {"type": "message", "role": "user", "content": []}),
    ]


FORMATS: dict[str, Callable[[str], list[Any]]] = {"blobviewer": ours, "claude": claude}
FORMATS["codex"] = codex
BIG_LINE = 3  # the line each of them holds the big output on


def write_lines(path: Path, entries: list[Any]) -> Path:
    path.write_bytes(b"".join(json.dumps(entry).encode() + b"\n" for entry in entries))
    return path


def without_line(path: Path, number: int, copy: Path) -> Path:
    lines = path.read_bytes().split(b"\n")
    copy.write_bytes(b"\n".join(lines[: number - 1] + lines[number:]))
    return copy


def line_size(path: Path, number: int) -> int:
    return len(path.read_bytes().split(b"\n")[number - 1])


def skip_line(path: Path, number: int, cap: int) -> str:
    return (
        f"{path}: line {number}: record of {megabytes(line_size(path, number))} is over "
        f"--max-record ({megabytes(cap)}); skipped"
    )


def session_items(path: Path) -> tuple[uuid.UUID, int]:
    if path.read_bytes().startswith(b'{"type": "session"'):
        return OURS_ID, len(path.read_bytes().strip().split(b"\n")) - 1
    loaded = load_recording(path)
    return uuid.UUID(loaded.header["id"]), len(loaded.records)


# --- the reader ---------------------------------------------------------------------------


def test_a_line_over_the_cap_is_passed_over_and_the_lines_after_it_are_read() -> None:
    data = b'{"a": 1}\n\n{"big": "' + b"x" * 5000 + b'"}\r\n{"b": 2}\n{"torn'
    reader = JsonLines(io.BytesIO(data), Path("r.jsonl"), max_record=1000)
    lines = list(reader)
    assert [(line.number, line.value) for line in lines[:2]] == [(1, {"a": 1}), (4, {"b": 2})]
    assert lines[2].number == 5 and lines[2].unterminated and lines[2].error
    assert [(r.line, r.size) for r in reader.skipped.values()] == [(3, 5012)]  # with its \r


def test_a_long_record_reads_to_the_same_items_and_digests_as_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_lines(tmp_path / "s.jsonl", claude(tool_output(9 * MB)))
    assert line_size(path, BIG_LINE) > json_lines.LONG_LINE
    streamed = load_recording(path)
    monkeypatch.setattr(json_lines, "LONG_LINE", 1 << 40)
    monkeypatch.setattr(recording, "LONG_TEXT", 1 << 40)
    whole = load_recording(path)
    assert streamed.records == whole.records
    assert streamed.header == whole.header
    assert streamed.records[2]["output"] == tool_output(9 * MB)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(alphabet=st.sampled_from('ab"\\\n\t/é─😀\ud800\udc00u'), max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet='ab"é\\', max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values, st.booleans(), st.integers(min_value=1, max_value=13))
def test_any_value_read_a_block_at_a_time_is_the_value_read_whole(
    value: Any, ascii_only: bool, block: int
) -> None:
    # Tiny blocks and long strings of a few bytes: every cut lands somewhere new.
    text = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    saved = long_lines.BLOCK, long_lines.LONG_STRING, recording.LONG_TEXT
    long_lines.BLOCK, long_lines.LONG_STRING, recording.LONG_TEXT = block, 3, 3
    try:
        file = io.BytesIO(b"--" + text + b"--")
        file.seek(2)
        read, _ = long_lines.read_long_value(file, len(text), load_json_record)
        digest = recording.canonical_digest(read)
    finally:
        long_lines.BLOCK, long_lines.LONG_STRING, recording.LONG_TEXT = saved
    whole, _ = load_json_record(text)
    assert json.dumps(read) == json.dumps(whole)
    assert digest == recording.canonical_digest(whole)
    assert file.tell() == 2 + len(text)


@pytest.mark.parametrize(
    "text",
    [b'{"a": "abcdefgh', b'"abcdefgh\\', b'["abc\x01defgh"]', b'"\\x1234567890"', b"[1,,2]"],
)
def test_a_long_text_that_is_not_json_is_refused(text: bytes) -> None:
    saved = long_lines.BLOCK, long_lines.LONG_STRING
    long_lines.BLOCK, long_lines.LONG_STRING = 4, 3
    try:
        with pytest.raises(ValueError):
            long_lines.read_long_value(io.BytesIO(text), len(text), load_json_record)
    finally:
        long_lines.BLOCK, long_lines.LONG_STRING = saved


@pytest.mark.parametrize(
    ("text", "size"),
    [("256M", 256 * MB), ("300", 300 * MB), ("512K", 512 << 10), ("1.5G", 3 * (1 << 29))],
)
def test_a_size_is_megabytes_or_has_its_unit(text: str, size: int) -> None:
    assert json_lines.size_in_bytes(text) == size


# --- ingest, in this process (SQLite or PostgreSQL, as the run's database is) ---------------


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_record_over_the_cap_is_skipped_with_one_line_and_the_rest_is_ingested(
    fmt: str, data_dir: Path, tmp_path: Path
) -> None:
    path = write_lines(tmp_path / f"{fmt}.jsonl", FORMATS[fmt](tool_output(MB + MB // 2)))
    session_id, expected = session_items(without_line(path, BIG_LINE, tmp_path / "rest.jsonl"))
    out, err = StringIO(), StringIO()

    call_command("ingest", "--max-record", "1M", str(path), stdout=out, stderr=err)

    assert err.getvalue().splitlines() == [skip_line(path, BIG_LINE, MB)]
    assert Item.objects.filter(session_id=session_id).count() == expected > 0
    assert "(1 records skipped: over --max-record)" in out.getvalue()


@pytest.mark.django_db
def test_a_run_of_an_evaluation_output_over_the_cap_is_skipped_and_the_others_ingested(
    data_dir: Path, tmp_path: Path
) -> None:
    runs = (FIXTURES / "openhands" / "multi_swe_bench_output.jsonl").read_bytes().splitlines()
    big = json.loads(runs[1])
    big["padding"] = tool_output(2 * MB)
    path = tmp_path / "output.jsonl"
    path.write_bytes(b"\n".join([runs[0], json.dumps(big).encode(), *runs[2:]]) + b"\n")
    kept = without_line(path, 2, tmp_path / "kept.jsonl")
    expected = {run.header["id"] for _, run in load_runs(kept, kept.read_bytes())}
    err = StringIO()

    call_command("ingest", "--max-record", "1M", str(path), stdout=StringIO(), stderr=err)

    assert err.getvalue().splitlines() == [skip_line(path, 2, MB)]
    assert {str(s.id) for s in Session.objects.all()} == expected
    assert len(expected) == len(runs) - 1


@pytest.mark.django_db
def test_a_file_of_one_record_over_the_cap_says_so_once_and_is_no_failure(
    data_dir: Path, tmp_path: Path
) -> None:
    one = tmp_path / "one.jsonl"
    one.write_bytes(json.dumps(claude_line("user", tool_output(2 * MB))).encode() + b"\n")
    document = tmp_path / "chat.json"  # a whole document (on many lines) is one record
    document.write_text(json.dumps([{"role": "user", "content": tool_output(2 * MB)}], indent=1))
    err = StringIO()

    call_command("ingest", "--max-record", "1M", str(one), str(document), stderr=err)

    size = megabytes(document.stat().st_size)
    assert err.getvalue().splitlines() == [
        skip_line(one, 1, MB),
        f"{document}: document of {size} is over --max-record (1.0 MB); skipped",
    ]
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_a_size_that_is_not_one_is_refused(data_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="give a size such as 256M"):
        call_command("ingest", "--max-record", "lots", str(tmp_path))


# --- `manage.py ingest` as its own process -----------------------------------------------------


def test_the_command_skips_it_too_and_exits_0(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s.jsonl", claude(tool_output(MB + MB // 2)))
    session_id, expected = session_items(without_line(path, BIG_LINE, tmp_path / "rest.jsonl"))

    done = run_ingest("--max-record", "1M", path, data=tmp_path / "data")

    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [skip_line(path, BIG_LINE, MB)]
    assert item_count(tmp_path / "data", session_id) == expected == 3


def test_watching_skips_it_with_one_line_however_often_the_file_changes(tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    watching = Watching(
        ["--max-record", "1M", watched], data=tmp_path / "data", logs=tmp_path / "logs"
    )
    try:
        watching.wait_for_output("watching ", bound=180)
        path = write_lines(watched / "s.jsonl", claude(tool_output(MB + MB // 2)))
        watching.wait_for_items(uuid.UUID(CLAUDE_SESSION), 3)
        with path.open("ab") as file:  # the session goes on: the file is read again
            file.write(json.dumps(claude_line("user", "and now?")).encode() + b"\n")
        watching.wait_for_items(uuid.UUID(CLAUDE_SESSION), 4)
        assert watching.stop() == 0
        assert watching.err().splitlines() == [skip_line(path, BIG_LINE, MB)]
    finally:
        watching.kill()


# --- memory, measured ---------------------------------------------------------------------------

READ_ONE = """
import gc, json, os, sys
from pathlib import Path
import django
django.setup()
from blobviewer.ingest.importers.long_lines import map_large_blocks
from blobviewer.ingest.recording_files import open_recording

def status(key):
    with open("/proc/self/status") as lines:
        return next(int(line.split()[1]) * 1024 for line in lines if line.startswith(key))

map_large_blocks()  # as manage.py ingest does
gc.collect()
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")  # VmHWM from here
before = status("VmRSS")
skipped = []
opened = open_recording(Path(sys.argv[1]), max_record=int(sys.argv[2]), skipped=skipped)
peak = status("VmHWM") - before
records = len(opened.session.records)
del opened
gc.collect()
print(json.dumps({"peak": peak, "after": status("VmRSS") - before, "records": records,
                  "skipped": len(skipped)}))
"""


def read_in_a_process(path: Path, cap: int) -> dict[str, int]:
    """open_recording of *path* in a fresh process: its peak and its RSS after, above its RSS
    before (bytes), and how many records it read and skipped."""
    env = command_env(path.parent / "data", DJANGO_SETTINGS_MODULE="blobviewer.settings")
    done = subprocess.run(
        [sys.executable, "-c", READ_ONE, str(path), str(cap)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout)


def test_reading_a_record_under_the_cap_takes_less_than_twice_its_size(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s.jsonl", claude(tool_output(20 * MB, plain=True)))
    size = line_size(path, BIG_LINE)

    read = read_in_a_process(path, 64 * MB)

    assert read["records"] == 4 and read["skipped"] == 0
    assert read["peak"] < 2 * size, f"peak {read['peak'] / size:.2f}x the record"
    assert read["after"] < 16 * MB, f"{read['after'] / MB:.0f} MB kept after the record"


def test_a_record_over_the_cap_is_passed_over_without_being_held(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s.jsonl", claude(tool_output(20 * MB, plain=True)))
    size = line_size(path, BIG_LINE)

    read = read_in_a_process(path, 4 * MB)

    assert read["records"] == 3 and read["skipped"] == 1
    # What is kept of a line while it is measured is at most LONG_LINE, whatever its size.
    assert read["peak"] < 2 * json_lines.LONG_LINE < size // 2, f"peak {read['peak'] / MB:.1f} MB"


def process_memory(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as lines:
        return next(int(line.split()[1]) * 1024 for line in lines if line.startswith(key))


def test_a_watching_process_gives_a_records_memory_back(tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    # Something to ingest first, so that what any ingest loads once is loaded before.
    write_lines(watched / "first.jsonl", ours("x" * 2000))
    watching = Watching(
        ["--max-record", "64M", watched], data=tmp_path / "data", logs=tmp_path / "logs"
    )
    try:
        watching.wait_for_output("watching ", bound=180)
        pid = watching.process.pid
        before = process_memory(pid, "VmRSS")
        # Renamed in whole, so that it is ingested once (a torn line would be read again).
        path = write_lines(tmp_path / "s.jsonl", claude(tool_output(20 * MB, plain=True)))
        os.replace(path, watched / "s.jsonl")
        watching.wait_for_items(uuid.UUID(CLAUDE_SESSION), 4, bound=120)
        wait_until(lambda: "s.jsonl: +4 items" in watching.out(), 30, "its line", watching)
        after = process_memory(pid, "VmRSS")
        assert watching.stop() == 0
    finally:
        watching.kill()
    size = line_size(watched / "s.jsonl", BIG_LINE)
    assert after - before < 64 * MB, f"{(after - before) / MB:.0f} MB more after a {size} B record"
