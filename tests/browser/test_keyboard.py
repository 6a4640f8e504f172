"""Keyboard shortcuts (static/js/keys.js), in Chromium: "/" and Esc, the
focus after a selector runs, "[" and "]", "j", "k" and "e" over steps, "?", and nothing
while typing in a field."""

from __future__ import annotations

import uuid

from playwright.sync_api import expect

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from core.content import Text
from web.records import header, user_item


def focused(page) -> str:
    """The focused element, as `tag#id.class …`."""
    return page.evaluate(
        "(() => { const e = document.activeElement;"
        " return e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +"
        " (e.className ? '.' + String(e.className).split(' ').join('.') : ''); })()"
    )


def test_slash_focuses_the_selector_and_after_a_selector_the_brackets_page(
    page, live_server, data_dir
):
    blob_id = blob_store().store_sync(Text("".join(f"row {n}\n" for n in range(1, 101))))
    page.goto(f"{live_server.url}/blobs/{blob_id}/")
    page.wait_for_load_state("domcontentloaded")

    page.keyboard.press("/")
    assert focused(page) == "input#blob-view-selector"
    page.keyboard.type("lines:1-10")
    page.keyboard.press("Enter")
    expect(page.locator("#blob-view .caption")).to_contain_text("lines 1–10 of 100")
    expect(page.locator("#blob-view pre.content")).to_be_focused()

    page.keyboard.press("]")  # no bracket typed anywhere: the next page
    expect(page.locator("#blob-view .caption")).to_contain_text("lines 11–20 of 100")
    page.keyboard.press("[")
    expect(page.locator("#blob-view .caption")).to_contain_text("lines 1–10 of 100")

    page.keyboard.press("/")
    page.keyboard.press("Escape")  # leaves the box for the content
    assert not focused(page).startswith("input")
    expect(page.locator("#blob-view-selector")).to_have_value("lines:1-10")


def test_j_k_and_e_move_between_steps(page, live_server, data_dir):
    session_id = uuid.uuid4()
    records = [user_item(1, "go")]
    for n in range(6):
        call, result = 2 + 2 * n, 3 + 2 * n
        records.append(
            {
                "type": "assistant",
                "seq": call,
                "text": "",
                "tool_calls": [{"id": f"c{n}", "name": "run", "arguments": {"n": n}}],
            }
        )
        output = f"step {n} output\n" * 80
        records.append(
            {
                "type": "tool_result",
                "seq": result,
                "call_id": f"c{n}",
                "tool": "run",
                "output": output,
                "is_error": n in (2, 4),
            }
        )
    ingest_session(header(session_id), records, source_path="t", store=blob_store())
    page.goto(f"{live_server.url}/sessions/{session_id}/")
    page.wait_for_load_state("domcontentloaded")
    steps = page.locator("section.step")
    expect(steps).to_have_count(6)

    page.keyboard.press("j")
    expect(steps.nth(0)).to_be_focused()
    page.keyboard.press("j")
    expect(steps.nth(1)).to_be_focused()
    page.keyboard.press("k")
    expect(steps.nth(0)).to_be_focused()
    page.keyboard.press("e")
    expect(steps.nth(2)).to_be_focused()
    page.keyboard.press("e")
    expect(steps.nth(4)).to_be_focused()
    assert page.evaluate("location.hash") == "#step-11"

    page.keyboard.press("/")
    assert focused(page) == "input#find-q"
    page.keyboard.type("jke")  # typed into the box: no shortcut fires
    expect(page.locator("#find-q")).to_have_value("jke")
    expect(page.locator("#find-q")).to_be_focused()


def test_question_mark_lists_the_shortcuts(page, live_server, data_dir):
    page.goto(f"{live_server.url}/")
    page.wait_for_load_state("domcontentloaded")
    dialog = page.locator("dialog#shortcuts")
    expect(dialog).to_be_hidden()

    page.keyboard.press("?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("next failed step")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.keyboard.press("?")
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()

    page.keyboard.press("/")
    assert focused(page) == "input#id_q"
    page.keyboard.type("?")  # a question mark in the search box, not the list
    expect(dialog).to_be_hidden()
    expect(page.locator("#id_q")).to_have_value("?")
