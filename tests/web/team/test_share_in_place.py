"""Sharing in place: "Share this view" beside the selector makes the link without leaving
the page (htmx; without JavaScript a redirect back), with a note; the share page says what
it shows and nothing else of the session; revoking asks first."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from blobviewer.catalog.blobs import refresh_blob
from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import ShareLink
from core.promotion import admit_sync, promote
from web.timeline_records import assistant, call, result, user

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
SECRET_ANSWER = "the deploy key is in vault/prod"


@pytest.fixture
def made(data_dir: Any) -> dict[str, Any]:
    """A run whose Read step made a blob; other steps say things a visitor must not see."""
    admitted = admit_sync(promote("".join(f"{n}: log line\n" for n in range(300))), blob_store())
    session_id = uuid.uuid4()
    header = {
        "type": "session",
        "id": str(session_id),
        "created_at": "2025-05-01T12:00:00+00:00",
        "title": "Investigate the outage",
        "model": "m",
        "meta": {},
    }
    records = [
        user(1, "Why did the deploy fail?"),
        assistant(2, call("r1", "Read", {"file_path": "logs/deploy.log"})),
        result(3, "r1", admitted.text, tool="Read"),
        assistant(4, text=f"{SECRET_ANSWER}; see [blob:{admitted.blob_id}]"),
    ]
    ingest_session(header, records, source_path=f"test:{session_id}", store=blob_store())
    return {"blob": admitted.blob_id, "session": session_id}


def share_in_place(client: Any, blob_id: uuid.UUID, **data: str) -> Any:
    fields = {"selector": "lines:5-9", "days": "7", **data}
    return client.post(reverse("share_create", args=[blob_id]), fields, headers=HTMX)


def share_box(html: str) -> str:
    """The share box: its form (up to </details>), or the new link (up to its last line)."""
    start = html.index('id="share-box"')
    end = html.find("</details>", start)
    if end < 0:
        end = html.index("</p>", html.index('class="share-more"', start))
    return html[start:end]


# --- creating, in place ---------------------------------------------------------------------


def test_the_share_box_sits_next_to_the_selector(logged_in_client, made):
    html = logged_in_client.get(reverse("blob_detail", args=[made["blob"]])).content.decode()

    selector_end = html.index("</form>", html.index('<form class="selector"'))
    box = html.index('<div class="share-box" id="share-box">')
    assert 0 < box - selector_end < 200  # straight after the selector's form
    form = re.search(r'<form class="share".*?</form>', html, re.S).group(0)
    url = reverse("share_create", args=[made["blob"]])
    assert f'action="{url}"' in form and f'hx-post="{url}"' in form
    assert 'hx-target="#share-box" hx-swap="outerHTML"' in form
    assert '<input type="text" name="note" id="id_note" maxlength="500"' in form
    assert "<summary>Share this view</summary>" in html


def test_with_htmx_it_answers_with_the_link_and_a_copy_button(logged_in_client, made):
    response = share_in_place(logged_in_client, made["blob"], note="Lines 5-9 show the crash")

    assert response.status_code == 201
    link = ShareLink.objects.get()
    assert (link.selector, link.note) == ("lines:5-9", "Lines 5-9 show the crash")
    html = response.content.decode()
    assert html.startswith('<div class="share-box created" id="share-box">')
    url = f"http://testserver/share/{link.token}/"
    assert f'<input id="share-url" class="share-url" type="text" readonly value="{url}"' in html
    assert '<button type="button" class="copy" data-copy="share-url"' in html
    assert 'role="status" aria-live="polite"' in html
    assert "Lines 5-9 show the crash" in html and "lines:5-9" in html
    assert f'href="{reverse("share_list")}#share-{link.pk}"' in html
    assert "<html" not in html and "Location" not in response


def test_without_javascript_it_goes_back_to_the_blob_showing_the_link(logged_in_client, made):
    response = logged_in_client.post(
        reverse("share_create", args=[made["blob"]]),
        {"selector": "grep:log", "days": "1", "note": "hello"},
        follow=True,
    )

    link = ShareLink.objects.get()
    assert response.redirect_chain[0][0].startswith(
        reverse("blob_detail", args=[made["blob"]]) + "?selector=grep%3Alog&shared="
    )
    box = share_box(response.content.decode())
    assert f"/share/{link.token}/" in box and "hello" in box
    assert "Share link created." in box


def test_a_shared_param_shows_only_my_own_link_of_this_blob(
    logged_in_client, made, django_user_model
):
    bob = django_user_model.objects.create_user("bob")
    theirs = ShareLink.objects.create(blob_id=made["blob"], created_by=bob)
    url = reverse("blob_detail", args=[made["blob"]])

    html = logged_in_client.get(url, {"shared": theirs.pk}).content.decode()

    assert theirs.token not in html
    assert "<summary>Share this view</summary>" in html


def test_a_note_too_long_is_refused_in_place_keeping_what_was_typed(logged_in_client, made):
    response = share_in_place(logged_in_client, made["blob"], note="n" * 501)

    assert response.status_code == 400
    assert not ShareLink.objects.exists()
    html = response.content.decode()
    assert html.startswith('<div class="share-box" id="share-box">')
    assert "<details open>" in html and 'value="' + "n" * 501 + '"' in html
    assert 'role="alert"><p>Could not share: note: Ensure this value has at most 500' in html


def test_a_note_too_long_without_javascript_is_a_400_page_keeping_the_note(logged_in_client, made):
    response = logged_in_client.post(
        reverse("share_create", args=[made["blob"]]),
        {"selector": "lines:5-9", "days": "7", "note": "n" * 501},
    )

    assert response.status_code == 400
    box = share_box(response.content.decode())
    assert "Could not share: note:" in box and "n" * 501 in box


def test_the_note_is_escaped_everywhere(logged_in_client, made):
    hostile = '<script>alert("x")</script>'
    share_in_place(logged_in_client, made["blob"], note=hostile)
    link = ShareLink.objects.get()

    pages = [
        logged_in_client.get(reverse("share_list")),
        logged_in_client.get(reverse("share_revoke", args=[link.token])),
        Client().get(reverse("share_detail", args=[link.token])),
    ]

    for response in pages:
        assert hostile not in response.content.decode()
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in response.content.decode()


# --- the share page -------------------------------------------------------------------------


def test_the_share_page_says_what_it_shows_and_nothing_else_of_the_session(logged_in_client, made):
    share_in_place(logged_in_client, made["blob"], note="Look at line 7")
    link = ShareLink.objects.get()

    html = Client().get(reverse("share_detail", args=[link.token])).content.decode()

    head = re.search(r'<header class="blob-head shared">.*?</header>', html, re.S).group(0)
    assert "<title>Read logs/deploy.log · blobviewer</title>" in html
    assert '<h1 class="made-by">Read logs/deploy.log</h1>' in head
    assert "Output of step #3 in “Investigate the outage”" in head
    assert "<blockquote>Look at line 7</blockquote><figcaption>— alice</figcaption>" in head
    # As text: no link into the logged-in site, nothing else the session holds.
    links = re.findall(r'href="([^"]+)"', html)
    assert links and all(
        href.startswith(("/static/", f"/share/{link.token}/", "?", "#", "data:")) for href in links
    )
    assert SECRET_ANSWER not in html and "Why did the deploy fail?" not in html
    assert "Referred to by" not in html


def test_the_share_page_of_a_blob_no_step_made_names_it_by_id(client, user, store, text_blob):
    blob_id = text_blob("alone\n" * 200)
    refresh_blob(blob_id, store=store)
    link = ShareLink.objects.create(blob_id=blob_id, created_by=user)

    html = client.get(reverse("share_detail", args=[link.token])).content.decode()

    assert f"<h1>Shared blob <code>{blob_id}</code></h1>" in html
    assert "made-in" not in html and "<blockquote>" not in html


# --- revoking -------------------------------------------------------------------------------


def test_the_list_offers_revoke_with_a_confirmation(logged_in_client, made, user):
    link = ShareLink.objects.create(blob_id=made["blob"], created_by=user, note="for Sam")

    html = logged_in_client.get(reverse("share_list")).content.decode()

    row = re.search(rf'<tr id="share-{link.pk}".*?</tr>', html, re.S).group(0)
    revoke = reverse("share_revoke", args=[link.token])
    # Without JavaScript the button opens the confirmation page; htmx posts after hx-confirm.
    assert f'<form class="revoke" method="get" action="{revoke}">' in row
    assert f'hx-post="{revoke}" hx-confirm="Revoke this link?' in row
    assert 'hx-target="closest tr" hx-swap="outerHTML"' in row
    assert "Read logs/deploy.log" in row and "for Sam" in row
    assert f'value="http://testserver/share/{link.token}/"' in row and 'class="copy"' in row


def test_get_asks_revoke_this_link_with_a_post_form(logged_in_client, made, user):
    link = ShareLink.objects.create(blob_id=made["blob"], created_by=user, note="for Sam")
    url = reverse("share_revoke", args=[link.token])

    response = logged_in_client.get(url)

    html = response.content.decode()
    assert response.status_code == 200
    assert "<h1>Revoke this link?</h1>" in html
    form = re.search(r'<form class="confirm-actions".*?</form>', html, re.S).group(0)
    assert f'method="post" action="{url}"' in form and "csrfmiddlewaretoken" in form
    assert (
        ">Revoke link</button>" in form
        and f'href="{reverse("share_list")}#share-{link.pk}"' in form
    )
    assert "for Sam" in html and f"http://testserver/share/{link.token}/" in html
    link.refresh_from_db()
    assert link.revoked_at is None


def test_confirming_revokes_and_goes_back_to_the_list(logged_in_client, made, user):
    link = ShareLink.objects.create(blob_id=made["blob"], created_by=user)

    response = logged_in_client.post(reverse("share_revoke", args=[link.token]), follow=True)

    assert response.redirect_chain == [(reverse("share_list"), 302)]
    assert "Share link revoked; it no longer opens." in response.content.decode()
    assert Client().get(reverse("share_detail", args=[link.token])).status_code == 410


def test_with_htmx_revoking_answers_with_the_revoked_row(logged_in_client, made, user):
    link = ShareLink.objects.create(blob_id=made["blob"], created_by=user)

    response = logged_in_client.post(reverse("share_revoke", args=[link.token]), headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<tr id="share-{link.pk}" class="share-row inactive">')
    assert '<td class="status" data-label="Status">revoked</td>' in html
    assert "hx-post" not in html and "<html" not in html
    link.refresh_from_db()
    assert link.revoked_at is not None


def test_the_confirmation_of_a_link_already_gone_offers_nothing_to_do(logged_in_client, made, user):
    revoked = ShareLink.objects.create(
        blob_id=made["blob"], created_by=user, revoked_at=timezone.now()
    )
    expired = ShareLink.objects.create(
        blob_id=made["blob"], created_by=user, expires_at=timezone.now() - timedelta(days=1)
    )

    for link, words in ((revoked, "was revoked already"), (expired, "expired on")):
        html = logged_in_client.get(reverse("share_revoke", args=[link.token])).content.decode()
        assert words in html and "<form" not in html.split("<main>")[1]


def test_nobody_may_see_the_confirmation_of_someone_elses_link(client, made, django_user_model):
    owner = django_user_model.objects.create_user("owner")
    link = ShareLink.objects.create(blob_id=made["blob"], created_by=owner)
    client.force_login(django_user_model.objects.create_user("mallory"))

    assert client.get(reverse("share_revoke", args=[link.token])).status_code == 404
