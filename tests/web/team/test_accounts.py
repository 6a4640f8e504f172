"""Logging in and out; every page but the login page and share links needs a login."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/blobs/",
        f"/sessions/{uuid.UUID(int=1)}/",
        f"/blobs/{uuid.UUID(int=1)}/",
        f"/blobs/{uuid.UUID(int=1)}/raw",
        f"/api/inspect/{uuid.UUID(int=1)}",
        "/shares/",
        "/admin/",
    ],
)
def test_every_page_sends_strangers_to_the_login_page(client, url):
    response = client.get(url)

    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_the_login_page_is_styled_and_open(client):
    response = client.get(reverse("login"))

    assert response.status_code == 200
    html = response.content.decode()
    assert "css/site.css" in html
    assert '<form method="post" action="/accounts/login/">' in html


def test_logging_in_leads_back_to_the_page_asked_for(client, user):
    response = client.post(
        reverse("login"),
        {"username": "alice", "password": "correct-horse-battery", "next": "/blobs/"},
    )

    assert response.status_code == 302
    assert response["Location"] == "/blobs/"
    assert client.get("/blobs/").status_code == 200


def test_a_wrong_password_is_refused_with_a_message(client, user):
    response = client.post(reverse("login"), {"username": "alice", "password": "wrong"})

    assert response.status_code == 200
    assert b'class="error" role="alert"' in response.content


def test_logging_out_takes_a_post(logged_in_client):
    assert logged_in_client.get(reverse("logout")).status_code == 405

    response = logged_in_client.post(reverse("logout"))

    assert response.status_code == 302
    assert response["Location"] == reverse("login")
    assert logged_in_client.get("/").status_code == 302


def test_pages_send_the_csrf_token_for_htmx_on_the_body(logged_in_client):
    html = logged_in_client.get("/").content.decode()
    assert '<body hx-headers=\'{"X-CSRFToken": "' in html
