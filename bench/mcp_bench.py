"""The MCP proxy's overhead per call: small calls to the reference filesystem server
(node_modules, `make node`) through `python -m core mcp proxy` against the same calls to
the server directly, both driven by the SDK's client over stdio, in the same run; then
big one-line results through the proxy. Not a test: run it by hand or with `make bench`.

    python bench/mcp_bench.py [--calls 300] [--rounds 5] [--sizes 8,64,200] [--big-rounds 3]
                               [--big-only]

Each round makes --calls sequential calls on each connection, the connections taking turns
(so a busy machine slows both alike); a connection's time per call is its best round. The
goal (docs/benchmarks.md#mcp-proxy-overhead) is under 5 ms added per small call. The
proxy runs as an agent would run it, recording the session log (--log-dir). Beside the
wall times, the proxy's own CPU time per call (from /proc) says what it costs whatever
else the machine is doing. A big read (a promoted result) is timed too, for information.

Big results (docs/benchmarks.md#mcp-proxy-big-results; `--big-only` runs only these): a
one-line text of each of --sizes megabytes, from tests/mcp/fake_servers/hostile_server.py
through a proxy of its own, best of --big-rounds calls. The goals: time linear in the
size (time(64 MB) / time(8 MB) at most 12, where linear is 8), 200 MB in under 30 s, the
proxy's peak memory while it reads and promotes the first result under 3x the result
(its growth after all the calls is shown beside it: below 32 MB, glibc keeps memory
freed between calls), and the proxy's own `inspect`, called every 50 ms meanwhile,
answered throughout (its slowest answer is shown).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[1]
FS_SERVER_JS = REPO / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
HOSTILE = REPO / "tests/mcp/fake_servers/hostile_server.py"
GOAL_MS = 5.0
BIG_LINES = 40_000  # about 2.4 MB
MB = 2**20
GOAL_RATIO = 12.0  # time(64 MB) / time(8 MB); linear is 8
GOAL_200_MB_SECONDS = 30.0
GOAL_MEMORY = 3.0  # the proxy's peak memory growth, in results
SMALL_CALL_EVERY = 0.05


def _connection(command: str, args: list[str], errlog: Any) -> Client:
    params = StdioServerParameters(command=command, args=args, cwd=REPO)
    return Client(stdio_client(params, errlog=errlog))


async def _per_call(client: Client, name: str, arguments: dict[str, Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        result = await client.call_tool(name, arguments)
        if result.is_error:
            raise SystemExit(f"{name} failed: {result.content}")
    return (time.perf_counter() - start) / calls


def _proxy_process(marker: Path) -> Path | None:
    """The /proc folder of the proxy started with *marker* among its arguments (None
    without /proc: not Linux)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"proxy" in words and str(marker).encode() in words:
            return entry
    return None


def _cpu_seconds(marker: Path) -> float:
    """CPU time (user + system) so far of the proxy started with *marker* among its
    arguments: what it costs, whatever else the machine is doing."""
    process = _proxy_process(marker)
    try:
        assert process is not None
        fields = (process / "stat").read_text().rpartition(")")[2].split()
    except (AssertionError, OSError):
        return float("nan")  # not measured
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _memory_bytes(marker: Path, field: str) -> float:
    """*field* of the proxy's /proc status (VmRSS now, VmHWM its peak), in bytes."""
    process = _proxy_process(marker)
    try:
        assert process is not None
        for line in (process / "status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return float(line.split()[1]) * 1024  # kB
    except (AssertionError, OSError):
        pass
    return float("nan")


async def _bench(folder: Path, work: Path, *, calls: int, rounds: int) -> bool:
    node = shutil.which("node")
    if node is None or not FS_SERVER_JS.exists():
        raise SystemExit("the filesystem MCP server is not installed: run `make node`")
    server = [str(FS_SERVER_JS), str(folder)]
    proxy = [
        "-m",
        "core",
        "mcp",
        "proxy",
        "--dir",
        str(work / "blobs"),
        "--log-dir",
        str(work / "sessions"),
        "--",
        node,
        *server,
    ]
    small = ("read_text_file", {"path": str(folder / "small.txt")})
    big = ("read_text_file", {"path": str(folder / "big.txt")})
    with (work / "stderr.log").open("w") as errlog:
        async with (
            _connection(node, server, errlog) as direct,
            _connection(sys.executable, proxy, errlog) as proxied,
        ):
            for client in (direct, proxied):  # warm up: imports, JIT, caches
                await _per_call(client, *small, max(calls // 10, 10))
            best = {"direct": float("inf"), "proxy": float("inf")}
            cpu_start = _cpu_seconds(work / "blobs")
            for _ in range(rounds):
                best["direct"] = min(best["direct"], await _per_call(direct, *small, calls))
                best["proxy"] = min(best["proxy"], await _per_call(proxied, *small, calls))
            proxy_cpu = (_cpu_seconds(work / "blobs") - cpu_start) / (calls * rounds)
            big_best = {"direct": float("inf"), "proxy": float("inf")}
            for _ in range(3):
                big_best["direct"] = min(big_best["direct"], await _per_call(direct, *big, 1))
                big_best["proxy"] = min(big_best["proxy"], await _per_call(proxied, *big, 1))

    overhead_ms = (best["proxy"] - best["direct"]) * 1000
    ok = overhead_ms < GOAL_MS
    print(f"MCP proxy overhead: {calls} small calls x {rounds} rounds, best round")
    print(f"python {sys.version.split()[0]}, node {_node_version(node)}, {os.cpu_count()} CPUs\n")
    print(f"{'small call, server directly':<40} {best['direct'] * 1000:>8.2f} ms/call")
    print(f"{'small call, through the proxy':<40} {best['proxy'] * 1000:>8.2f} ms/call")
    print(f"  ratio {best['proxy'] / best['direct']:.2f}x the direct call")
    verdict = "ok" if ok else "MISSED"
    print(f"  overhead {overhead_ms:.2f} ms per small call (goal < {GOAL_MS:g} ms) {verdict}")
    print(f"  the proxy's own CPU: {proxy_cpu * 1000:.2f} ms per small call (from /proc)\n")
    size = (folder / "big.txt").stat().st_size
    print(
        f"{f'big read ({size / 2**20:.1f} MB), directly':<40} {big_best['direct'] * 1000:>8.1f} ms"
    )
    print(
        f"{'big read, through the proxy (promoted)':<40} {big_best['proxy'] * 1000:>8.1f} ms"
        f"  ({big_best['proxy'] / big_best['direct']:.2f}x; for information)"
    )
    return ok


def _node_version(node: str) -> str:
    return subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()


# -- big results ---------------------------------------------------------------------------


async def _big_result(work: Path, size_mb: int, rounds: int) -> dict[str, float]:
    """Calls of `big` for a one-line text of *size_mb* MB through a proxy of its own: the
    best time, the slowest small call meanwhile, and the proxy's peak memory over what it
    held before, after the first call (`first`, in results) and after all (`all`, MB)."""
    marker = work / f"blobs-{size_mb}"
    proxy = ["-m", "core", "mcp", "proxy", "--dir", str(marker)]
    proxy += ["--log-dir", str(work / "sessions"), "--", sys.executable, str(HOSTILE)]
    best, slowest_small, first = float("inf"), [0.0], float("nan")
    with (work / "stderr.log").open("a") as errlog:
        async with _connection(sys.executable, proxy, errlog) as client:
            await client.call_tool("echo", {"text": "warm up"})
            await client.call_tool("inspect", {"blob_id": "warm-up"})
            before = _memory_bytes(marker, "VmRSS")
            for round_ in range(rounds):
                done = anyio.Event()
                async with anyio.create_task_group() as calls:
                    calls.start_soon(_small_calls, client, done, slowest_small)
                    start = time.perf_counter()
                    result = await client.call_tool("big", {"mb": size_mb})
                    best = min(best, time.perf_counter() - start)
                    done.set()
                if result.is_error or "[blob:" not in str(result.content[0]):
                    raise SystemExit(f"big {size_mb} MB was not promoted: {result.content}")
                if round_ == 0:
                    first = (_memory_bytes(marker, "VmHWM") - before) / (size_mb * MB)
            peak = _memory_bytes(marker, "VmHWM")
    return {"seconds": best, "small": slowest_small[0], "first": first, "all": peak - before}


async def _small_calls(client: Client, done: anyio.Event, slowest: list[float]) -> None:
    """The proxy's own `inspect`, every SMALL_CALL_EVERY seconds until *done*; the
    slowest answer's time goes in *slowest*."""
    while not done.is_set():
        start = time.perf_counter()
        await client.call_tool("inspect", {"blob_id": "none"})
        slowest[0] = max(slowest[0], time.perf_counter() - start)
        await anyio.sleep(SMALL_CALL_EVERY)


async def _bench_big(work: Path, sizes: list[int], rounds: int) -> bool:
    measured = {size: await _big_result(work, size, rounds) for size in sizes}
    print(f"big one-line results through the proxy ({HOSTILE.name} `big`), best of {rounds}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {_load()}\n")
    ok = True
    for size, row in measured.items():
        memory_ok = not row["first"] >= GOAL_MEMORY  # nan (no /proc): not judged
        ok = ok and memory_ok
        print(
            f"{size:>5} MB {row['seconds']:>8.2f} s   peak memory +{row['first']:.2f}x the "
            f"result{'' if memory_ok else ' MISSED'} (+{row['all'] / MB:.0f} MB after "
            f"{rounds} calls)   slowest small call meanwhile {row['small'] * 1000:.0f} ms"
        )
    if 8 in measured and 64 in measured:
        ratio = measured[64]["seconds"] / measured[8]["seconds"]
        ok = ok and ratio <= GOAL_RATIO
        verdict = "ok" if ratio <= GOAL_RATIO else "MISSED"
        print(f"  time(64 MB) / time(8 MB) = {ratio:.1f} (linear is 8; goal <= 12) {verdict}")
    if 200 in measured:
        seconds = measured[200]["seconds"]
        ok = ok and seconds < GOAL_200_MB_SECONDS
        verdict = "ok" if seconds < GOAL_200_MB_SECONDS else "MISSED"
        print(f"  200 MB in {seconds:.1f} s (goal < {GOAL_200_MB_SECONDS:g} s) {verdict}")
    return ok


def _load() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="small calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="8,64,200", help="big results, in MB")
    parser.add_argument("--big-rounds", type=int, default=3, help="calls per big result")
    parser.add_argument("--big-only", action="store_true", help="only the big results")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size]
    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as temp:
        root = Path(temp)
        ok = True
        if not args.big_only:
            folder = root / "files"
            folder.mkdir()
            (folder / "small.txt").write_text("a small file\nof two lines\n", encoding="utf-8")
            lines = (
                f"{n:08d} INFO worker processed item {n * 7919 % 10**8:08d}\n"
                for n in range(BIG_LINES)
            )
            (folder / "big.txt").write_text("".join(lines), encoding="utf-8")
            ok = anyio.run(
                functools.partial(_bench, folder, root, calls=args.calls, rounds=args.rounds)
            )
            print()
        big_ok = anyio.run(_bench_big, root, sizes, args.big_rounds) if sizes else True
    print("all goals met" if ok and big_ok else "goals missed (see MISSED above)")


if __name__ == "__main__":
    main()
