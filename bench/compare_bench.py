"""Comparing two runs: the alignment of their steps and the diff of two big outputs,
each against a baseline measured in the same run.

    python bench/compare_bench.py [--runs 3] [--mb 100]

Alignment (blobviewer.compare): both runs' step keys made (`step_key`, from tool
arguments with paths under each run's working folder) and aligned (`align`), at 200,
2,000 and 20,000 steps a side, for runs that are mostly the same (one step in 50 inserted,
deleted or changed) and for runs that share almost nothing. The baseline is
difflib.SequenceMatcher's opcodes over the same keys (no minimal script, and quadratic on
some inputs: a reference point, not a goal). Goal: under 1 s at 20,000 steps
a side, whatever the runs.

Output diff: two text blobs of --mb MB in a real folder store that differ 50 lines
before their end, page 0 of `output_diff` against one plain read of both files. Goal:
at most 2x the read (the diff reads both once, a block at a time, compares the
blocks, then reads a window; 1.3-1.7x measured on a busy 2-core machine).

The compare page (page_rows): its first page for two runs of 200, 2,000 and 20,000 steps
a side, through Django's test client, against the session page of one of them in the
same run. Goal: at most 2x at 2,000 steps; reading, keying and aligning both runs' steps
(`aligned_runs`) under 1 s at 20,000 steps a side; and at every size, the rest of the page
(the same request with that work done beforehand) at most 2x the session page: it does
not grow with the runs.

Rows are made by the functions in ROWS; each returns Row tuples.

Best of --runs runs. Exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from difflib import SequenceMatcher
from pathlib import Path
from typing import NamedTuple
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from blobviewer.compare.alignment import align  # noqa: E402
from blobviewer.compare.line_sources import StoredOutput  # noqa: E402
from blobviewer.compare.output_diff import output_diff  # noqa: E402
from blobviewer.compare.step_keys import step_key  # noqa: E402
from core.store import FsBlobStore  # noqa: E402
from core.store.index import open_index  # noqa: E402

ALIGN_GOAL_SECONDS = 1.0
DIFF_GOAL_RATIO = 2.0
SIZES = (200, 2_000, 20_000)
TOOLS = ("bash", "read_file", "write_file", "grep", "inspect")


class Row(NamedTuple):
    """One line of the report: what was timed, its best time, the baseline's, and the
    goal (at most *goal_seconds*, or at most *goal_ratio* times the baseline)."""

    label: str
    seconds: float
    baseline: float
    goal_seconds: float | None = None
    goal_ratio: float | None = None

    def ok(self) -> bool:
        if self.goal_seconds is not None and self.seconds >= self.goal_seconds:
            return False
        return self.goal_ratio is None or self.seconds <= self.goal_ratio * self.baseline


def best(run: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


# -- alignment ---------------------------------------------------------------------------------


def _steps(count: int, seed: int, workdir: str) -> list[tuple[str, dict[str, object]]]:
    """*count* steps as an agent makes them: a tool and its arguments, with paths."""
    rng = random.Random(seed)
    steps: list[tuple[str, dict[str, object]]] = []
    for n in range(count):
        tool = TOOLS[n % len(TOOLS)]
        path = f"{workdir}/src/module_{rng.randrange(count)}.py"
        command = f"  pytest  -q  tests/test_{n % 97}.py "  # spaced as models space them
        steps.append((tool, {"path": path, "command": command, "n": n}))
    return steps


def _edited(
    steps: list[tuple[str, dict[str, object]]], seed: int
) -> list[tuple[str, dict[str, object]]]:
    """The same run with one step in 50 inserted, deleted or changed."""
    rng = random.Random(seed)
    edited = list(steps)
    for _ in range(len(steps) // 50):
        at = rng.randrange(len(edited))
        choice = rng.randrange(3)
        if choice == 0:
            edited.insert(at, ("bash", {"command": f"echo {rng.random()}"}))
        elif choice == 1:
            del edited[at]
        else:
            edited[at] = ("grep", {"pattern": str(rng.random())})
    return edited


def _keys(steps: list[tuple[str, dict[str, object]]], workdir: str) -> list[str]:
    return [step_key(tool, arguments, workdir) for tool, arguments in steps]


def alignment_rows(runs: int) -> Iterator[Row]:
    for count in SIZES:
        run_a = _steps(count, 1, "/tmp/run-a")
        cases = {
            "mostly equal": (_edited(_steps(count, 1, "/tmp/run-b"), 2), "/tmp/run-b"),
            "almost nothing shared": (_steps(count, 3, "/tmp/run-b"), "/tmp/run-b"),
        }
        for name, (run_b, workdir_b) in cases.items():
            keys_a, keys_b = _keys(run_a, "/tmp/run-a"), _keys(run_b, workdir_b)
            seconds = best(
                lambda a=run_a, b=run_b, w=workdir_b: align(_keys(a, "/tmp/run-a"), _keys(b, w)),
                runs,
            )
            baseline = best(
                lambda a=keys_a, b=keys_b: SequenceMatcher(
                    None, a, b, autojunk=False
                ).get_opcodes(),
                runs,
            )
            yield Row(f"align {count:,} steps, {name}", seconds, baseline, ALIGN_GOAL_SECONDS)


# -- output diff -------------------------------------------------------------------------------


def _text_chunks(mb: int, changed: int | None) -> Iterator[bytes]:
    """*mb* MB of 80-byte log lines, a 800 KB block at a time; line *changed* differs."""
    per_block = 10_000
    block = "".join(
        f"{n:08d} INFO worker-{n % 7} processed an item status=ok".ljust(79) + "\n"
        for n in range(per_block)
    ).encode()
    for number in range(mb * 2**20 // len(block)):
        first = number * per_block
        if changed is not None and first <= changed < first + per_block:
            at = (changed - first) * 80
            yield block[:at] + b"X" * 79 + block[at + 79 :]
        else:
            yield block


def diff_rows(runs: int, mb: int) -> Iterator[Row]:
    folder = Path(tempfile.mkdtemp(prefix="compare-bench-"))
    try:
        store = FsBlobStore(folder / "blobs")
        lines = mb * 2**20 // (80 * 10_000) * 10_000
        ids = []
        for changed in (None, lines - 50):
            blob_id = uuid.uuid4()
            store.put_stream_sync(blob_id, "text", _text_chunks(mb, changed))
            index = open_index(store, blob_id)  # as the store makes a big blob's index
            assert index is not None
            index.close()
            ids.append(blob_id)
        paths = [folder / "blobs" / f"{blob_id}.txt" for blob_id in ids]
        a, b = (StoredOutput(store, blob_id) for blob_id in ids)
        seconds = best(lambda: output_diff(a, b), runs)
        baseline = best(lambda: [_read(path) for path in paths], runs)
        yield Row(
            f"output_diff, 2 x {mb} MB, differing at the end",
            seconds,
            baseline,
            None,
            DIFF_GOAL_RATIO,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _read(path: Path) -> int:
    """One plain read of a file, a MB at a time (what any diff must at least do)."""
    size = 0
    with open(path, "rb", buffering=0) as file:
        while chunk := file.read(2**20):
            size += len(chunk)
    return size


# Each function makes rows of the report; add the compare page's here.
PAGE_SIZES = (200, 2_000, 20_000)
PAGE_GOAL_RATIO = 2.0  # the compare page of two runs, against the session page of one


def page_rows(runs: int) -> Iterator[Row]:
    """The compare page's first page of two runs (B: A with one step in 50 left out, and
    one in 50 given another output) against the session page of A, through Django's test
    client on a throwaway SQLite database, at each of PAGE_SIZES steps a side. At 2,000
    steps the goal is at most PAGE_GOAL_RATIO times the session page; reading, keying and
    aligning both runs' steps (which grows with their length) must take under a second at
    the largest size; at every size, the rest of the page must stay within
    PAGE_GOAL_RATIO of the session page."""
    data = Path(tempfile.mkdtemp(prefix="compare-bench-"))
    try:
        client, record = _site(data)
        from blobviewer.compare import pages
        from blobviewer.models import Session

        for steps in PAGE_SIZES:
            a, b = record(steps)
            url = f"/compare/{a}/{b}/"
            compare = best(_fetch(client, url), runs)
            session = best(_fetch(client, f"/sessions/{a}/"), runs)
            runs_ab = (Session.objects.get(id=a), Session.objects.get(id=b))
            alignment = best(lambda runs_ab=runs_ab: pages.aligned_runs(*runs_ab), runs)
            # The rest of the page, timed on its own: the same request with the runs'
            # steps already read, keyed and aligned (a difference of two best times
            # would carry both their noise).
            done = pages.aligned_runs(*runs_ab)
            with mock.patch.object(pages, "aligned_runs", lambda a, b, done=done: done):
                rest = best(_fetch(client, url), runs)
            if steps == 2_000:
                label = f"compare page, {steps:,} steps a side"
                yield Row(label, compare, session, goal_ratio=PAGE_GOAL_RATIO)
            if steps == PAGE_SIZES[-1]:
                label = f"read, key and align both runs, {steps:,} steps"
                yield Row(label, alignment, session, goal_seconds=ALIGN_GOAL_SECONDS)
            label = f"compare page less its alignment, {steps:,} steps"
            yield Row(label, rest, session, goal_ratio=PAGE_GOAL_RATIO)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _site(data: Path) -> tuple[object, Callable[[int], tuple[str, str]]]:
    """Django set up on a fresh data folder: a logged-in test client, and a function
    recording two runs of *steps* steps (our own session logs, ingested)."""
    os.environ.update(
        BLOBVIEWER_DATA=str(data), DJANGO_SETTINGS_MODULE="blobviewer.settings", DEBUG="true"
    )
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment

    from blobviewer.data_dir import blob_store, sessions_dir
    from blobviewer.ingest.sessions import ingest_file
    from core.agent.history import AssistantMessage, ToolCall, ToolResult, UserMessage
    from core.agent.session_log import SessionLogWriter

    setup_test_environment()
    call_command("migrate", verbosity=0)
    client = Client()
    client.force_login(get_user_model().objects.create_user("bench", password="bench-pw-1"))

    def record(steps: int) -> tuple[str, str]:
        ids = []
        for run in ("a", "b"):
            with SessionLogWriter(sessions_dir(), title=f"{run} {steps}") as log:
                log.append(UserMessage("go"))
                for n, (tool, arguments) in enumerate(_steps(steps, seed=steps, workdir="/w")):
                    if run == "b" and n % 50 == 7:
                        continue  # a step only A made
                    call = ToolCall(f"c{n}", tool, arguments)
                    log.append(AssistantMessage("", (call,)))
                    output = f"ok {n}" if run == "a" or n % 50 != 21 else f"other {n}"
                    log.append(ToolResult(f"c{n}", tool, output, is_error=n % 97 == 0))
            ingest_file(log.path, store=blob_store())
            ids.append(log.session_id)
        return ids[0], ids[1]

    return client, record


def _fetch(client: object, url: str) -> Callable[[], object]:
    def get() -> object:
        response = client.get(url)  # type: ignore[attr-defined]
        assert response.status_code == 200, (url, response.status_code)
        return response.content

    return get


ROWS: list[Callable[[argparse.Namespace], Iterator[Row]]] = [
    lambda args: alignment_rows(args.runs),
    lambda args: diff_rows(args.runs, args.mb),
    lambda args: page_rows(args.runs),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each; the best counts")
    parser.add_argument("--mb", type=int, default=100, help="size of each output diffed (MB)")
    args = parser.parse_args()
    print(f"compare benchmarks: python {sys.version.split()[0]}, {os.cpu_count()} CPUs;")
    print(f"best of {args.runs} runs; ratios against the baseline in the same run\n")
    print(f"{'':<46} {'time':>10} {'baseline':>10} {'ratio':>8}  goal")
    missed = 0
    for make in ROWS:
        for row in make(args):
            goal = (
                f"< {row.goal_seconds:g} s"
                if row.goal_seconds is not None
                else f"<= {row.goal_ratio:g}x"
            )
            verdict = "ok" if row.ok() else "MISSES GOAL"
            missed += not row.ok()
            print(
                f"{row.label:<46} {row.seconds * 1000:>7.1f} ms {row.baseline * 1000:>7.1f} ms "
                f"{row.seconds / row.baseline:>7.2f}x  {goal:<8} {verdict}"
            )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
