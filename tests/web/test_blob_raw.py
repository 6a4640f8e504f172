"""`/blobs/<uuid>/raw`: the stored file as it is, never sniffed into HTML."""

from __future__ import annotations

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


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


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
    logged_in_client, text_blob, store
):
    text = "".join(f"line {n:07d} of a long output\n" for n in range(40_000))  # ~1.3 MB
    blob_id = text_blob(text)
    before = open_files()

    response = logged_in_client.get(reverse("blob_raw", args=[blob_id]))
    pieces = list(response.streaming_content)
    response.close()

    assert len(pieces) > 1 and b"".join(pieces) == text.encode()
    assert response["Content-Length"] == str(len(text.encode()))
    assert open_files() == before


def test_a_download_closed_unread_lets_go_of_the_blob(logged_in_client, text_blob):
    blob_id = text_blob("never read\n")
    before = open_files()

    response = logged_in_client.get(reverse("blob_raw", args=[blob_id]))
    response.close()

    assert open_files() == before
