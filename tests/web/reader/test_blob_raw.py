"""`/blobs/<uuid>/raw`: the stored file as it is, never sniffed into HTML."""

from __future__ import annotations

import contextlib
import os
import uuid

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["fs", "s3"])
def blob_backend(request: pytest.FixtureRequest) -> str:
    """Every test that uses the site's store runs on a folder and on object storage."""
    return request.param


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def stored(store, blob_id) -> bytes:
    with store.open_sync(blob_id) as blob:
        return blob.read(0, blob.size)


class TrackedReader:
    """A blob reader that remembers whether it was closed."""

    def __init__(self, reader) -> None:
        self.reader = reader
        self.closed = False

    def __getattr__(self, name: str):
        return getattr(self.reader, name)

    def close(self) -> None:
        self.closed = True
        self.reader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[TrackedReader]:
    """Every reader the raw view opens (through the site's store, whichever kind)."""
    import blobviewer.reader.views

    readers: list[TrackedReader] = []
    site_store = blobviewer.reader.views.blob_store

    class TrackingStore:
        def __init__(self, store) -> None:
            self.store = store

        def __getattr__(self, name: str):
            return getattr(self.store, name)

        def open_sync(self, blob_id):
            readers.append(TrackedReader(self.store.open_sync(blob_id)))
            return readers[-1]

    monkeypatch.setattr(blobviewer.reader.views, "blob_store", lambda: TrackingStore(site_store()))
    return readers


def files_open_under(folder) -> list[str]:
    """This process's open files inside *folder* (a file store's blobs, for one)."""
    inside = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(f"{folder}{os.sep}"):
                inside.append(target)
    return inside


def test_it_streams_a_text_blob_as_utf8_plain_text(logged_in_client, text_blob, store):
    blob_id = text_blob("<script>alert(1)</script>\nzwei ü\n")

    response = logged_in_client.get(reverse("blob_raw", args=[blob_id]))

    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"] == f'inline; filename="{blob_id}.txt"'
    assert body(response) == stored(store, blob_id)


def test_it_sends_a_json_blob_as_application_json(logged_in_client, json_blob, store):
    blob_id = json_blob({"a": [1, 2, {"<b>": "</script>"}]})

    response = logged_in_client.get(reverse("blob_raw", args=[blob_id]))

    assert response["Content-Type"] == "application/json"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert body(response) == stored(store, blob_id)


def test_it_answers_an_unknown_blob_with_404(logged_in_client, data_dir):
    response = logged_in_client.get(reverse("blob_raw", args=[uuid.uuid4()]))
    assert response.status_code == 404


def test_it_needs_a_login(client, text_blob):
    response = client.get(reverse("blob_raw", args=[text_blob("secret")]))
    assert response.status_code == 302


def test_a_big_blob_streams_in_blocks_with_its_length_and_closes_after(
    logged_in_client, text_blob, store, opened, data_dir
):
    text = "".join(f"line {n:07d} of a long output\n" for n in range(40_000))  # ~1.3 MB
    blob_id = text_blob(text)

    response = logged_in_client.get(reverse("blob_raw", args=[blob_id]))
    stream = iter(response.streaming_content)
    pieces = [next(stream)]
    assert len(opened) == 1 and not opened[0].closed  # open while it streams
    pieces.extend(stream)
    response.close()

    assert len(pieces) > 1 and b"".join(pieces) == text.encode()
    assert response["Content-Length"] == str(len(text.encode()))
    assert opened[0].closed
    assert files_open_under(data_dir) == []


def test_a_download_closed_unread_lets_go_of_the_blob(
    logged_in_client, text_blob, opened, data_dir
):
    blob_id = text_blob("never read\n")

    response = logged_in_client.get(reverse("blob_raw", args=[blob_id]))
    assert len(opened) == 1 and not opened[0].closed
    response.close()

    assert opened[0].closed
    assert files_open_under(data_dir) == []
