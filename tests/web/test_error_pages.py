"""The site's own 404, 410 and 500 pages."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string

pytestmark = pytest.mark.django_db


def test_an_unknown_address_gets_the_404_page(logged_in_client):
    response = logged_in_client.get("/no/such/page/")

    assert response.status_code == 404
    html = response.content.decode()
    assert "<h1>Not found</h1>" in html
    assert "Resolver404" not in html
    assert "css/site.css" in html


def test_the_500_page_renders_without_a_request():
    html = render_to_string("500.html")

    assert "Something went wrong" in html
    assert "css/site.css" in html


def test_a_server_error_shows_the_500_page(logged_in_client, monkeypatch, sample_session):
    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("blobviewer.reader.views.blob_page", explode)
    logged_in_client.raise_request_exception = False

    response = logged_in_client.get(f"/blobs/{sample_session.text_blob}/")

    assert response.status_code == 500
    assert b"Something went wrong" in response.content
    assert b"boom" not in response.content
