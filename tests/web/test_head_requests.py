"""HEAD is answered wherever GET is (link checkers, uptime monitors and `curl -I` send it):
the same status and headers, no body, and never a change."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from blobviewer.models import ShareLink

pytestmark = pytest.mark.django_db


@pytest.fixture
def link(user, sample_session) -> ShareLink:
    return ShareLink.objects.create(
        blob_id=sample_session.text_blob,
        selector="lines:2-3",
        created_by=user,
        expires_at=timezone.now() + timedelta(days=7),
    )


def _pages(sample_session, link: ShareLink) -> list[str]:
    session, blob = sample_session.id, sample_session.text_blob
    return [
        reverse("session_list"),
        reverse("session_list") + "?q=build",
        reverse("session_detail", args=[session]),
        reverse("item_detail", args=[session, 1]),
        reverse("session_find", args=[session]) + "?q=build",
        reverse("blob_list"),
        reverse("blob_detail", args=[blob]) + "?selector=lines:2-3",
        reverse("blob_raw", args=[blob]),
        reverse("api_inspect", args=[blob]) + "?selector=lines:1",
        reverse("token_list"),
        reverse("share_list"),
        reverse("share_revoke", args=[link.token]),
        reverse("share_detail", args=[link.token]),
        reverse("share_raw", args=[link.token]),
        reverse("login"),
    ]


def _body(response) -> bytes:
    if response.streaming:
        return b"".join(response.streaming_content)
    return response.content


def test_every_read_only_page_answers_head_as_get_does(logged_in_client, sample_session, link):
    for url in _pages(sample_session, link):
        get = logged_in_client.get(url)
        head = logged_in_client.head(url)

        assert head.status_code == get.status_code != 405, url
        assert head["Content-Type"] == get["Content-Type"], url
        assert _body(head) == b"", url
        assert _body(get) or get.status_code == 302, url


def test_head_on_a_share_links_revoke_page_does_not_revoke_it(logged_in_client, link):
    response = logged_in_client.head(reverse("share_revoke", args=[link.token]))

    assert response.status_code == 200
    link.refresh_from_db()
    assert link.revoked_at is None
    assert Client().get(reverse("share_detail", args=[link.token])).status_code == 200


def test_head_needs_a_login_as_get_does(client, sample_session):
    response = client.head(reverse("session_detail", args=[sample_session.id]))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_post_only_urls_still_refuse_head(logged_in_client, sample_session):
    response = logged_in_client.head(reverse("share_create", args=[sample_session.text_blob]))

    assert response.status_code == 405
