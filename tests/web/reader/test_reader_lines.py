"""Lines you can select: each row an anchor `#L<n>` (prefixed per reader when opened in
place), numbers that are links but not tab stops, one skip link past the content, the bar
that turns a selection into `lines:A-B`; grep matches marked within escaped lines."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def page(client, blob_id, selector=None, **headers) -> str:
    query = {"selector": selector} if selector else {}
    response = client.get(reverse("blob_detail", args=[blob_id]), query, headers=headers)
    assert response.status_code == 200
    return response.content.decode()


def test_each_line_is_a_row_with_an_anchor_and_a_number_link(logged_in_client, text_blob):
    blob_id = text_blob("alpha\nbeta\n")

    html = page(logged_in_client, blob_id)

    assert (
        '<span class="r" id="L1"><a class="ln" href="#L1" tabindex="-1">1</a>alpha\n</span>'
        '<span class="r" id="L2"><a class="ln" href="#L2" tabindex="-1">2</a>beta\n</span>'
    ) in html


def test_line_numbers_are_never_tab_stops(logged_in_client, text_blob):
    blob_id = text_blob("".join(f"{n}\n" for n in range(300)))

    for selector in (None, "grep:1"):
        html = page(logged_in_client, blob_id, selector)
        numbers = re.findall(r'<a class="ln"[^>]*>', html)
        assert numbers and all('tabindex="-1"' in link for link in numbers)


def test_one_skip_link_leads_past_the_content(logged_in_client, text_blob):
    blob_id = text_blob("a\n" * 50)

    html = page(logged_in_client, blob_id)

    assert html.count('class="skip"') == 1
    skip = html.index('<a class="skip" href="#blob-view-end">Skip past the content</a>')
    end = html.index('id="blob-view-end" tabindex="-1"')
    assert skip < html.index('<pre class="content lines') < end


def test_a_reader_in_place_prefixes_its_ids_with_its_slot(logged_in_client, text_blob):
    blob_id = text_blob("a\nb\n")

    html = page(logged_in_client, blob_id, **HTMX, **{"HX-Target": "item-12-blob"})

    assert 'data-prefix="item-12-blob-"' in html
    assert '<span class="r" id="item-12-blob-L2"><a class="ln" href="#item-12-blob-L2"' in html
    assert 'id="L2"' not in html
    assert 'href="#item-12-blob-end"' in html and 'id="item-12-blob-end"' in html


def test_select_these_lines_keeps_the_steps_before_the_lines(logged_in_client, json_blob):
    blob_id = json_blob({"log": "one\ntwo\nthree\n"})

    html = page(logged_in_client, blob_id, "key:log | lines:2-3")

    assert '<pre class="content lines d1" data-base="key:log">' in html
    bar = re.search(r'<p class="line-selection" hidden>.*?</p>', html, re.S).group(0)
    assert "Select these lines" in bar and f'href="/blobs/{blob_id}/"' in bar
    assert re.search(r'<section [^>]*data-url="/blobs/[^"]+/"', html)


def test_the_keys_and_the_wrap_toggle_are_offered_for_the_script_to_show(
    logged_in_client, text_blob
):
    blob_id = text_blob("a\n" * 1_000)

    html = page(logged_in_client, blob_id)

    assert '<button type="button" class="tool wrap-toggle" aria-pressed="false" hidden>' in html
    assert "<kbd>[</kbd> previous page · <kbd>]</kbd> next page" in html
    assert re.search(r'<script src="/static/js/reader[^"]*\.js" defer></script>', html)


def test_grep_marks_what_matched_within_each_escaped_line(logged_in_client, text_blob):
    blob_id = text_blob("<b>bold</b> and <b>more</b>\nnone\n")

    html = page(logged_in_client, blob_id, "grep:<b>[a-z]+")

    assert "<mark>&lt;b&gt;bold</mark>&lt;/b&gt; and <mark>&lt;b&gt;more</mark>&lt;/b&gt;\n" in html
    grep = re.search(r'<pre class="content grep.*?</pre>', html, re.S).group(0)
    # The line after the match is context: shown dimmed, nothing marked in it.
    assert re.search(r'<span class="r context"><a class="ln" [^>]*>2</a>none\n</span>', grep)


def grep_rows(html: str) -> list[tuple[str, str]]:
    """(class, number) of each row of the grep page's text."""
    grep = re.search(r'<pre class="content grep.*?</pre>', html, re.S).group(0)
    return re.findall(r'<span class="(r[^"]*)"[^>]*>(?:<a class="ln"[^>]*>(\d+)</a>)?', grep)


def test_grep_shows_two_lines_around_each_match_within_the_lines_searched(
    logged_in_client, text_blob
):
    lines = [f"line {n}" for n in range(1, 41)]
    for n in (10, 12, 30, 40):
        lines[n - 1] = f"hit {n}"
    blob_id = text_blob("\n".join(lines) + "\n")

    rows = grep_rows(page(logged_in_client, blob_id, "grep:hit"))
    assert rows == [
        *[("r context", str(n)) for n in (8, 9)],
        ("r", "10"),
        ("r context", "11"),
        ("r", "12"),
        *[("r context", str(n)) for n in (13, 14)],
        ("r gap", ""),
        *[("r context", str(n)) for n in (28, 29)],
        ("r", "30"),
        *[("r context", str(n)) for n in (31, 32)],
        ("r gap", ""),
        *[("r context", str(n)) for n in (38, 39)],
        ("r", "40"),  # the last line: nothing after it
    ]

    # Within lines:, context stays inside the range searched.
    rows = grep_rows(page(logged_in_client, blob_id, "lines:11-31 | grep:hit"))
    assert rows[:3] == [("r context", "11"), ("r", "12"), ("r context", "13")]
    assert rows[-3:] == [("r context", "29"), ("r", "30"), ("r context", "31")]


def test_grep_context_is_bounded_on_a_page_of_many_matches(logged_in_client, text_blob):
    # Every other line matches: a page of matches, and context no more than its budget.
    text = "".join(f"hit {n}\n{'x' * 250}\n" for n in range(1, 1001))
    blob_id = text_blob(text)

    html = page(logged_in_client, blob_id, "grep:hit")

    rows = grep_rows(html)
    matches = [row for row in rows if row[0] == "r"]
    context = [row for row in rows if row[0] == "r context"]
    assert len(matches) == 500  # a page of matches, as without context
    assert 0 < len(context) < len(matches)  # context stopped at its budget
    # Never the next page's first match (line 1,001) as context.
    assert max(int(number) for _, number in rows if number) <= 1000
    assert len(html.encode()) < 200_000


def test_a_line_with_terminal_codes_is_shown_and_marked_without_them(logged_in_client, text_blob):
    blob_id = text_blob("\x1b[31mERROR\x1b[0m: disk full\n")

    html = page(logged_in_client, blob_id, "grep:disk")

    assert "ERROR: <mark>disk</mark> full" in html and "\x1b" not in html


def test_a_grep_for_a_lone_surrogate_that_matches_nothing_says_so_escaped(
    logged_in_client, text_blob
):
    blob_id = text_blob("plain\n")

    html = page(logged_in_client, blob_id, 'grep:"\\ud801"')

    assert "no lines match \\ud801 in lines 1–1 of 1" in html
