"""`manage.py ingest --watch`: what is there first, then every new or grown recording as
its agent writes it; torn last lines and half-written documents wait until complete;
SIGTERM ends it cleanly with a summary.

The end-to-end test runs the command as its own process on a data directory of its own
(it migrates its SQLite database itself) and reads that database directly, polling up to
a bound for each change to arrive; the expected item counts come from the importers run on
the same bytes, so nothing is doubled and nothing is missing. The smaller tests pin how
file-system changes map to recordings, the first pass racing with writes, and signals.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import threading
import uuid
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from blobviewer.ingest import recording_run
from blobviewer.ingest.importers import OUR_FORMAT, holds_runs, load_runs, load_sniffed, sniff
from blobviewer.ingest.watch import WatchRoot, follow, recordings_changed, stop_on_signals
from blobviewer.models import Session
from core.agent.session_log import parse_session_log
from web.ingest_process import REAL, Watching, expected_items, wait_until
from web.records import header, user_item

CODEX = REAL / "codex" / "codex_golden.jsonl"
GEMINI = REAL / "gemini" / "gemini_golden.json"
V1_CONVERSATION = REAL / "openhands" / "v1-conversation-cd94562403b9487ebdd4018e3f531dfd"


def line(record: dict) -> bytes:
    return json.dumps(record).encode() + b"\n"


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def importer_view(tmp_path: Path, name: str, data: bytes) -> tuple[uuid.UUID, int]:
    """What the importer derives from *data* (a copy outside the watched folder)."""
    copy = tmp_path / "importer-view" / name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(data)
    return expected_items(copy)


def test_it_follows_new_and_grown_recordings_until_sigterm(tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    data = tmp_path / "data"
    codex_lines = CODEX.read_bytes().splitlines(keepends=True)
    rollout = watched / "rollout-2025-01-04T09-00-00-golden.jsonl"
    rollout.write_bytes(b"".join(codex_lines[:4]))
    ours_id = uuid.uuid4()
    ours = watched / f"{ours_id}.jsonl"
    ours.write_bytes(line(header(ours_id)) + line(user_item(1, "one")))
    codex_id, codex_first = importer_view(tmp_path, "first.jsonl", rollout.read_bytes())

    watching = Watching([watched], data=data, logs=tmp_path / "logs")
    try:
        # What is there is ingested first (into a database the command migrated itself).
        watching.wait_for_output("watching ", bound=180)
        assert watching.items(codex_id) == codex_first == 2
        assert watching.items(ours_id) == 1

        # Both grow; each ends in a torn line, the way an agent's write is caught midway.
        torn = codex_lines[8]
        append(rollout, b"".join(codex_lines[4:8]) + torn[:40])
        append(ours, line(user_item(2, "two")) + b'{"type": "user", "seq": 3, "at": "2025-05')
        _, codex_grown = importer_view(tmp_path, "grown.jsonl", rollout.read_bytes())
        assert codex_grown == 6
        watching.wait_for_items(codex_id, codex_grown)
        watching.wait_for_items(ours_id, 2)
        watching.wait_for_output("skipped a torn last line")

        # The rest of each torn line arrives: read now, once.
        append(rollout, torn[40:] + b"".join(codex_lines[9:]))
        append(ours, b'-01T12:00:01+00:00", "text": "three"}\n')
        _, codex_all = expected_items(CODEX)
        watching.wait_for_items(codex_id, codex_all)
        watching.wait_for_items(ours_id, 3)

        # A Gemini CLI session is rewritten whole; caught half-written in a new folder, it
        # is not a recording yet, and is read again when it changes.
        chats = watched / "project-hash" / "chats"
        chats.mkdir(parents=True)
        session = chats / "session-golden.json"
        document = GEMINI.read_bytes()
        session.write_bytes(document[: len(document) // 2])
        watching.wait_for_output("session-golden.json: skipped, not a recording")
        session.write_bytes(document)
        gemini_id, gemini_items = expected_items(GEMINI)
        watching.wait_for_items(gemini_id, gemini_items)

        assert watching.stop() == 0
    finally:
        watching.kill()
    out = watching.out()
    assert out.splitlines()[-1].startswith("stopped watching after ")
    assert "2 of 2 files ingested" in out
    assert watching.err() == ""
    # Nothing doubled by ingesting the same files again and again.
    assert watching.items(codex_id) == codex_all
    assert watching.items(ours_id) == 3
    assert watching.items(gemini_id) == gemini_items


# --- in the same process: the command in the main thread, changes made beside it --------------


def watch_in_process(steps: Callable[[StringIO], None], *args: str) -> str:
    """`ingest --watch ARGS` in this process (on the test database) while another thread
    runs *steps* once it watches, then sends SIGTERM as a service manager would; the
    command's output (stdout and stderr)."""
    out = StringIO()
    done = threading.Event()
    failures: list[BaseException] = []

    def drive() -> None:
        try:
            wait_until(lambda: "watching " in out.getvalue() or done.is_set(), 60, "watching")
            if not done.is_set():
                steps(out)
        except BaseException as error:  # noqa: BLE001 - raised again in the test's thread
            failures.append(error)
        finally:
            if not done.is_set():
                os.kill(os.getpid(), signal.SIGTERM)

    # A SIGTERM that came after the command ended must not end the test run.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    driver = threading.Thread(target=drive)
    driver.start()
    try:
        call_command("ingest", "--watch", *args, stdout=out, stderr=out)
    finally:
        done.set()
        driver.join(timeout=60)
        signal.signal(signal.SIGTERM, previous)
    if failures:
        raise AssertionError(out.getvalue()) from failures[0]
    return out.getvalue()


@pytest.mark.django_db
def test_a_session_an_older_importer_recorded_is_said_once_while_it_grows(
    data_dir: Path, write_log, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    old = write_log([header(old_id), user_item(1, "one")], name="a-old.jsonl")
    call_command("ingest", str(old), stdout=StringIO())
    detect = importlib.import_module(
        "blobviewer.ingest.importers.detect"
    )  # the module, not detect()
    monkeypatch.setattr(detect, "OUR_IMPORTER_VERSION", detect.OUR_IMPORTER_VERSION + 1)
    new = write_log([header(new_id), user_item(1, "one")], name="b-new.jsonl")

    def grow(out: StringIO) -> None:
        for seq in (2, 3):
            append(old, line(user_item(seq, "more")))
            append(new, line(user_item(seq, "more")))
            said = f"+1 items ({seq} in all)"
            wait_until(lambda said=said: said in out.getvalue(), 15, said)

    out = watch_in_process(grow, str(data_dir / "sessions"))

    assert out.count("was recorded by an older blobviewer importer") == 1
    assert Session.objects.get(id=old_id).item_count == 1  # nothing appended until a rebuild
    assert Session.objects.get(id=new_id).item_count == 3
    assert out.splitlines()[-1].startswith("stopped watching after ")


@pytest.mark.django_db
def test_sigterm_during_a_plain_ingest_stops_after_the_file_being_read(
    write_log, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = [write_log([header(), user_item(1, "one")], name=f"{n}.jsonl") for n in range(3)]
    ingest_recordings = recording_run.ingest_recordings

    def read_then_terminated(path: Path, **options: object) -> object:
        outcome = ingest_recordings(path, **options)
        signal.raise_signal(signal.SIGTERM)  # arrives while the first file is read
        return outcome

    monkeypatch.setattr(recording_run, "ingest_recordings", read_then_terminated)
    out = StringIO()
    with pytest.raises(CommandError, match="stopped before 2 of 3 files"):
        call_command("ingest", *map(str, logs), stdout=out, stderr=out)

    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"[1/3] {logs[0]}: +1 items")
    assert lines[1].startswith("1 of 3 files ingested, 1 new items")
    assert len(lines) == 2


# --- a torn last line in every JSON Lines format ----------------------------------------------

JSON_LINES = [
    REAL / "a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl",  # Claude Code
    CODEX,
    REAL / "codex" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
    REAL / "gemini" / "gemini_with_tool_error.jsonl",  # Gemini CLI's JSON Lines variant
    REAL / "openhands" / "multi_swe_bench_output.jsonl",  # one run a line
    None,  # our own session log
]


def derived(path: Path, data: bytes) -> object:
    """What ingest would read from *data*: the records (of each run), comparable."""
    kind, document = sniff(path, data)
    if kind == OUR_FORMAT:
        return parse_session_log(data, path).records
    if holds_runs(kind, document):
        return [(number, run.header["id"], run.records) for number, run in load_runs(path, data)]
    return load_sniffed(path, data, kind, document).records


@pytest.mark.parametrize("fixture", JSON_LINES, ids=lambda f: f.name if f else "blobviewer")
def test_every_json_lines_format_leaves_a_torn_last_line_for_later(
    fixture: Path | None, tmp_path: Path
) -> None:
    if fixture is None:
        session_id = uuid.uuid4()
        data = line(header(session_id)) + b"".join(line(user_item(n, "x")) for n in (1, 2, 3))
    else:
        data = fixture.read_bytes()
    path = tmp_path / "recording.jsonl"
    lines = data.splitlines(keepends=True)
    # The last line that adds to what is read (some formats end with bookkeeping events).
    last = next(
        n
        for n in range(len(lines) - 1, 0, -1)
        if derived(path, b"".join(lines[: n + 1])) != derived(path, b"".join(lines[:n]))
    )
    before = b"".join(lines[:last])
    torn = before + lines[last][: len(lines[last]) // 2]

    # Caught mid-write, that line is no error, and nothing of it is read until complete.
    assert derived(path, torn) == derived(path, before)


# --- which recording a change belongs to ----------------------------------------------------


def test_a_changed_file_is_the_recording_unless_hidden_or_in_a_blob_store(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    for name in ("a.jsonl", "b.json", "c.traj", "notes.txt", ".hidden.jsonl"):
        (root / "x" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "x" / name).write_text("{}")
    (root / "blobs").mkdir()
    (root / "blobs" / "0.json").write_text("{}")
    (root / ".cache").mkdir()
    (root / ".cache" / "d.jsonl").write_text("{}")
    roots = [WatchRoot.of(root)]

    changed = [root / "x" / name for name in ("a.jsonl", "b.json", "c.traj", "notes.txt")]
    changed += [root / "x" / ".hidden.jsonl", root / "blobs" / "0.json", root / ".cache/d.jsonl"]
    changed += [root / "x" / "deleted.jsonl"]

    assert recordings_changed([r.absolute() for r in changed], roots) == [
        (root / "x" / "a.jsonl", False),
        (root / "x" / "b.json", False),
        (root / "x" / "c.traj", False),
    ]


def test_a_change_inside_a_conversation_folder_is_that_folder(tmp_path: Path) -> None:
    root = tmp_path / "conversations"
    folder = root / V1_CONVERSATION.name
    shutil.copytree(V1_CONVERSATION, folder)
    event = next((folder / "events").iterdir())

    assert recordings_changed([event], [WatchRoot.of(root)]) == [(folder, False)]
    # Given as the PATH itself, the folder is a named recording.
    assert recordings_changed([event], [WatchRoot.of(folder)]) == [(folder, True)]


def test_a_new_folder_is_searched_as_its_files_may_predate_its_watch(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    day = root / "2026" / "05" / "11"
    day.mkdir(parents=True)
    (day / "rollout-1.jsonl").write_text("{}\n")
    (day / "rollout-2.jsonl").write_text("{}\n")

    assert recordings_changed([root / "2026"], [WatchRoot.of(root)]) == [
        (day / "rollout-1.jsonl", False),
        (day / "rollout-2.jsonl", False),
    ]


def test_a_named_file_is_followed_alone_and_shown_as_it_was_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.jsonl").write_text("{}\n")
    (tmp_path / "other.jsonl").write_text("{}\n")
    roots = [WatchRoot.of(Path("run.jsonl"))]

    changed = [tmp_path / "run.jsonl", tmp_path / "other.jsonl"]
    assert recordings_changed(changed, roots) == [(Path("run.jsonl"), True)]


# --- the loop ---------------------------------------------------------------------------------


def test_a_file_written_during_the_first_pass_is_not_missed(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    stop = threading.Event()
    batches: list[list[tuple[Path, bool]]] = []

    def first_pass() -> None:  # the watcher runs already: this write must be reported
        (root / "late.jsonl").write_text("{}\n")

    def changed(recordings: list[tuple[Path, bool]]) -> None:
        batches.append(recordings)
        stop.set()

    thread = threading.Thread(
        target=follow,
        args=([WatchRoot.of(root)],),
        kwargs={"stop": stop, "on_ready": first_pass, "on_changes": changed},
    )
    thread.start()
    try:
        wait_until(lambda: bool(batches), 15, "a change reported")
    finally:
        stop.set()
        thread.join(timeout=15)
    assert not thread.is_alive()
    assert batches == [[(root / "late.jsonl", False)]]


def test_sigterm_and_ctrl_c_ask_to_stop_instead_of_killing(tmp_path: Path) -> None:
    stop = threading.Event()
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals(stop):
        os.kill(os.getpid(), signal.SIGTERM)
        wait_until(stop.is_set, 5, "the stop event set by SIGTERM")
    assert signal.getsignal(signal.SIGTERM) == before

    stop = threading.Event()
    with stop_on_signals(stop):
        signal.raise_signal(signal.SIGINT)
        assert stop.is_set()
        with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C stops at once
            signal.raise_signal(signal.SIGINT)
