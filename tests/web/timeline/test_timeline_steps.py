"""`/sessions/<uuid>/` as a list of steps: calls paired with their results under their
turn, per-step bytes, errors, durations and inspect links, tokens and their chart, the
outline, filters that keep the URL, pages of a fixed number of steps that stay under
200 KB, and the facts at the top."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from django.urls import reverse
from django.utils.html import escape

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import BlobRef, Item, Session
from blobviewer.timeline.pages import step_url
from blobviewer.timeline.paging import (
    OUTLINE_MARKS,
    PAGE_LIMIT,
    ROW_BYTES,
    STEPS_PER_PAGE,
    TIMELINE_BUDGET,
    paginate,
)
from blobviewer.timeline.steps import CallRow, ItemRow, StepFilter, build_units, size_class
from blobviewer.timeline.timeline import Timeline
from web.timeline_records import (
    OUT_OF_ORDER_ID,
    assistant,
    call,
    ingest_out_of_order,
    record,
    result,
    set_duration,
    steps_session,
    tokens_session,
    user,
)

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def page(client, session: Session, **query) -> str:
    response = client.get(reverse("session_detail", args=[session.id]), query)
    assert response.status_code == 200
    return response.content.decode()


def ids(html: str, prefix: str) -> list[str]:
    """The ids of the steps, turns and messages in *html*'s timeline, in page order."""
    if '<div id="timeline"' in html:
        html = html[html.index('<div id="timeline"') :]
    return re.findall(rf'<(?:section|article)[^>]* id="({prefix}[^"]*)"', html)


def step_html(html: str, anchor: str) -> str:
    start = html.index(f'id="{anchor}"')
    return html[start : html.index("</section>", start)]


def data_value(html: str, name: str) -> int:
    return int(re.search(rf'<data class="{name}" value="(\d+)"', html).group(1))


def pages_of(client, session: Session, **query) -> list[str]:
    """Every page of the timeline under *query*, by following its "next" links."""
    pages = [page(client, session, **query)]
    while match := re.search(r'<a href="([^"]+)"[^>]*rel="next"', pages[-1]):
        response = client.get(unescape(match.group(1)))
        assert response.status_code == 200
        pages.append(response.content.decode())
        assert len(pages) < 500
    return pages


# --- pairing and grouping -----------------------------------------------------------------


def test_parallel_calls_sit_under_their_turn_in_call_order_whatever_order_the_results_came(
    logged_in_client, data_dir
):
    session = ingest_out_of_order()
    html = page(logged_in_client, session)

    # The log records the results of calls a, b, c as seq 4, 5, 3.
    turn = html[html.index('id="turn-2"') : html.index("</article>", html.index('id="turn-2"'))]
    assert ids(turn, "step-") == ["step-4", "step-5", "step-3"]
    assert re.findall(r'<code class="tool">([^<]*)</code>', turn) == ["Bash", "Read", "Grep"]
    assert "3 calls" in turn
    # The messages stay between the steps, in the order they were recorded.
    assert ids(html, "") == [
        "item-1",
        "turn-2",
        "step-4",
        "step-5",
        "step-3",
        "turn-6",
        "step-7",
        "turn-8",
    ]


def test_the_item_anchors_keep_working_inside_steps_and_turns(logged_in_client, data_dir):
    session = ingest_out_of_order()

    html = page(logged_in_client, session)

    for seq in range(1, 9):
        assert html.count(f'id="item-{seq}"') == 1, seq


def test_a_result_without_its_call_and_a_call_without_a_result_are_steps_too(
    logged_in_client, data_dir
):
    session = record(
        [
            assistant(1, call("c1", "run", {"command": "a"}), call("c2", "run", {"command": "b"})),
            result(2, "c1", "first"),
            result(3, "elsewhere", "who asked?"),
        ]
    )

    html = page(logged_in_client, session)

    assert ids(html, "step-") == ["step-2", "step-3"]
    assert ids(html, "call-") == ["call-1-1"]
    assert "no result recorded" in step_html(html, "call-1-1")
    assert "call not recorded" in step_html(html, "step-3")


def test_a_turn_recorded_as_several_assistant_items_is_one_turn():
    # Claude Code writes one API message (text, then each tool_use) as several lines.
    rows = [
        ItemRow(seq=1, type="assistant", text_chars=10, input_tokens=100, output_tokens=3),
        ItemRow(seq=2, type="assistant", calls=(CallRow(0, "a", "Read"),), output_tokens=3),
        ItemRow(seq=3, type="assistant", calls=(CallRow(0, "b", "Bash"),), output_tokens=90),
        ItemRow(seq=4, type="tool_result", call_id="b"),
        ItemRow(seq=5, type="tool_result", call_id="a"),
        ItemRow(seq=6, type="user", text_chars=5),
    ]

    units = build_units(rows)

    assert [u.kind for u in units] == ["turn", "message"]
    turn = units[0]
    assert [item.seq for item in turn.items] == [1, 2, 3]
    assert [(s.tool, s.result.seq) for s in turn.steps] == [("Read", 5), ("Bash", 4)]
    # The usage repeated on each line is the message's: the last, not a sum.
    assert (turn.input_tokens, turn.output_tokens, turn.context_tokens) == (100, 90, 100)


def test_a_sub_agents_turn_is_not_merged_into_the_main_one():
    rows = [
        ItemRow(seq=1, type="assistant", calls=(CallRow(0, "t", "Task"),)),
        ItemRow(seq=2, type="assistant", sidechain=True, calls=(CallRow(0, "s", "Bash"),)),
        ItemRow(seq=3, type="tool_result", call_id="s", sidechain=True),
        ItemRow(seq=4, type="tool_result", call_id="t"),
    ]

    units = build_units(rows)

    assert [[s.result.seq for s in u.steps] for u in units] == [[4], [3]]
    assert [u.sidechain for u in units] == [False, True]


# --- what each step shows -----------------------------------------------------------------


def test_each_step_shows_the_bytes_received_in_history_and_kept_out(logged_in_client, data_dir):
    session = ingest_out_of_order()
    listing = Item.objects.get(session=session, seq=4)
    html = page(logged_in_client, session)

    bash = step_html(html, "step-4")
    # The Bash result was 2,700 bytes; promotion put its summary into the history.
    assert data_value(bash, "received") == 2_700 == listing.received_bytes
    assert data_value(bash, "in-history") == len(listing.output.encode()) < 400
    assert data_value(bash, "kept-out") == 2_700 - len(listing.output.encode())
    assert "2,700 B</data> received →" in bash
    read = step_html(html, "step-5")
    assert data_value(read, "received") == data_value(read, "in-history") == 25
    assert "kept-out" not in read and "all</data> in history" in read


def test_a_failed_step_says_error_in_words(logged_in_client, data_dir):
    session = ingest_out_of_order()

    html = page(logged_in_client, session)

    grep = step_html(html, "step-3")
    assert grep.startswith('id="step-3"')
    assert '<section class="step is-error" id="step-3"' in html
    assert '<span class="badge error">error</span>' in grep
    assert "No such file or directory" in grep
    assert "badge error" not in step_html(html, "step-4")


def test_each_call_shows_its_arguments_for_reading(logged_in_client, data_dir):
    session = ingest_out_of_order()

    html = page(logged_in_client, session)

    assert '<span class="prompt" aria-hidden="true">$ </span>find src -name &#x27;*.py&#x27;' in (
        step_html(html, "step-4")
    )
    assert "<code>README.md</code>" in step_html(html, "step-5")
    assert '<code class="pattern">TODO</code>' in step_html(html, "step-3")
    edit = step_html(html, "step-7")
    assert '<span class="del">-A small project.</span>' in edit
    assert '<span class="add">+A small, tidy project.</span>' in edit
    assert "{&quot;" not in html  # never escaped JSON


def test_a_step_shows_its_duration_where_recorded(logged_in_client, data_dir):
    session = ingest_out_of_order()
    set_duration(session, 4, 1.25)
    set_duration(session, 5, 0.04)

    html = page(logged_in_client, session)

    assert '<span class="duration" title="from the call to its result">1.2 s</span>' in (
        step_html(html, "step-4")
    )
    assert ">40 ms</span>" in step_html(html, "step-5")
    Item.objects.filter(session=session, seq=7).update(duration=None)
    assert 'class="duration"' not in step_html(page(logged_in_client, session), "step-7")


def test_a_step_links_to_the_later_inspect_call_that_read_its_blob(
    logged_in_client, sample_session
):
    session = sample_session.session
    html = page(logged_in_client, session)

    # #3 is run_build's promoted output; #5 is the inspect call that read it.
    build = step_html(html, "step-3")
    assert '<a class="read-by" href="#step-5">#5</a>' in build
    inspect = step_html(html, "step-5")
    assert '<a class="reads" href="#step-3">#3</a>' in inspect
    reader = reverse("blob_detail", args=[sample_session.text_blob]) + "?selector=lines%3A2-3"
    assert f'<a class="reader-link" href="{reader}">open in the reader</a>' in inspect
    item_url = reverse("item_detail", args=[session.id, 5])
    link = re.search(r'<a class="inspect-link"[^>]*>', inspect).group(0)
    assert f'href="{item_url}"' in link and f'hx-get="{item_url}"' in link
    assert 'hx-target="#item-5-blob"' in link


def test_an_importers_note_is_shown_on_its_step_cut_and_escaped(logged_in_client, data_dir):
    session = ingest_out_of_order()
    Item.objects.filter(session=session, seq=4).update(note="<persisted> " + "n" * 500)

    html = page(logged_in_client, session)

    note = re.search(r'<p class="note importer-note">([^<]*)</p>', step_html(html, "step-4"))
    assert note.group(1).startswith("&lt;persisted&gt; nnn")
    assert len(unescape(note.group(1))) == 200


# --- in place -------------------------------------------------------------------------------


def test_an_inspect_call_opens_in_place_the_output_the_model_got(logged_in_client, sample_session):
    session = sample_session.session
    url = reverse("item_detail", args=[session.id, 5])

    response = logged_in_client.get(url, headers={**HTMX, "HX-Target": "item-5-blob"})

    html = response.content.decode()
    assert html.startswith('<section id="item-5-blob" class="output-view in-place"')
    recorded = Item.objects.get(session=session, seq=5).output
    shown = re.search(r'<pre class="content output">(.*?)</pre>', html, re.S).group(1)
    assert unescape(shown) == recorded
    reader = reverse("blob_detail", args=[sample_session.text_blob]) + "?selector=lines%3A2-3"
    assert f'<a class="reader-link" href="{reader}">' in html


def test_open_the_item_replaces_a_steps_output_with_all_of_it(logged_in_client, data_dir):
    output = "".join(f"line {n}\n" for n in range(300))[:790]
    session = record([assistant(1, call("c", "run")), result(2, "c", output * 1)])
    long_text = "w" * 3_000
    Item.objects.filter(session=session, seq=2).update(output=long_text, output_bytes=3_000)

    timeline = page(logged_in_client, session)
    fragment = logged_in_client.get(
        reverse("item_detail", args=[session.id, 2]), headers={**HTMX, "HX-Target": "item-2"}
    ).content.decode()

    assert "more bytes — <a" in step_html(timeline, "step-2")
    assert fragment.startswith('<div class="result" id="item-2">')
    assert long_text in fragment and "more bytes" not in fragment


# --- tokens and the chart -------------------------------------------------------------------


def test_each_turn_shows_its_input_and_output_tokens(logged_in_client, data_dir):
    session = tokens_session()

    html = page(logged_in_client, session)

    turn = html[html.index('id="turn-5"') : html.index("</article>", html.index('id="turn-5"'))]
    assert '<data class="input-tokens" value="1900">1,900</data> in' in turn
    assert '<data class="output-tokens" value="55">55</data> out tokens' in turn


def test_the_chart_draws_context_tokens_per_turn_and_marks_each_promoted_output(
    logged_in_client, data_dir
):
    session = tokens_session()

    html = page(logged_in_client, session)

    chart = re.search(r'<svg class="chart".*?</svg>', html, re.S).group(0)
    line = re.search(r'<path class="context" d="([^"]+)"', chart).group(1)
    points = re.findall(r"[ML]([\d.]+) ([\d.]+)", line)
    assert len(points) == 4
    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    assert xs == sorted(xs) and ys == sorted(ys, reverse=True)  # more context: higher
    marks = re.findall(r'<a class="promoted" href="([^"]+)"><path d="M([\d.]+) ', chart)
    assert [href for href, _ in marks] == ["#step-3", "#step-8"]
    assert float(marks[0][1]) == xs[0] and float(marks[1][1]) == xs[2]
    assert "style=" not in chart
    assert "2 outputs promoted to a blob" in html


def test_without_recorded_tokens_there_is_no_chart_and_the_page_says_so(logged_in_client, data_dir):
    session = ingest_out_of_order()

    html = page(logged_in_client, session)

    assert "<svg" not in html
    assert "No token counts recorded in this session" in html


# --- the outline ----------------------------------------------------------------------------


def outline_of(html: str) -> str:
    start = html.index('<aside class="outline"')
    return html[start : html.index("</aside>", start)]


def test_the_outline_has_one_mark_per_step_shaded_by_size_with_errors_marked(
    logged_in_client, data_dir
):
    session = ingest_out_of_order()

    outline = outline_of(page(logged_in_client, session))

    marks = re.findall(r'<a class="m ([^"]*)" href="([^"]+)" title="([^"]*)"', outline)
    assert [href for _, href, _ in marks] == ["#step-4", "#step-5", "#step-3", "#step-7"]
    classes = [set(c.split()) for c, _, _ in marks]
    assert classes[0] >= {f"s{size_class(2_700)}", "here"} and "e" not in classes[0]
    assert classes[2] >= {"s0", "e"}
    assert "#3 Grep, 44 bytes, error" in marks[2][2]


def test_the_outline_links_to_steps_on_other_pages(logged_in_client, data_dir):
    session = steps_session(150, output="x" * 700)

    html = page(logged_in_client, session)

    marks = re.findall(r'<a class="m[^"]*" href="([^"]+)"', outline_of(html))
    assert len(marks) == 150
    assert marks[0] == "#step-3"
    last = Timeline(session, StepFilter()).layout.page_count
    assert last > 1
    assert unescape(marks[-1]) == f"{session.get_absolute_url()}?page={last}#step-301"


def test_the_pager_names_the_steps_a_page_holds(logged_in_client, data_dir):
    session = steps_session(30, output="x" * 10)

    first = page(logged_in_client, session)
    second = logged_in_client.get(session.get_absolute_url(), {"page": 2}).content.decode()

    # Items are numbered from #1 (the task); a page names its steps' numbers as such.
    assert re.search(r"<span>page 1 of \d+ · steps #3–#\d+</span>", first)
    assert re.search(r"<span>page 2 of \d+ · steps? #\d+", second)


def test_a_long_sessions_outline_marks_runs_of_steps(logged_in_client, data_dir):
    steps = 2 * OUTLINE_MARKS + 10
    session = steps_session(steps, every_error=500)

    html = page(logged_in_client, session)

    outline = outline_of(html)
    per_mark = int(re.search(r"· (\d+) a mark", outline).group(1))
    assert per_mark >= 3
    marks = re.findall(r'<a class="m([^"]*)" href="[^"]+" title="([^"]*)"', outline)
    assert len(marks) == -(-steps // per_mark) <= OUTLINE_MARKS
    last_seq = 3 + 2 * (per_mark - 1)
    assert marks[0][1].startswith(f"#3–#{last_seq}: {per_mark} steps") and "1 error" in marks[0][1]
    assert " e" in marks[0][0]
    assert len(html.encode()) < PAGE_LIMIT


def test_biggest_outputs_first_stays_on_after_a_jump_to_a_step(data_dir, db):
    session = steps_session(60, output="x" * 700)
    query = {"outline": "biggest", "tool": "Read"}
    timeline = Timeline(session, StepFilter.from_query(query), query=query)

    # Under the filter, and on the unfiltered timeline (the chart's marks, a hidden step).
    assert "outline=biggest" in timeline.page_url(3)
    assert "outline=biggest" in timeline.page_url(3, filtered=False)
    assert "tool=" not in timeline.page_url(3, filtered=False)
    plain = Timeline(session, StepFilter(), query={})
    assert "outline" not in plain.page_url(3, filtered=False)


def test_biggest_outputs_first_is_one_click(logged_in_client, data_dir):
    session = record(
        [
            assistant(1, call("a", "Read", {"file_path": "small.txt"})),
            result(2, "a", "s" * 100),
            assistant(3, call("b", "Read", {"file_path": "huge.txt"})),
            result(4, "b", "h" * 9_000),
            assistant(5, call("c", "Bash", {"command": "make"})),
            result(6, "c", "m" * 2_000),
        ]
    )
    html = page(logged_in_client, session)
    toggle = re.search(r'<a class="toggle" href="([^"]+)"[^>]*>biggest outputs first</a>', html)
    assert "hx-push-url" in toggle.group(0)

    sorted_page = logged_in_client.get(unescape(toggle.group(1)), headers=HTMX).content.decode()

    rows = re.findall(
        r'<li[^>]*><a href="([^"]+)"><span class="seq">#\d+</span> ([^<]+)</a>', sorted_page
    )
    assert rows == [
        ("#step-4", "Read huge.txt"),
        ("#step-6", "Bash: make"),
        ("#step-2", "Read small.txt"),
    ]
    assert ">in order</a>" in sorted_page


# --- filters --------------------------------------------------------------------------------


def test_errors_only_shows_the_failed_steps_and_keeps_the_url(logged_in_client, data_dir):
    session = ingest_out_of_order()

    html = page(logged_in_client, session, errors=1)

    assert ids(html, "step-") == ["step-3"]
    assert "item-1" not in ids(html, "")  # messages are hidden under a filter
    assert "2 other steps of this turn hidden by the filter" in html
    assert 'name="errors" value="1" checked' in html


def test_steps_with_blobs_and_one_tool_filter_the_steps(logged_in_client, sample_session):
    session = sample_session.session

    with_blobs = page(logged_in_client, session, blobs=1)
    one_tool = page(logged_in_client, session, tool="list_issues")

    assert ids(with_blobs, "step-") == ["step-3", "step-5", "step-7"]
    assert ids(one_tool, "step-") == ["step-7"]
    assert '<option value="list_issues" selected>list_issues (1)</option>' in one_tool


def test_the_filter_form_works_without_javascript_and_swaps_with_htmx(logged_in_client, data_dir):
    session = ingest_out_of_order()
    url = session.get_absolute_url()

    html = page(logged_in_client, session)
    response = logged_in_client.get(url, {"tool": "Grep", "errors": "", "page": "1"}, headers=HTMX)
    fragment = response.content.decode()

    form = re.search(r'<form class="filters step-filters"[^>]*>', html).group(0)
    assert 'method="get"' in form and f'action="{url}"' in form and f'hx-get="{url}"' in form
    assert 'hx-target="#timeline-body"' in form and 'hx-push-url="true"' in form
    assert fragment.lstrip().startswith('<div id="timeline-body" class="timeline-body">')
    assert ids(fragment, "step-") == ["step-3"] and "<h1>" not in fragment
    assert response["HX-Push-Url"] == f"{url}?tool=Grep"  # what is shown, nothing empty


def test_each_filter_pages_and_keeps_itself_in_the_page_links(logged_in_client, data_dir):
    # 300 steps of 700 bytes each: several pages; every 7th step fails.
    session = steps_session(300, output="y" * 700, every_error=7)

    for query, expected in (
        ({}, 300),
        ({"errors": "1"}, 43),
        ({"tool": "run"}, 300),
        ({"errors": "1", "tool": "run"}, 43),
    ):
        pages = pages_of(logged_in_client, session, **query)
        shown = [anchor for html in pages for anchor in ids(html, "step-")]
        assert len(shown) == expected == len(set(shown)), query
        assert all(len(html.encode()) < PAGE_LIMIT for html in pages)
        if len(pages) > 1:
            nxt = re.search(r'<a href="([^"]+)"[^>]*rel="next"', pages[0]).group(1)
            for key, value in query.items():
                assert f"{key}={value}" in unescape(nxt), (query, nxt)
    assert len(pages_of(logged_in_client, session)) > 1


def test_a_filter_that_matches_nothing_says_so(logged_in_client, data_dir):
    session = ingest_out_of_order()

    html = page(logged_in_client, session, tool="no-such-tool")

    assert "No steps match this filter." in html


# --- pages ----------------------------------------------------------------------------------


def one_call_turns(count: int, *, text: bool = False) -> list[ItemRow]:
    """Rows of *count* turns of one call each (with a text when *text*), and their results."""
    rows = []
    for n in range(count):
        calls = (CallRow(0, f"c{n}", "run"),)
        rows.append(ItemRow(seq=2 * n + 1, type="assistant", text_chars=int(text), calls=calls))
        rows.append(ItemRow(seq=2 * n + 2, type="tool_result", call_id=f"c{n}", output_bytes=9))
    return rows


def steps_per_page(layout) -> list[int]:
    return [sum(len(piece.steps) for piece in pieces) for pieces in layout.pages]


def test_a_page_holds_a_fixed_number_of_steps_whatever_their_outputs():
    small = build_units(one_call_turns(45))
    big = build_units(one_call_turns(45))
    for unit in big:
        unit.steps[0].result.output_bytes = unit.steps[0].result.received_bytes = 10**9

    assert steps_per_page(paginate(small)) == [STEPS_PER_PAGE, STEPS_PER_PAGE, 5]
    assert paginate(big).page_of_anchor == paginate(small).page_of_anchor


def test_a_turns_texts_and_each_message_take_a_row_of_the_page():
    with_texts = build_units(one_call_turns(20, text=True))
    messages = [ItemRow(seq=n, type="user", text_chars=5) for n in range(1, 26)]

    assert steps_per_page(paginate(with_texts)) == [10, 10]
    assert [len(pieces) for pieces in paginate(build_units(messages)).pages] == [20, 5]


def test_a_turn_of_more_steps_than_a_page_continues_a_page_at_a_time():
    calls = tuple(CallRow(n, f"c{n}", "run") for n in range(50))
    rows = [ItemRow(seq=1, type="user", text_chars=2)]
    rows.append(ItemRow(seq=2, type="assistant", text_chars=9, calls=calls))
    rows += [ItemRow(seq=3 + n, type="tool_result", call_id=f"c{n}") for n in range(50)]

    layout = paginate(build_units(rows))

    # The message alone on the first page; the turn's text and 19 steps, then 20, then 11.
    assert [[(p.start, p.end) for p in pieces if p.unit.steps] for pieces in layout.pages] == [
        [],
        [(0, 19)],
        [(19, 39)],
        [(39, 50)],
    ]
    assert layout.page_of_anchor["step-22"] == 3 and layout.page_of_item[2] == 2


def test_a_turn_is_never_split_across_pages_when_it_fits_on_one(logged_in_client, data_dir):
    records = [user(1, "go")]
    seq = 2
    for turn in range(40):  # turns of 4 parallel calls with 700-byte outputs
        calls = [call(f"t{turn}c{n}", "run", {"command": f"{turn}.{n}"}) for n in range(4)]
        records.append(assistant(seq, *calls))
        records += [result(seq + 1 + n, f"t{turn}c{n}", "z" * 700) for n in range(4)]
        seq += 5
    session = record(records)

    pages = pages_of(logged_in_client, session)

    assert len(pages) > 1
    for html in pages:
        for turn in re.findall(
            r'<article class="turn[^"]*" id="turn-\d+".*?</article>', html, re.S
        ):
            assert len(ids(turn, "step-")) == 4
        assert "continued" not in html


def test_a_turn_bigger_than_a_page_continues_on_the_next_marked_as_continued(
    logged_in_client, data_dir
):
    calls = [call(f"c{n}", "run", {"command": f"part {n}"}) for n in range(120)]
    records = [assistant(1, *calls)] + [result(2 + n, f"c{n}", "q" * 700) for n in range(120)]
    session = record(records)

    pages = pages_of(logged_in_client, session)

    assert len(pages) > 1
    shown = [anchor for html in pages for anchor in ids(html, "step-")]
    assert shown == [f"step-{2 + n}" for n in range(120)]
    assert 'class="note continues">this turn continues on the <a' in pages[0]
    assert 'class="badge continued">continued from <a href="' in pages[1]
    assert all(len(html.encode()) < PAGE_LIMIT for html in pages)


HOSTILE = "\"<&'>" * 60


@pytest.fixture
def worst_case_session(data_dir) -> Session:
    """Every part of a step at its largest: hostile tool names, arguments and notes that
    escape to six times their size, errors, durations, tokens, a system prompt, and
    blobs each read by four inspect calls."""
    records = [user(1, HOSTILE * 10, role="system")]
    seq = 2
    for n in range(40):
        arguments = {"command": HOSTILE * 5, "x": HOSTILE, "y": [HOSTILE]}
        records.append(assistant(seq, call(f"c{n}", HOSTILE[:200], arguments), text=HOSTILE * 4))
        output = (HOSTILE + "\n") * 4 if n % 2 else "x" * 790
        records.append(result(seq + 1, f"c{n}", output, tool=HOSTILE[:200], is_error=n % 3 == 0))
        records.append(user(seq + 2, HOSTILE * 4))
        seq += 3
    session = record(records, title=HOSTILE)
    more = []
    for blob_id in BlobRef.objects.filter(session=session).values_list("blob_id", flat=True):
        for _ in range(4):
            arguments = {"blob_id": str(blob_id), "selector": "grep:" + HOSTILE[:250]}
            more.append(assistant(seq, call(f"i{seq}", "inspect", arguments)))
            more.append(
                result(seq + 1, f"i{seq}", f"[blob:{blob_id}] x\n" + HOSTILE, tool="inspect")
            )
            seq += 2
    header = {"type": "session", "id": str(session.id), "created_at": "2025-05-01T12:00:00Z"}
    ingest_session(header, records + more, source_path=session.source_path, store=blob_store())
    results = Item.objects.filter(session=session, type="tool_result")
    results.update(note=HOSTILE * 3, duration=timedelta(seconds=62))
    Item.objects.filter(session=session, type="assistant").update(
        input_tokens=123_456_789, output_tokens=123_456, context_tokens=123_456_789
    )
    return session


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"errors": "1"},
        {"blobs": "1"},
        {"tool": HOSTILE[:200]},
        {"tool": "inspect"},
        {"outline": "biggest"},
    ],
)
def test_every_page_of_a_worst_case_session_stays_under_200_kb(
    logged_in_client, worst_case_session, query
):
    pages = pages_of(logged_in_client, worst_case_session, **query)

    assert len(pages) > 1
    for html in pages:
        assert len(html.encode()) < PAGE_LIMIT
        timeline = html[html.index('<div id="timeline"') :]
        assert len(timeline.encode()) < TIMELINE_BUDGET
        assert "<script>" not in html.split("<script src=")[0] and HOSTILE not in html
        # ...because each row (a step, a turn's text, a message) stays under ROW_BYTES.
        units = re.findall(r'<article class="(?:turn|item message).*?</article>', timeline, re.S)
        assert units
        for unit in units:
            rows = max(1, len(ids(unit, "step-")) + len(ids(unit, "call-")))
            rows += unit.count('<div class="turn-text"') + unit.count('"item message')
            assert len(unit.encode()) <= rows * ROW_BYTES, rows


def test_a_page_out_of_range_shows_the_nearest_page(logged_in_client, data_dir):
    session = ingest_out_of_order()

    for value in ("0", "-3", "99", "x"):
        assert ids(page(logged_in_client, session, page=value), "step-") == [
            "step-4",
            "step-5",
            "step-3",
            "step-7",
        ]


def test_the_item_page_links_back_to_the_step_on_its_page(logged_in_client, data_dir):
    session = steps_session(200, output="x" * 700)
    timeline = Timeline(session, StepFilter())
    last = timeline.layout.page_count
    assert last > 2

    for seq, anchor in ((401, "step-401"), (400, "item-400"), (1, "item-1")):
        html = logged_in_client.get(reverse("item_detail", args=[session.id, seq])).content
        number = timeline.layout.page_of_item[seq]
        query = f"?page={number}" if number > 1 else ""
        back = f"{session.get_absolute_url()}{query}#{anchor}"
        assert f'<a class="back" href="{escape(back)}">' in html.decode()
        # ...and the page it names shows that anchor.
        assert f'id="{anchor}"' in logged_in_client.get(back).content.decode()
    assert timeline.layout.page_of_item[401] == last


def test_step_url_names_the_page_and_anchor_for_other_pages(data_dir, db):
    session = steps_session(200, output="x" * 700)
    timeline = Timeline(session, StepFilter())

    assert step_url(session, 3) == f"{session.get_absolute_url()}#step-3"
    page_of_last = timeline.layout.page_of_anchor["step-401"]
    assert step_url(session, 401) == f"{session.get_absolute_url()}?page={page_of_last}#step-401"
    assert step_url(session, 1) == f"{session.get_absolute_url()}#item-1"


def test_a_page_of_a_10000_item_session_takes_a_fixed_number_of_queries(
    logged_in_client, django_assert_max_num_queries, data_dir
):
    session = Session.objects.create(id=uuid.uuid4(), title="huge", created_at=datetime.now(UTC))
    Item.objects.bulk_create(
        Item(
            session=session,
            seq=n,
            type="tool_result" if n % 2 else "assistant",
            call_id=f"c{n - 1}" if n % 2 else "",
            tool="run",
            output=f"ok {n}",
            output_bytes=len(f"ok {n}"),
            received_bytes=len(f"ok {n}"),
            is_error=n % 100 == 1,
            tool_calls=[] if n % 2 else [{"id": f"c{n}", "name": "run", "arguments": {"n": n}}],
        )
        for n in range(2, 10_002)
    )
    url = reverse("session_detail", args=[session.id])

    for query, queries in (({}, 9), ({"page": 50}, 6), ({"errors": "1", "page": 2}, 6)):
        # Login session and user, the session, its items' count and last id; the first
        # time, the skeleton (items, calls, blob refs), kept for the next pages while the
        # session stays as it is; the page's items and their blob refs.
        with django_assert_max_num_queries(queries):
            html = logged_in_client.get(url, query).content.decode()
        assert len(ids(html, "step-")) > 10
        assert len(html.encode()) < PAGE_LIMIT


def test_a_session_that_grew_shows_its_new_steps_at_once(logged_in_client, data_dir):
    session = record([assistant(1, call("a", "run")), result(2, "a", "first")])
    assert ids(page(logged_in_client, session), "step-") == ["step-2"]

    # A grown log, ingested again...
    header = {"type": "session", "id": str(session.id), "created_at": "2025-05-01T12:00:00Z"}
    grown = [assistant(1, call("a", "run")), result(2, "a", "first")]
    grown += [assistant(3, call("b", "run")), result(4, "b", "second")]
    ingest_session(header, grown, source_path=session.source_path, store=blob_store())
    assert ids(page(logged_in_client, session), "step-") == ["step-2", "step-4"]
    # ...or rows written by anything else.
    Item.objects.create(session=session, seq=5, type="tool_result", call_id="zz", output="x")
    assert ids(page(logged_in_client, session), "step-") == ["step-2", "step-4", "step-5"]


# --- long prompts, facts --------------------------------------------------------------------


def test_a_long_system_prompt_is_folded_past_a_few_lines(logged_in_client, data_dir):
    prompt = "".join(f"rule {n}: be careful\n" for n in range(1, 31))
    session = record([user(1, prompt, role="system"), user(2, prompt)])

    html = page(logged_in_client, session)

    system = html[html.index('id="item-1"') : html.index('id="item-2"')]
    visible, folded = system.split("<details", 1)
    assert "rule 4: be careful" in visible and "rule 5:" not in visible
    assert "<summary>27 more lines</summary>" in folded and "rule 30: be careful" in folded
    assert "<details" not in html[html.index('id="item-2"') :]  # the user is never folded


def test_the_facts_are_the_recordings_own_times_with_their_zone(logged_in_client, data_dir):
    session = ingest_out_of_order()
    Session.objects.filter(id=session.id).update(
        started_at=datetime(2025, 6, 2, 7, 0, 0, tzinfo=UTC),
        ended_at=datetime(2025, 6, 2, 7, 0, 20, tzinfo=UTC),
        duration=timedelta(seconds=20),
        status="end_turn",
    )

    html = page(logged_in_client, session)

    facts = re.search(r'<div class="session-facts"><dl class="facts">.*?</dl>', html, re.S).group(0)
    assert (
        '<dt>Started</dt><dd><time datetime="2025-06-02T07:00:00+00:00">2025-06-02 07:00:00 UTC'
        in facts
    )
    assert "<dt>Ended</dt>" in facts and "07:00:20 UTC" in facts
    assert '<dt>Duration</dt><dd class="duration">20 s</dd>' in facts
    assert "<dt>Source</dt><dd>blobviewer</dd>" in facts
    assert "<dt>Model</dt><dd>test-model</dd>" in facts
    assert '<dt>Exit status</dt><dd class="status">end_turn</dd>' in facts
    assert '<dt>Steps</dt><dd class="steps-count">4</dd>' in facts
    assert '<dt>Errors</dt><dd class="errors-count has-errors">1</dd>' in facts


def test_a_recording_without_times_says_so_and_names_its_ingest_time(logged_in_client, data_dir):
    session = ingest_out_of_order()
    Session.objects.filter(id=OUT_OF_ORDER_ID).update(started_at=None, ended_at=None)

    html = page(logged_in_client, session)

    facts = re.search(r'<div class="session-facts"><dl class="facts">.*?</dl>', html, re.S).group(0)
    assert "no times recorded" in facts and "listed by its ingest time" in facts
    assert session.ingested_at.strftime("%Y-%m-%d %H:%M") in facts
    assert "<dt>Ended</dt>" not in facts


def test_the_header_has_a_place_for_find_in_this_session(logged_in_client, data_dir):
    html = page(logged_in_client, ingest_out_of_order())

    assert '<div class="find-in-session">' in html
