"""The S3 store against the file store (docs/benchmarks.md#object-storage), each printed as
a ratio to the file store measured in the same run, on a real SeaweedFS that the bench
starts in a temporary folder and stops (tests/s3_server.py). Not a test: run it by hand or
with `make bench`.

    python bench/store_bench.py [--mb 100] [--runs 3]

- store and load of a MB-sized text blob (its index made and kept, as the store does);
- `lines:` deep in it (the last 40 lines), through the index, by HTTP Range GETs on S3;
  the bytes those GETs return are printed beside the blob's size;
- raw boto3 put_object / get_object of the same bytes, so what the store adds to S3's own
  cost shows apart from what loopback HTTP and SeaweedFS cost.

Times are the best of the runs (wall clock, time.perf_counter).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from s3_server import SeaweedFailed, SeaweedServer  # noqa: E402

from core.content import Text  # noqa: E402
from core.inspect_tool import inspect_blob  # noqa: E402
from core.store import FsBlobStore  # noqa: E402
from core.store.s3 import S3BlobStore  # noqa: E402

LINE_WIDTH = 80
SHOWN_LINES = 40


def make_text(mb: int) -> str:
    """About *mb* MB of distinct 80-byte log lines (as bench/core_bench.py makes)."""
    count = mb * 1024 * 1024 // LINE_WIDTH
    template = "{:010d} INFO worker-{} processed item {:010d} in {:04d} ms status=ok"
    lines = (template.format(n, n % 7, n * 7919 % 10**10, n % 1000) for n in range(count))
    return "".join(line.ljust(LINE_WIDTH - 1) + "\n" for line in lines)


def best(runs: int, *measured: Callable[[], object]) -> list[float]:
    """The best time of each callable over *runs* rounds, taking turns within a round, so
    that a busy moment of the machine (or of SeaweedFS growing its volumes) does not fall
    on one of them only."""
    times = [float("inf")] * len(measured)
    for _ in range(runs):
        for number, run in enumerate(measured):
            gc.collect()
            start = time.perf_counter()
            run()
            times[number] = min(times[number], time.perf_counter() - start)
    return times


class GetBytes:
    """The body bytes of the GetObject calls a client makes (boto3's event hooks)."""

    def __init__(self, client: Any) -> None:
        self.calls = 0
        self.bytes = 0
        client.meta.events.register("after-call.s3.GetObject", self._after)

    def _after(self, parsed: dict[str, Any], **_: Any) -> None:
        self.calls += 1
        self.bytes += int(parsed.get("ContentLength") or 0)


def row(label: str, seconds: float, baseline: float | None = None, note: str = "") -> None:
    ratio = f"{seconds / baseline:>7.2f}x" if baseline else " " * 8
    print(f"{label:<40} {seconds * 1000:>9.1f} ms {ratio}  {note}".rstrip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=100, help="size of the text blob (MB)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each; the best counts")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="store-bench-"))
    server = SeaweedServer(folder / "seaweedfs")
    try:
        try:
            server.start()
        except SeaweedFailed as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        return _bench(server, folder, args.mb, args.runs)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _bench(server: SeaweedServer, folder: Path, mb: int, runs: int) -> int:
    text = make_text(mb)
    content = Text(text)
    data = text.encode()
    lines = text.count("\n")
    selector = f"lines:{lines - SHOWN_LINES + 1}-{lines}"
    bucket = server.make_bucket("bench")
    client = server.client(retries={"mode": "standard", "max_attempts": 3})
    fs = FsBlobStore(folder / "blobs")
    s3 = S3BlobStore.from_url(f"s3://{bucket}/blobs", client=client)
    gets = GetBytes(client)

    print(f"store benchmarks: {len(data) / 2**20:.1f} MB text, {lines:,} lines")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; SeaweedFS on loopback;")
    print(f"best of {runs} runs; ratios against the file store in the same run\n")
    print(f"{'':<40} {'time':>12} {'ratio':>8}")

    # A first write grows the bucket's volumes; that is not what is measured.
    client.put_object(Bucket=bucket, Key="raw/warm-up", Body=data)

    fs_store, s3_store, raw_put = best(
        runs,
        lambda: fs.store_sync(content),
        lambda: s3.store_sync(content),
        lambda: client.put_object(Bucket=bucket, Key="raw/blob", Body=data),
    )
    print("-- store (the blob and its index)")
    row("FsBlobStore.store_sync", fs_store)
    row("S3BlobStore.store_sync", s3_store, fs_store)
    row("  reference: boto3 put_object (no index)", raw_put, fs_store)

    fs_id, s3_id = fs.store_sync(content), s3.store_sync(content)
    fs_load, s3_load, raw_get = best(
        runs,
        lambda: fs.load_sync(fs_id),
        lambda: s3.load_sync(s3_id),
        lambda: client.get_object(Bucket=bucket, Key="raw/blob")["Body"].read(),
    )
    print("-- load")
    row("FsBlobStore.load_sync", fs_load)
    row("S3BlobStore.load_sync", s3_load, fs_load)
    row("  reference: boto3 get_object", raw_get, fs_load)

    expected = inspect_blob(fs, str(fs_id), selector).replace(str(fs_id), str(s3_id))
    if inspect_blob(s3, str(s3_id), selector) != expected:
        print("error: lines: on S3 differs from the file store", file=sys.stderr)
        return 1
    gets.calls = gets.bytes = 0
    fs_lines, s3_lines = best(
        runs,
        lambda: inspect_blob(fs, str(fs_id), selector),
        lambda: inspect_blob(s3, str(s3_id), selector),
    )
    per_call = gets.bytes / runs
    print(f"-- {selector} (the last {SHOWN_LINES} lines, through the index)")
    row("FsBlobStore", fs_lines)
    row(
        "S3BlobStore (Range GETs)",
        s3_lines,
        fs_lines,
        f"{gets.calls / runs:.0f} GETs, {per_call / 1024:.0f} KB of {len(data) / 2**20:.0f} MB",
    )
    whole = per_call >= len(data) / 2
    print(f"\n{'read the whole blob: FAILED' if whole else 'only ranges were read: ok'}")
    return 1 if whole else 0


if __name__ == "__main__":
    sys.exit(main())
