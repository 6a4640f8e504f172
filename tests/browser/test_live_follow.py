"""Live follow in Chromium: steps ingested while a session page is open show up without a
reload, first as a bar ("2 new steps · show them"), and with Follow on at once, in view."""

from __future__ import annotations

import uuid

from playwright.sync_api import expect

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from web.records import header, user_item


def records(steps: int) -> list[dict]:
    """A task, then *steps* calls with their results (each output a few lines)."""
    items = [user_item(1, "watch this run")]
    for n in range(steps):
        call_id = f"c{n}"
        items.append(
            {
                "type": "assistant",
                "seq": 2 + 2 * n,
                "text": "",
                "tool_calls": [{"id": call_id, "name": "run", "arguments": {"step": n}}],
            }
        )
        items.append(
            {
                "type": "tool_result",
                "seq": 3 + 2 * n,
                "call_id": call_id,
                "tool": "run",
                "output": f"output of step {n}\n" * 30,
                "is_error": False,
            }
        )
    return items


def test_new_steps_appear_without_a_reload(page, live_server, data_dir):
    session_id = uuid.uuid4()
    ingest = lambda n: ingest_session(  # noqa: E731 - the run growing, as ingest --watch does it
        header(session_id, title="a live run"), records(n), source_path="t", store=blob_store()
    )
    ingest(2)
    page.goto(f"{live_server.url}/sessions/{session_id}/")
    page.wait_for_load_state("domcontentloaded")
    page.evaluate("window.notReloaded = true")
    expect(page.locator("section.step")).to_have_count(2)

    ingest(4)  # two more steps

    bar = page.locator("#live-news .live-bar")
    expect(bar).to_contain_text("2 new steps · show them", timeout=5_000)
    expect(page.locator("section.step")).to_have_count(2)  # nothing moved yet
    bar.locator("a.show-new").click()
    expect(page.locator("section.step")).to_have_count(4)
    expect(page.locator("#live-news")).to_be_hidden()

    page.locator("#live input.follow").check()
    ingest(6)

    expect(page.locator("section.step")).to_have_count(6, timeout=5_000)
    expect(page.locator("section.step").last).to_be_in_viewport()
    assert page.evaluate("window.notReloaded") is True
    assert page.problems.console_errors == []


def test_a_hidden_tab_does_not_ask(page, live_server, data_dir):
    session_id = uuid.uuid4()
    ingest_session(header(session_id), records(1), source_path="t", store=blob_store())
    asked: list[str] = []
    page.on(
        "request", lambda request: asked.append(request.url) if "/live" in request.url else None
    )
    page.goto(f"{live_server.url}/sessions/{session_id}/")
    page.wait_for_timeout(2_500)
    assert asked  # visible: it asks

    page.evaluate(
        "Object.defineProperty(document, 'visibilityState', {get: () => 'hidden'});"
        "document.dispatchEvent(new Event('visibilitychange'))"
    )
    page.wait_for_timeout(2_500)  # the request already scheduled may go out
    before = len(asked)
    page.wait_for_timeout(4_500)
    assert len(asked) == before


def test_the_list_follows_a_live_session(page, live_server, data_dir):
    session_id = uuid.uuid4()

    def ingest(steps: int) -> None:
        items = records(steps)
        ingest_session(
            header(session_id, title="a live run"), items, source_path="t", store=blob_store()
        )

    ingest(1)
    page.goto(f"{live_server.url}/")
    page.wait_for_load_state("domcontentloaded")
    page.evaluate("window.notReloaded = true")
    row = page.locator("tr.session", has_text="a live run")
    expect(row.locator(".live-dot")).to_be_visible()
    expect(row.locator('td[data-label="Steps"]')).to_have_text("1")

    ingest(3)

    expect(row.locator('td[data-label="Steps"]')).to_have_text("3", timeout=8_000)
    assert page.evaluate("window.notReloaded") is True
