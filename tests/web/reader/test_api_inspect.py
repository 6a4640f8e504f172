"""`/api/inspect/<uuid>?selector=`: byte for byte what the model's inspect tool returns."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from core.content import encode_text
from core.inspect_tool import InspectError, inspect_blob

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["fs", "s3"])
def blob_backend(request: pytest.FixtureRequest) -> str:
    """Every test that uses the site's store runs on a folder and on object storage."""
    return request.param


@pytest.mark.parametrize("selector", [None, "lines:2-5", "grep:module_1[0-9]\\b", "lines:290-"])
def test_it_returns_exactly_what_inspect_returns_for_a_text(
    logged_in_client, sample_session, store, selector
):
    query = {"selector": selector} if selector else {}

    response = logged_in_client.get(reverse("api_inspect", args=[sample_session.text_blob]), query)

    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    expected = inspect_blob(store, str(sample_session.text_blob), selector)
    assert response.content == expected.encode("utf-8")


@pytest.mark.parametrize("selector", [None, "slice:3..6", "slice:0..1 | slice:0..1"])
def test_it_returns_exactly_what_inspect_returns_for_json(
    logged_in_client, sample_session, store, selector
):
    query = {"selector": selector} if selector else {}

    response = logged_in_client.get(reverse("api_inspect", args=[sample_session.json_blob]), query)

    assert response.content == inspect_blob(store, str(sample_session.json_blob), selector).encode()


def test_it_keeps_text_that_utf8_cannot_encode_as_the_store_does(
    logged_in_client, text_blob, store
):
    blob_id = text_blob("lone \ud800 surrogate\n")

    response = logged_in_client.get(reverse("api_inspect", args=[blob_id]))

    assert response.status_code == 200
    assert response.content == encode_text(inspect_blob(store, str(blob_id)))


def test_it_answers_a_bad_selector_with_400_and_the_tool_error(
    logged_in_client, sample_session, store
):
    response = logged_in_client.get(
        reverse("api_inspect", args=[sample_session.json_blob]), {"selector": "lines:1-2"}
    )

    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    with pytest.raises(InspectError) as error:
        inspect_blob(store, str(sample_session.json_blob), "lines:1-2")
    assert response.content.decode() == str(error.value)


def test_it_answers_an_unknown_blob_with_404(logged_in_client, data_dir):
    blob_id = uuid.uuid4()

    response = logged_in_client.get(reverse("api_inspect", args=[blob_id]))

    assert response.status_code == 404
    assert response.content == f"blob {blob_id} not found".encode()


def test_it_needs_a_login(client, sample_session):
    response = client.get(reverse("api_inspect", args=[sample_session.text_blob]))
    assert response.status_code == 302
