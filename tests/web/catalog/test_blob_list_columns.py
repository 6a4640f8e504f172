"""`/blobs/`: what made each blob (tool and argument), its session and step, its first
line, kind, size and creation time; sorts by size and date; filters by tool and session."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse

from blobviewer.catalog.blobs import refresh_blob
from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Blob, Session
from core.promotion import admit_sync, promote
from web.timeline_records import assistant, call, result

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def run(title: str, *steps: tuple[str, dict[str, Any], str]) -> tuple[Session, list[uuid.UUID]]:
    """A session whose steps (tool, arguments, output) each made a blob; and their ids."""
    session_id = uuid.uuid4()
    records: list[dict[str, Any]] = []
    blob_ids = []
    for n, (tool, arguments, output) in enumerate(steps):
        admitted = admit_sync(promote(output), blob_store())
        assert admitted.blob_id is not None
        blob_ids.append(admitted.blob_id)
        records += [
            assistant(2 * n + 1, call(f"c{n}", tool, arguments)),
            result(2 * n + 2, f"c{n}", admitted.text, tool=tool),
        ]
    header = {
        "type": "session",
        "id": str(session_id),
        "created_at": "2025-05-01T12:00:00+00:00",
        "title": title,
        "model": "m",
        "meta": {},
    }
    ingest_session(header, records, source_path=f"test:{session_id}", store=blob_store())
    return Session.objects.get(id=session_id), blob_ids


def text(first_line: str, size: int = 2000) -> str:
    body = first_line + "\n"
    return body + "".join(f"more {n}\n" for n in range((size - len(body)) // 8))


def rows(html: str) -> list[str]:
    return re.findall(r'<tr class="blob-row.*?</tr>', html, re.S)


_ROW_ID = re.compile(
    r'<tr class="blob-row[^"]*">\s*<td class="blob">\s*<a class="title" href="/blobs/([^/]+)/"'
)


def order(html: str) -> list[uuid.UUID]:
    """The blobs of the list's rows, in order."""
    return [uuid.UUID(m) for m in _ROW_ID.findall(html)]


def listing(client: Any, **params: Any) -> str:
    response = client.get(reverse("blob_list"), params)
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def two_runs(data_dir: Any) -> dict[str, Any]:
    fix, (app, tests) = run(
        "Fix the app",
        ("Read", {"file_path": "src/app.py"}, text("import os  # the app", 3000)),
        ("Bash", {"command": "pytest -x"}, text("===== 3 failed, 97 passed =====", 9000)),
    )
    docs, (readme,) = run(
        "Write the docs", ("Read", {"file_path": "README.md"}, text("# blobviewer", 1500))
    )
    return {"fix": fix, "docs": docs, "app": app, "tests": tests, "readme": readme}


# --- columns -------------------------------------------------------------------------------


def test_each_row_shows_tool_and_argument_session_step_preview_kind_size_created(
    logged_in_client, two_runs
):
    html = listing(logged_in_client)

    row = next(r for r in rows(html) if str(two_runs["tests"]) in r)
    fix = two_runs["fix"]
    assert f'<a class="title" href="/blobs/{two_runs["tests"]}/">Bash: pytest -x</a>' in row
    assert '<code class="preview">===== 3 failed, 97 passed =====</code>' in row
    assert f'<a href="{fix.get_absolute_url()}">Fix the app</a>' in row
    assert (
        f'href="{reverse("item_detail", args=[fix.id, 4])}" title="the step that made it">#4</a>'
        in row
    )
    assert '<td class="kind">text <span class="count-label">' in row
    blob = Blob.objects.get(id=two_runs["tests"])
    assert f'title="{blob.size:,} bytes"' in row
    assert f'<time datetime="{blob.created_at.isoformat()}' in row


def test_a_blob_no_step_made_keeps_its_id_and_says_so(logged_in_client, store, text_blob):
    blob_id = text_blob("an agent wrote this straight into the store\n" * 30)
    refresh_blob(blob_id, store=store)

    row = next(r for r in rows(listing(logged_in_client)) if str(blob_id) in r)

    assert f'<a class="title" href="/blobs/{blob_id}/"><code>{blob_id}</code></a>' in row
    assert '<code class="preview">an agent wrote this straight into the store</code>' in row
    assert '<span class="none">no session</span>' in row


def test_the_preview_is_stored_when_the_blob_is_indexed_not_read_per_request(
    logged_in_client, two_runs, store
):
    store.path_of(two_runs["readme"]).unlink()  # the page must not need the file

    html = listing(logged_in_client)

    assert '<code class="preview"># blobviewer</code>' in html
    assert Blob.objects.get(id=two_runs["readme"]).preview == "# blobviewer"


def test_a_preview_is_escaped(logged_in_client, store, text_blob):
    blob_id = text_blob('<img src=x onerror="alert(1)"> & more\n' * 40)
    refresh_blob(blob_id, store=store)

    html = listing(logged_in_client)

    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; more" in html


def test_the_page_stays_small(logged_in_client, data_dir):
    long = "y" * 5000
    run("many", *[("Read", {"file_path": f"{long}/{n}"}, text(long, 3000)) for n in range(60)])

    html = listing(logged_in_client)

    assert len(rows(html)) == 50
    assert len(html.encode()) < 120_000  # titles and previews are stored cut short


# --- sorts ---------------------------------------------------------------------------------


def test_it_sorts_by_size_both_ways(logged_in_client, two_runs):
    by_size = sorted(Blob.objects.all(), key=lambda b: (b.size, b.id))

    assert order(listing(logged_in_client, sort="size")) == [b.id for b in by_size]
    assert order(listing(logged_in_client, sort="-size")) == [b.id for b in reversed(by_size)]


def test_it_sorts_by_date_newest_first_unless_asked(logged_in_client, two_runs):
    oldest_first = [b.id for b in sorted(Blob.objects.all(), key=lambda b: (b.created_at, b.id))]

    assert order(listing(logged_in_client)) == oldest_first[::-1]
    assert order(listing(logged_in_client, sort="created")) == oldest_first


def test_equal_sizes_keep_one_order_across_pages(logged_in_client, data_dir):
    now = datetime(2025, 5, 1, tzinfo=UTC)
    Blob.objects.bulk_create(
        Blob(id=uuid.uuid4(), kind="text", size=100, created_at=now + timedelta(seconds=n % 3))
        for n in range(75)
    )
    expected = sorted(Blob.objects.values_list("id", flat=True))

    for sort in ("size", "created"):
        shown = order(listing(logged_in_client, sort=sort)) + order(
            listing(logged_in_client, sort=sort, page=2)
        )
        assert len(shown) == 75 and len(set(shown)) == 75
        if sort == "size":
            assert shown == expected  # ties by id


def test_missing_blobs_come_last_by_size_either_way(logged_in_client, two_runs):
    absent = Blob.objects.create(id=uuid.uuid4(), missing=True)

    assert order(listing(logged_in_client, sort="size"))[-1] == absent.id
    assert order(listing(logged_in_client, sort="-size"))[-1] == absent.id


def test_the_headers_link_to_the_other_direction_and_keep_the_filters(logged_in_client, two_runs):
    html = listing(logged_in_client, sort="-size", tool="Read")

    headers = re.findall(r"<th [^>]*>.*?</th>", html, re.S)
    size = next(h for h in headers if "Size" in h)
    created = next(h for h in headers if "Stored" in h)
    assert 'aria-sort="descending"' in size and 'href="?sort=size&amp;tool=Read"' in size
    assert "aria-sort" not in created and 'href="?sort=-created&amp;tool=Read"' in created
    # The list's sort goes with the next filter change.
    assert '<input type="hidden" name="sort" value="-size" form="blob-filters">' in html


def test_an_unknown_sort_says_so_and_sorts_newest_first(logged_in_client, two_runs):
    html = listing(logged_in_client, sort="colour")

    assert 'role="alert">sort: unknown sort colour; newest first instead.' in html
    oldest_first = [b.id for b in sorted(Blob.objects.all(), key=lambda b: (b.created_at, b.id))]
    assert order(html) == oldest_first[::-1]


# --- filters -------------------------------------------------------------------------------


def test_it_filters_by_the_tool_that_made_the_blob(logged_in_client, two_runs):
    html = listing(logged_in_client, tool="Read")

    assert set(order(html)) == {two_runs["app"], two_runs["readme"]}
    options = re.search(r'<select id="id_tool".*?</select>', html, re.S).group(0)
    assert '<option value="Bash">Bash</option>' in options
    assert '<option value="Read" selected>Read</option>' in options


def test_it_filters_by_session(logged_in_client, two_runs):
    fix = two_runs["fix"]

    html = listing(logged_in_client, session=str(fix.id))

    assert set(order(html)) == {two_runs["app"], two_runs["tests"]}
    assert f'<option value="{fix.id}" selected>Fix the app · 2025-05-01</option>' in html
    assert f'that <a href="{fix.get_absolute_url()}">Fix the app</a> refers to' in html


def test_the_session_filter_sees_the_blobs_it_refers_to_but_did_not_make(
    logged_in_client, two_runs
):
    review_id = uuid.uuid4()
    header = {"type": "session", "id": str(review_id), "title": "Review", "meta": {}}
    header["created_at"] = "2025-05-02T09:00:00+00:00"
    mention = {"type": "user", "seq": 1, "at": None, "text": f"see [blob:{two_runs['tests']}]"}
    ingest_session(header, [mention], source_path=f"test:{review_id}", store=blob_store())

    html = listing(logged_in_client, session=str(review_id))

    assert order(html) == [two_runs["tests"]]
    row = rows(html)[0]
    # Made in its own session still; the row says so.
    assert ">Fix the app</a>" in row and '<span class="more">+1 more</span>' in row


def test_filters_combine(logged_in_client, two_runs):
    html = listing(logged_in_client, tool="Read", session=str(two_runs["docs"].id), kind="text")

    assert order(html) == [two_runs["readme"]]


def test_a_bad_session_id_is_an_error_line_and_the_other_filters_still_apply(
    logged_in_client, two_runs
):
    html = listing(logged_in_client, session="not-a-uuid", tool="Bash")

    assert 'role="alert">session: not a session id (a UUID).</p>' in html
    assert order(html) == [two_runs["tests"]]


def test_a_session_with_nothing_matching_says_no_blobs_match(logged_in_client, two_runs):
    html = listing(logged_in_client, tool="Bash", session=str(two_runs["docs"].id))

    assert "No blobs match these filters." in html


def test_htmx_gets_the_list_with_its_sort(logged_in_client, two_runs):
    html = logged_in_client.get(
        reverse("blob_list"), {"sort": "size"}, headers=HTMX
    ).content.decode()

    assert html.lstrip().startswith('<div id="list">')
    assert '<input type="hidden" name="sort" value="size" form="blob-filters">' in html
    assert "<html" not in html
