"""Search and find in a real browser: a hit inside a blob found from the session list, its
snippet and its jumps; the session page's find box stepping through hits; sorting by a
column header; the list at 1440 and 390 px (screenshots in /tmp/shots/)."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from playwright.sync_api import expect

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Session
from web.records import header, tool_result_item, user_item

SHOTS = Path("/tmp/shots")
NARROW, WIDE = 390, 1440


def big_output(middle: str, *, lines: int = 300) -> str:
    body = [f"line {n}: compiling module_{n}.py ... ok" for n in range(1, lines + 1)]
    body[lines // 2] = middle
    return "\n".join(body) + "\n"


def record(title: str, *items: dict, **session_fields) -> uuid.UUID:
    session_id = uuid.uuid4()
    ingest_session(
        header(session_id, title=title), list(items), source_path="t", store=blob_store()
    )
    if session_fields:
        Session.objects.filter(id=session_id).update(**session_fields)
    return session_id


def in_viewport(page, selector: str) -> bool:
    return page.locator(selector).evaluate(
        "e => { const r = e.getBoundingClientRect();"
        " return r.top > -2 && r.top < window.innerHeight; }"  # sub-pixel scrolling
    )


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")


def test_a_search_finds_a_hit_inside_a_blob_shows_it_and_jumps_to_it(page, live_server, data_dir):
    session_id = record(
        "Fix the build",
        user_item(1, "The build fails."),
        tool_result_item(2, big_output("Traceback: KeyError: 'flux_capacitor'"), tool="run_build"),
    )
    record("Unrelated run", user_item(1, "Nothing to see."))
    page.goto(f"{live_server.url}/")

    page.fill("#id_q", "FLUX_capacitor")

    hit = page.locator("ul.hits li.hit")
    expect(hit).to_have_count(1)
    expect(hit).to_contain_text("text blob of #2 run_build")
    expect(hit.locator("mark")).to_have_text("flux_capacitor")
    expect(page.locator("table.sessions td.title a")).to_have_text(["Fix the build"])
    expect(page).to_have_url(re.compile(r"\?q=FLUX_capacitor"))

    hit.get_by_role("link", name="open the blob at the hit").click()
    expect(page).to_have_url(re.compile(r"/blobs/[0-9a-f-]+/\?selector=grep%3Aflux_capacitor$"))
    view = page.locator("#blob-view")
    expect(view).to_contain_text("Traceback: KeyError: 'flux_capacitor'")
    expect(view).not_to_contain_text("compiling module_1.py")

    page.go_back()
    page.locator("ul.hits a.hit-step").click()
    expect(page).to_have_url(
        f"{live_server.url}/sessions/{session_id}/?find=FLUX_capacitor&hit=1#step-2"
    )
    assert in_viewport(page, "#step-2")
    expect(page.locator("#find-in-session .find-count")).to_have_text("hit 1 of 1")
    assert page.problems.csp_violations == []


def test_find_in_session_steps_through_the_hits(page, live_server, data_dir):
    filler = [user_item(n, f"filler message {n}\n" + "lorem ipsum " * 40) for n in range(6, 40)]
    session_id = record(
        "Zoo run",
        user_item(1, "Find the Walrus."),
        user_item(2, "nothing here"),
        tool_result_item(3, big_output("ERROR: walrus not found in zoo.db"), tool="query"),
        user_item(4, "still nothing " * 50),
        tool_result_item(5, "the WALRUS is back", tool="look"),
        *filler,
    )
    session_url = f"{live_server.url}/sessions/{session_id}/"
    page.set_viewport_size({"width": 1200, "height": 700})
    page.goto(session_url)
    count = page.locator("#find-in-session .find-count")

    page.fill("#find-q", "walrus")
    page.press("#find-q", "Enter")

    expect(count).to_have_text("hit 1 of 3")
    expect(page).to_have_url(f"{session_url}?find=walrus&hit=1#item-1")
    expect(page.locator("#find-in-session .find-hit mark")).to_have_text("Walrus")

    page.click("#find-in-session a.find-next")
    expect(count).to_have_text("hit 2 of 3")
    expect(page).to_have_url(f"{session_url}?find=walrus&hit=2#step-3")
    expect(page.locator("#find-in-session .find-hit")).to_contain_text("text blob of #3 query")
    page.wait_for_function("document.getElementById('step-3').getBoundingClientRect().top < 100")
    assert in_viewport(page, "#step-3")

    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "find-in-session-1200.png"), caret="initial")

    page.click("#find-in-session a.find-next")
    expect(count).to_have_text("hit 3 of 3")
    expect(page).to_have_url(f"{session_url}?find=walrus&hit=3#step-5")

    page.click("#find-in-session a.find-prev")
    expect(count).to_have_text("hit 2 of 3")
    expect(page).to_have_url(f"{session_url}?find=walrus&hit=2#step-3")

    page.click("#find-in-session a.find-blob")
    expect(page).to_have_url(re.compile(r"/blobs/[0-9a-f-]+/\?selector=grep%3Awalrus$"))
    expect(page.locator("#blob-view")).to_contain_text("ERROR: walrus not found in zoo.db")
    expect(page.locator("#blob-view")).not_to_contain_text("line 1: compiling")
    assert page.problems.csp_violations == []


def test_find_in_session_goes_to_the_page_of_a_hit_on_another_page(page, live_server, data_dir):
    items = [user_item(1, "the first okapi")]
    items += [user_item(n, f"message {n}\n" + "lorem ipsum dolor " * 60) for n in range(2, 400)]
    items.append(user_item(400, "the last okapi"))
    session_id = record("Long run", *items)
    session_url = f"{live_server.url}/sessions/{session_id}/"
    page.goto(f"{session_url}?find=okapi&hit=1")
    expect(page.locator("#find-in-session .find-count")).to_have_text("hit 1 of 2")

    page.click("#find-in-session a.find-next")

    expect(page).to_have_url(re.compile(r"\?page=\d+&find=okapi&hit=2#item-400$"))
    expect(page.locator("#find-in-session .find-count")).to_have_text("hit 2 of 2")
    assert in_viewport(page, "#item-400")


def test_a_header_sorts_the_list_and_the_search_keeps_that_sort(page, live_server, data_dir):
    for title, minutes in (("quick run", 1), ("slow run", 90), ("medium run", 20)):
        record(title, user_item(1, "a run"), duration=timedelta(minutes=minutes))
    page.goto(f"{live_server.url}/")

    page.locator("table.sessions th").get_by_role("link", name="Duration").click()

    expect(page).to_have_url(re.compile(r"\?sort=-duration$"))
    page.wait_for_load_state("domcontentloaded")  # htmx (deferred) is running: typing searches
    titles = page.locator("table.sessions td.title a")
    expect(titles).to_have_text(["slow run", "medium run", "quick run"])

    page.fill("#id_q", "run")
    expect(page).to_have_url(re.compile(r"\?q=run&model=&sort=-duration$"))
    expect(titles).to_have_text(["slow run", "medium run", "quick run"])


def test_the_list_and_its_search_results_at_1440_and_390_px(page, live_server, data_dir):
    SHOTS.mkdir(exist_ok=True)
    start = datetime(2025, 5, 1, 9, 30, tzinfo=UTC)
    for n, (title, model) in enumerate(
        [
            ("Fix the flaky parser tests in the reactor module", "claude-sonnet-4"),
            ("Refactor the storage layer", "gpt-4.1"),
            ("Investigate the memory leak in the worker pool", "claude-opus-4"),
        ]
    ):
        record(
            title,
            user_item(1, f"Please look at the {title.lower()}."),
            {
                **tool_result_item(
                    2, big_output(f"ERROR: reactor stalled at step {n}"), tool="bash"
                ),
                # A hit's place named by its command, as a Codex poll's is: long, unbroken.
                "title": "sed -n '1,180p' /Users/Sample_User/.codex/plugins/cache/openai-curated"
                f"/superpowers/63976030/skills/using-superpowers/SKILL.md · poll {n}",
            },
            started_at=start + timedelta(hours=n),
            duration=timedelta(minutes=3 * n + 1, seconds=7),
            step_count=12 * (n + 1),
            error_count=n,
            status="end_turn" if n != 1 else "",
            source_format="claude-code",
            model=model,
        )
    record("A recording without times", user_item(1, "hello"), started_at=None, duration=None)

    for width in (WIDE, NARROW):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/")
        expect(page.locator("table.sessions td.title a")).to_have_count(4)
        page.screenshot(path=str(SHOTS / f"session-list-{width}.png"), full_page=True)
        assert no_sideways_scroll(page), width

        page.goto(f"{live_server.url}/?q=reactor+stalled")
        expect(page.locator("ul.hits li.hit")).to_have_count(3)
        expect(page.locator("ul.hits a.hit-step").first).to_contain_text("SKILL.md · poll")
        page.screenshot(path=str(SHOTS / f"search-results-{width}.png"), full_page=True)
        assert no_sideways_scroll(page), width
    # On a phone each session is a card with labelled numbers; nothing scrolls sideways.
    assert page.locator(".table-scroll").evaluate("e => e.scrollWidth <= e.clientWidth")
    label = page.locator("table.sessions tr.session td.model").first.evaluate(
        "e => getComputedStyle(e, '::before').content"
    )
    assert label == '"Model"'
