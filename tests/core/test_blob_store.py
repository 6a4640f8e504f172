"""FsBlobStore (SPEC 2.5, 2.6): a flat directory of `<id>.txt` / `<id>.json` files, written
atomically, validated before the disk is touched, with errors derived from BlobStoreError."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
import uuid6
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import json_values

from core.content import Structured, Text
from core.store import BlobStore, FsBlobStore
from core.store.blob_id import blob_created_at
from core.store.errors import BlobCorrupt, BlobIOError, BlobNotFound, BlobStoreError, InvalidBlobId

REPO = Path(__file__).resolve().parents[2]
REAL_NAME = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}\.(txt|json)$"
)
BAD_IDS = ["../etc/passwd", "", "not-a-uuid", None, "../../" + "0" * 32]


def names(directory: Path) -> list[str]:
    return sorted(os.listdir(directory)) if directory.exists() else []


# -- layout ---------------------------------------------------------------------------------


def test_it_is_a_blob_store(store: FsBlobStore) -> None:
    assert isinstance(store, BlobStore)


def test_a_text_is_stored_as_utf8_in_id_txt(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Text("héllo\r\nwörld\n"))
    assert names(store.root) == [f"{blob_id}.txt"]
    assert (store.root / f"{blob_id}.txt").read_bytes() == "héllo\r\nwörld\n".encode()


def test_a_json_value_is_stored_as_compact_json_in_id_json(store: FsBlobStore) -> None:
    value = {"b": [1, 2.5, None, True], "a": "é"}
    blob_id = store.store_sync(Structured(value))
    assert names(store.root) == [f"{blob_id}.json"]
    data = (store.root / f"{blob_id}.json").read_bytes()
    assert data == orjson.dumps(value)
    assert orjson.loads(data) == value


def test_ids_are_uuid_v7_made_when_the_blob_was_stored(store: FsBlobStore) -> None:
    # uuid6.uuid7 keeps ids ordered by moving the timestamp 1 ms ahead of the last id when
    # a burst makes ids faster than 1 per ms; earlier tests store in bursts, so let the
    # clock catch up with the last id before checking the time this one records.
    deadline = time.monotonic() + 10
    while (uuid6._last_v7_timestamp or 0) >= time.time_ns() // 10**6:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    before = time.time()
    blob_id = store.store_sync(Text("x"))
    after = time.time()
    created = blob_created_at(blob_id)
    assert blob_id.version == 7
    assert created is not None
    assert before - 0.001 <= created.timestamp() <= after


def test_it_creates_its_directory(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path / "a" / "b" / "blobs")
    blob_id = store.store_sync(Text("x"))
    assert store.load_sync(blob_id) == Text("x")


def test_every_store_makes_a_new_blob(store: FsBlobStore) -> None:
    first, second = store.store_sync(Text("same")), store.store_sync(Text("same"))
    assert first != second
    assert len(names(store.root)) == 2


def test_it_leaves_no_temporary_files(store: FsBlobStore) -> None:
    for n in range(20):
        store.store_sync(Text(str(n)))
        store.store_sync(Structured([n]))
    assert all(REAL_NAME.match(name) for name in names(store.root))


def test_it_reports_the_size_of_a_blob_file(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Text("€uro"))
    assert store.size_sync(blob_id) == 6
    assert store.path_of(str(blob_id)) == store.root / f"{blob_id}.txt"


def test_fsync_mode_stores_the_same_files(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path, fsync=True)
    blob_id = store.store_sync(Structured({"k": 1}))
    assert store.load_sync(blob_id) == Structured({"k": 1})


# -- round trips ----------------------------------------------------------------------------


def test_it_loads_by_uuid_or_by_string(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Text("abc"))
    assert store.load_sync(blob_id) == Text("abc")
    assert store.load_sync(str(blob_id)) == Text("abc")
    assert store.load_sync(str(blob_id).upper()) == Text("abc")


def test_json_whitespace_is_not_kept_but_values_are(store: FsBlobStore) -> None:
    value = orjson.loads(b'{ "a" : [ 1 ,\n 2 ] , "b" : { } }')
    blob_id = store.store_sync(Structured(value))
    assert store.load_sync(blob_id) == Structured({"a": [1, 2], "b": {}})
    assert (store.root / f"{blob_id}.json").read_bytes() == b'{"a":[1,2],"b":{}}'


def test_integers_beyond_64_bits_survive(store: FsBlobStore) -> None:
    value = [2**64, -(2**70), 10**40, {"n": 2**100 + 1}]
    assert store.load_sync(store.store_sync(Structured(value))) == Structured(value)


def test_lone_surrogates_survive_in_text_and_json(store: FsBlobStore) -> None:
    text = "a\ud800b\udfff"
    assert store.load_sync(store.store_sync(Text(text))) == Text(text)
    value = {"\udc80": ["\ud800", "ok"]}
    assert store.load_sync(store.store_sync(Structured(value))) == Structured(value)


def test_a_value_that_is_not_json_is_refused(store: FsBlobStore) -> None:
    with pytest.raises(BlobStoreError):
        store.store_sync(Structured({"x": {1, 2}}))
    assert names(store.root) == []


def test_other_content_types_are_refused(store: FsBlobStore) -> None:
    with pytest.raises(TypeError):
        store.store_sync("plain str")  # type: ignore[arg-type]


texts = st.text(alphabet=st.characters(codec=None)) | st.lists(
    st.sampled_from(["\x00", "\r\n", "\n", "\r", "\ud800", "é", "\U0001f600", "x"])
).map("".join)
store_settings = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@store_settings
@given(texts)
def test_any_text_round_trips(store: FsBlobStore, text: str) -> None:
    assert store.load_sync(store.store_sync(Text(text))) == Text(text)


@store_settings
@given(json_values)
def test_any_json_value_round_trips(store: FsBlobStore, value: Any) -> None:
    assert store.load_sync(store.store_sync(Structured(value))) == Structured(value)


# -- async protocol -------------------------------------------------------------------------


def test_the_async_methods_work(store: FsBlobStore) -> None:
    async def scenario() -> None:
        text_id = await store.store(Text("async text"))
        json_id = await store.store(Structured([1, {"a": None}]))
        assert await store.load(text_id) == Text("async text")
        assert await store.load(str(json_id)) == Structured([1, {"a": None}])
        assert await store.exists(text_id)
        assert not await store.exists(uuid.uuid4())
        with pytest.raises(BlobNotFound):
            await store.load(uuid.uuid4())
        with pytest.raises(InvalidBlobId):
            await store.load("../etc/passwd")
        ids = await asyncio.gather(*(store.store(Text(str(n))) for n in range(20)))
        assert [await store.load(i) for i in ids] == [Text(str(n)) for n in range(20)]

    asyncio.run(scenario())


# -- errors ---------------------------------------------------------------------------------


def test_exists_tells_a_stored_blob_from_a_missing_one(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Structured({}))
    assert store.exists_sync(blob_id)
    assert not store.exists_sync(uuid.uuid4())


def test_a_missing_blob_is_not_found(store: FsBlobStore) -> None:
    missing = uuid.uuid4()
    with pytest.raises(BlobNotFound, match=str(missing)) as raised:
        store.load_sync(missing)
    assert isinstance(raised.value, BlobStoreError)
    assert isinstance(raised.value, LookupError)
    with pytest.raises(BlobNotFound):
        store.size_sync(missing)


def test_a_damaged_json_file_is_corrupt(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Structured({"a": [1, 2, 3]}))
    (store.root / f"{blob_id}.json").write_bytes(b'{"a": [1, 2')
    with pytest.raises(BlobCorrupt, match=str(blob_id)) as raised:
        store.load_sync(blob_id)
    assert isinstance(raised.value, BlobStoreError)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("data", [b"", b"\xff", b"NaN", b"[1] [2]", b"\x80abc", b"{'a': 1}"])
def test_any_bytes_that_are_not_json_are_corrupt(store: FsBlobStore, data: bytes) -> None:
    blob_id = uuid.uuid4()
    store.root.mkdir()
    (store.root / f"{blob_id}.json").write_bytes(data)
    with pytest.raises(BlobCorrupt):
        store.load_sync(blob_id)


def test_a_text_file_that_is_not_utf8_is_corrupt(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Text("fine"))
    (store.root / f"{blob_id}.txt").write_bytes(b"caf\xe9 latin-1")
    with pytest.raises(BlobCorrupt, match="not UTF-8 at byte 3") as raised:
        store.load_sync(blob_id)
    assert isinstance(raised.value, BlobStoreError)


def test_an_unreadable_blob_is_an_io_error(store: FsBlobStore) -> None:
    blob_id = uuid.uuid4()
    (store.root / f"{blob_id}.txt").mkdir(parents=True)  # a directory where a file should be
    with pytest.raises(BlobIOError) as raised:
        store.load_sync(blob_id)
    assert isinstance(raised.value, BlobStoreError)


def test_a_failed_write_leaves_nothing_behind(
    store: FsBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(BlobIOError, match="No space left on device"):
        store.store_sync(Text("x" * 1000))
    assert names(store.root) == []


def test_an_unwritable_directory_is_an_io_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    store = FsBlobStore(tmp_path / "file" / "blobs")
    with pytest.raises(BlobIOError):
        store.store_sync(Text("x"))


@pytest.mark.parametrize("bad", BAD_IDS)
def test_invalid_ids_are_refused_before_any_path_is_touched(
    store: FsBlobStore, monkeypatch: pytest.MonkeyPatch, bad: object
) -> None:
    def touched(*_: object, **__: object) -> None:
        raise AssertionError("a path was touched")

    for name in ("exists", "stat", "read_bytes", "open", "is_file"):
        monkeypatch.setattr(Path, name, touched)
    monkeypatch.setattr("builtins.open", touched)
    for method in (store.load_sync, store.exists_sync, store.path_of, store.size_sync):
        with pytest.raises(InvalidBlobId):
            method(bad)  # type: ignore[arg-type]


def test_invalid_ids_are_refused_by_the_async_methods(store: FsBlobStore) -> None:
    async def scenario() -> None:
        for bad in BAD_IDS:
            with pytest.raises(InvalidBlobId):
                await store.load(bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidBlobId):
                await store.exists(bad)  # type: ignore[arg-type]

    asyncio.run(scenario())


def test_a_file_outside_the_store_cannot_be_reached(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    store = FsBlobStore(tmp_path / "blobs")
    for bad in ("../secret", "../secret.txt", str(secret)):
        with pytest.raises(InvalidBlobId):
            store.load_sync(bad)


# -- concurrency ----------------------------------------------------------------------------


def test_eight_threads_store_at_once(store: FsBlobStore) -> None:
    def work(thread: int) -> list[tuple[uuid.UUID, Any]]:
        out = []
        for n in range(40):
            content = Text(f"thread {thread} blob {n}\n" * 50) if n % 2 else Structured([thread, n])
            out.append((store.store_sync(content), content))
        return out

    with ThreadPoolExecutor(8) as pool:
        results = [pair for chunk in pool.map(work, range(8)) for pair in chunk]
    assert len({blob_id for blob_id, _ in results}) == 8 * 40
    for blob_id, content in results:
        assert store.load_sync(blob_id) == content
    assert len(names(store.root)) == 8 * 40


def _store_from_process(root: str, worker: int, barrier: Any, results: Any) -> None:
    store = FsBlobStore(root)
    barrier.wait()
    ids = []
    for n in range(50):
        content = Text(f"process {worker} blob {n}") if n % 2 else Structured({"w": worker, "n": n})
        ids.append(str(store.store_sync(content)))
    results.put((worker, ids))


def test_four_processes_store_at_once(store: FsBlobStore) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    results = context.Queue()
    processes = [
        context.Process(target=_store_from_process, args=(str(store.root), w, barrier, results))
        for w in range(4)
    ]
    for process in processes:
        process.start()
    collected = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert sorted(collected) == [0, 1, 2, 3]
    all_ids = [blob_id for ids in collected.values() for blob_id in ids]
    assert len(set(all_ids)) == 200
    for worker, ids in collected.items():
        for n, blob_id in enumerate(ids):
            expected = (
                Text(f"process {worker} blob {n}") if n % 2 else Structured({"w": worker, "n": n})
            )
            assert store.load_sync(blob_id) == expected
    assert len(names(store.root)) == 200


# -- crash safety ---------------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import sys
    from core.store import FsBlobStore
    from core.content import Text

    text = "0123456789abcdef" * (200 * 1024 * 1024 // 16)  # 200 MB
    print("ready", flush=True)
    FsBlobStore(sys.argv[1]).store_sync(Text(text))
    print("done", flush=True)
    """
)


def _kill_mid_write(root: Path) -> bool:
    """Start a writer, SIGKILL it once its temporary file appears; True if it died mid-write."""
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(root)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and writer.poll() is None:
            if any(not REAL_NAME.match(name) for name in names(root)):
                writer.send_signal(signal.SIGKILL)
                break
            time.sleep(0.0005)
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.wait(timeout=60)
    # A kill that came after the rename proves nothing; the caller tries again.
    return writer.returncode == -signal.SIGKILL and not any(
        REAL_NAME.match(name) for name in names(root)
    )


def test_a_crash_mid_write_leaves_no_partial_blob_under_a_real_name(tmp_path: Path) -> None:
    for attempt in range(5):
        root = tmp_path / f"attempt{attempt}"
        if _kill_mid_write(root):
            break
        # Whatever landed under a real name must be whole.
        for name in names(root):
            if REAL_NAME.match(name):
                assert (root / name).stat().st_size == 200 * 1024 * 1024
    else:
        pytest.fail("could not kill the writer mid-write in 5 attempts")
    leftovers = names(root)
    assert leftovers, "the killed writer's temporary file should still be there"
    assert not any(REAL_NAME.match(name) for name in leftovers)
    # The store still works, and the leftover is never mistaken for a blob.
    store = FsBlobStore(root)
    blob_id = store.store_sync(Text("after the crash"))
    assert store.load_sync(blob_id) == Text("after the crash")
