"""One benchmark case in a fresh subprocess: its CPU time, wall time and peak memory.

A bench script runs `SCRIPT --case NAME PATH` in a child process (see `measure`); the
child builds the case (reading its input first) and calls `run_case`, which prints the
three numbers. Times are the best of the runs (time.process_time: the machine is shared,
and CPU time is what a worker spends; and wall time); memory is the highest peak RSS
(VmHWM, reset through /proc/self/clear_refs) above the RSS just before the case ran, so
native allocations (RE2, orjson, ijson) count too.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def run_case(run: Callable[[], object]) -> None:
    """In the child: run *run* once and print `cpu wall peak_bytes`."""
    gc.collect()
    start = _kib("VmRSS:")
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{cpu} {wall} {(_kib('VmHWM:') - start) * 1024}")


def measure(script: str, name: str, path: Path, repeat: int) -> tuple[float, float, int] | str:
    """Best CPU and wall time and the highest peak of *repeat* runs of case *name* of
    *script* on *path*, or why a run failed (the last line of its stderr)."""
    runs = []
    for _ in range(repeat):
        command = [sys.executable, script, "--case", name, str(path)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            return (done.stderr.strip().splitlines() or ["failed"])[-1]
        cpu, wall, peak = done.stdout.split()
        runs.append((float(cpu), float(wall), int(peak)))
    return min(r[0] for r in runs), min(r[1] for r in runs), max(r[2] for r in runs)


def _kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    return 0
