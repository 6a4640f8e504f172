"""`/blobs/<uuid>/raw`: the stored file as it is, never sniffed into HTML."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def test_it_streams_a_text_blob_as_utf8_plain_text(logged_in_client, text_blob, store):
    blob_id = text_blob("<script>alert(1)</script>\nzwei ü\n")

    response = logged_in_client.get(reverse("blob_raw", args=[blob_id]))

    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Disposition"] == f'inline; filename="{blob_id}.txt"'
    assert body(response) == store.path_of(blob_id).read_bytes()


def test_it_sends_a_json_blob_as_application_json(logged_in_client, json_blob, store):
    blob_id = json_blob({"a": [1, 2, {"<b>": "</script>"}]})

    response = logged_in_client.get(reverse("blob_raw", args=[blob_id]))

    assert response["Content-Type"] == "application/json"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert body(response) == store.path_of(blob_id).read_bytes()


def test_it_answers_an_unknown_blob_with_404(logged_in_client, data_dir):
    response = logged_in_client.get(reverse("blob_raw", args=[uuid.uuid4()]))
    assert response.status_code == 404


def test_it_needs_a_login(client, text_blob):
    response = client.get(reverse("blob_raw", args=[text_blob("secret")]))
    assert response.status_code == 302
