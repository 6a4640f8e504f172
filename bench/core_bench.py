"""Benchmarks for core on a large text, each printed as a ratio to a baseline measured in
the same run (docs/benchmarks.md#core-promotion-store-lines-grep). Not a test: run it by
hand or with `make bench`.

    python bench/core_bench.py [--mb 100]

Times are the best of 3 runs (time.perf_counter). Peak memory is measured with tracemalloc
in a fresh subprocess per measurement: the peak of Python allocations while the operation
runs, above what was already held before it started (the input text, for example).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


from case_runs import measure, run_case  # noqa: E402  (bench/, beside this script)

from core.content import Text  # noqa: E402
from core.inspect_tool import inspect_blob  # noqa: E402
from core.promotion import promote  # noqa: E402
from core.store import FsBlobStore  # noqa: E402
from core.summary import summarize  # noqa: E402

BLOB_ID = uuid.UUID("0190f5e2-7c1a-7b3e-9c4d-123456789abc")
LINE_WIDTH = 80


def make_text(mb: int) -> str:
    """About *mb* MB of distinct 80-byte log lines (ASCII, like most tool output)."""
    count = mb * 1024 * 1024 // LINE_WIDTH
    template = "{:010d} INFO worker-{} processed item {:010d} in {:04d} ms status=ok"
    lines = (template.format(n, n % 7, n * 7919 % 10**10, n % 1000) for n in range(count))
    return "".join(line.ljust(LINE_WIDTH - 1) + "\n" for line in lines)


# -- the measurements -----------------------------------------------------------------------
# Each takes a context (the text, a directory, a stored blob) and returns a callable to time.


def promote_and_summarize(ctx: dict) -> Callable[[], object]:
    def run() -> object:
        output = promote(ctx["text"])
        return summarize(BLOB_ID, output.content)

    return run


def encode_and_count(ctx: dict) -> Callable[[], object]:
    def run() -> object:
        text = ctx["text"]
        return len(text.encode("utf-8")), text.count("\n")

    return run


def store_blob(ctx: dict) -> Callable[[], object]:
    store = FsBlobStore(ctx["dir"] / "store")
    content = Text(ctx["text"])
    return lambda: store.store_sync(content)


def plain_write(ctx: dict) -> Callable[[], object]:
    directory = ctx["dir"] / "plain"
    directory.mkdir(exist_ok=True)
    counter = iter(range(10**9))

    def run() -> object:
        path = directory / f"{next(counter)}.txt"
        with open(path, "wb") as file:
            file.write(ctx["text"].encode("utf-8"))
        return path

    return run


def load_blob(ctx: dict) -> Callable[[], object]:
    store = FsBlobStore(ctx["blob_dir"])
    return lambda: store.load_sync(ctx["blob_id"])


def plain_read_and_decode(ctx: dict) -> Callable[[], object]:
    return lambda: Path(ctx["blob_path"]).read_bytes().decode("utf-8")


def inspect_lines_near_the_end(ctx: dict) -> Callable[[], object]:
    store = FsBlobStore(ctx["blob_dir"])
    total = ctx["lines"]
    selector = f"lines:{total - 120}-{total - 20}"
    return lambda: inspect_blob(store, str(ctx["blob_id"]), selector)


def plain_read(ctx: dict) -> Callable[[], object]:
    return lambda: Path(ctx["blob_path"]).read_bytes()


PAIRS = [
    (
        "promote + summarize",
        "str.encode + str.count",
        promote_and_summarize,
        encode_and_count,
        3.0,
    ),
    ("FsBlobStore.store_sync", "plain write (encode + write)", store_blob, plain_write, 1.5),
    ("FsBlobStore.load_sync", "plain read (read + decode)", load_blob, plain_read_and_decode, 1.5),
    (
        "inspect lines:A-B near the end",
        "plain read of the file",
        inspect_lines_near_the_end,
        plain_read,
        2.0,
    ),
]
MEASUREMENTS = {f.__name__: f for pair in PAIRS for f in pair[2:4]}
NEEDS_TEXT = {"promote_and_summarize", "encode_and_count", "store_blob", "plain_write"}


def best_of(run: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = run()
        elapsed = time.perf_counter() - start
        del result
        best = min(best, elapsed)
    return best


def peak_memory(name: str, args: argparse.Namespace, shared: dict) -> int:
    """Peak bytes allocated by one run of *name*, above what was held before, in a fresh process."""
    command = [sys.executable, __file__, "--mb", str(args.mb), "--memory-of", name]
    command += ["--context", json.dumps(shared)]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return int(result.stdout.strip().splitlines()[-1])


def _measure_memory_here(name: str, args: argparse.Namespace, shared: dict) -> None:
    ctx = _context(args, shared, with_text=name in NEEDS_TEXT)
    run = MEASUREMENTS[name](ctx)
    gc.collect()
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    result = run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    print(peak - before)


def _context(args: argparse.Namespace, shared: dict, *, with_text: bool) -> dict:
    ctx: dict = {
        "dir": Path(shared["dir"]),
        "blob_dir": Path(shared["blob_dir"]),
        "blob_id": uuid.UUID(shared["blob_id"]),
        "blob_path": Path(shared["blob_path"]),
        "lines": shared["lines"],
    }
    if with_text:
        ctx["text"] = make_text(args.mb)
    if "dir_suffix" in shared:  # a private scratch directory per subprocess
        ctx["dir"] = Path(tempfile.mkdtemp(dir=shared["dir"]))
    return ctx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=100, help="size of the text (default 100)")
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)
    parser.add_argument("--context", help=argparse.SUPPRESS)
    parser.add_argument("--case", nargs=2, help=argparse.SUPPRESS)  # NAME PATH, in a subprocess
    args = parser.parse_args()
    if args.case:
        _run_case(*args.case)
        return
    if args.memory_of:
        _measure_memory_here(args.memory_of, args, json.loads(args.context))
        return

    with tempfile.TemporaryDirectory(prefix="core-bench-") as scratch:
        scratch_dir = Path(scratch)
        text = make_text(args.mb)
        size = len(text.encode("utf-8"))
        blob_store = FsBlobStore(scratch_dir / "blobs")
        blob_id = blob_store.store_sync(Text(text))
        # The baselines read the same bytes from a plain file of their own.
        plain = scratch_dir / "plain.txt"
        plain.write_bytes(text.encode("utf-8"))
        shared = {
            "dir": str(scratch_dir),
            "blob_dir": str(scratch_dir / "blobs"),
            "blob_id": str(blob_id),
            "blob_path": str(plain),
            "lines": text.count("\n"),
        }
        ctx = _context(args, shared, with_text=False)
        ctx["text"] = text
        print(f"core benchmarks: {size / 2**20:.1f} MB text, {shared['lines']:,} lines")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; best of 3 runs")
        print("memory: tracemalloc peak above what was held before, fresh subprocess each\n")
        header = f"{'measurement':<44} {'time':>9} {'peak mem':>10}"
        print(header)
        print("-" * len(header))
        results = []
        for name, base_name, op, base, goal in PAIRS:
            rows = []
            for label, factory in ((name, op), (f"  baseline: {base_name}", base)):
                seconds = best_of(factory(ctx))
                memory = peak_memory(factory.__name__, args, {**shared, "dir_suffix": "1"})
                rows.append(seconds)
                print(f"{label:<44} {seconds * 1000:>7.1f}ms {memory / 2**20:>7.1f} MB")
            ratio = rows[0] / rows[1]
            verdict = "ok" if ratio <= goal else "MISSES GOAL"
            print(f"  ratio {ratio:.2f}x (goal <= {goal:g}x) {verdict}\n")
            results.append((name, ratio, goal))
        misses = [name for name, ratio, goal in results if ratio > goal]
        misses += grep_bench(args.mb, scratch_dir)
        # lines:, slice:, key:, keys: deep inside blobs of this size (1 GB with
        # BLOBVIEWER_BENCH_GB=1), through their indexes, and /api/inspect (bench/index_bench.py)
        from index_bench import index_bench

        gb = os.environ.get("BLOBVIEWER_BENCH_GB") == "1"
        misses += index_bench(args.mb, scratch_dir, gb=gb)
        print("all goals met" if not misses else f"goals missed: {', '.join(misses)}")


# -- grep: ------------------------------------------------------------------------------------
# Each case runs in a fresh subprocess with its input already read, three times (see
# bench/case_runs.py for what is measured).

GREP_PATTERN = "ERROR"
RARE_EVERY = 100_000  # one line in this many holds the pattern: grep: reads the whole file


def _case_grep_inspect(path: Path) -> Callable[[], object]:
    store = FsBlobStore(path.parent)
    return lambda: inspect_blob(store, path.stem, f"grep:{GREP_PATTERN}")


def _case_grep_frequent(path: Path) -> Callable[[], object]:
    store = FsBlobStore(path.parent)
    return lambda: inspect_blob(store, path.stem, "grep:worker-3")


def _case_re_finditer(path: Path) -> Callable[[], object]:
    # The same bytes, read from the same (cached) file as grep: reads them, in one call.
    pattern = re.compile(GREP_PATTERN.encode())
    return lambda: sum(1 for _ in pattern.finditer(path.read_bytes()))


CASES = {f.__name__.removeprefix("_case_"): f for f in (
    _case_grep_inspect, _case_grep_frequent, _case_re_finditer,
)}  # fmt: skip


def _run_case(name: str, path: str) -> None:
    run_case(CASES[name](Path(path)))


def grep_bench(mb: int, scratch: Path) -> list[str]:
    """grep: over *mb* MB against re.finditer (GNU grep -c printed beside it); returns the
    goals missed. (Promotion of big JSON: bench/promotion_bench.py.)"""
    print(f"\n-- grep: ({mb} MB; best CPU and wall time of 3, peak RSS above start)")
    text = make_text(mb)
    lines = text.split("\n")
    for n in range(RARE_EVERY // 2, len(lines) - 1, RARE_EVERY):
        lines[n] = lines[n][:60] + f" {GREP_PATTERN} x"
    text_dir = scratch / "grep"
    text_dir.mkdir()
    text_path = text_dir / f"{uuid.uuid4()}.txt"
    text_path.write_text("\n".join(lines), encoding="utf-8")
    del text, lines
    misses: list[str] = []
    rows = [
        ("inspect grep:ERROR (whole file, 10s of hits)", "grep_inspect"),
        ("  baseline: read + re.finditer in one call", "re_finditer"),
        ("inspect grep:worker-3 (stops after a page)", "grep_frequent"),
    ]
    measured = {}
    for label, case in rows:
        result = measure(__file__, case, text_path, 3)
        if isinstance(result, str):
            raise SystemExit(f"{label}: {result}")
        cpu, wall, peak = result
        measured[case] = cpu
        print(f"{label:<48} {cpu:>6.2f}s cpu {wall:>6.2f}s wall {peak / 2**20:>7.1f} MB")
    started = time.perf_counter()
    gnu = subprocess.run(["grep", "-c", GREP_PATTERN, str(text_path)], capture_output=True)
    gnu_seconds = time.perf_counter() - started
    found = gnu.stdout.decode().strip()
    print(f"{'  reference: GNU grep -c (wall)':<48} {gnu_seconds:>6.2f}s ({found} lines)")
    ratio = measured["grep_inspect"] / measured["re_finditer"]
    verdict = "ok" if ratio <= 1 else "MISSES GOAL"
    gnu_ratio = measured["grep_inspect"] / max(gnu_seconds, 1e-9)
    print(f"  ratio {ratio:.2f}x re.finditer (goal <= 1x) {verdict}; ", end="")
    print(f"{gnu_ratio:.1f}x GNU grep (stretch <= 5x)")
    if ratio > 1:
        misses.append("grep: over the text")
    text_path.unlink()
    return misses


if __name__ == "__main__":
    main()
