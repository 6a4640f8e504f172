"""`/?sort=…`: the session list sorts by any of its columns, in the database, with ties
broken the same way on every page and sessions without a value last in both directions."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from blobviewer.models import Session
from blobviewer.timeline.sort import COLUMNS
from blobviewer.timeline.views import SESSIONS_PER_PAGE

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
START = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)


def make(title: str, **fields) -> Session:
    fields.setdefault("created_at", START)
    return Session.objects.create(id=uuid.uuid4(), title=title, **fields)


def titles(client, **params) -> list[str]:
    html = client.get(reverse("session_list"), params).content.decode()
    return re.findall(r'<td class="title"><a [^>]*>([^<]*)</a>', html)


# One value per column for three sessions, in ascending order, and a session without one
# where the column can lack a value.
ASCENDING = {
    "title": [{"title": "alpha"}, {"title": "Beta"}, {"title": "gamma"}],
    "source": [
        {"source_format": "blobviewer"},
        {"source_format": "claude-code"},
        {"source_format": "swe-agent"},
    ],
    "model": [{"model": "claude"}, {"model": "gpt"}, {"model": "llama"}],
    "started": [
        {"started_at": START},
        {"started_at": START + timedelta(hours=1)},
        {"started_at": START + timedelta(days=2)},
    ],
    "duration": [
        {"duration": timedelta(seconds=5)},
        {"duration": timedelta(minutes=3)},
        {"duration": timedelta(hours=2)},
    ],
    "items": [{"item_count": 2}, {"item_count": 30}, {"item_count": 400}],
    "steps": [{"step_count": 1}, {"step_count": 12}, {"step_count": 300}],
    "errors": [{"error_count": 0}, {"error_count": 4}, {"error_count": 9}],
    "blobs": [{"blob_count": 0}, {"blob_count": 3}, {"blob_count": 70}],
    "received": [
        {"output_bytes_received": 10},
        {"output_bytes_received": 5_000},
        {"output_bytes_received": 9_000_000},
    ],
    "kept": [
        {"output_bytes_received": 9_000, "output_bytes_in_history": 8_990},  # 10 kept out
        {"output_bytes_received": 1_000, "output_bytes_in_history": 0},  # 1,000
        {"output_bytes_received": 90_000, "output_bytes_in_history": 500},  # 89,500
    ],
    "status": [{"status": "end_turn"}, {"status": "exit_error"}, {"status": "submitted"}],
    "cost": [{"cost_usd": 0.0072}, {"cost_usd": 0.37}, {"cost_usd": 8.37}],
}
WITHOUT = {
    "title": {"title": ""},
    "model": {"model": ""},
    "duration": {"duration": None},
    "status": {"status": ""},
    "cost": {"cost_usd": None, "unpriced_turns": 3},  # no price
}


def test_every_column_has_a_case():
    assert set(ASCENDING) == set(COLUMNS)


@pytest.mark.parametrize("key", sorted(COLUMNS))
def test_it_sorts_by_each_column_both_ways_with_blanks_last(logged_in_client, key):
    names = []
    # Made in an order that is neither ascending nor descending.
    for index in (1, 0, 2):
        fields = dict(ASCENDING[key][index])
        name = fields.pop("title", None) or f"{key}-{index}"
        make(name, **fields)
        names.append((index, name))
    ordered = [name for _, name in sorted(names)]
    blank = None
    if key in WITHOUT:
        blank = "(untitled)" if key == "title" else f"{key}-none"
        make(
            "" if key == "title" else blank,
            **{k: v for k, v in WITHOUT[key].items() if k != "title"},
        )

    ascending = titles(logged_in_client, sort=key)
    descending = titles(logged_in_client, sort=f"-{key}")

    tail = [blank] if blank else []
    assert ascending == ordered + tail
    assert descending == ordered[::-1] + tail


@pytest.mark.parametrize("key", sorted(COLUMNS))
def test_equal_values_page_the_same_way_on_every_page(logged_in_client, key):
    """Sessions alike in the sorted column are ordered by id: pages are disjoint and
    together hold every session once."""
    fields = dict(ASCENDING[key][1])
    fields.pop("title", None)
    same = START + timedelta(days=1)
    Session.objects.bulk_create(
        Session(
            id=uuid.uuid4(),
            title=f"same {n:03}",
            created_at=same,
            **fields,
        )
        for n in range(SESSIONS_PER_PAGE + 20)
    )
    if key == "title":
        Session.objects.update(title="same title")
    all_ids = {str(i) for i in Session.objects.values_list("id", flat=True)}

    for sort in (key, f"-{key}"):
        pages = []
        for number in (1, 2):
            html = logged_in_client.get(
                reverse("session_list"), {"sort": sort, "page": number}
            ).content.decode()
            pages.append(re.findall(r'<td class="title"><a href="/sessions/([0-9a-f-]+)/"', html))
        first, second = pages
        assert len(first) == SESSIONS_PER_PAGE and len(second) == 20
        assert not set(first) & set(second)
        assert set(first) | set(second) == all_ids
        ids = first + second
        assert ids == sorted(ids, reverse=sort.startswith("-"))  # ties: by id


def test_the_default_is_newest_started_first(logged_in_client):
    make("early", started_at=START)
    make("late", started_at=START + timedelta(hours=3))

    assert titles(logged_in_client) == ["late", "early"]


def test_sessions_without_recorded_times_sort_by_their_ingest_time_and_say_so(logged_in_client):
    make("recorded at noon", started_at=START + timedelta(hours=1))
    untimed = make("no times")
    Session.objects.filter(pk=untimed.pk).update(ingested_at=START + timedelta(hours=2))
    make("recorded before", started_at=START)

    assert titles(logged_in_client, sort="started") == [
        "recorded before",
        "recorded at noon",
        "no times",
    ]
    html = logged_in_client.get(reverse("session_list")).content.decode()
    row = re.search(
        r'<tr class="session">\s*<td class="title"><a [^>]*>no times<.*?</tr>', html, re.S
    )
    assert "2025-05-01 14:00 UTC" in row.group(0)
    assert "ingested; no times recorded" in row.group(0)


def test_times_show_their_time_zone(logged_in_client, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    make("summer run", started_at=datetime(2025, 7, 1, 10, 0, tzinfo=UTC))
    timezone.deactivate()

    html = logged_in_client.get(reverse("session_list")).content.decode()

    assert '<time datetime="2025-07-01T12:00:00+02:00">2025-07-01 12:00 CEST</time>' in html


def test_it_shows_the_columns_of_a_session(logged_in_client):
    make(
        "full row",
        source_format="claude-code",
        model="opus",
        started_at=START,
        duration=timedelta(minutes=4, seconds=5),
        item_count=40,
        step_count=12,
        error_count=2,
        blob_count=3,
        output_bytes_received=3_000_000,
        output_bytes_in_history=1_000_000,
        status="end_turn",
        cost_usd=8.3698,
    )

    Session.objects.update(updated_at=START)  # not grown in the last minute: not "live"
    html = logged_in_client.get(reverse("session_list")).content.decode()

    row = re.search(r'<tr class="session has-errors">.*?</tr>', html, re.S).group(0)
    cells = [
        re.sub(r"<[^>]+>", "", cell).strip()
        for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    ]
    assert cells == [
        "full row",
        "claude-code",
        "opus",
        "2025-05-01 12:00 UTC",
        "4 min 05 s",
        "$8.37",
        "40",
        "12",
        "2 failed",
        "3",
        "2.9\xa0MB → 976.6\xa0KB (1.9\xa0MB)",
        "3.0×",
        "end_turn",
    ]


def test_header_links_sort_and_a_second_click_reverses(logged_in_client):
    make("only")

    html = unescape(logged_in_client.get(reverse("session_list"), {"q": "only"}).content.decode())
    duration = re.search(
        r'<th scope="col" class="num"><a class="sort" href="([^"]*)"[^>]*>Duration<', html
    )
    assert duration.group(1) == "?q=only&sort=-duration"  # numbers: biggest first

    html = unescape(
        logged_in_client.get(
            reverse("session_list"), {"q": "only", "sort": "-duration"}
        ).content.decode()
    )
    header = re.search(
        r'<th scope="col" class="num" aria-sort="descending">(.*?)</th>', html
    ).group(1)
    assert 'href="?q=only&sort=duration"' in header and "▼" in header
    title = re.search(r'<th scope="col"><a class="sort" href="([^"]*)"[^>]*>Title<', html)
    assert title.group(1) == "?q=only&sort=title"  # text: A to Z first


def test_sorting_keeps_the_filters_and_the_filters_keep_the_sort(logged_in_client):
    make("llama fast", model="llama", duration=timedelta(seconds=3))
    make("llama slow", model="llama", duration=timedelta(seconds=90))
    make("gpt", model="gpt", duration=timedelta(seconds=50))

    html = logged_in_client.get(
        reverse("session_list"), {"model": "llama", "sort": "duration"}, headers=HTMX
    ).content.decode()

    assert re.findall(r'<td class="title"><a [^>]*>([^<]*)<', html) == ["llama fast", "llama slow"]
    # The filter form (outside the swapped list) submits the sort through this input.
    assert '<input type="hidden" name="sort" value="duration" form="session-filters">' in html


def test_paging_links_keep_the_sort(logged_in_client):
    Session.objects.bulk_create(
        Session(id=uuid.uuid4(), title=f"s{n}", created_at=START, step_count=n)
        for n in range(SESSIONS_PER_PAGE + 1)
    )

    html = logged_in_client.get(reverse("session_list"), {"sort": "steps"}).content.decode()

    assert 'href="?sort=steps&amp;page=2"' in html


def test_an_unknown_sort_is_a_one_line_note_and_sorts_newest_first(logged_in_client):
    make("old", started_at=START)
    make("new", started_at=START + timedelta(days=1))

    response = logged_in_client.get(reverse("session_list"), {"sort": "-colour"})

    assert response.status_code == 200
    html = unescape(response.content.decode())
    assert "unknown sort '-colour'; sort by one of title, source, model, started" in html
    assert titles(logged_in_client, sort="-colour") == ["new", "old"]


def test_the_table_scrolls_inside_its_own_box(logged_in_client):
    make("wide")

    html = logged_in_client.get(reverse("session_list")).content.decode()

    assert re.search(r'<div class="table-scroll">\s*<table class="sessions">', html)
