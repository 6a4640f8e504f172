"""The memory `manage.py ingest --watch` needs for one giant record, under the record cap
and over it (docs/benchmarks.md#a-giant-record-while-watching). Not a test: run it by hand
or with `make bench`.

    .venv/bin/python bench/watch_bench.py [--mb 1024]

The record is one line of a Claude Code session, a tool result of --mb megabytes of
terminal output (ASCII, a line break every 50 bytes or so), in a recording of four lines.
Each row runs in a fresh process, on a data folder of its own:

- reading only: open_recording of the file (the reading step: the record parsed a block
  at a time, the importer and its digests), as `manage.py ingest` runs it;
- ingest --watch, under the cap: `--max-record` above the record; the recording is
  written into the watched folder once the process watches (a small one was ingested
  first, so what any ingest loads once is loaded), and the process ingests it whole
  (promotion, blob file, database, search index);
- ingest --watch, over the cap: the default `--max-record` (256 MB); the record is
  skipped with one line, the other three lines are ingested.

Printed for each: the peak RSS above the RSS before the record (VmHWM, reset through
/proc/<pid>/clear_refs), as a multiple of the record's size, and the RSS once the record
was ingested or skipped against the RSS before it. Goals: reading under 2x the record;
over the cap, a peak that does not grow with the record (under 64 MB); RSS after within
64 MB of before.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MB = 1 << 20
DEFAULT_CAP = 256 * MB
GOAL_READING = 2.0
GOAL_AFTER = 64 * MB
SESSION = "a7da6a22-facc-4fcd-8bab-f83c87862004"
LEAKY = ("DATABASE_URL", "DJANGO_", "BLOBVIEWER_", "DEBUG", "SECRET_KEY", "WATCHFILES_")

READ_ONE = """
import gc, json, sys
from pathlib import Path
import django
django.setup()
from blobviewer.ingest.importers.long_lines import map_large_blocks
from blobviewer.ingest.recording_files import open_recording

def status(key):
    with open("/proc/self/status") as lines:
        return next(int(line.split()[1]) * 1024 for line in lines if line.startswith(key))

map_large_blocks()
gc.collect()
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")
before = status("VmRSS")
opened = open_recording(Path(sys.argv[1]), max_record=int(sys.argv[2]))
peak = status("VmHWM") - before
del opened
gc.collect()
print(json.dumps({"peak": peak, "after": status("VmRSS") - before}))
"""


def claude_line(kind: str, content: object) -> bytes:
    entry = {
        "type": kind,
        "sessionId": SESSION,
        "timestamp": "2025-11-29T15:16:58.435Z",
        "message": {"role": kind, "content": content},
    }
    return json.dumps(entry).encode() + b"\n"


def write_recording(path: Path, size: int) -> int:
    """A four-line Claude Code session whose third line, a tool result, is about *size*
    bytes; the size of that line."""
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat log"}}
    result = claude_line("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "@"}])
    before, after = result.split(b'"@"')
    rows = b"".join(b"row %07d: make[2]: Leaving directory 'src/x'\\n" % n for n in range(20_000))
    with path.open("wb") as file:
        file.write(claude_line("user", "show me the log"))
        file.write(claude_line("assistant", [call]))
        start = file.tell()
        file.write(before + b'"')
        while file.tell() - start < size:
            file.write(rows)
        file.write(b'"' + after)
        length = file.tell() - start - 1
        file.write(claude_line("assistant", [{"type": "text", "text": "done"}]))
    return length


def command_env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(LEAKY)}
    env["BLOBVIEWER_DATA"] = str(data)
    env["DJANGO_SETTINGS_MODULE"] = "blobviewer.settings"
    return env


def status(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as lines:
        return next(int(line.split()[1]) * 1024 for line in lines if line.startswith(key))


def reading(record: Path, cap: int, data: Path) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-c", READ_ONE, str(record), str(cap)],
        cwd=ROOT,
        env=command_env(data),
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(done.stdout)
    return measured["peak"], measured["after"]


def watching(record: Path, cap: int | None, work: Path) -> tuple[int, int, str]:
    """`ingest --watch` of a folder into which *record* is copied once it watches: the
    peak above the RSS before, the RSS after against before, and the stderr."""
    folder, logs = work / "watched", work / "logs"
    folder.mkdir()
    logs.mkdir()
    warm_up = {"type": "session", "id": str(uuid.uuid4()), "title": "warm-up", "meta": {}}
    (folder / "first.jsonl").write_bytes(json.dumps(warm_up).encode() + b"\n")
    options = [] if cap is None else ["--max-record", str(cap // MB)]
    out, err = logs / "out.txt", logs / "err.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "ingest", "--watch", *options, str(folder)],
            cwd=ROOT,
            env=command_env(work / "data"),
            stdout=stdout,
            stderr=stderr,
        )
    try:
        wait(lambda: "watching " in out.read_text(), process, 300)
        before = status(process.pid, "VmRSS")
        with open(f"/proc/{process.pid}/clear_refs", "w") as refs:
            refs.write("5")
        # Renamed in whole, as an agent that rewrites a file does: one change, one ingest.
        shutil.copyfile(record, work / "session.jsonl")
        os.replace(work / "session.jsonl", folder / "session.jsonl")
        wait(lambda: "session.jsonl: +" in out.read_text(), process, 3600)
        settle(out)
        peak = status(process.pid, "VmHWM") - before
        after = status(process.pid, "VmRSS") - before
        process.terminate()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    return peak, after, err.read_text()


def settle(out: Path, quiet: float = 5.0) -> None:
    """Until the output has not grown for *quiet* seconds: the ingest is over."""
    size, since = out.stat().st_size, time.monotonic()
    while time.monotonic() - since < quiet:
        time.sleep(0.5)
        if out.stat().st_size != size:
            size, since = out.stat().st_size, time.monotonic()


def wait(condition: object, process: subprocess.Popen[bytes], bound: float) -> None:
    deadline = time.monotonic() + bound
    while not condition():  # type: ignore[operator]
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"ingest --watch exited or hung (exit {process.poll()})")
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="the record's size in MB")
    args = parser.parse_args()
    missed = False
    with tempfile.TemporaryDirectory(prefix="watch-bench-") as scratch:
        work = Path(scratch)
        record = work / "giant.jsonl"
        size = write_recording(record, args.mb * MB)
        above = max(2 * size, DEFAULT_CAP)
        print(f"a record of {size / MB:,.0f} MB (one line of {record.stat().st_size / MB:,.0f})")
        print(f"{'case':<44} {'peak / record':>14} {'RSS after - before':>20}  goal")
        rows = []
        peak, after = reading(record, above, work / "reading")
        rows.append(("reading only, under the cap", peak, after, peak < GOAL_READING * size))
        (work / "under").mkdir()
        peak, after, _ = watching(record, above, work / "under")
        name = f"ingest --watch, under the cap ({above // MB} MB)"
        rows.append((name, peak, after, after < GOAL_AFTER))
        (work / "over").mkdir()
        below = None if size > DEFAULT_CAP else size // 4  # the default cap, when it is below
        peak, after, err = watching(record, below, work / "over")
        skipped = "over --max-record" in err
        name = f"ingest --watch, over the cap ({(below or DEFAULT_CAP) // MB} MB)"
        rows.append((name, peak, after, skipped and peak < GOAL_AFTER and after < GOAL_AFTER))
        for name, peak, after, ok in rows:
            missed = missed or not ok
            verdict = "ok" if ok else "MISSES GOAL"
            print(f"{name:<44} {peak / size:>13.2f}x {after / MB:>17.0f} MB  {verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
