"""An object store that is down or hangs: every page that reads it answers 503 with one
plain sentence (never a 500, a 404 or "missing", never the store's address), the blob
rows stay as they were, and the pages that need no store keep answering
(docs/team.md#when-the-blob-store-fails).

Each test starts a SeaweedFS of its own, since it stops or freezes it (SIGSTOP), and sets
the client's limits low (1 s), as an operator may through the environment."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from s3_server import SeaweedFailed, SeaweedServer

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_file
from blobviewer.models import ApiToken, Blob, ShareLink
from core.content import Text
from core.store import FsBlobStore, StoreUnavailable, open_store
from core.store.blob_id import new_blob_id
from web.production import PASSWORD, Browser, create_superuser, own_database, serving
from web.records import SampleSession, header, record_sample_session, tool_result_item

pytestmark = pytest.mark.django_db

NOT_ANSWERING = "The blob store is not answering"
LIMITS = {
    "BLOBVIEWER_S3_CONNECT_TIMEOUT": "1",
    "BLOBVIEWER_S3_READ_TIMEOUT": "1",
    "BLOBVIEWER_S3_ATTEMPTS": "2",
}
# A request to a store that does not answer fails after two tries of 1 s (and botocore's
# back-off between them); a few store calls' worth is the most a page may wait.
PATIENCE_SECONDS = 12


@pytest.fixture
def own_s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SeaweedServer]:
    server = SeaweedServer(tmp_path / "seaweedfs")
    try:
        server.start()
    except SeaweedFailed as error:
        pytest.fail(str(error), pytrace=False)
    for name, value in {**server.env(), **LIMITS}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def bucket(own_s3: SeaweedServer, settings: Any, data_dir: Path) -> str:
    name = own_s3.make_bucket("outage")
    settings.BLOBVIEWER_BLOBS = f"s3://{name}/team"
    return name


@pytest.fixture
def recorded(bucket: str, data_dir: Path) -> SampleSession:
    store = blob_store()
    sample = record_sample_session(store, data_dir / "sessions")
    ingest_file(sample.path, store=store)
    return sample


@pytest.fixture
def link(user: Any, recorded: SampleSession) -> ShareLink:
    return ShareLink.objects.create(
        blob_id=recorded.text_blob,
        selector="lines:2-3",
        created_by=user,
        expires_at=timezone.now() + timedelta(days=7),
    )


def _store_pages(recorded: SampleSession, link: ShareLink) -> list[tuple[str, dict[str, str]]]:
    text, json_blob = recorded.text_blob, recorded.json_blob
    fragment = {"HX-Request": "true", "HX-Target": "blob-view"}
    return [
        (reverse("blob_detail", args=[text]), {}),
        (reverse("blob_detail", args=[json_blob]) + "?selector=slice:0..2", {}),
        (reverse("blob_detail", args=[text]) + "?selector=grep:compiling", fragment),
        (reverse("blob_raw", args=[text]), {}),
        (reverse("share_detail", args=[link.token]), {}),
        (reverse("share_raw", args=[link.token]), {}),
        (reverse("api_inspect", args=[text]) + "?selector=lines:1-2", {}),
    ]


def _pages_without_store(recorded: SampleSession) -> list[str]:
    return [
        reverse("login"),
        reverse("session_list"),
        reverse("session_list") + "?q=compiling",  # search snippets come from the database
        reverse("session_detail", args=[recorded.id]),
    ]


def _upload(client: Client, secret: str, blob_id: str) -> Any:
    records = [
        header(title="sent while the store is down"),
        tool_result_item(1, f"[blob:{blob_id}] the output | 3 lines"),
    ]
    log = b"".join(orjson.dumps(record) + b"\n" for record in records)
    return client.post(
        reverse("api_ingest"),
        data={
            "log": SimpleUploadedFile("session.jsonl", log),
            "blob": SimpleUploadedFile(f"{blob_id}.txt", b"one\ntwo\nthree\n"),
        },
        headers={"Authorization": f"Bearer {secret}"},
    )


def _assert_not_answering(response: Any, *, bucket: str, server: SeaweedServer) -> None:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    text = body.decode()
    assert response.status_code == 503, (response.status_code, text[:300])
    assert response["Retry-After"]
    assert NOT_ANSWERING.lower() in text.lower(), text[:500]
    assert bucket not in text and server.endpoint not in text and "127.0.0.1" not in text
    for wrong in ("does not have it", "no blob with this id", "Traceback", "Server error"):
        assert wrong not in text


def _rows(recorded: SampleSession) -> list[tuple[Any, ...]]:
    blobs = Blob.objects.filter(id__in=[recorded.text_blob, recorded.json_blob])
    return sorted(blobs.values_list("id", "missing", "error", "size", "kind"))


@pytest.mark.parametrize("failure", ["stopped", "frozen"])
def test_a_store_that_fails_gets_503_and_pages_without_it_still_answer(
    failure, own_s3, bucket, recorded, link, logged_in_client, client, api_token
):
    rows = _rows(recorded)
    assert rows and not any(missing or error for _, missing, error, *_ in rows)
    pages = _store_pages(recorded, link)
    for url, headers in pages:  # all of them read the store while it is up
        assert logged_in_client.get(url, headers=headers).status_code == 200, url

    if failure == "stopped":
        own_s3.stop()
        outage: Any = None
    else:
        outage = own_s3.frozen()
        outage.__enter__()
    try:
        for url, headers in pages:
            started = time.monotonic()
            response = logged_in_client.get(url, headers=headers)
            _assert_not_answering(response, bucket=bucket, server=own_s3)
            assert time.monotonic() - started < PATIENCE_SECONDS, url

        upload = _upload(client, api_token[1], str(new_blob_id()))
        _assert_not_answering(upload, bucket=bucket, server=own_s3)
        assert upload.content.decode().startswith("the blob store is not answering; nothing")

        for url in _pages_without_store(recorded):
            response = logged_in_client.get(url)
            assert response.status_code == 200, url
        search = logged_in_client.get(reverse("session_list") + "?q=compiling")
        assert b"compiling" in search.content
    finally:
        if outage is not None:
            outage.__exit__(None, None, None)

    assert _rows(recorded) == rows  # nothing was marked missing or damaged
    assert ApiToken.objects.count() == 1


def test_a_hanging_store_leaves_a_thread_for_the_pages_that_need_none(tmp_path, own_s3):
    """Under `make serve` with one worker of two threads: three blob pages wait on a frozen
    store, and the login page is answered meanwhile, well before the store's read timeout
    would have freed a thread."""
    bucket = own_s3.make_bucket("outage")
    url = f"s3://{bucket}/team"
    blob_id = open_store(url).store_sync(Text("served from a bucket\n" * 50))
    hang = 8  # the read timeout: how long a blob page waits on the frozen store
    env = {
        "BLOBVIEWER_BLOBS": url,
        **own_s3.env(),
        **LIMITS,
        "BLOBVIEWER_S3_READ_TIMEOUT": str(hang),
        "BLOBVIEWER_S3_ATTEMPTS": "1",
        "WEB_CONCURRENCY": "1",
        "GUNICORN_THREADS": "2",
    }
    with own_database(tmp_path) as database_url, serving(tmp_path, database_url, **env) as server:
        create_superuser(server)
        browser = Browser(server)
        assert browser.log_in("alice", PASSWORD).status_code == 302
        blob_page = f"/blobs/{blob_id}/"
        assert browser.request("GET", blob_page).status_code == 200, server.output()

        with own_s3.frozen(), ThreadPoolExecutor(3) as pool:
            waiting = [pool.submit(browser.request, "GET", blob_page) for _ in range(3)]
            time.sleep(0.5)  # they have reached the server
            started = time.monotonic()
            login = browser.request("GET", "/accounts/login/")
            answered_in = time.monotonic() - started
            assert login.status_code == 200
            assert answered_in < hang - 2, (answered_in, server.output())
            statuses = [future.result().status_code for future in waiting]
        assert statuses == [503, 503, 503], server.output()
        assert browser.request("GET", blob_page).status_code == 200  # thawed, it answers


def test_a_store_that_fails_after_answering_that_the_blob_exists_gets_503(
    logged_in_client, sample_session, monkeypatch
):
    """The store says the blob is there, then fails to read it: still the store's
    failure (503), never a bad selector (400) nor a message naming where it is."""

    def not_answering(self, *args, **kwargs):
        raise StoreUnavailable("cannot read s3://secret-bucket/x: the blob store is not answering")

    monkeypatch.setattr(FsBlobStore, "open_sync", not_answering)
    monkeypatch.setattr(FsBlobStore, "load_sync", not_answering)
    url = reverse("api_inspect", args=[sample_session.text_blob])

    response = logged_in_client.get(url, {"selector": "lines:1-2"})

    assert response.status_code == 503
    assert response.content == b"The blob store is not answering; try again in a moment.\n"
