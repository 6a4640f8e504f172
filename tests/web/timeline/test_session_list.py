"""`/`: the recorded sessions, newest first, with search, filters and pages."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from blobviewer.models import Item, Session

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
START = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)


def make_session(title: str, *, hours: int = 0, model: str = "m", blobs: int = 0, **kw) -> Session:
    return Session.objects.create(
        id=uuid.uuid4(),
        title=title,
        model=model,
        created_at=START + timedelta(hours=hours),
        started_at=START + timedelta(hours=hours),
        blob_count=blobs,
        **kw,
    )


def test_it_lists_sessions_newest_first_with_their_counts(logged_in_client):
    make_session("Older run", hours=0)
    make_session(
        "Newer run",
        hours=5,
        item_count=1234,
        step_count=56,
        blobs=7,
        output_bytes_received=3_000_000,
        output_bytes_in_history=1_000_000,
    )

    response = logged_in_client.get(reverse("session_list"))

    assert response.status_code == 200
    html = response.content.decode()
    assert html.index(">Newer run<") < html.index(">Older run<")
    assert '<td class="num" data-label="Items">1,234</td>' in html
    assert '<td class="num" data-label="Steps">56</td>' in html
    assert '<td class="num" data-label="Blobs">7</td>' in html
    assert "1.9\xa0MB" in html  # 2,000,000 bytes kept out of the context
    assert "2025-05-01 17:00 UTC" in html  # times say their zone


def test_it_answers_htmx_with_the_list_fragment(logged_in_client):
    make_session("only")

    response = logged_in_client.get(reverse("session_list"), headers=HTMX)

    html = response.content.decode()
    assert html.lstrip().startswith('<div id="list">')
    assert "<html" not in html and "only" in html


def test_it_searches_titles_and_item_text(logged_in_client):
    by_title = make_session("Deploy the parser")
    by_text = make_session("something else")
    Item.objects.create(session=by_text, seq=1, type="user", text="please fix the PARSER")
    Item.objects.create(session=by_text, seq=2, type="user", text="and the parser tests")
    make_session("unrelated")

    html = logged_in_client.get(reverse("session_list"), {"q": "parser"}).content.decode()

    assert by_title.title in html and by_text.title in html
    assert "unrelated" not in html
    assert "2 sessions" in html


def test_it_searches_tool_outputs(logged_in_client):
    session = make_session("with output")
    Item.objects.create(session=session, seq=1, type="tool_result", output="Traceback: KeyError")
    make_session("without")

    html = logged_in_client.get(reverse("session_list"), {"q": "keyerror"}).content.decode()

    assert "with output" in html and "without" not in html


def test_it_filters_by_model_and_by_having_blobs(logged_in_client):
    make_session("gpt run", model="gpt-x", blobs=2)
    make_session("llama run", model="llama", blobs=0)
    make_session("llama blobs", model="llama", blobs=1)

    html = logged_in_client.get(reverse("session_list"), {"model": "llama"}).content.decode()
    assert "llama run" in html and "llama blobs" in html and "gpt run" not in html

    query = {"model": "llama", "has_blobs": "on"}
    html = logged_in_client.get(reverse("session_list"), query).content.decode()
    assert "llama blobs" in html and "llama run" not in html
    assert '<option value="llama" selected>' in html


def test_the_model_filter_offers_each_model_once_in_order(logged_in_client):
    """The choices are read a model at a time (the least after the one before), and only
    for the whole page."""
    for title, model in [("b1", "beta"), ("a1", "alpha"), ("b2", "beta"), ("n", ""), ("g", "gé")]:
        make_session(title, model=model)

    html = logged_in_client.get(reverse("session_list")).content.decode()
    select = html[html.index('<select id="id_model"') : html.index("</select>")]
    assert re.findall(r'<option value="([^"]*)"', select) == ["", "alpha", "beta", "gé"]
    # The list htmx swaps has no filter form, and reads no model.
    with CaptureQueriesContext(connection) as queries:
        logged_in_client.get(reverse("session_list"), headers=HTMX)
    assert not any("RECURSIVE" in query["sql"] for query in queries)


def test_it_pages_the_sessions_keeping_the_filters(logged_in_client):
    for n in range(55):
        make_session(f"run {n:02}", hours=n, model="m1")

    html = logged_in_client.get(reverse("session_list"), {"model": "m1"}).content.decode()
    assert "run 54" in html and "run 04" not in html
    assert "page 1 of 2" in html
    assert 'href="?model=m1&amp;page=2"' in html

    html = logged_in_client.get(
        reverse("session_list"), {"model": "m1", "page": 2}
    ).content.decode()
    assert "run 04" in html and "run 54" not in html


def test_it_survives_a_page_number_out_of_range(logged_in_client):
    make_session("only")

    for page in ("999", "184467440737095517", "-3", "x"):  # past the end, past any offset
        response = logged_in_client.get(reverse("session_list"), {"page": page, "q": "onl"})

        assert response.status_code == 200 and b"only" in response.content, page


def test_its_filter_form_swaps_the_list_and_pushes_the_url(logged_in_client):
    html = logged_in_client.get(reverse("session_list")).content.decode()

    assert (
        'hx-get="/" hx-target="#list" hx-sync="#list:queue last" hx-swap="outerHTML" '
        'hx-push-url="true"'
    ) in html


def test_it_says_so_when_there_are_no_sessions(logged_in_client):
    html = logged_in_client.get(reverse("session_list")).content.decode()
    assert "No sessions yet" in html


def test_it_needs_a_login(client):
    response = client.get(reverse("session_list"))
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next=/"
