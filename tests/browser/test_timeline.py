"""The session timeline in a real browser: steps paired under their turn, byte counts, the
chart and the outline, jumping by the outline, filters with paging, views opened in place
and closed again, and no sideways scrolling on a phone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_file
from blobviewer.models import Item, Session
from blobviewer.timeline.steps import StepFilter
from blobviewer.timeline.timeline import Timeline
from importers.recordings import CLAUDE_CODE, CLAUDE_SESSION
from web.timeline_records import (
    assistant,
    call,
    ingest_out_of_order,
    record,
    result,
    steps_session,
    tokens_session,
    user,
)

PHONE = {"width": 390, "height": 844}


def open_session(page, live_server, session: Session, query: str = "") -> str:
    url = f"{live_server.url}{session.get_absolute_url()}{query}"
    page.goto(url)
    return url


def step_ids(locator) -> list[str]:
    return locator.evaluate_all("(nodes) => nodes.map((n) => n.id)")


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")


def test_parallel_results_recorded_out_of_order_sit_under_their_turn_in_call_order(
    page, live_server, data_dir
):
    session = ingest_out_of_order()

    open_session(page, live_server, session)

    turn = page.locator("#turn-2")
    assert step_ids(turn.locator("section.step")) == ["step-4", "step-5", "step-3"]
    expect(turn.locator("section.step code.tool")).to_have_text(["Bash", "Read", "Grep"])
    expect(turn.locator(".turn-text")).to_have_text("Three things at once.")
    # The user's message before the turn, the answer after the edit.
    order = page.locator("#timeline article").evaluate_all("(n) => n.map((a) => a.id)")
    assert order == ["item-1", "turn-2", "turn-6", "turn-8"]
    assert page.problems.csp_violations == []


def test_each_step_shows_its_exact_byte_counts(page, live_server, data_dir):
    session = ingest_out_of_order()
    in_history = len(Item.objects.get(session=session, seq=4).output.encode())

    open_session(page, live_server, session)

    bash = page.locator("#step-4 .bytes")
    expect(bash.locator("data.received")).to_have_attribute("value", "2700")
    expect(bash.locator("data.in-history")).to_have_attribute("value", str(in_history))
    expect(bash.locator("data.kept-out")).to_have_attribute("value", str(2700 - in_history))
    expect(bash).to_contain_text(f"2,700 B received → {in_history:,} B in history")
    read = page.locator("#step-5 .bytes")
    expect(read).to_have_text("25 B received, all in history")
    grep = page.locator("#step-3")
    expect(grep.locator(".badge.error")).to_have_text("error")
    expect(grep.locator(".bytes")).to_have_text("44 B received, all in history")


def test_the_chart_and_the_outline_have_one_mark_per_promoted_output_and_per_step(
    page, live_server, data_dir
):
    session = tokens_session()

    open_session(page, live_server, session)

    chart = page.locator("svg.chart")
    expect(chart).to_be_visible()
    expect(chart.locator("a.promoted")).to_have_count(2)
    expect(chart.locator("circle.point")).to_have_count(4)  # four turns recorded tokens
    expect(page.locator(".outline .marks a.m")).to_have_count(4)  # four steps
    expect(page.locator(".outline .marks a.m.here")).to_have_count(4)

    chart.locator("a.promoted").last.click()

    expect(page).to_have_url(re.compile(r"#step-8$"))
    expect(page.locator("#step-8")).to_be_in_viewport()


def test_without_tokens_the_page_says_so_instead_of_a_chart(page, live_server, data_dir):
    open_session(page, live_server, ingest_out_of_order())

    expect(page.locator("svg.chart")).to_have_count(0)
    expect(page.locator(".no-tokens")).to_contain_text("No token counts recorded")


def test_an_outline_mark_jumps_to_its_step_on_another_page(page, live_server, data_dir):
    session = steps_session(150, output="x" * 700)
    last_page = Timeline(session, StepFilter()).layout.page_count
    assert last_page > 1
    open_session(page, live_server, session)
    marks = page.locator(".outline .marks a.m")
    expect(marks).to_have_count(150)
    expect(page.locator("#step-301")).to_have_count(0)  # not on the first page

    marks.last.click()

    expect(page).to_have_url(re.compile(rf"\?page={last_page}#step-301$"))
    expect(page.locator("#step-301")).to_be_in_viewport()
    expect(page.locator(".pager").first).to_contain_text(f"page {last_page} of {last_page}")

    page.locator(".outline .marks a.m").first.click()  # and back to the first page

    expect(page).to_have_url(re.compile(r"/#step-3$"))
    expect(page.locator("#step-3")).to_be_in_viewport()


def test_biggest_outputs_first_is_one_click(page, live_server, data_dir):
    session = ingest_out_of_order()
    url = open_session(page, live_server, session)
    page.evaluate("window.notReloaded = true")

    page.get_by_role("link", name="biggest outputs first").click()

    expect(page).to_have_url(f"{url}?outline=biggest")
    rows = page.locator("ol.biggest li")
    expect(rows).to_have_count(4)
    expect(rows.first).to_contain_text("#4 Bash: find src -name '*.py'")
    expect(rows.nth(1)).to_contain_text("#3 Grep TODO in src/missing")
    assert page.evaluate("window.notReloaded") is True  # swapped by htmx

    rows.nth(1).locator("a").click()
    expect(page.locator("#step-3")).to_be_in_viewport()


def test_biggest_outputs_first_stays_on_after_a_jump_from_the_chart(page, live_server, data_dir):
    # Sixty turns with tokens, every tenth output promoted: the chart marks those, on
    # every page, and its marks lead to the unfiltered timeline.
    records = [user(1, "go")]
    for n in range(60):
        turn = assistant(2 + 2 * n, call(f"c{n}", "run", {"command": f"step {n}"}))
        turn["input_tokens"] = turn["context_tokens"] = 1000 + 100 * n
        records.append(turn)
        output = "".join(f"row {m}\n" for m in range(300)) if n % 10 == 9 else "ok"
        records.append(result(3 + 2 * n, f"c{n}", output))
    session = record(records)
    open_session(page, live_server, session, "?outline=biggest")
    far = page.locator("a.promoted").last
    assert "page=" in (far.get_attribute("href") or "")  # on another page

    far.click()

    expect(page).to_have_url(re.compile(r"outline=biggest.*page=\d+#step-\d+$"))
    expect(page.locator("ol.biggest")).to_be_visible()  # still biggest first


def every_step_on_every_page(page) -> list[str]:
    """The step ids of this and each following page, by clicking "next"."""
    seen = []
    while True:
        seen += step_ids(page.locator("#timeline section.step"))
        following = page.locator("#timeline .pager").first.get_by_role("link", name="next →")
        if following.count() == 0:
            return seen
        current = page.url
        following.click()
        expect(page).not_to_have_url(current)


def test_errors_only_keeps_the_url_and_pages(page, live_server, data_dir):
    session = steps_session(300, output="y" * 700, every_error=7)  # 43 errors
    url = open_session(page, live_server, session)

    page.get_by_label("errors only").check()

    expect(page).to_have_url(f"{url}?errors=1")
    expect(page.locator("#timeline section.step").first).to_have_class(re.compile("is-error"))
    errors = [f"step-{3 + 2 * n}" for n in range(0, 300, 7)]
    assert every_step_on_every_page(page) == errors
    assert "errors=1" in page.url and "page=" in page.url
    expect(page.get_by_label("errors only")).to_be_checked()
    assert page.problems.csp_violations == []


def test_one_tool_and_steps_with_blobs_filter_with_paging(page, live_server, data_dir):
    records = [user(1, "go")]
    for n in range(120):
        seq = 2 + 2 * n
        tool = "Read" if n % 3 else "Bash"
        output = "z" * (900 if n % 4 == 0 else 700)  # over 800 bytes: promoted to a blob
        records.append(
            {
                "type": "assistant",
                "seq": seq,
                "text": "",
                "tool_calls": [{"id": f"c{n}", "name": tool, "arguments": {"n": n}}],
            }
        )
        records.append(
            {
                "type": "tool_result",
                "seq": seq + 1,
                "call_id": f"c{n}",
                "tool": tool,
                "output": output,
            }
        )
    session = record(records)
    url = open_session(page, live_server, session)

    page.get_by_label("tool").select_option("Bash")

    expect(page).to_have_url(f"{url}?tool=Bash")
    bash = [f"step-{3 + 2 * n}" for n in range(0, 120, 3)]
    assert every_step_on_every_page(page) == bash
    expect(page.locator("#timeline section.step code.tool").first).to_have_text("Bash")

    open_session(page, live_server, session, "?blobs=1")
    with_blobs = [f"step-{3 + 2 * n}" for n in range(0, 120, 4)]
    assert every_step_on_every_page(page) == with_blobs


def test_an_inspect_call_opens_what_the_model_got_and_closes_again(
    page, live_server, sample_session
):
    got = Item.objects.get(session_id=sample_session.id, seq=5).output
    url = open_session(page, live_server, sample_session.session)
    step = page.locator("#step-5")

    step.get_by_role("link", name="what the model got").click()

    view = page.locator("#item-5-blob.output-view.in-place")
    expect(view.locator("pre.content")).to_have_text(got)  # the item's own recorded text
    reader = view.get_by_role("link", name=re.compile("open in the reader"))
    expect(reader).to_have_attribute(
        "href", f"/blobs/{sample_session.text_blob}/?selector=lines%3A2-3"
    )
    expect(page).to_have_url(url)

    step.get_by_role("button", name="close this view").click()

    expect(page.locator("#item-5-blob.in-place")).to_have_count(0)
    expect(page.locator("#item-5-blob.blob-slot")).to_have_count(1)
    expect(step.get_by_role("button", name="close this view")).to_be_hidden()
    assert page.problems.csp_violations == []


def test_a_summarys_blob_link_opens_the_readers_first_page_and_closes_again(
    page, live_server, sample_session
):
    open_session(page, live_server, sample_session.session)
    step = page.locator("#step-3")

    step.locator("a.blob-ref").click()

    # The reader's own view of the blob (its page's #view fragment), not the recorded text.
    view = page.locator("#item-3-blob.blob-view.in-place")
    expect(view).to_contain_text(f"blob {sample_session.text_blob}")
    expect(view.locator("input[name=selector]")).to_be_visible()

    step.get_by_role("button", name="close this view").click()

    expect(page.locator("#item-3-blob.in-place")).to_have_count(0)
    step.locator("a.blob-ref").click()  # and it opens again
    expect(page.locator("#item-3-blob.blob-view.in-place")).to_be_visible()


def test_a_long_system_prompt_is_folded_and_opens_with_one_click(page, live_server, data_dir):
    prompt = "".join(f"rule {n}: be careful\n" for n in range(1, 31))
    session = record([user(1, prompt, role="system"), user(2, "hello")])
    open_session(page, live_server, session)
    system = page.locator("#item-1")
    expect(system.get_by_text("rule 4: be careful")).to_be_visible()
    expect(system.get_by_text("rule 30: be careful")).to_be_hidden()

    system.get_by_text("27 more lines").click()

    expect(system.get_by_text("rule 30: be careful")).to_be_visible()


@pytest.fixture
def claude_code_session(data_dir, transactional_db) -> Session:
    ingest_file(Path(CLAUDE_CODE), store=blob_store())
    return Session.objects.get(id=CLAUDE_SESSION)


def test_nothing_scrolls_the_page_sideways_on_a_phone(
    new_page, page, live_server, claude_code_session, sample_session
):
    phone = new_page()
    phone.set_viewport_size(PHONE)
    phone.goto(f"{live_server.url}/accounts/login/")
    phone.fill("#id_username", "alice")
    phone.fill("#id_password", "correct-horse-battery")
    phone.click("button[type=submit]")
    phone.wait_for_url(f"{live_server.url}/")
    assert no_sideways_scroll(phone), "the session list and the nav"

    for session in (claude_code_session, sample_session.session):
        timeline = Timeline(session, StepFilter())
        for number in range(1, timeline.layout.page_count + 1):
            phone.goto(f"{live_server.url}{session.get_absolute_url()}?page={number}")
            assert no_sideways_scroll(phone), (session.title, number)
        phone.goto(f"{live_server.url}{session.get_absolute_url()}?outline=biggest")
        assert no_sideways_scroll(phone)

    # With a blob and what the model got open in place, and on an item's own page.
    phone.goto(f"{live_server.url}{sample_session.session.get_absolute_url()}")
    phone.locator("#step-3 a.blob-ref").click()
    expect(phone.locator("#item-3-blob.in-place")).to_be_visible()
    phone.locator("#step-5").get_by_role("link", name="what the model got").click()
    expect(phone.locator("#item-5-blob.in-place")).to_be_visible()
    assert no_sideways_scroll(phone)
    phone.goto(f"{live_server.url}/sessions/{CLAUDE_SESSION}/items/13/")
    assert no_sideways_scroll(phone)
    assert phone.problems.csp_violations == []
