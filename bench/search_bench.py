"""The search page on a corpus of thousands of sessions, SQLite and PostgreSQL, against the
login page in the same process (docs/benchmarks.md#search-at-scale). Not a test: run it by
hand or with `make bench`.

    python bench/search_bench.py [--sessions 2000] [--kb 100] [--big] [--databases ...]

Each database gets a fresh corpus: --sessions sessions (`--big`: 20,000) of about --kb KB
of tool output each (a user message, tool calls, five outputs of which the biggest is
promoted to a blob), text that reads like a coding agent's: Python and JavaScript source,
test runs, build logs. The words searched for are spread as they are in real recordings:
`import` in most sessions, `def ` and `function` in many, `error` in a third,
`kafka_rebalance` in every output of one session in twenty, `disk_pressure` in one in a
hundred, `unobtainium_flux` once, deep in one output. Each word
is searched for through Django's test client (the whole request), p50 of --repeat
requests after one warm-up, and printed with its ratio to the login page's p50. Goals
(docs/pages.md#search): every word <= 100 ms and <= 10x the login page, at 2,000 sessions and
at 20,000.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

WORDS = (
    "import",
    "def ",
    "function",
    "error",
    "kafka_rebalance",
    "disk_pressure",
    "unobtainium_flux",
    "zq",
)
RARE = "unobtainium_flux"
GOAL_MS, GOAL_RATIO = 100.0, 10.0

_PYTHON = [
    "import os",
    "import json",
    "from pathlib import Path",
    "def load(path):",
    "    with open(path) as handle:",
    "        return json.load(handle)",
    "def main(argv=None):",
    "    parser = argparse.ArgumentParser()",
    "    return 0",
    "class Config:",
    "    retries: int = 3",
]
_JAVASCRIPT = [
    "export function render(items) {",
    "  return items.map((item) => `<li>${item.name}</li>`).join('');",
    "}",
    "const cache = new Map();",
    "function debounce(fn, ms) {",
    "  let timer;",
    "};",
]
_TESTS = [
    "tests/test_api.py::test_login PASSED",
    "tests/test_api.py::test_upload PASSED",
    "tests/test_models.py::test_save FAILED",
    "E   AssertionError: expected 200, got 500",
    "=========== 41 passed, 1 failed in 3.12s ===========",
]
_BUILD = [
    "[INFO] compiling module {n}",
    "[INFO] linking target {n}",
    "gcc -O2 -c src/module_{n}.c -o build/module_{n}.o",
    "npm WARN deprecated package-{n}@1.0.{n}",
]


def _output(rng: random.Random, size: int, kinds: list[list[str]]) -> str:
    lines, total = [], 0
    while total < size:
        line = rng.choice(rng.choice(kinds)).replace("{n}", str(rng.randrange(10_000)))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def session_records(n: int, kb: int) -> list[dict[str, object]]:
    """The records of session *n*: about *kb* KB of outputs, the words spread as the
    module says (seeded by *n*, so every run builds the same corpus)."""
    rng = random.Random(n)
    kinds = [_BUILD]
    if rng.random() < 0.7:
        kinds.append(_PYTHON)
    if rng.random() < 0.4:
        kinds.append(_JAVASCRIPT)
    if rng.random() < 0.33:
        kinds.append(_TESTS)
    sizes = [kb * 1024 * 6 // 10] + [kb * 1024 // 10] * 4
    records: list[dict[str, object]] = [
        {"type": "user", "seq": 1, "text": f"task {n}: make the build pass"}
    ]
    for step, size in enumerate(sizes):
        text = _output(rng, size, kinds)
        if step == 0 and n % 100 == 7:
            text += f"WARN disk_pressure on /dev/sda{n % 4}\n"
        if n % 20 == 3:  # a project's own name, in every output of its sessions
            text += f"INFO kafka_rebalance of group-{n} done\n"
        if step == 0 and n == 1_001:
            middle = len(text) // 2
            text = text[:middle] + f"\nERROR reactor: {RARE} depleted\n" + text[middle:]
        call = f"c{step}"
        records.append(
            {
                "type": "assistant",
                "seq": len(records) + 1,
                "text": "",
                "tool_calls": [{"id": call, "name": "bash", "arguments": {"command": "make"}}],
            }
        )
        records.append(
            {
                "type": "tool_result",
                "seq": len(records) + 1,
                "call_id": call,
                "tool": "bash",
                "output": text,
            }
        )
    return records


def build(sessions: int, kb: int) -> float:
    """Ingest the corpus into the configured database; returns the seconds it took."""
    from blobviewer.data_dir import blob_store
    from blobviewer.ingest.database_ready import refresh_statistics
    from blobviewer.ingest.sessions import ingest_session

    store = blob_store()
    started = time.perf_counter()
    for n in range(sessions):
        header = {
            "id": str(uuid.UUID(int=n + 1)),
            "title": f"build {n}",
            "created_at": f"2026-{n % 12 + 1:02d}-{n % 28 + 1:02d}T12:00:00Z",
        }
        ingest_session(header, session_records(n, kb), source_path=f"search-bench-{n}", store=store)
        if n and n % 1000 == 0:
            print(f"  {n:,} sessions ({time.perf_counter() - started:.0f}s)", flush=True)
    refresh_statistics()  # as `manage.py ingest` leaves PostgreSQL after writing
    return time.perf_counter() - started


def measure(repeat: int) -> list[tuple[str, float, int]]:
    """(url, p50 ms, bytes) of the login page and each word's search."""
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.create_user("search-bench"))

    def p50(url: str) -> tuple[float, int]:
        response = client.get(url)  # warm-up
        assert response.status_code == 200, (url, response.status_code)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            client.get(url)
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1000, len(response.content)

    rows = [("/accounts/login/", *p50("/accounts/login/"))]
    for word in WORDS:
        url = f"/?q={word}"
        rows.append((url, *p50(url)))
    return rows


def child(args: argparse.Namespace) -> int:
    os.environ["ALLOWED_HOSTS"] = "testserver"
    os.environ["DJANGO_SETTINGS_MODULE"] = "blobviewer.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    # Not setup_test_environment(): it has every template's rendering recorded (the client
    # copies the context each time), which no server does; the login page's form, a
    # template for each widget, paid it most.
    call_command("migrate", verbosity=0)
    seconds = build(args.sessions, args.kb)
    print(f"  corpus built in {seconds:.0f}s ({connection.vendor})", flush=True)
    rows = measure(args.repeat)
    login = rows[0][1]
    print(f"  {'page':34} {'p50':>9} {'x login':>8} {'HTML':>8}")
    failed = 0
    for url, ms, size in rows:
        ratio = ms / login
        ok = url == rows[0][0] or (ms <= GOAL_MS and ratio <= GOAL_RATIO)
        failed += not ok
        mark = "" if ok else "  MISSES GOAL"
        print(f"  {url:34} {ms:7.1f}ms {ratio:7.1f}x {size / 1024:6.0f}KB{mark}", flush=True)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=2_000)
    parser.add_argument("--kb", type=int, default=100)
    parser.add_argument("--big", action="store_true", help="20,000 sessions")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.big:
        args.sessions = 20_000
    if args.child:
        return child(args)
    from ingest_bench import postgres_database, postgres_server

    print(
        f"{args.sessions:,} sessions of about {args.kb} KB of outputs; load "
        f"{os.getloadavg()[0]:.1f}"
    )
    failed = 0
    command = [
        sys.executable,
        __file__,
        "--child",
        "--sessions",
        str(args.sessions),
        "--kb",
        str(args.kb),
        "--repeat",
        str(args.repeat),
    ]
    for database in args.databases.split(","):
        data = Path(tempfile.mkdtemp(prefix="search-bench-"))
        env = {**os.environ, "BLOBVIEWER_DATA": str(data)}
        env.pop("DATABASE_URL", None)
        try:
            print(database)
            if database == "sqlite":
                failed |= subprocess.run(command, env=env).returncode
                continue
            server = postgres_server()
            if server is None:
                print("  no server (set DATABASE_URL, or run one on 127.0.0.1:5432)")
                continue
            with postgres_database(server, f"search_bench_{os.getpid()}") as url:
                env["DATABASE_URL"] = url
                failed |= subprocess.run(command, env=env).returncode
        finally:
            shutil.rmtree(data, ignore_errors=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
