"""What promotion saves: tool output received, what entered the history, and their ratio,
per session and in total over the sessions a filter matches."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from blobviewer.models import Session
from blobviewer.templatetags.savings import ratio

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
START = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)


def make_session(
    title: str, *, received: int = 0, in_history: int = 0, n: int = 0, **fields
) -> Session:
    return Session.objects.create(
        id=uuid.uuid4(),
        title=title,
        created_at=START + timedelta(minutes=n),
        output_bytes_received=received,
        output_bytes_in_history=in_history,
        **fields,
    )


def totals_row(html: str) -> str:
    return re.search(r'<tr class="totals">.*?</tr>', html, re.S).group(0)


def row_of(html: str, title: str) -> str:
    cell = rf'<td class="title"><a [^>]*>{re.escape(title)}</a>'
    pattern = rf'<tr class="session[^"]*">\s*{cell}.*?</tr>'
    return re.search(pattern, html, re.S).group(0)


@pytest.mark.parametrize(
    ("received", "in_history", "shown"),
    [
        (12_400, 1_000, "12.4×"),
        (1_000, 1_000, "1.0×"),
        (123_450_000, 100_000, "1,234.5×"),
        (0, 0, "—"),
        (0, 500, "—"),
        (500, 0, "—"),
        (None, None, "—"),
    ],
)
def test_the_ratio_is_received_over_in_history_with_one_decimal(received, in_history, shown):
    assert ratio(received, in_history) == shown


def test_the_list_shows_received_in_history_and_the_ratio(logged_in_client):
    make_session("Big outputs", received=3_000_000, in_history=1_000_000)
    make_session("Nothing received", n=1)

    html = logged_in_client.get(reverse("session_list")).content.decode()

    assert "</a> → in history <span" in html and ">Ratio</th>" in html
    row = row_of(html, "Big outputs")
    assert 'title="3,000,000 bytes received">2.9\xa0MB</span> → ' in row
    assert 'title="1,000,000 bytes in the history">976.6\xa0KB</span>' in row
    assert 'title="2,000,000 bytes kept out of context">(1.9\xa0MB)</span>' in row
    assert '<td class="num ratio" data-label="Ratio">3.0×</td>' in row
    assert '<td class="num ratio" data-label="Ratio">—</td>' in row_of(html, "Nothing received")


def test_the_session_page_shows_received_in_history_and_the_ratio(logged_in_client):
    session = make_session("Big outputs", received=12_400_000, in_history=1_000_000)

    html = logged_in_client.get(session.get_absolute_url()).content.decode()

    facts = re.search(r'<dl class="facts">.*?</dl>', html, re.S).group(0)
    assert '<dt>Tool output received</dt><dd title="12,400,000 bytes">11.8\xa0MB</dd>' in facts
    assert '<dt>In history</dt><dd title="1,000,000 bytes">976.6\xa0KB' in facts
    assert "10.9\xa0MB kept out of context" in facts
    assert re.search(r"<dt>Ratio</dt><dd [^>]*>12\.4×</dd>", facts)


def test_a_session_with_no_tool_output_has_no_ratio(logged_in_client):
    session = make_session("Chat only")

    html = logged_in_client.get(session.get_absolute_url()).content.decode()

    assert re.search(r"<dt>Ratio</dt><dd [^>]*>—</dd>", html)


def test_a_recorded_session_shows_what_promotion_kept_out(logged_in_client, sample_session):
    session = sample_session.session
    expected = f"{session.output_bytes_received / session.output_bytes_in_history:,.1f}×"

    html = logged_in_client.get(reverse("session_list")).content.decode()

    assert session.output_bytes_received > 10 * session.output_bytes_in_history > 0
    cell = f'<td class="num ratio" data-label="Ratio">{expected}</td>'
    assert cell in row_of(html, "Fix the build")


def test_the_totals_are_the_sums_over_the_filtered_sessions(logged_in_client):
    make_session("a1", model="alpha", received=2_000, in_history=100, blob_count=2, item_count=5)
    make_session("a2", model="alpha", received=4_000, in_history=300, blob_count=3, item_count=7)
    make_session("b1", model="beta", received=90_000, in_history=10, blob_count=40)

    html = logged_in_client.get(reverse("session_list"), {"model": "alpha"}).content.decode()

    row = totals_row(html)
    assert "all 2 matching sessions" in row
    cells = re.findall(r'<td class="num[^"]*"[^>]*>([^<]*)</td>', row)
    assert cells == ["12", "0", "0", "5", "15.0×"]  # items, steps, errors, blobs, ratio
    spans = re.findall(r'<span (?:class="kept" )?title="([^"]*)">([^<]*)</span>', row)
    assert spans == [
        ("6,000 bytes received", "5.9\xa0KB"),
        ("400 bytes in the history", "400\xa0bytes"),
        ("5,600 bytes kept out of context", "(5.5\xa0KB)"),
    ]


def test_the_totals_cover_every_page_not_only_the_one_shown(logged_in_client):
    Session.objects.bulk_create(
        Session(
            id=uuid.uuid4(),
            title=f"s{n}",
            created_at=START + timedelta(minutes=n),
            output_bytes_received=1_000,
            output_bytes_in_history=100,
            blob_count=1,
        )
        for n in range(60)
    )

    html = logged_in_client.get(reverse("session_list")).content.decode()

    row = totals_row(html)
    assert "Total of all 60 sessions" in row
    assert 'title="60,000 bytes received"' in row and ">60</td>" in row and ">10.0×</td>" in row


def test_the_totals_follow_the_filters_in_the_htmx_fragment(logged_in_client):
    make_session("parser fix", received=5_000, in_history=500)
    make_session("unrelated", received=7_000, in_history=100)

    response = logged_in_client.get(reverse("session_list"), {"q": "parser"}, headers=HTMX)

    html = response.content.decode()
    assert html.lstrip().startswith('<div id="list">')
    row = totals_row(html)
    assert "Total of 1 matching session<" in row
    assert 'title="5,000 bytes received"' in row and ">10.0×</td>" in row


def test_the_totals_take_one_query_however_many_sessions_match(logged_in_client):
    def queries_for_list() -> int:
        with CaptureQueriesContext(connection) as queries:
            logged_in_client.get(reverse("session_list"))
        return len(queries)

    for n in range(2):
        make_session(f"first {n}", received=100, in_history=10, n=n)
    few = queries_for_list()
    for n in range(2, 30):
        make_session(f"more {n}", received=100, in_history=10, n=n)

    assert queries_for_list() == few


def test_the_new_columns_keep_titles_and_models_escaped(logged_in_client):
    make_session(
        "<script>alert('title')</script>",
        model="<img src=x onerror=alert(1)>",
        received=2_000,
        in_history=100,
    )

    html = logged_in_client.get(reverse("session_list")).content.decode()

    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#x27;title&#x27;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert ">20.0×</td>" in html
