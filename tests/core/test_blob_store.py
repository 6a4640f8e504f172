"""FsBlobStore (docs/store.md): a flat directory of `<id>.txt` / `<id>.json` files, written
atomically, validated before the disk is touched, with errors derived from BlobStoreError.

What every store does (round trips, ids, no-clobber, concurrent writers, errors) is tested
on this store and the S3 store alike in test_store_contract.py; here, what only a folder
has: its files, paths, temporary files and crashes mid-write."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import orjson
import pytest

from core.content import Structured, Text
from core.store import FsBlobStore
from core.store.errors import BlobCorrupt, BlobIOError, BlobStoreError, InvalidBlobId
from core.store.fs import UNNAMED_MAX_BYTES

REPO = Path(__file__).resolve().parents[2]
REAL_NAME = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}\.(txt|json)$"
)
BAD_IDS = ["../etc/passwd", "", "not-a-uuid", None, "../../" + "0" * 32]


def names(directory: Path) -> list[str]:
    return sorted(os.listdir(directory)) if directory.exists() else []


# -- layout ---------------------------------------------------------------------------------


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


def test_it_creates_its_directory(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path / "a" / "b" / "blobs")
    blob_id = store.store_sync(Text("x"))
    assert store.load_sync(blob_id) == Text("x")


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


# -- errors ---------------------------------------------------------------------------------


def test_a_damaged_json_file_is_corrupt(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Structured({"a": [1, 2, 3]}))
    (store.root / f"{blob_id}.json").write_bytes(b'{"a": [1, 2')
    with pytest.raises(BlobCorrupt, match=str(blob_id)) as raised:
        store.load_sync(blob_id)
    assert isinstance(raised.value, BlobStoreError)
    assert "\n" not in str(raised.value)


def test_an_unreadable_blob_is_an_io_error(store: FsBlobStore) -> None:
    blob_id = uuid.uuid4()
    (store.root / f"{blob_id}.txt").mkdir(parents=True)  # a directory where a file should be
    with pytest.raises(BlobIOError) as raised:
        store.load_sync(blob_id)
    assert isinstance(raised.value, BlobStoreError)


@pytest.mark.parametrize("size", [1000, UNNAMED_MAX_BYTES + 1], ids=["unnamed", "named"])
def test_a_failed_write_leaves_nothing_behind(
    store: FsBlobStore, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    # The last step of either way of writing: a link of the unnamed file, a rename of the
    # named one.
    monkeypatch.setattr(os, "link", refuse)
    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(BlobIOError, match="No space left on device"):
        store.store_sync(Text("x" * size))
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


def test_a_file_outside_the_store_cannot_be_reached(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    store = FsBlobStore(tmp_path / "blobs")
    for bad in ("../secret", "../secret.txt", str(secret)):
        with pytest.raises(InvalidBlobId):
            store.load_sync(bad)


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
