"""What only the S3 store has (docs/object-storage.md), on a real SeaweedFS: its objects and keys,
the server's conditional writes, reads by HTTP Range, S3Objects for session logs, its URL, its
errors, boto3 loaded only for it, and the CLI's --store. (The contract every store keeps is in
test_store_contract.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from botocore.exceptions import ClientError

from core.content import Structured, Text
from core.inspect_tool import inspect_blob
from core.json_stream import PromotedJson
from core.promotion import admit_sync, promote
from core.store import FsBlobStore, open_store
from core.store.blob_id import new_blob_id
from core.store.errors import BlobIOError, BlobNotFound, BlobStoreError, IndexUnusable
from core.store.s3 import PAGE, S3BlobStore, S3Objects

if TYPE_CHECKING:
    from conftest import S3Place
    from s3_server import SeaweedServer

REPO = Path(__file__).resolve().parents[2]


class GetCounter:
    """The GetObject calls a client makes (their Range) and the body bytes they return,
    seen through boto3's event hooks."""

    def __init__(self, client: Any) -> None:
        self.events = client.meta.events
        self.ranges: list[str | None] = []
        self.bytes = 0
        self.events.register("provide-client-params.s3.GetObject", self._params)
        self.events.register("after-call.s3.GetObject", self._after)

    def _params(self, params: dict[str, Any], **_: Any) -> None:
        self.ranges.append(params.get("Range"))

    def _after(self, parsed: dict[str, Any], **_: Any) -> None:
        self.bytes += int(parsed.get("ContentLength") or 0)

    def reset(self) -> None:
        self.ranges.clear()
        self.bytes = 0

    def close(self) -> None:
        self.events.unregister("provide-client-params.s3.GetObject", self._params)
        self.events.unregister("after-call.s3.GetObject", self._after)


@pytest.fixture
def s3(s3_place: S3Place) -> S3BlobStore:
    store = open_store(s3_place.url)
    assert isinstance(store, S3BlobStore)
    return store


@pytest.fixture
def gets(s3: S3BlobStore) -> Iterator[GetCounter]:
    counter = GetCounter(s3.client)
    yield counter
    counter.close()


def raw(place: S3Place, key: str) -> bytes:
    return place.client().get_object(Bucket=place.bucket, Key=key)["Body"].read()


def keys(place: S3Place) -> list[str]:
    listed = place.client().list_objects_v2(Bucket=place.bucket, Prefix=place.prefix + "/")
    return sorted(item["Key"] for item in listed.get("Contents", ()))


# -- objects, byte for byte as the file store's files ---------------------------------------


def test_blobs_and_indexes_are_the_file_stores_bytes_under_the_prefix(
    s3: S3BlobStore, s3_place: S3Place, tmp_path: Path
) -> None:
    fs = FsBlobStore(tmp_path / "blobs")
    contents = {
        "txt": Text("héllo\r\nwörld\n\ud800 lone\n" * 70_000),  # > 1 MB: indexed
        "json": Structured({"rows": [{"n": n, "s": "é" * (n % 7)} for n in range(60_000)]}),
        "small.json": Structured([1, "\udc80", {"a": None}]),
    }
    ids = {}
    for name, content in contents.items():
        blob_id = ids[name] = new_blob_id()
        assert s3.put_sync(blob_id, content) and fs.put_sync(blob_id, content)
    prefix = s3_place.prefix
    expected = sorted(
        [f"{prefix}/{ids['txt']}.txt", f"{prefix}/{ids['json']}.json"]
        + [f"{prefix}/{ids['small.json']}.json"]
        + [f"{prefix}/.index/{ids['txt']}.idx", f"{prefix}/.index/{ids['json']}.idx"]
    )
    assert keys(s3_place) == expected
    for key in expected:
        relative = key[len(prefix) + 1 :]
        assert raw(s3_place, key) == (fs.root / relative).read_bytes(), key
    client = s3_place.client()
    types = {
        name: client.head_object(Bucket=s3_place.bucket, Key=key)["ContentType"]
        for name, key in [
            ("txt", f"{prefix}/{ids['txt']}.txt"),
            ("json", f"{prefix}/{ids['json']}.json"),
        ]
    }
    assert types == {"txt": "text/plain; charset=utf-8", "json": "application/json"}


def test_a_promoted_big_json_keeps_the_index_made_as_it_was_written(
    s3: S3BlobStore, s3_place: S3Place, tmp_path: Path
) -> None:
    output = orjson.dumps([{"n": n, "tag": f"item-{n}"} for n in range(80_000)]).decode()
    promoted = promote(output)
    assert isinstance(promoted.content, PromotedJson) and promoted.content.index
    stored = admit_sync(promoted, s3)
    blob_id = stored.text[len("[blob:") : stored.text.index("]")]
    index_key = f"{s3_place.prefix}/.index/{blob_id}.idx"
    assert raw(s3_place, index_key) == promoted.content.index
    fs = FsBlobStore(tmp_path / "blobs")
    fs.put_sync(blob_id, Structured(orjson.loads(output)))
    assert inspect_blob(s3, blob_id, "slice:79990..") == inspect_blob(fs, blob_id, "slice:79990..")


def test_seaweedfs_answers_412_to_the_losers_of_concurrent_conditional_puts(
    s3_place: S3Place,
) -> None:
    clients = [s3_place.client() for _ in range(8)]
    for round_ in range(5):
        key = f"{s3_place.prefix}/race-{round_}"
        barrier = threading.Barrier(len(clients))

        def put(writer: int, key: str = key, barrier: threading.Barrier = barrier) -> Any:
            barrier.wait()
            try:
                return clients[writer].put_object(
                    Bucket=s3_place.bucket,
                    Key=key,
                    Body=f"writer {writer}".encode(),
                    IfNoneMatch="*",
                )["ResponseMetadata"]["HTTPStatusCode"]
            except ClientError as error:
                return (
                    error.response["ResponseMetadata"]["HTTPStatusCode"],
                    error.response["Error"]["Code"],
                )

        with ThreadPoolExecutor(len(clients)) as pool:
            answers = list(pool.map(put, range(len(clients))))
        assert answers.count(200) == 1, answers
        assert sorted(a for a in answers if a != 200) == [(412, "PreconditionFailed")] * 7
        assert raw(s3_place, key) == f"writer {answers.index(200)}".encode()


# -- selectors read ranges ------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_blobs(
    s3_server: SeaweedServer, s3_bucket: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[FsBlobStore, S3BlobStore, dict[str, Any]]:
    """The same multi-MB text, array and object in a file store and in an S3 store (made
    once for the module: storing them takes seconds)."""
    fs = FsBlobStore(tmp_path_factory.mktemp("big") / "blobs")
    url = f"s3://{s3_bucket}/big-{new_blob_id().hex}"
    s3 = S3BlobStore.from_url(url, client=s3_server.client())
    contents = {
        "text": Text("".join(f"line {n:07d} of the log é\r\n" for n in range(1, 300_001))),
        "array": Structured(
            [{"n": n, "name": f"entry {n}", "ok": n % 3 == 0} for n in range(150_000)]
        ),
        "object": Structured(
            {f"key{n:06d}": {"value": n, "text": "x" * (n % 50)} for n in range(80_000)}
        ),
    }
    ids = {}
    for name, content in contents.items():
        blob_id = ids[name] = new_blob_id()
        assert s3.put_sync(blob_id, content) and fs.put_sync(blob_id, content)
        assert s3.size_sync(blob_id) > 4_000_000
    return fs, s3, ids


@pytest.mark.parametrize(
    ("blob", "selector"),
    [
        ("text", "lines:250000-250040"),
        ("text", "lines:299990-"),
        ("text", None),
        ("array", "slice:110000..110020"),
        ("array", "slice:119990.. | slice:2..5"),
        ("array", None),
        ("object", "key:key054321"),
        ("object", "keys:70000..70030"),
        ("object", None),
    ],
)
def test_selectors_deep_in_a_big_blob_read_only_ranges(
    big_blobs: tuple[FsBlobStore, S3BlobStore, dict[str, Any]], blob: str, selector: str | None
) -> None:
    fs, s3, ids = big_blobs
    blob_id = str(ids[blob])
    gets = GetCounter(s3.client)
    try:
        result = inspect_blob(s3, blob_id, selector)
    finally:
        gets.close()
    assert result == inspect_blob(fs, blob_id, selector)
    assert gets.ranges, "nothing was read"
    assert all(r is not None and r.startswith("bytes=") for r in gets.ranges), gets.ranges
    size = s3.size_sync(blob_id)
    assert gets.bytes <= 24 * PAGE + len(result.encode()) * 2, (gets.bytes, size, gets.ranges)
    assert gets.bytes < size // 8


def test_a_blob_without_an_index_gets_one_from_its_first_read(
    s3: S3BlobStore, gets: GetCounter, tmp_path: Path
) -> None:
    text = "".join(f"row {n}\n" for n in range(400_000))  # 3.6 MB
    blob_id = new_blob_id()
    assert s3.put_stream_sync(blob_id, "text", [text.encode()])  # stream puts keep no index
    assert s3.index_reader_sync(str(blob_id)) is None
    fs = FsBlobStore(tmp_path / "blobs")
    fs.put_sync(blob_id, Text(text))
    expected = inspect_blob(fs, str(blob_id), "lines:399000-399010")
    assert inspect_blob(s3, str(blob_id), "lines:399000-399010") == expected
    assert s3.index_reader_sync(str(blob_id)) is not None  # kept under <prefix>/.index/
    gets.reset()
    assert inspect_blob(s3, str(blob_id), "lines:399000-399010") == expected
    assert gets.bytes < 8 * PAGE


def test_grep_streams_the_blob_and_finds_what_the_file_store_finds(
    big_blobs: tuple[FsBlobStore, S3BlobStore, dict[str, Any]],
) -> None:
    fs, s3, ids = big_blobs
    blob_id = str(ids["text"])
    gets = GetCounter(s3.client)
    try:
        result = inspect_blob(s3, blob_id, "grep:^line 00299[0-9]{2} ")
    finally:
        gets.close()
    assert result == inspect_blob(fs, blob_id, "grep:^line 00299[0-9]{2} ")
    assert "29990: line 0029990" in result
    size = s3.size_sync(blob_id)
    assert gets.bytes <= size + 8 * PAGE  # one pass (and a few pages), never the blob twice
    assert all(r is not None for r in gets.ranges)


def test_blocks_is_one_streamed_get(s3: S3BlobStore, gets: GetCounter) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    blob_id = new_blob_id()
    assert s3.put_stream_sync(blob_id, "text", [data])
    with s3.open_sync(blob_id) as reader:
        gets.reset()
        blocks = list(reader.blocks(start=5, block=1 << 20))
    assert b"".join(blocks) == data[5:]
    assert [len(b) for b in blocks] == [1 << 20] * 3 + [12]
    assert gets.ranges == [f"bytes=5-{len(data) - 1}"]


def test_an_index_replaced_while_it_is_read_is_unusable(s3: S3BlobStore) -> None:
    name = str(s3.store_sync(Text("a blob")))
    assert s3.index_put_sync(name, b"A" * (3 * PAGE))
    index = s3.index_reader_sync(name)
    assert index is not None
    assert s3.index_put_sync(name, b"B" * (3 * PAGE))
    with pytest.raises(IndexUnusable):
        index.read(2 * PAGE, 10)  # a page not read yet: never a mix of two versions


# -- S3Objects: session logs and other plain objects ----------------------------------------


def test_objects_are_put_only_when_their_condition_holds(s3: S3BlobStore) -> None:
    logs = s3.objects("sessions")
    assert logs.url.endswith("/sessions")
    assert logs.get("a.jsonl") is None and logs.head("a.jsonl") is None
    first = logs.put("a.jsonl", b"line 1\n", if_none_match=True)
    assert first is not None
    assert logs.put("a.jsonl", b"other", if_none_match=True) is None
    second = logs.put("a.jsonl", b"line 1\nline 2\n", if_match=first)
    assert second is not None and second != first
    assert logs.put("a.jsonl", b"stale", if_match=first) is None
    got = logs.get("a.jsonl")
    assert got is not None and (got.data, got.etag) == (b"line 1\nline 2\n", second)
    info = logs.head("a.jsonl")
    assert info is not None and (info.size, info.etag) == (14, second)
    logs.delete("a.jsonl")
    logs.delete("a.jsonl")
    assert logs.get("a.jsonl") is None


def test_hosts_appending_to_one_log_at_once_lose_no_line(s3_place: S3Place) -> None:
    def append(writer: int) -> None:
        logs = S3Objects.from_url(f"{s3_place.url}/sessions")  # a client each, as hosts have
        for n in range(15):
            logs.append("shared.jsonl", f'{{"writer": {writer}, "n": {n}}}\n'.encode())

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(append, range(6)))
    got = S3Objects.from_url(s3_place.url).get("sessions/shared.jsonl")
    assert got is not None
    lines = [orjson.loads(line) for line in got.data.splitlines()]
    assert sorted((line["writer"], line["n"]) for line in lines) == [
        (w, n) for w in range(6) for n in range(15)
    ]
    for writer in range(6):  # each writer's lines in its own order
        assert [line["n"] for line in lines if line["writer"] == writer] == list(range(15))


def test_listing_goes_in_key_order_and_resumes_after_a_marker(s3: S3BlobStore) -> None:
    objects = s3.objects("files")
    names = ["a/1", "a/2", "b", "c/x/y", "d.json"]
    for name in reversed(names):
        objects.put(name, name.encode())
    assert [info.name for info in objects.list()] == names
    assert [info.name for info in objects.list(start_after="a/2")] == ["b", "c/x/y", "d.json"]
    assert [info.name for info in objects.list("a")] == ["a/1", "a/2"]
    assert [info.size for info in objects.list("c")] == [5]
    assert list(s3.ids_sync()) == []  # other folders are not blobs


def test_a_big_stream_is_uploaded_in_parts_and_a_losing_one_leaves_no_upload(
    s3: S3BlobStore, s3_place: S3Place
) -> None:
    from core.store.s3 import PART_SIZE

    chunk = os.urandom(1 << 20)
    count = PART_SIZE // len(chunk) * 2 + 3  # two whole parts and a short one
    objects = s3.objects("derived")
    assert objects.put_stream("big.bin", (chunk for _ in range(count)), if_none_match=True)
    assert objects.head("big.bin").size == count * len(chunk)  # type: ignore[union-attr]
    with objects.open("big.bin") as reader:  # type: ignore[union-attr]
        assert reader.read(PART_SIZE - 3, 6) == (chunk * 32)[PART_SIZE - 3 : PART_SIZE + 3]
    loser = objects.put_stream("big.bin", (chunk for _ in range(count)), if_none_match=True)
    assert loser is None
    uploads = s3_place.client().list_multipart_uploads(Bucket=s3_place.bucket)
    assert [u for u in uploads.get("Uploads", ()) if u["Key"].startswith(s3_place.prefix)] == []


def test_stale_multipart_uploads_are_aborted(s3: S3BlobStore, s3_place: S3Place) -> None:
    client = s3_place.client()
    key = f"{s3_place.prefix}/derived/abandoned"
    client.create_multipart_upload(Bucket=s3_place.bucket, Key=key)
    objects = s3.objects("derived")
    assert objects.abort_uploads(older_than=3600) == 0  # a recent one may still be going
    assert objects.abort_uploads(older_than=0) == 1
    uploads = client.list_multipart_uploads(Bucket=s3_place.bucket, Prefix=key)
    assert uploads.get("Uploads", []) == []


@pytest.mark.parametrize("name", ["", "/etc/passwd", "../other", "a/../../b", "a//b", "."])
def test_an_object_name_cannot_leave_its_prefix(s3: S3BlobStore, name: str) -> None:
    with pytest.raises(BlobStoreError, match="not an object name"):
        s3.objects("sessions").put(name, b"x")
    assert s3.index_reader_sync(name) is None
    assert s3.index_put_sync(name, b"x") is False


# -- URLs, environment and errors -----------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["s3://", "s3://ab/x", "s3://Upper/x", "s3://bucket_name/x", "s3://bucket/a/../b"]
)
def test_a_bad_url_is_a_one_line_error(url: str) -> None:
    with pytest.raises(BlobStoreError) as raised:
        open_store(url)
    assert "\n" not in str(raised.value)
    assert "s3://" in str(raised.value)


def test_the_store_says_where_it_is(s3: S3BlobStore, s3_place: S3Place) -> None:
    assert str(s3) == s3_place.url
    assert repr(s3) == f"S3BlobStore({s3_place.url!r})"
    assert open_store(s3_place.url + "/").url == s3_place.url  # type: ignore[attr-defined]


def test_stores_of_one_endpoint_and_credentials_share_a_client(
    s3_place: S3Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = open_store(s3_place.url)
    assert open_store(f"s3://{s3_place.bucket}/other").client is first.client  # type: ignore[attr-defined]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "someone-else")
    assert open_store(s3_place.url).client is not first.client  # type: ignore[attr-defined]


def _assert_io_error(action: Any, *fragments: str) -> None:
    with pytest.raises(BlobIOError) as raised:
        action()
    message = str(raised.value)
    assert "\n" not in message and "Traceback" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_a_server_that_does_not_answer_is_an_io_error(
    s3_place: S3Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    store = open_store(s3_place.url, retries={"max_attempts": 1})
    _assert_io_error(lambda: store.store_sync(Text("x")), "cannot write", s3_place.url)
    _assert_io_error(lambda: store.load_sync(new_blob_id()), "cannot read")
    _assert_io_error(lambda: list(store.ids_sync()), "cannot list")


def test_a_missing_bucket_and_bad_keys_are_io_errors(
    s3_place: S3Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = open_store(f"s3://{s3_place.bucket}-missing/blobs")
    _assert_io_error(lambda: missing.store_sync(Text("x")), "NoSuchBucket")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    wrong = open_store(s3_place.url)
    _assert_io_error(lambda: wrong.exists_sync(new_blob_id()), "HTTP 403")
    _assert_io_error(lambda: wrong.put_sync(new_blob_id(), Text("x")), "HTTP 403")


def test_a_blob_deleted_while_open_is_an_io_error_not_a_mix(s3: S3BlobStore) -> None:
    blob_id = s3.store_sync(Text("x" * (3 * PAGE)))
    reader = s3.open_sync(blob_id)
    s3.discard_sync(blob_id)
    _assert_io_error(lambda: reader.read(2 * PAGE, 10), "deleted")
    with pytest.raises(BlobNotFound):
        s3.open_sync(blob_id)


def test_boto3_is_imported_only_when_an_s3_store_is_used(s3_place: S3Place) -> None:
    script = (
        "import sys, core, core.store, core.store.s3, core.cli, core.inspect_tool\n"
        "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules\n"
        "from core.store import open_store\n"
        "open_store(sys.argv[1])\n"
        "assert 'boto3' in sys.modules\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, s3_place.url],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=60,
    )
    assert result.stdout == b"ok\n", result.stderr.decode()


# -- the CLI --------------------------------------------------------------------------------


def run_cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        input=stdin,
        capture_output=True,
        timeout=60,
    )


def test_the_cli_stores_and_inspects_in_an_s3_store(s3_place: S3Place, tmp_path: Path) -> None:
    output = "".join(f"result row {n}\r\n" for n in range(5000)).encode()
    stored = run_cli("store", "--store", s3_place.url, stdin=output)
    assert stored.returncode == 0, stored.stderr.decode()
    summary = stored.stdout.decode()
    blob_id = summary[len("[blob:") : summary.index("]")]
    s3 = open_store(s3_place.url)
    assert s3.load_sync(blob_id) == Text(output.decode())
    fs = FsBlobStore(tmp_path / "blobs")
    fs.put_sync(blob_id, Text(output.decode()))
    for selector in ("lines:4000-4010", "grep:row 49[0-9]9", None):
        args = [blob_id] + ([selector] if selector else [])
        on_s3 = run_cli("inspect", "--store", s3_place.url, *args)
        on_fs = run_cli("inspect", "--dir", str(fs.root), *args)
        assert on_s3.returncode == 0, on_s3.stderr.decode()
        assert on_s3.stdout == on_fs.stdout


def test_the_cli_says_what_is_wrong_with_an_s3_store_in_one_line(s3_place: S3Place) -> None:
    for args, fragment in [
        (("inspect", "--store", s3_place.url, str(new_blob_id())), "not found"),
        (("inspect", "--store", "s3://x/y", str(new_blob_id())), "bucket name"),
        (("inspect", "--store", f"s3://{s3_place.bucket}-none/p", str(new_blob_id())), "NoSuch"),
    ]:
        result = run_cli(*args)
        stderr = result.stderr.decode()
        assert result.returncode == 2 and result.stdout == b""
        assert "Traceback" not in stderr
        assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
        assert fragment in stderr
    both = run_cli("inspect", "--store", s3_place.url, "--dir", "x", str(new_blob_id()))
    assert both.returncode == 2 and b"not allowed with" in both.stderr
