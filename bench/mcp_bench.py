"""The MCP proxy's overhead per call: small calls to the reference filesystem server
(node_modules, `make node`) through `python -m core mcp proxy` against the same calls to
the server directly, both driven by the SDK's client over stdio, in the same run. Not a
test: run it by hand or with `make bench`.

    python bench/mcp_bench.py [--calls 300] [--rounds 5]

Each round makes --calls sequential calls on each connection, the connections taking turns
(so a busy machine slows both alike); a connection's time per call is its best round. The
goal (docs/benchmarks.md#mcp-proxy-overhead) is under 5 ms added per small call. The
proxy runs as an agent would run it, recording the session log (--log-dir). Beside the
wall times, the proxy's own CPU time per call (from /proc) says what it costs whatever
else the machine is doing. A big read (a promoted result) is timed too, for information.
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
GOAL_MS = 5.0
BIG_LINES = 40_000  # about 2.4 MB


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


def _cpu_seconds(marker: Path) -> float:
    """CPU time (user + system) so far of the proxy started with *marker* among its
    arguments: what it costs, whatever else the machine is doing."""
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            if b"proxy" not in words or str(marker).encode() not in words:
                continue
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return float("nan")  # no /proc (not Linux): not measured


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="small calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as temp:
        root = Path(temp)
        folder = root / "files"
        folder.mkdir()
        (folder / "small.txt").write_text("a small file\nof two lines\n", encoding="utf-8")
        lines = (
            f"{n:08d} INFO worker processed item {n * 7919 % 10**8:08d}\n" for n in range(BIG_LINES)
        )
        (folder / "big.txt").write_text("".join(lines), encoding="utf-8")
        ok = anyio.run(
            functools.partial(_bench, folder, root, calls=args.calls, rounds=args.rounds)
        )
    print("all goals met" if ok else "goals missed: proxy overhead per small call")


if __name__ == "__main__":
    main()
