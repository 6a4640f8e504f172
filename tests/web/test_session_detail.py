"""`/sessions/<uuid>/`: a run as a timeline; blobs open in place."""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import reverse

from blobviewer.models import Item, Session
from blobviewer.views import ITEMS_PER_PAGE

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def timeline(client, session_id: uuid.UUID) -> str:
    return client.get(reverse("session_detail", args=[session_id])).content.decode()


def test_it_shows_the_run_as_a_timeline(logged_in_client, sample_session):
    response = logged_in_client.get(reverse("session_detail", args=[sample_session.id]))

    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Fix the build</h1>" in html
    assert html.count('<article class="item user"') == 1
    assert html.count('<article class="item assistant"') == 4
    assert html.count('<article class="item tool_result"') == 4
    assert "The build is failing; find out why." in html
    assert '<code class="tool">run_build</code>' in html


def test_it_links_each_blob_reference_to_the_blob_opening_in_place(
    logged_in_client, sample_session
):
    html = logged_in_client.get(
        reverse("session_detail", args=[sample_session.id])
    ).content.decode()

    blob_url = reverse("blob_detail", args=[sample_session.text_blob])
    link = re.search(rf'<a class="blob-ref" href="{blob_url}"[^>]*>([^<]*)</a>', html)
    assert link, "the summary's [blob:<id>] is a link"
    assert link.group(1) == f"[blob:{sample_session.text_blob}]"
    assert f'hx-get="{blob_url}"' in link.group(0)
    assert 'hx-target="#item-3-blob"' in link.group(0)
    assert 'hx-swap="outerHTML"' in link.group(0)
    assert "hx-push-url" not in link.group(0)
    assert '<div class="blob-slot" id="item-3-blob"></div>' in html


def test_it_links_an_inspect_call_to_the_view_the_model_got(logged_in_client, sample_session):
    html = logged_in_client.get(
        reverse("session_detail", args=[sample_session.id])
    ).content.decode()

    target = reverse("blob_detail", args=[sample_session.text_blob]) + "?selector=lines%3A2-3"
    link = re.search(r'<a class="inspect-link"[^>]*>', html).group(0)
    assert f'href="{target}"' in link and f'hx-get="{target}"' in link
    assert 'hx-target="#item-4-blob"' in link


def test_it_marks_references_to_missing_blobs(logged_in_client, write_log):
    from django.core.management import call_command

    from web.records import header, tool_result_item

    absent = uuid.UUID("01900000-0000-7000-8000-000000000010")
    session_id = uuid.uuid4()
    path = write_log([header(session_id), tool_result_item(1, f"[blob:{absent}] text | 2 lines")])
    call_command("ingest", str(path))

    html = logged_in_client.get(reverse("session_detail", args=[session_id])).content.decode()

    assert 'class="blob-ref missing"' in html


def test_it_answers_htmx_with_the_timeline_fragment(logged_in_client, sample_session):
    url = reverse("session_detail", args=[sample_session.id])

    html = logged_in_client.get(url, headers=HTMX).content.decode()

    assert html.lstrip().startswith('<div id="timeline">')
    assert "<h1>" not in html


def test_it_pages_a_long_session(logged_in_client):
    session = Session.objects.create(id=uuid.uuid4(), title="long", created_at="2025-01-01T00:00Z")
    Item.objects.bulk_create(
        Item(session=session, seq=n, type="user", text=f"message number {n}")
        for n in range(1, 2 * ITEMS_PER_PAGE + 11)
    )
    url = reverse("session_detail", args=[session.id])

    html = logged_in_client.get(url).content.decode()
    assert html.count("<article") == ITEMS_PER_PAGE
    assert "page 1 of 3" in html
    assert f">message number {ITEMS_PER_PAGE}<" in html
    assert f">message number {ITEMS_PER_PAGE + 1}<" not in html

    html = logged_in_client.get(url, {"page": 3}, headers=HTMX).content.decode()
    assert html.count("<article") == 10
    assert f'id="item-{2 * ITEMS_PER_PAGE + 10}"' in html
    assert 'hx-target="#timeline"' in html


def test_it_cuts_an_enormous_item_text(logged_in_client, write_log):
    from django.core.management import call_command

    from web.records import header, user_item

    session_id = uuid.uuid4()
    call_command("ingest", str(write_log([header(session_id), user_item(1, "y" * 100_000)])))

    response = logged_in_client.get(reverse("session_detail", args=[session_id]))

    assert b"80000 more characters not shown" in response.content
    assert len(response.content) < 40_000


def test_it_answers_an_unknown_session_with_404(logged_in_client, db):
    response = logged_in_client.get(reverse("session_detail", args=[uuid.uuid4()]))
    assert response.status_code == 404


def test_it_needs_a_login(client, sample_session):
    response = client.get(reverse("session_detail", args=[sample_session.id]))
    assert response.status_code == 302
