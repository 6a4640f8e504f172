"""Promotion of a big JSON output (docs/benchmarks.md#promotion-of-big-json): promote +
summarize + store, its index made in the same pass and kept by the store, against
`orjson.loads` + write of the same output, both measured in this run; and the candidates
the choice was made from.

    .venv/bin/python bench/promotion_bench.py [--mb 100] [--repeat 3] [--candidates]

Each case runs in a fresh subprocess with the output already read into a str (as a tool
hands it over); times are the best CPU time of --repeat runs (the machine is shared, and
CPU time is what a worker spends) with the wall time beside it; memory is the peak RSS
(VmHWM, reset through /proc/self/clear_refs) above the RSS just before the case, i.e.
native allocations (orjson, yajl) counted too. Goals: <= 1.3x the baseline's CPU time,
peak <= 2x the output's size.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from case_runs import measure, run_case  # noqa: E402  (bench/, beside this script)

from core.json_stream import _IJSON, _Reader  # noqa: E402
from core.promotion import admit_sync, promote  # noqa: E402
from core.store import FsBlobStore  # noqa: E402

GOAL_TIME = 1.3
GOAL_MEMORY = 2.0


def json_text(kind: str, mb: int) -> bytes:
    """About *mb* MB of compact JSON: an array of small records, or an object of them (the
    records of bench/core_bench.py)."""
    target, parts, size, n = mb * 1024 * 1024, [], 0, 0
    while size < target:
        record = {"id": n, "name": f"item {n}", "tags": ["alpha", "beta"], "score": n / 4}
        piece = orjson.dumps(record)
        if kind == "object":
            piece = b'"k%07d":' % n + piece
        parts.append(piece)
        size, n = size + len(piece) + 1, n + 1
    brackets = (b"[", b"]") if kind == "array" else (b"{", b"}")
    return brackets[0] + b",".join(parts) + brackets[1]


# -- the cases, each run in a subprocess of its own ------------------------------------------


def _case_promote(path: Path, text: str) -> Callable[[], object]:
    store = FsBlobStore(path.parent / "promoted")

    def run() -> object:
        admitted = admit_sync(promote(text), store)  # promote + store (and index) + summary
        kept = store.index_reader_sync(str(admitted.blob_id))
        if kept is None:
            raise SystemExit("the promoted blob was stored without its index")
        kept.close()
        return admitted

    return run


def _case_orjson_loads_and_write(path: Path, text: str) -> Callable[[], object]:
    out = path.parent / "baseline.json"

    def run() -> object:
        value = orjson.loads(text)
        out.write_bytes(orjson.dumps(value))
        return len(value)

    return run


def _case_ijson_parse_only(path: Path, text: str) -> Callable[[], object]:
    """The chosen parser alone (yajl2_c, one entry at a time): the floor of that path."""

    def run() -> object:
        if text.lstrip()[:1] == "[":
            entries = _IJSON.items(_Reader(text), "item", use_float=True, buf_size=1 << 18)
        else:
            entries = _IJSON.kvitems(_Reader(text), "", use_float=True, buf_size=1 << 18)
        return sum(1 for _ in entries)

    return run


def _case_orjson_per_entry(path: Path, text: str) -> Callable[[], object]:
    """orjson.loads of the whole output, then each entry serialised for its span."""
    out = path.parent / "per-entry.json"

    def run() -> object:
        value = orjson.loads(text)
        data = bytearray()
        if isinstance(value, list):
            for entry in value:
                data += orjson.dumps(entry)
                data += b","
        else:
            for key, entry in value.items():
                data += orjson.dumps(key)
                data += orjson.dumps(entry)
                data += b","
        out.write_bytes(data)
        return len(value)

    return run


def _case_simdjson_per_entry(path: Path, text: str) -> Callable[[], object]:
    """pysimdjson's DOM of the whole output, each entry converted and serialised."""
    import simdjson  # type: ignore[import-not-found]

    out = path.parent / "simdjson.json"

    def plain(item: object) -> object:
        if isinstance(item, simdjson.Object):
            return item.as_dict()
        if isinstance(item, simdjson.Array):
            return item.as_list()
        return item

    def run() -> object:
        document = simdjson.Parser().parse(text.encode())
        data = bytearray()
        entries = document.items() if isinstance(document, simdjson.Object) else document
        for entry in entries:
            if isinstance(entry, tuple):
                data += orjson.dumps(entry[0])
                entry = entry[1]
            data += orjson.dumps(plain(entry))
            data += b","
        out.write_bytes(data)
        return len(document)

    return run


CASES = {
    f.__name__.removeprefix("_case_"): f
    for f in (
        _case_promote,
        _case_orjson_loads_and_write,
        _case_ijson_parse_only,
        _case_orjson_per_entry,
        _case_simdjson_per_entry,
    )
}


def _run_case(name: str, path: str) -> None:
    text = Path(path).read_text(encoding="utf-8")
    run_case(CASES[name](Path(path), text))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--candidates", action="store_true", help="measure the candidates too")
    parser.add_argument("--case", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        _run_case(*args.case)
        return 0
    scratch = Path(tempfile.mkdtemp(prefix="promotion-bench-"))
    misses: list[str] = []
    try:
        print(
            f"promotion of {args.mb} MB of JSON: best CPU and wall time of {args.repeat}, ", end=""
        )
        print("peak RSS above the start (x the output's size)")
        for kind in ("array", "object"):
            folder = scratch / f"{kind}-{uuid.uuid4()}"
            folder.mkdir()
            path = folder / "output.json"
            path.write_bytes(json_text(kind, args.mb))
            size = path.stat().st_size
            print(f"\n-- JSON {kind}, {size / 2**20:.0f} MB")
            rows = [
                ("promote + store + summarize, index kept", "promote", args.repeat),
                ("  baseline: orjson.loads + write", "orjson_loads_and_write", args.repeat),
            ]
            if args.candidates:
                rows += [
                    ("  candidate: ijson (yajl2_c) parse alone", "ijson_parse_only", 1),
                    ("  candidate: orjson.loads + per-entry dumps", "orjson_per_entry", 1),
                    ("  candidate: pysimdjson DOM + per-entry dumps", "simdjson_per_entry", 1),
                ]
            measured: dict[str, tuple[float, float, int]] = {}
            for label, case, repeat in rows:
                result = measure(__file__, case, path, repeat)
                if isinstance(result, str):
                    print(f"{label:<48} not measured: {result}")
                    continue
                measured[case] = result
                cpu, wall, peak = result
                print(f"{label:<48} {cpu:>6.2f}s cpu {wall:>6.2f}s wall ", end="")
                print(f"{peak / 2**20:>7.1f} MB ({peak / size:.2f}x)")
            if "promote" not in measured or "orjson_loads_and_write" not in measured:
                misses.append(f"JSON {kind}: not measured")
                continue
            base = measured["orjson_loads_and_write"][0]
            for case in measured:
                if case != "orjson_loads_and_write":
                    print(f"  {case}: {measured[case][0] / base:.2f}x the baseline's CPU time")
            ratio = measured["promote"][0] / base
            memory = measured["promote"][2] / size
            verdict = "ok" if ratio <= GOAL_TIME and memory <= GOAL_MEMORY else "MISSES GOAL"
            print(f"  promotion: {ratio:.2f}x (goal <= {GOAL_TIME}x), peak {memory:.2f}x ", end="")
            print(f"the output (goal <= {GOAL_MEMORY}x) {verdict}")
            if verdict != "ok":
                misses.append(f"JSON {kind}")
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("\nall goals met" if not misses else f"\nmissed: {', '.join(misses)}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
