"""Memory, measured in fresh processes: `slice:` deep in a 100 MB JSON array, through its
index, stays within 64 MB of what the process held before it (its peak resident size,
started again just before the call); so does making the index of such an old blob on its
first use. Linux only (/proc)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIMIT = 64 * 2**20
ENTRIES = 100_000
TEXT = "x" * 1000

MEASURE = """
import json, re, resource, sys
sys.path.insert(0, sys.argv[1])
from core.store import FsBlobStore
from core.inspect_tool import inspect_blob


def status(field):
    with open("/proc/self/status") as file:
        return int(re.search(field + r":\\s+(\\d+) kB", file.read()).group(1)) * 1024


store = FsBlobStore(sys.argv[2])
# The peak so far (ru_maxrss) includes what importing held for a moment, which could hide
# the call's own peak. Linux can start the peak again from now (VmHWM, after writing 5 to
# clear_refs): the call's peak above what the process holds before it.
with open("/proc/self/clear_refs", "w") as file:
    file.write("5")
before = status("VmRSS")
result = inspect_blob(store, sys.argv[3], sys.argv[4])
peak = status("VmHWM")
print(json.dumps({"before": before, "peak": peak, "result": result,
                  "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def measure(store: Path, blob_id: str, selector: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(REPO), str(store), blob_id, selector],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def write_array(path: Path) -> int:
    """About 100 MB of JSON as the store writes it, a MB at a time (this process stays
    small): `[{"id":0,"text":"xxx…"},…]`."""
    with open(path, "w", encoding="utf-8") as file:
        file.write("[")
        for start in range(0, ENTRIES, 1000):
            entries = (f'{{"id":{n},"text":"{TEXT}"}}' for n in range(start, start + 1000))
            file.write(("," if start else "") + ",".join(entries))
        file.write("]")
    return path.stat().st_size


def test_slice_deep_in_a_100_mb_array_stays_within_64_mb(tmp_path: Path) -> None:
    store = tmp_path / "blobs"
    store.mkdir()
    blob_id = str(uuid.UUID("0190f5e2-7c1a-7b3e-9c4d-123456789abc"))
    size = write_array(store / f"{blob_id}.json")
    assert size > 100_000_000
    selector = f"slice:{ENTRIES - 10}..{ENTRIES - 8}"
    expected = "\n".join(
        [
            f"[blob:{blob_id}] slice {ENTRIES - 10}..{ENTRIES - 8} of {ENTRIES} entries",
            f'{{"id":{ENTRIES - 10},"text":"{TEXT}"}}',
            f'{{"id":{ENTRIES - 9},"text":"{TEXT}"}}',
        ]
    )

    # An old blob: the first read makes its index, from the file, a few MB at a time.
    first = measure(store, blob_id, selector)
    assert first["result"] == expected
    assert (store / ".index" / f"{blob_id}.idx").exists()
    print(f"first use, index made: {(first['peak'] - first['before']) / 2**20:.1f} MB above start")
    assert first["peak"] - first["before"] < LIMIT

    later = measure(store, blob_id, selector)
    assert later["result"] == expected
    print(f"through the index: {(later['peak'] - later['before']) / 2**20:.2f} MB above start")
    assert later["peak"] - later["before"] < LIMIT
