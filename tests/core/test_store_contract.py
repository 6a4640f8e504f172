"""The BlobStore contract (docs/store.md; core.store.base), run on every store through one
parametrised fixture, ``any_store``: a folder (FsBlobStore) and SeaweedFS (S3BlobStore).

What only the file store has (paths, temporary files, crashes mid-write) is tested in
test_blob_store.py; what only the S3 store has, in test_s3_store.py.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest
import uuid6
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import json_values

from core.content import Structured, Text
from core.store import BlobStore, open_store
from core.store.base import BlobReader
from core.store.blob_id import blob_created_at, new_blob_id
from core.store.errors import (
    BlobCorrupt,
    BlobNotFound,
    BlobStoreError,
    IndexUnusable,
    InvalidBlobId,
)

BAD_IDS = ["../etc/passwd", "", "not-a-uuid", None, "../../" + "0" * 32]


def stored_bytes(store: BlobStore, blob_id: Any) -> bytes:
    with store.open_sync(blob_id) as reader:
        return b"".join(reader.blocks())


# -- what a blob is kept as ---------------------------------------------------------------


def test_it_is_a_blob_store(any_store: BlobStore) -> None:
    assert isinstance(any_store, BlobStore)


def test_a_text_is_kept_as_its_utf8_bytes(any_store: BlobStore) -> None:
    text = "héllo\r\nwörld\n\r\n\x00end\r"
    blob_id = any_store.store_sync(Text(text))
    assert stored_bytes(any_store, blob_id) == text.encode()
    assert any_store.stat_sync(blob_id).kind == "text"
    assert any_store.size_sync(blob_id) == len(text.encode())


def test_a_json_value_is_kept_as_compact_json(any_store: BlobStore) -> None:
    value = {"b": [1, 2.5, None, True], "a": "é"}
    blob_id = any_store.store_sync(Structured(value))
    assert stored_bytes(any_store, blob_id) == orjson.dumps(value)
    assert any_store.stat_sync(blob_id).kind == "json"


def test_json_whitespace_is_not_kept_but_values_are(any_store: BlobStore) -> None:
    value = orjson.loads(b'{ "a" : [ 1 ,\n 2 ] , "b" : { } }')
    blob_id = any_store.store_sync(Structured(value))
    assert any_store.load_sync(blob_id) == Structured({"a": [1, 2], "b": {}})
    assert stored_bytes(any_store, blob_id) == b'{"a":[1,2],"b":{}}'


def test_lone_surrogates_are_kept_in_text_and_json(any_store: BlobStore) -> None:
    text = "a\ud800b\udfff"
    text_id = any_store.store_sync(Text(text))
    assert stored_bytes(any_store, text_id) == text.encode("utf-8", "surrogatepass")
    assert any_store.load_sync(text_id) == Text(text)
    value = {"\udc80": ["\ud800", "ok"]}
    assert any_store.load_sync(any_store.store_sync(Structured(value))) == Structured(value)


def test_integers_beyond_64_bits_survive(any_store: BlobStore) -> None:
    value = [2**64, -(2**70), 10**40, {"n": 2**100 + 1}]
    assert any_store.load_sync(any_store.store_sync(Structured(value))) == Structured(value)


def test_an_empty_text_is_a_blob_of_no_bytes(any_store: BlobStore) -> None:
    blob_id = any_store.store_sync(Text(""))
    assert any_store.load_sync(blob_id) == Text("")
    assert any_store.size_sync(blob_id) == 0
    with any_store.open_sync(blob_id) as reader:
        assert reader.size == 0
        assert reader.read(0, 10) == b""
        assert list(reader.blocks()) == []


# -- ids ----------------------------------------------------------------------------------


def test_ids_are_uuid_v7_made_when_the_blob_was_stored(any_store: BlobStore) -> None:
    # uuid6.uuid7 moves its clock 1 ms ahead of the last id in a burst; let time catch up.
    deadline = time.monotonic() + 10
    while (uuid6._last_v7_timestamp or 0) >= time.time_ns() // 10**6:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    before = time.time()
    blob_id = any_store.store_sync(Text("x"))
    after = time.time()
    created = blob_created_at(blob_id)
    assert blob_id.version == 7
    assert created is not None
    assert before - 0.001 <= created.timestamp() <= after


def test_every_store_makes_a_new_blob(any_store: BlobStore) -> None:
    first, second = any_store.store_sync(Text("same")), any_store.store_sync(Text("same"))
    assert first != second
    assert set(any_store.ids_sync()) == {first, second}


def test_it_loads_by_uuid_or_by_string_in_any_case(any_store: BlobStore) -> None:
    blob_id = any_store.store_sync(Text("abc"))
    assert any_store.load_sync(blob_id) == Text("abc")
    assert any_store.load_sync(str(blob_id)) == Text("abc")
    assert any_store.load_sync(str(blob_id).upper()) == Text("abc")


def test_ids_lists_the_blobs_and_not_their_indexes(any_store: BlobStore) -> None:
    assert list(any_store.ids_sync()) == []
    stored = {any_store.store_sync(Text("a")), any_store.store_sync(Structured([1]))}
    assert any_store.index_put_sync(str(next(iter(stored))), b"an index")
    assert set(any_store.ids_sync()) == stored


# -- round trips --------------------------------------------------------------------------

texts = st.text(alphabet=st.characters(codec=None)) | st.lists(
    st.sampled_from(["\x00", "\r\n", "\n", "\r", "\ud800", "é", "\U0001f600", "x"])
).map("".join)
store_settings = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@store_settings
@given(texts)
def test_any_text_round_trips_byte_for_byte(any_store: BlobStore, text: str) -> None:
    blob_id = any_store.store_sync(Text(text))
    assert any_store.load_sync(blob_id) == Text(text)
    assert stored_bytes(any_store, blob_id) == text.encode("utf-8", "surrogatepass")


@store_settings
@given(json_values)
def test_any_json_value_round_trips(any_store: BlobStore, value: Any) -> None:
    assert any_store.load_sync(any_store.store_sync(Structured(value))) == Structured(value)


def test_the_async_methods_work(any_store: BlobStore) -> None:
    async def scenario() -> None:
        text_id = await any_store.store(Text("async text"))
        json_id = await any_store.store(Structured([1, {"a": None}]))
        assert await any_store.load(text_id) == Text("async text")
        assert await any_store.load(str(json_id)) == Structured([1, {"a": None}])
        assert await any_store.exists(text_id)
        assert not await any_store.exists(uuid.uuid4())
        with pytest.raises(BlobNotFound):
            await any_store.load(uuid.uuid4())
        with pytest.raises(InvalidBlobId):
            await any_store.load("../etc/passwd")
        ids = await asyncio.gather(*(any_store.store(Text(str(n))) for n in range(20)))
        assert [await any_store.load(i) for i in ids] == [Text(str(n)) for n in range(20)]

    asyncio.run(scenario())


# -- positioned reads ---------------------------------------------------------------------


def test_a_reader_reads_ranges_and_streams_blocks(any_store: BlobStore) -> None:
    data = bytes(range(256)) * 40  # 10,240 bytes, every offset distinct mod 256
    blob_id = new_blob_id()
    assert any_store.put_stream_sync(blob_id, "text", [data[:1000], data[1000:]])
    with any_store.open_sync(blob_id) as reader:
        assert isinstance(reader, BlobReader)
        assert (reader.kind, reader.size) == ("text", len(data))
        assert reader.read(0, 10) == data[:10]
        assert reader.read(5000, 3000) == data[5000:8000]
        assert reader.read(10_000, 1000) == data[10_000:]  # fewer only at the end
        assert reader.read(len(data), 5) == b""
        assert reader.exact(100, 200) == data[100:300]
        with pytest.raises(IndexUnusable):
            reader.exact(10_200, 100)
        blocks = list(reader.blocks(block=4096))
        assert [len(b) for b in blocks] == [4096, 4096, 2048]
        assert b"".join(blocks) == data
        assert b"".join(reader.blocks(start=9000, block=100)) == data[9000:]
        assert list(reader.blocks(start=len(data))) == []


def test_a_stream_put_stores_its_chunks_as_a_blob(any_store: BlobStore) -> None:
    blob_id = new_blob_id()
    chunks = [b'{"a":', b"[1,2,", b'3],"b":"\xc3\xa9"}']
    assert any_store.put_stream_sync(blob_id, "json", iter(chunks)) is True
    assert any_store.load_sync(blob_id) == Structured({"a": [1, 2, 3], "b": "é"})
    assert any_store.put_stream_sync(blob_id, "json", [b"[]"]) is False
    assert any_store.load_sync(blob_id) == Structured({"a": [1, 2, 3], "b": "é"})


# -- indexes ------------------------------------------------------------------------------


def test_a_big_blob_gets_its_index_as_it_is_stored(any_store: BlobStore) -> None:
    small = any_store.store_sync(Text("small\n"))
    big = any_store.store_sync(Text("a line of text\n" * (any_store.index_min_bytes // 15 + 1)))
    assert any_store.index_reader_sync(str(small)) is None
    with any_store.index_reader_sync(str(big)) as index:  # type: ignore[union-attr]
        assert index.size > 0
        assert index.read(0, 8) == b"BVIDX\r\n\x1a"


def test_indexes_are_kept_replaced_read_and_discarded_by_name(any_store: BlobStore) -> None:
    name = str(any_store.store_sync(Text("a blob too small to get an index")))
    assert any_store.index_reader_sync(name) is None
    assert any_store.index_writable_sync()
    assert any_store.index_put_sync(name, b"first version")
    assert any_store.index_put_sync(name, b"second, longer version")
    with any_store.index_reader_sync(name) as index:  # type: ignore[union-attr]
        assert index.size == 22
        assert b"".join(index.blocks()) == b"second, longer version"
    any_store.index_discard_sync(name)
    any_store.index_discard_sync(name)  # already gone: nothing happens
    assert any_store.index_reader_sync(name) is None


def test_discarding_a_blob_discards_its_index(any_store: BlobStore) -> None:
    blob_id = any_store.store_sync(Text("x\n" * (any_store.index_min_bytes // 2 + 1)))
    assert any_store.index_reader_sync(str(blob_id)) is not None
    any_store.discard_sync(blob_id)
    assert not any_store.exists_sync(blob_id)
    assert any_store.index_reader_sync(str(blob_id)) is None
    assert list(any_store.ids_sync()) == []
    any_store.discard_sync(blob_id)  # already gone: nothing happens


# -- no clobbering ------------------------------------------------------------------------


def test_put_stores_under_the_given_id_and_never_overwrites(any_store: BlobStore) -> None:
    text_id, json_id = new_blob_id(), new_blob_id()
    assert any_store.put_sync(text_id, Text("first\r\n")) is True
    assert any_store.put_sync(str(json_id), Structured({"a": [1, 2]})) is True
    assert any_store.put_sync(text_id, Text("second")) is False
    assert any_store.put_sync(text_id, Structured([1])) is False
    assert any_store.load_sync(text_id) == Text("first\r\n")
    assert any_store.load_sync(json_id) == Structured({"a": [1, 2]})
    assert set(any_store.ids_sync()) == {text_id, json_id}


def test_of_eight_threads_putting_one_id_exactly_one_wins(any_store: BlobStore) -> None:
    for _ in range(3):
        blob_id = new_blob_id()
        barrier = threading.Barrier(8)

        def put(writer: int, blob_id: uuid.UUID = blob_id, barrier: Any = barrier) -> bool:
            barrier.wait()
            return any_store.put_sync(blob_id, Text(f"writer {writer}\n" * 1000))

        with ThreadPoolExecutor(8) as pool:
            won = list(pool.map(put, range(8)))
        assert won.count(True) == 1
        winner = won.index(True)
        assert any_store.load_sync(blob_id) == Text(f"writer {winner}\n" * 1000)


def _put_from_process(where: str, blob_id: str, writer: int, barrier: Any, results: Any) -> None:
    store = open_store(where)
    barrier.wait()
    results.put((writer, store.put_sync(blob_id, Text(f"process {writer}\n" * 1000))))


def _where(store: BlobStore) -> str:
    return getattr(store, "url", None) or str(store.root)  # type: ignore[attr-defined]


def test_of_four_processes_putting_one_id_exactly_one_wins(any_store: BlobStore) -> None:
    context = multiprocessing.get_context("spawn")
    blob_id = str(new_blob_id())
    barrier, results = context.Barrier(4), context.Queue()
    processes = [
        context.Process(
            target=_put_from_process, args=(_where(any_store), blob_id, w, barrier, results)
        )
        for w in range(4)
    ]
    for process in processes:
        process.start()
    won = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert sorted(won) == [0, 1, 2, 3]
    winners = [writer for writer, ok in won.items() if ok]
    assert len(winners) == 1
    assert any_store.load_sync(blob_id) == Text(f"process {winners[0]}\n" * 1000)


def test_eight_threads_store_at_once(any_store: BlobStore) -> None:
    def work(thread: int) -> list[tuple[uuid.UUID, Any]]:
        out = []
        for n in range(20):
            content = Text(f"thread {thread} blob {n}\n" * 50) if n % 2 else Structured([thread, n])
            out.append((any_store.store_sync(content), content))
        return out

    with ThreadPoolExecutor(8) as pool:
        results = [pair for chunk in pool.map(work, range(8)) for pair in chunk]
    assert len({blob_id for blob_id, _ in results}) == 8 * 20
    for blob_id, content in results:
        assert any_store.load_sync(blob_id) == content
    assert len(set(any_store.ids_sync())) == 8 * 20


def _store_from_process(where: str, worker: int, barrier: Any, results: Any) -> None:
    store = open_store(where)
    barrier.wait()
    ids = []
    for n in range(25):
        content = Text(f"process {worker} blob {n}") if n % 2 else Structured({"w": worker, "n": n})
        ids.append(str(store.store_sync(content)))
    results.put((worker, ids))


def test_four_processes_store_at_once(any_store: BlobStore) -> None:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(4), context.Queue()
    processes = [
        context.Process(target=_store_from_process, args=(_where(any_store), w, barrier, results))
        for w in range(4)
    ]
    for process in processes:
        process.start()
    collected = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    all_ids = [blob_id for ids in collected.values() for blob_id in ids]
    assert len(set(all_ids)) == 100
    for worker, ids in collected.items():
        for n, blob_id in enumerate(ids):
            expected = (
                Text(f"process {worker} blob {n}") if n % 2 else Structured({"w": worker, "n": n})
            )
            assert any_store.load_sync(blob_id) == expected
    assert {str(i) for i in any_store.ids_sync()} == set(all_ids)


# -- errors -------------------------------------------------------------------------------


def test_exists_tells_a_stored_blob_from_a_missing_one(any_store: BlobStore) -> None:
    blob_id = any_store.store_sync(Structured({}))
    assert any_store.exists_sync(blob_id)
    assert not any_store.exists_sync(uuid.uuid4())


def test_a_missing_blob_is_not_found_by_every_read(any_store: BlobStore) -> None:
    missing = uuid.uuid4()
    for read in (any_store.load_sync, any_store.size_sync, any_store.stat_sync):
        with pytest.raises(BlobNotFound, match=str(missing)) as raised:
            read(missing)
        assert isinstance(raised.value, BlobStoreError)
        assert isinstance(raised.value, LookupError)
    with pytest.raises(BlobNotFound):
        any_store.open_sync(missing)


@pytest.mark.parametrize("data", [b"", b"\xff", b"NaN", b"[1] [2]", b"\x80abc", b"{'a': 1}"])
def test_any_bytes_that_are_not_json_are_corrupt(any_store: BlobStore, data: bytes) -> None:
    blob_id = new_blob_id()
    assert any_store.put_stream_sync(blob_id, "json", [data])
    with pytest.raises(BlobCorrupt, match=str(blob_id)) as raised:
        any_store.load_sync(blob_id)
    assert "\n" not in str(raised.value)


def test_a_text_that_is_not_utf8_is_corrupt(any_store: BlobStore) -> None:
    blob_id = new_blob_id()
    assert any_store.put_stream_sync(blob_id, "text", [b"caf\xe9 latin-1"])
    with pytest.raises(BlobCorrupt, match="not UTF-8 at byte 3"):
        any_store.load_sync(blob_id)
    with any_store.open_sync(blob_id) as reader:  # its bytes can still be read as they are
        assert reader.read(0, 100) == b"caf\xe9 latin-1"


def test_a_value_that_is_not_json_is_refused_and_nothing_is_kept(any_store: BlobStore) -> None:
    with pytest.raises(BlobStoreError):
        any_store.store_sync(Structured({"x": {1, 2}}))
    with pytest.raises(TypeError):
        any_store.store_sync("plain str")  # type: ignore[arg-type]
    assert list(any_store.ids_sync()) == []


@pytest.mark.parametrize("bad", BAD_IDS)
def test_every_method_refuses_an_invalid_id(any_store: BlobStore, bad: Any) -> None:
    reads = (
        any_store.load_sync,
        any_store.exists_sync,
        any_store.stat_sync,
        any_store.size_sync,
        any_store.open_sync,
        any_store.discard_sync,
    )
    for method in reads:
        with pytest.raises(InvalidBlobId):
            method(bad)
    with pytest.raises(InvalidBlobId):
        any_store.put_sync(bad, Text("x"))
    with pytest.raises(InvalidBlobId):
        any_store.put_stream_sync(bad, "text", [b"x"])
    assert list(any_store.ids_sync()) == []


def test_invalid_ids_are_refused_by_the_async_methods(any_store: BlobStore) -> None:
    async def scenario() -> None:
        for bad in BAD_IDS:
            with pytest.raises(InvalidBlobId):
                await any_store.load(bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidBlobId):
                await any_store.exists(bad)  # type: ignore[arg-type]

    asyncio.run(scenario())
