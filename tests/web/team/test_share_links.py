"""Share links: made from a blob view, shown without login, expiring, revocable."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from blobviewer.models import ShareLink

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["fs", "s3"])
def blob_backend(request: pytest.FixtureRequest) -> str:
    """Every test that uses the site's store runs on a folder and on object storage."""
    return request.param


HTMX = {"HX-Request": "true"}


@pytest.fixture
def share(user, sample_session):
    def make(selector: str = "lines:2-3", **fields) -> ShareLink:
        return ShareLink.objects.create(
            blob_id=sample_session.text_blob, selector=selector, created_by=user, **fields
        )

    return make


def test_it_makes_a_share_link_that_keeps_the_current_selector(logged_in_client, sample_session):
    response = logged_in_client.post(
        reverse("share_create", args=[sample_session.text_blob]),
        {"selector": "lines:5-9", "days": "7"},
    )

    link = ShareLink.objects.get()
    assert response.status_code == 302
    # Back to the blob at the shared view, whose share box shows the new link.
    blob_url = reverse("blob_detail", args=[sample_session.text_blob])
    assert response["Location"] == f"{blob_url}?selector=lines%3A5-9&shared={link.pk}#share-box"
    assert link.selector == "lines:5-9"
    assert link.blob_id == sample_session.text_blob
    assert link.created_by.username == "alice"
    expected = timezone.now() + timedelta(days=7)
    assert abs((link.expires_at - expected).total_seconds()) < 60


def test_the_blob_page_offers_to_share_the_view_on_screen(logged_in_client, sample_session):
    url = reverse("blob_detail", args=[sample_session.text_blob])

    html = logged_in_client.get(url, {"selector": "grep:step 1"}).content.decode()

    form = re.search(r'<form class="share".*?</form>', html, re.S).group(0)
    assert 'method="post"' in form and "csrfmiddlewaretoken" in form
    assert '<input type="hidden" name="selector" value="grep:step 1">' in form


def test_the_blob_page_offers_no_share_link_for_a_bad_selector(logged_in_client, sample_session):
    url = reverse("blob_detail", args=[sample_session.text_blob])

    response = logged_in_client.get(url, {"selector": "slice:0..1"})

    assert response.status_code == 400
    assert b"Create share link" not in response.content


def test_it_refuses_to_share_a_bad_selector(logged_in_client, sample_session):
    url = reverse("share_create", args=[sample_session.text_blob])

    response = logged_in_client.post(url, {"selector": "lines:x", "days": "7"})

    assert response.status_code == 400
    assert "lines: expects A-B, A or A-" in response.content.decode()
    assert not ShareLink.objects.exists()


def test_making_a_share_link_needs_post(logged_in_client, sample_session):
    response = logged_in_client.get(reverse("share_create", args=[sample_session.text_blob]))
    assert response.status_code == 405


def test_it_shows_the_blob_through_the_link_without_login(client, share):
    link = share()

    response = client.get(reverse("share_detail", args=[link.token]))

    assert response.status_code == 200
    html = response.content.decode()
    assert "lines 2–3 of 300" in html
    assert 'id="L2"' in html and 'id="L4"' not in html
    assert "Log out" not in html and "My share links" not in html
    assert "Referenced by" not in html and "Create share link" not in html
    assert reverse("api_inspect", args=[link.blob_id]) not in html
    assert reverse("share_raw", args=[link.token]) in html


def test_a_visitor_may_change_the_selector_within_the_blob(client, share):
    link = share()
    url = reverse("share_detail", args=[link.token])

    response = client.get(url, {"selector": "lines:10-11"}, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<section id="blob-view"')
    assert "lines 10–11 of 300" in html
    assert f'hx-get="{url}"' in html


def test_a_bad_selector_on_a_share_link_is_a_400_beside_the_box(client, share):
    link = share()

    response = client.get(reverse("share_detail", args=[link.token]), {"selector": "key:"})

    assert response.status_code == 400
    assert b'role="alert">key: expects a key name' in response.content


def test_it_serves_the_raw_blob_through_the_link(client, share, store):
    link = share()

    response = client.get(reverse("share_raw", args=[link.token]))

    assert response["X-Content-Type-Options"] == "nosniff"
    with store.open_sync(link.blob_id) as stored:
        assert b"".join(response.streaming_content) == b"".join(stored.blocks())


def test_an_expired_link_is_gone(client, share):
    link = share(expires_at=timezone.now() - timedelta(seconds=1))

    for name in ("share_detail", "share_raw"):
        response = client.get(reverse(name, args=[link.token]))
        assert response.status_code == 410
        assert b"expired" in response.content


def test_a_revoked_link_is_gone(client, share):
    link = share(revoked_at=timezone.now())

    response = client.get(reverse("share_detail", args=[link.token]))

    assert response.status_code == 410
    assert b"revoked" in response.content


def test_an_unknown_link_is_not_found(client, db):
    assert client.get(reverse("share_detail", args=["no-such-token"])).status_code == 404


def test_it_lists_my_share_links_with_their_state(logged_in_client, share, django_user_model):
    active = share("lines:1-2")
    share("lines:3-4", revoked_at=timezone.now())
    other = django_user_model.objects.create_user("bob")
    ShareLink.objects.create(blob_id=active.blob_id, selector="lines:7", created_by=other)

    html = logged_in_client.get(reverse("share_list")).content.decode()

    assert f"http://testserver{active.get_absolute_url()}" in html
    assert "lines:1-2" in html and "lines:3-4" in html and "lines:7" not in html
    assert ">active<" in html and ">revoked<" in html
    assert html.count(">Revoke</button>") == 1


def test_revoking_a_link_stops_it_at_once(logged_in_client, client, share):
    link = share()

    response = logged_in_client.post(reverse("share_revoke", args=[link.token]))

    assert response.status_code == 302
    link.refresh_from_db()
    assert link.revoked_at is not None
    assert client.get(reverse("share_detail", args=[link.token])).status_code == 410


def test_nobody_can_revoke_someone_elses_link(client, share, django_user_model):
    link = share()
    client.force_login(django_user_model.objects.create_user("mallory"))

    response = client.post(reverse("share_revoke", args=[link.token]))

    assert response.status_code == 404
    link.refresh_from_db()
    assert link.revoked_at is None


def test_revoking_needs_post(logged_in_client, share):
    link = share()

    # A GET only asks for confirmation (tests/web/team/test_share_in_place.py).
    assert logged_in_client.get(reverse("share_revoke", args=[link.token])).status_code == 200
    link.refresh_from_db()
    assert link.revoked_at is None


def test_a_new_link_expires_after_the_default_seven_days(user, sample_session):
    link = ShareLink.objects.create(blob_id=sample_session.text_blob, created_by=user)

    remaining = link.expires_at - timezone.now()
    assert timedelta(days=6, hours=23) < remaining <= timedelta(days=7)
    assert len(link.token) >= 32
