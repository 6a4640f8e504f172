"""blobviewer beside agentsview, the leanest local viewer of agent recordings, on the same
files in the same run (docs/benchmarks.md#beside-agentsview). Not a test: run it by hand
or with `make bench`.

    python bench/peer_bench.py [--mb 40] [--rounds 3] [--words import,function,...]

The Claude Code and Codex recordings in `tests/fixtures/real` are copied, each copy its
own session (its UUIDs rewritten, as bench/ingest_bench.py does, and a Codex copy's file
name carrying a UUID of its own, since agentsview names a Codex session by it), until
there are --mb megabytes, laid out as `~/.claude/projects` and `~/.codex/sessions` under a
temporary HOME. agentsview 0.46.1 is installed from PyPI into a virtual environment of its
own under the temporary folder (the bench says so, and leaves its column out, when it
cannot be installed). Then, in --rounds interleaved rounds, each tool starts from an empty
data folder:

- ingest: `manage.py ingest --agents` (search indexing included) against
  `agentsview sync`, wall time and CPU time (the child processes'), and input MB/s;
- the data folder's size over the input's;
- the same files again, unchanged;
- the same files again after one recording grew by a few records.

Then the site's search page is timed through Django's test client on blobviewer's data
(p50 of --repeat requests for each of --words), against the login page's p50 in the same
process. Each row prints the ratio measured in this run and the goal beside it, with the
load average; best of the rounds. Everything is removed at the end.
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
FIXTURES = ROOT / "tests" / "fixtures" / "real"
AGENTSVIEW = "agentsview==0.46.1"
NAMESPACE = uuid.UUID("5d1c3f3e-8e0b-4b43-9a54-0a3c4c1e2b7f")
DEFAULT_WORDS = ("import", "function", "error", "def ")
GROWN_RECORDS = 5

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "blobviewer.settings")


def lay_out(home: Path, megabytes: float) -> tuple[int, int, Path]:
    """Copies of the real Claude Code and Codex recordings under *home*, until there are
    *megabytes* MB; returns (files, bytes, one Claude Code copy to grow later)."""
    import django

    django.setup()
    from ingest_bench import readable_recordings, replica_bytes

    recordings = [r for r in readable_recordings(FIXTURES) if r.kind in ("claude_code", "codex")]
    if not recordings:
        raise SystemExit(f"no Claude Code or Codex recordings in {FIXTURES}")
    claude = home / ".claude" / "projects" / "-src-bench"
    codex = home / ".codex" / "sessions" / "2026" / "05" / "11"
    claude.mkdir(parents=True)
    codex.mkdir(parents=True)
    files = total = replica = 0
    grow: Path | None = None
    while total < megabytes * 1_000_000:
        for recording in recordings:
            data = replica_bytes(recording, replica)
            name = uuid.uuid5(NAMESPACE, f"{replica}:{recording.path.name}")
            if recording.kind == "claude_code":
                path = claude / f"{_claude_session_id(data) or name}.jsonl"
                grow = grow or path
            else:
                path = codex / f"rollout-2026-05-11T11-26-55-{name}.jsonl"
            path.write_bytes(data)
            files += 1
            total += len(data)
        replica += 1
    assert grow is not None
    return files, total, grow


def _claude_session_id(data: bytes) -> str | None:
    import json

    for line in data.splitlines()[:50]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("sessionId"), str):
            return record["sessionId"]
    return None


def install_agentsview(folder: Path) -> Path | None:
    """agentsview's executable, installed into a venv under *folder*; None (said) when
    it cannot be installed."""
    venv = folder / "agentsview-venv"
    print(f"installing {AGENTSVIEW} from PyPI into {venv} ...", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--quiet", AGENTSVIEW],
            check=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as error:
        print(f"agentsview could not be installed ({error}); its column is left out")
        return None
    found = list((venv / "lib").glob("python*/site-packages/agentsview/bin/agentsview"))
    if not found:
        print("agentsview's executable was not found in its package; its column is left out")
        return None
    return found[0]


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall and CPU seconds of *command*, and its peak memory in bytes."""
    with tempfile.TemporaryFile() as output:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            output.seek(0)
            said = output.read()[-3000:].decode(errors="replace")
            raise SystemExit(f"{command[0]} failed ({process.returncode}):\n{said}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


class Tool:
    """One viewer: how it ingests the recordings under a HOME, and where its data goes."""

    def __init__(self, name: str, home: Path, data: Path, command: list[str]) -> None:
        self.name, self.home, self.data, self.command = name, home, data, command

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BLOBVIEWER_", "DJANGO"))}
        env.update(
            HOME=str(self.home),
            BLOBVIEWER_DATA=str(self.data),
            AGENTSVIEW_NO_DAEMON="1",
            DATABASE_URL="",
        )
        return env

    def reset(self) -> None:
        shutil.rmtree(self.data, ignore_errors=True)
        shutil.rmtree(self.home / ".agentsview", ignore_errors=True)

    def ingest(self) -> tuple[float, float, int]:
        return timed(self.command, self.env())

    def size(self) -> int:
        return folder_bytes(self.data if self.name == "blobviewer" else self.home / ".agentsview")


def grow(path: Path) -> bytes:
    """Append GROWN_RECORDS new records, as the agent goes on: copies of the recording's
    last record, each with a `uuid` of its own (as Claude Code gives every line); returns
    what the file was."""
    data = path.read_bytes()
    last = json.loads(data.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    grown = [json.dumps({**last, "uuid": str(uuid.uuid4())}) for _ in range(GROWN_RECORDS)]
    with path.open("ab") as file:  # the same file, appended to
        file.write("".join(line + "\n" for line in grown).encode())
    return data


def start_up(tool: Tool, empty: Path) -> float:
    """Wall seconds of blobviewer's ingest of an empty folder into the data it has made:
    Python, Django and the database check, paid once per run whatever the files."""
    empty.mkdir(exist_ok=True)
    command = [*tool.command[:-1], str(empty)]  # `ingest <empty>` instead of `--agents`
    return timed(command, tool.env())[0]


def round_of(tools: list[Tool], grown: Path) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    for tool in tools:
        tool.reset()
        wall, cpu, peak = tool.ingest()
        start = start_up(tool, tool.data.parent / "empty") if tool.name == "blobviewer" else 0.0
        size = tool.size()
        again = tool.ingest()[0]
        before = grow(grown)
        try:
            after_growth = tool.ingest()[0]
        finally:
            grown.write_bytes(before)
        figures[tool.name] = {
            "wall": wall,
            "cpu": cpu,
            "size": size,
            "again": again,
            "grown": after_growth,
            "start": start,
            "peak": peak,
        }
    return figures


def search_timings(data: Path, words: list[str], repeat: int) -> dict[str, float]:
    """p50 seconds of the search page for each word and of the login page, in a child."""
    script = f"""
import os, statistics, sys, time
sys.path.insert(0, {str(ROOT)!r})
os.environ["BLOBVIEWER_DATA"] = {str(data)!r}
os.environ["DJANGO_SETTINGS_MODULE"] = "blobviewer.settings"
os.environ["ALLOWED_HOSTS"] = "testserver"
import django
django.setup()
from django.contrib.auth.models import User
from django.test import Client
# Not setup_test_environment(): it has every template's rendering recorded (the client
# copies the context each time), which no server does; the login page's form, a template
# for each widget, paid it most.
client = Client()
user, _ = User.objects.get_or_create(username="bench")
client.force_login(user)
def p50(url, data=None):
    times = []
    for _ in range({repeat}):
        started = time.perf_counter()
        response = client.get(url, data)
        times.append(time.perf_counter() - started)
        assert response.status_code == 200, response.status_code
    return statistics.median(times)
client.logout()
print("login", p50("/accounts/login/"))
client.force_login(user)
for word in {words!r}:
    print("q:" + word, p50("/", {{"q": word}}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BLOBVIEWER_", "DJANGO"))}
    env["DATABASE_URL"] = ""
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the search timing failed:\n{done.stderr[-3000:]}")
    timings = {}
    for line in done.stdout.splitlines():
        name, _, value = line.rpartition(" ")
        timings[name] = float(value)
    return timings


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSES GOAL"


def compile_bytecode() -> None:
    """Our modules compiled to bytecode, as any run after a user's first finds them: where
    PYTHONDONTWRITEBYTECODE is set (as on CI machines), every run would compile them all
    again (about 1 CPU-s of the ingest on a 2-core machine), which no user pays."""
    for package in ("blobviewer", "core"):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / package)], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=40.0, help="input size (default 40 MB)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--words", default=",".join(DEFAULT_WORDS))
    parser.add_argument("--repeat", type=int, default=7, help="requests per search word")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="peer-bench-") as scratch:
        folder = Path(scratch)
        home = folder / "home"
        files, total, grown = lay_out(home, args.mb)
        print(f"{files} recordings, {total / 1e6:.1f} MB, under {home}")
        bv = Tool(
            "blobviewer",
            home,
            folder / "bv-data",
            [sys.executable, str(ROOT / "manage.py"), "ingest", "--agents"],
        )
        tools = [bv]
        compile_bytecode()
        executable = install_agentsview(folder)
        if executable is not None:
            tools.append(Tool("agentsview", home, folder / "unused", [str(executable), "sync"]))
        rounds = []
        for number in range(1, args.rounds + 1):
            figures = round_of(tools if number % 2 else tools[::-1], grown)
            rounds.append(figures)
            shown = ", ".join(
                f"{name} {f['wall']:.1f}s wall {f['cpu']:.1f}s CPU" for name, f in figures.items()
            )
            print(f"round {number}: {shown} (load {os.getloadavg()[0]:.2f})", flush=True)
        best = {
            tool.name: {
                key: min(r[tool.name][key] for r in rounds)
                for key in ("wall", "cpu", "size", "again", "grown", "start", "peak")
            }
            for tool in tools
        }
        failures = report(best, total, files)
        bv.reset()
        bv.ingest()  # the search corpus: blobviewer's data as an ingest leaves it
        timings = search_timings(bv.data, args.words.split(","), args.repeat)
        login = timings.pop("login")
        for name, seconds in timings.items():
            ok = seconds <= 0.1 and seconds <= 10 * login
            failures += not ok
            print(
                f"search {name[2:]!r}: p50 {seconds * 1000:.1f} ms, {seconds / login:.1f}x the "
                f"login page ({login * 1000:.1f} ms); goal <= 100 ms and <= 10x: {verdict(ok)}"
            )
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 1 if failures else 0


def report(best: dict[str, dict[str, float]], total: int, files: int) -> int:
    """Print each row of the table; the number of goals missed."""
    mine = best["blobviewer"]
    peer = best.get("agentsview")
    failures = 0
    megabytes = total / 1e6
    line = f"ingest, search included: {megabytes / mine['wall']:.1f} MB/s, {mine['cpu']:.1f} CPU-s"
    if peer:
        speed = peer["wall"] / mine["wall"]
        ok = speed >= 1.0 and mine["cpu"] <= peer["cpu"]
        failures += not ok
        line += (
            f"; agentsview {megabytes / peer['wall']:.1f} MB/s, {peer['cpu']:.1f} CPU-s: "
            f"{speed:.2f}x its speed; goal >= 1.0x and CPU <= its: {verdict(ok)}"
        )
    print(line)
    ratio = mine["size"] / total
    failures += ratio > 1.0
    peer_size = f" (agentsview {peer['size'] / total:.2f}x)" if peer else ""
    print(f"data folder / input: {ratio:.2f}x{peer_size}; goal <= 1.0x: {verdict(ratio <= 1.0)}")
    per_thousand = max(0.0, mine["again"] - mine["start"]) / files * 1000
    line = (
        f"unchanged files again: {mine['again']:.2f}s ({per_thousand:.2f}s per 1,000 files "
        f"beyond the {mine['start']:.2f}s start-up)"
    )
    ok = per_thousand <= 2.0
    if peer:
        times = mine["again"] / peer["again"]
        ok = ok and times <= 2.0
        line += f", {times:.1f}x agentsview's {peer['again']:.2f}s"
    failures += not ok
    print(f"{line}; goal <= 2x and <= 2 s per 1,000: {verdict(ok)}")
    peak_mb = mine["peak"] / 1e6
    failures += peak_mb > 200
    line = f"ingest peak memory: {peak_mb:.0f} MB"
    if peer:
        line += f" (agentsview {peer['peak'] / 1e6:.0f} MB)"
    print(f"{line}; goal <= 200 MB: {verdict(peak_mb <= 200)}")
    beyond = max(0.0, mine["grown"] - mine["start"])
    line = (
        f"one recording grown by {GROWN_RECORDS} records, again: {mine['grown']:.2f}s "
        f"({beyond:.2f}s beyond the {mine['start']:.2f}s start-up)"
    )
    if peer:
        line += f" ({mine['grown'] / peer['grown']:.1f}x agentsview's {peer['grown']:.2f}s)"
    print(line)
    return failures


if __name__ == "__main__":
    sys.exit(main())
