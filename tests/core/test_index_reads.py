"""Counted reads: `lines:`, `slice:`, `key:`, `keys:` and the overview deep inside a large
blob read the spans they return and a few index records, never the blob whole, and never
make its index again when it has one."""

from __future__ import annotations

import builtins
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.content import Structured, Text
from core.inspect_tool import inspect_blob
from core.store import FsBlobStore
from core.store import index as index_package
from core.store.index import INDEX_FOLDER
from core.store.index.json_index import NAME_GAP
from core.store.index.text_index import BLOCK

LINES = 400_000  # 80-byte lines: 32 MB
ENTRIES = 400_000  # about 55 bytes each: 22 MB
KEYS = 100_000


@dataclass
class Blobs:
    store: FsBlobStore
    text: uuid.UUID
    array: uuid.UUID
    obj: uuid.UUID
    sizes: dict[uuid.UUID, int] = field(default_factory=dict)


@pytest.fixture(scope="module")
def blobs(tmp_path_factory: pytest.TempPathFactory) -> Blobs:
    store = FsBlobStore(tmp_path_factory.mktemp("large") / "blobs")
    text = store.store_sync(
        Text("".join(f"{n:08d} " + "x" * 70 + "\n" for n in range(1, LINES + 1)))
    )
    array = store.store_sync(
        Structured(
            [{"id": n, "name": f"entry {n:08d}", "tags": ["a", "b"]} for n in range(ENTRIES)]
        )
    )
    obj = store.store_sync(
        Structured(
            {f"key{n:06d}": {"n": n, "s": "é" * (n % 40)} for n in range(KEYS)}
            | {"items": [{"id": n} for n in range(ENTRIES)], "last": "end"}
        )
    )
    blobs = Blobs(store, text, array, obj)
    for blob_id in (text, array, obj):
        blobs.sizes[blob_id] = store.size_sync(blob_id)
        assert blobs.sizes[blob_id] > 20_000_000 or blob_id == obj
    return blobs


@dataclass
class Reads:
    by_file: dict[str, int] = field(default_factory=dict)

    def of(self, path: Path) -> int:
        return self.by_file.get(str(path), 0)

    @property
    def total(self) -> int:
        return sum(self.by_file.values())


@pytest.fixture
def reads(blobs: Blobs, monkeypatch: pytest.MonkeyPatch) -> Iterator[Reads]:
    """Every byte read, by file; any whole read of a blob, a load or a rebuild fails."""
    counted = Reads()
    names: dict[int, str] = {}
    real_open, real_pread, real_builtin_open = os.open, os.pread, builtins.open

    def counting_open(path: str | os.PathLike[str], flags: int, *args: object) -> int:
        fd = real_open(path, flags, *args)
        names[fd] = str(path)
        return fd

    def counting_pread(fd: int, size: int, offset: int) -> bytes:
        data = real_pread(fd, size, offset)
        name = names.get(fd, "?")
        counted.by_file[name] = counted.by_file.get(name, 0) + len(data)
        return data

    def guarded_open(file: object, *args: object, **kwargs: object) -> object:
        if str(file).startswith(str(blobs.store.root)):
            raise AssertionError(f"{file} was opened to be read as a stream")
        return real_builtin_open(file, *args, **kwargs)  # type: ignore[call-overload]

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the whole blob was loaded, or its index made again")

    monkeypatch.setattr(os, "open", counting_open)
    monkeypatch.setattr(os, "pread", counting_pread)
    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(FsBlobStore, "load_sync", refuse)
    monkeypatch.setattr(index_package, "text_index_from_file", refuse)
    monkeypatch.setattr(index_package, "json_index_from_file", refuse)
    yield counted


def index_file(blobs: Blobs, blob_id: uuid.UUID) -> Path:
    return blobs.store.root / INDEX_FOLDER / f"{blob_id}.idx"


def body_bytes(result: str) -> int:
    """Bytes of what the result shows of the blob: its lines after the header."""
    return len("\n".join(result.split("\n")[1:]).encode())


def test_lines_deep_inside_read_their_lines_and_one_block(blobs: Blobs, reads: Reads) -> None:
    result = inspect_blob(blobs.store, str(blobs.text), "lines:390000-390200")
    assert result.startswith(f"[blob:{blobs.text}] lines 390000-390200 of {LINES}\n00390000 ")
    shown = body_bytes(result)
    blob = reads.of(blobs.store.path_of(blobs.text))
    index = reads.of(index_file(blobs, blobs.text))
    assert blob <= shown + BLOCK + 1024  # and the block that holds the first line's start
    assert index <= 80 + 2 * 8 + 4 * 8  # the header, two group and a few block records


def test_slice_deep_inside_reads_only_the_entries_shown(blobs: Blobs, reads: Reads) -> None:
    result = inspect_blob(blobs.store, str(blobs.array), "slice:390000..390010")
    assert result.split("\n")[1] == '{"id":390000,"name":"entry 00390000","tags":["a","b"]}'
    blob = reads.of(blobs.store.path_of(blobs.array))
    index = reads.of(index_file(blobs, blobs.array))
    assert blob == body_bytes(result) - 9  # the entries themselves, read once (9 newlines)
    assert index <= 80 + 32 + 4 * 65  # header, table, a batch of offsets


def test_key_deep_inside_reads_a_few_records_and_the_value(blobs: Blobs, reads: Reads) -> None:
    result = inspect_blob(blobs.store, str(blobs.obj), "key:key099999")
    assert result == (
        f"[blob:{blobs.obj}] key key099999: object{{2}}\n"
        '{\n  "n": 99999,\n  "s": "ééééééééééééééééééééééééééééééééééééééé"\n}'
    )
    value = len(('{"n":99999,"s":"' + "é" * 39 + '"}').encode())
    blob = reads.of(blobs.store.path_of(blobs.obj))
    index = reads.of(index_file(blobs, blobs.obj))
    assert blob <= value + len('"key099999"')
    assert index <= 80 + 32 + 6 * 512 + 2 * 12 + 2 * 16 * 8  # a few windows of the name table


def test_keys_deep_inside_read_their_records_and_names(blobs: Blobs, reads: Reads) -> None:
    result = inspect_blob(blobs.store, str(blobs.obj), "keys:99990..100005")
    assert result.split("\n")[1:] == [
        *(f"key{n:06d}: object{{2}}" for n in range(99990, 100000)),
        f"items: array[{ENTRIES}]",
        "last: string(3)",
    ]
    blob = reads.of(blobs.store.path_of(blobs.obj))
    index = reads.of(index_file(blobs, blobs.obj))
    names = 10 * len('"key000000"') + len('"items"') + len('"last"')
    # Names less than NAME_GAP apart are read in one read, with the small values between.
    assert names <= blob <= names + 11 * NAME_GAP
    assert index <= 80 + 32 + 13 * 12


def test_slice_one_level_down_reads_only_the_entries_shown(blobs: Blobs, reads: Reads) -> None:
    result = inspect_blob(blobs.store, str(blobs.obj), "key:items | slice:399990..")
    assert result.split("\n")[1:] == [f'{{"id":{n}}}' for n in range(399990, 400000)]
    blob = reads.of(blobs.store.path_of(blobs.obj))
    assert blob <= body_bytes(result) + len('"items"')
    assert reads.of(index_file(blobs, blobs.obj)) <= 80 + 32 + 6 * 512 + 3 * 12 + 16 * 8 + 4 * 11


@pytest.mark.parametrize("which", ["text", "array", "obj"])
def test_the_overview_reads_only_its_beginning(blobs: Blobs, reads: Reads, which: str) -> None:
    blob_id = getattr(blobs, which)
    result = inspect_blob(blobs.store, str(blob_id))
    assert f"| {blobs.sizes[blob_id]} bytes" in result.split("\n")[0]
    assert len(result.encode()) <= 8000
    if which == "obj":  # key lines: the names shown, read with the small values between them
        assert reads.total <= 8000 + len(result.split("\n")) * NAME_GAP + 8192
    else:
        assert reads.total <= 8000 + BLOCK + 8192


def test_key_over_a_slice_deep_inside_reads_only_those_entries(blobs: Blobs, reads: Reads) -> None:
    result = inspect_blob(blobs.store, str(blobs.array), "slice:390000..390010 | key:name")
    assert result.split("\n") == [
        f"[blob:{blobs.array}] slice:390000..390010 | key:name: 10 values, 0 missing",
        *(f'"entry {n:08d}"' for n in range(390000, 390010)),
    ]
    entries = sum(
        len(f'{{"id":{n},"name":"entry {n:08d}","tags":["a","b"]}}') for n in range(390000, 390010)
    )
    assert reads.of(blobs.store.path_of(blobs.array)) == entries  # each entry, once
    assert reads.of(index_file(blobs, blobs.array)) <= 80 + 32 + 4 * 65


def test_a_chain_of_keys_over_a_slice_one_level_down(blobs: Blobs, reads: Reads) -> None:
    result = inspect_blob(blobs.store, str(blobs.obj), "key:items | slice:399995.. | key:id")
    assert result.split("\n")[1:] == [str(n) for n in range(399995, 400000)]
    assert reads.of(blobs.store.path_of(blobs.obj)) <= 5 * len('{"id":399999}') + len('"items"')
