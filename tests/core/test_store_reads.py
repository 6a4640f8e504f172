"""The store's range-read interface (core.store.base) on the file store: stat, open and
its reads and blocks, the store's indexes by name, streamed puts, open_store, and the rule
that nothing outside core/store/ reads a blob by path."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.content import Structured, Text
from core.json_values import dumps_for_storage
from core.store import (
    BlobIOError,
    BlobNotFound,
    BlobReader,
    BlobStat,
    BlobStore,
    FsBlobStore,
    IndexUnusable,
    InvalidBlobId,
    open_store,
)
from core.store.index import INDEX_FOLDER, index_path, open_index
from core.store.index.index_file import BytesReader
from core.store.index.json_from_file import json_index_from_file
from core.store.index.json_index import json_index_from_value
from core.store.index.text_index import text_index_from_bytes, text_index_from_file

REPO = Path(__file__).resolve().parents[2]
TEXT = "héllo\r\nwörld\nno newline at the end ☃"


@pytest.fixture
def store(tmp_path: Path) -> FsBlobStore:
    return FsBlobStore(tmp_path / "blobs")


def test_the_file_store_is_a_blob_store_with_range_reads(store: FsBlobStore) -> None:
    assert isinstance(store, BlobStore)
    with store.open_sync(store.store_sync(Text("x"))) as blob:
        assert isinstance(blob, BlobReader)


# --- stat ------------------------------------------------------------------------------------


def test_stat_gives_the_kind_and_the_size_in_bytes(store: FsBlobStore) -> None:
    text = store.store_sync(Text(TEXT))
    value = {"a": [1, 2.5, "é"], "n": 10**25}
    json = store.store_sync(Structured(value))
    assert store.stat_sync(text) == BlobStat("text", len(TEXT.encode()))
    assert store.stat_sync(str(json)) == BlobStat("json", len(dumps_for_storage(value)))
    assert store.size_sync(text) == len(TEXT.encode())


def test_stat_of_a_missing_or_malformed_id_says_so(store: FsBlobStore) -> None:
    with pytest.raises(BlobNotFound):
        store.stat_sync(uuid.uuid4())
    with pytest.raises(InvalidBlobId):
        store.stat_sync("../etc/passwd")
    with pytest.raises(BlobNotFound):
        store.open_sync(uuid.uuid4())
    with pytest.raises(InvalidBlobId):
        store.open_sync("not-an-id")


def test_a_folder_where_a_blob_should_be_is_an_io_error_everywhere(store: FsBlobStore) -> None:
    blob_id = uuid.uuid4()
    (store.root / f"{blob_id}.txt").mkdir(parents=True)
    for read in (store.stat_sync, store.open_sync, store.load_sync, store.size_sync):
        with pytest.raises(BlobIOError, match="Is a directory"):
            read(blob_id)


# --- open, read, exact, blocks ---------------------------------------------------------------


def test_reads_give_the_bytes_at_their_offsets(store: FsBlobStore) -> None:
    data = TEXT.encode()
    with store.open_sync(store.store_sync(Text(TEXT))) as blob:
        assert (blob.kind, blob.size) == ("text", len(data))
        assert blob.read(0, blob.size) == data
        assert blob.read(3, 5) == data[3:8]
        assert blob.read(len(data) - 2, 100) == data[-2:]  # fewer only at the end
        assert blob.read(len(data), 10) == b""
        assert blob.read(len(data) + 50, 10) == b""
        assert blob.read(4, 0) == b"" and blob.read(4, -3) == b""
        assert blob.exact(1, 4) == data[1:5]
        with pytest.raises(IndexUnusable):
            blob.exact(len(data) - 2, 3)


def test_a_json_blob_opens_as_json(store: FsBlobStore) -> None:
    value = [{"id": n} for n in range(10)]
    with store.open_sync(store.store_sync(Structured(value))) as blob:
        assert blob.kind == "json"
        assert blob.read(0, blob.size) == dumps_for_storage(value)


@pytest.mark.parametrize("block", [1, 2, 7, 1 << 20])
@pytest.mark.parametrize("start", [0, 1, 6, 40])
def test_blocks_stream_the_rest_in_pieces_of_at_most_a_block(
    store: FsBlobStore, block: int, start: int
) -> None:
    data = TEXT.encode()
    with store.open_sync(store.store_sync(Text(TEXT))) as blob:
        pieces = list(blob.blocks(start, block))
    assert b"".join(pieces) == data[start:]
    assert all(0 < len(piece) <= block for piece in pieces)
    assert all(len(piece) == block for piece in pieces[:-1])


def test_blocks_past_the_end_and_of_an_empty_blob_are_none(store: FsBlobStore) -> None:
    with store.open_sync(store.store_sync(Text("abc"))) as blob:
        assert list(blob.blocks(3)) == [] and list(blob.blocks(100)) == []
    with store.open_sync(store.store_sync(Text(""))) as blob:
        assert blob.size == 0 and list(blob.blocks()) == [] and blob.read(0, 10) == b""


def test_a_reader_closes_once_and_holds_no_file_after(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Text(TEXT))
    before = len(os.listdir("/proc/self/fd"))
    with store.open_sync(blob_id) as blob:
        assert len(os.listdir("/proc/self/fd")) == before + 1
    assert len(os.listdir("/proc/self/fd")) == before
    other = os.open(os.devnull, os.O_RDONLY)  # may take the closed reader's number
    try:
        blob.close()  # a second close must not close the file that took the number
        os.fstat(other)
    finally:
        os.close(other)


def test_a_reader_reads_the_file_it_opened_even_once_discarded(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Text("kept while open\n"))
    with store.open_sync(blob_id) as blob:
        store.discard_sync(blob_id)
        assert blob.read(0, 100) == b"kept while open\n"
    assert not store.exists_sync(blob_id)


# --- the store's indexes, by name -----------------------------------------------------------


def test_an_index_is_kept_read_replaced_and_discarded_by_name(store: FsBlobStore) -> None:
    name = str(uuid.uuid4())
    assert store.index_reader_sync(name) is None
    assert store.index_writable_sync()
    assert store.index_put_sync(name, b"first index")
    assert index_path(store.root, name).read_bytes() == b"first index"  # docs/store.md
    with store.index_reader_sync(name) as index:  # type: ignore[union-attr]
        assert (index.size, index.read(0, 100)) == (11, b"first index")
    assert store.index_put_sync(name, b"second")
    with store.index_reader_sync(name) as index:  # type: ignore[union-attr]
        assert index.read(0, 100) == b"second"
    store.index_discard_sync(name)
    assert store.index_reader_sync(name) is None
    store.index_discard_sync(name)  # gone already: nothing to do
    assert [p.name for p in (store.root / INDEX_FOLDER).iterdir()] == []  # no temporaries


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "x\0y", "/etc/passwd"])
def test_an_index_name_never_becomes_another_path(store: FsBlobStore, name: str) -> None:
    for call in (
        lambda: store.index_reader_sync(name),
        lambda: store.index_put_sync(name, b"x"),
        lambda: store.index_discard_sync(name),
    ):
        with pytest.raises(ValueError, match="not an index name"):
            call()


def test_a_store_that_cannot_keep_indexes_says_so(store: FsBlobStore) -> None:
    store.root.mkdir()
    (store.root / INDEX_FOLDER).write_bytes(b"")  # a file where the folder should be
    assert not store.index_writable_sync()
    assert not store.index_put_sync(str(uuid.uuid4()), b"index")


def test_discarding_a_blob_discards_its_index(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Text("line\n" * 10))
    assert store.index_put_sync(str(blob_id), b"its index")
    store.discard_sync(blob_id)
    assert store.index_reader_sync(str(blob_id)) is None
    assert not store.exists_sync(blob_id)
    store.discard_sync(blob_id)  # twice is fine


def test_a_blob_that_cannot_be_deleted_is_an_io_error(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Text("x"))
    store.index_put_sync(str(blob_id), b"index")
    (store.root / f"{blob_id}.json").mkdir()  # unlink refuses a folder, even to root
    with pytest.raises(BlobIOError, match=f"cannot delete blob {blob_id}: Is a directory"):
        store.discard_sync(blob_id)
    assert not (store.root / f"{blob_id}.txt").exists()  # the others still went
    assert store.index_reader_sync(str(blob_id)) is None


# --- open_index over the interface ------------------------------------------------------------


def test_open_index_keeps_a_missing_index_through_the_store(store: FsBlobStore) -> None:
    text = "".join(f"line {n}\n" for n in range(5000))
    blob_id = store.store_sync(Text(text))
    store.index_discard_sync(str(blob_id))
    with open_index(store, blob_id, min_bytes=0) as index:  # type: ignore[union-attr]
        assert index.read_lines(4999, 5000)[0].text == "line 4998"
    with store.index_reader_sync(str(blob_id)) as kept:  # type: ignore[union-attr]
        assert kept.read(0, kept.size) == text_index_from_bytes(text.encode())


def test_open_index_of_a_missing_blob_raises_the_stores_error(store: FsBlobStore) -> None:
    with pytest.raises(BlobNotFound):
        open_index(store, uuid.uuid4())


# --- builders read any BlobReader, in blocks of any size --------------------------------------


class UnevenReader(BytesReader):
    """A reader whose blocks come in uneven pieces, as a network stream may give them."""

    def blocks(self, start: int = 0, block: int = 1 << 20) -> Iterator[bytes]:
        sizes = [1, 4095, 4097, 3, 10_000, 77]
        at, turn = start, 0
        while at < self.size:
            size = min(sizes[turn % len(sizes)], block)
            yield self.data[at : at + size]
            at, turn = at + size, turn + 1


def test_a_text_index_does_not_depend_on_how_blocks_fall() -> None:
    data = "".join(f"{'é' * (n % 5)}{n}\r\n" for n in range(3000)).encode() + b"tail"
    expected = text_index_from_bytes(data, block=100, group=7)
    assert text_index_from_file(UnevenReader(data), block=100, group=7) == expected
    assert text_index_from_file(BytesReader(data), block=100, group=7) == expected


def test_a_json_index_is_made_from_a_reader() -> None:
    value = {"items": [{"n": n, "s": "é" * (n % 3)} for n in range(3000)], "total": 3000}
    data = dumps_for_storage(value)
    assert json_index_from_file(UnevenReader(data, "json")) == json_index_from_value(value, data)


# --- streamed puts ------------------------------------------------------------------------------


def test_a_streamed_put_stores_its_chunks_and_never_clobbers(store: FsBlobStore) -> None:
    blob_id = uuid.uuid4()
    assert store.put_stream_sync(blob_id, "text", iter([b"one\n", b"", b"two\n"]))
    assert store.load_sync(blob_id) == Text("one\ntwo\n")
    assert not store.put_stream_sync(blob_id, "text", iter([b"other"]))
    assert not store.put_stream_sync(blob_id, "json", iter([b"[1]"]))
    assert store.load_sync(blob_id) == Text("one\ntwo\n")
    json_id = uuid.uuid4()
    assert store.put_stream_sync(json_id, "json", [b'{"a":', b"[1,2]}"])
    assert store.load_sync(json_id) == Structured({"a": [1, 2]})
    assert store.index_reader_sync(str(json_id)) is None  # no index is written


def test_a_streamed_put_that_fails_midway_leaves_nothing(store: FsBlobStore) -> None:
    def chunks() -> Iterator[bytes]:
        yield b"half of it"
        raise TypeError("the producer failed")

    blob_id = uuid.uuid4()
    with pytest.raises(TypeError, match="the producer failed"):
        store.put_stream_sync(blob_id, "text", chunks())
    assert not store.exists_sync(blob_id)
    assert os.listdir(store.root) == []  # no temporary file either
    with pytest.raises(ValueError, match="text or json"):
        store.put_stream_sync(blob_id, "xml", [b"<a/>"])  # type: ignore[arg-type]


# --- open_store ---------------------------------------------------------------------------------


def test_open_store_gives_a_file_store_for_a_path(tmp_path: Path) -> None:
    for where in (tmp_path / "a", str(tmp_path / "b"), "relative/blobs"):
        store = open_store(where, index_min_bytes=5)
        assert type(store) is FsBlobStore
        assert store.index_min_bytes == 5
        assert str(store) == str(where)


def test_open_store_imports_boto3_only_for_an_s3_url(tmp_path: Path) -> None:
    script = f"""
import sys
from core.store import open_store
store = open_store({str(tmp_path)!r})
assert "boto3" not in sys.modules, "boto3 imported for a file store"
store = open_store("s3://some-bucket/some/prefix", index_min_bytes=7)
assert type(store).__name__ == "S3BlobStore", type(store)
assert store.index_min_bytes == 7
assert "boto3" in sys.modules
print("ok")
"""
    environment = {
        **os.environ,
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # never contacted: no request is made
        "AWS_ACCESS_KEY_ID": "unused",
        "AWS_SECRET_ACCESS_KEY": "unused",
    }
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# --- nothing outside core/store/ reads a blob by path -----------------------------------------


def path_uses(source: str) -> list[tuple[int, str]]:
    """`path_of` (or `_path_of`) of anything, and `.root` that is not called (a store's
    folder; `index.root()` is a JSON index's top node): (line, what) for each."""
    tree = ast.parse(source)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr in ("path_of", "_path_of"):
            found.append((node.lineno, f".{node.attr}"))
        elif node.attr == "root" and id(node) not in called:
            found.append((node.lineno, ".root"))
    return found


def test_the_rule_finds_what_it_forbids() -> None:
    source = (
        "path = store.path_of(blob_id)\n"
        "folder = renderings().root / 'x'\n"
        "top = index.root()\n"
        "other = store._path_of(blob_id)\n"
    )
    assert path_uses(source) == [(1, ".path_of"), (2, ".root"), (4, "._path_of")]


def test_nothing_outside_the_store_knows_a_blob_by_path() -> None:
    """core/ (outside core/store/), blobviewer/ and bench/ read blobs, indexes and
    renderings through the BlobStore interface only, so any store serves them."""
    offenders = []
    for folder in ("core", "blobviewer", "bench"):
        for path in sorted((REPO / folder).rglob("*.py")):
            relative = path.relative_to(REPO)
            if relative.parts[:2] == ("core", "store"):
                continue
            for line, what in path_uses(path.read_text(encoding="utf-8")):
                offenders.append(f"{relative}:{line}: {what}")
    assert offenders == []
