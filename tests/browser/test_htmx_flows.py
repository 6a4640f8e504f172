"""The htmx flows in a real browser: timelines, blobs in place, selectors, share links."""

from __future__ import annotations

import re
import uuid

from django.utils import timezone
from playwright.sync_api import expect

from blobviewer.catalog.blobs import refresh_blob
from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from core.content import Text
from web.records import header, user_item

HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def test_it_opens_a_session_and_a_blob_in_place(page, live_server, sample_session):
    page.goto(f"{live_server.url}/")
    page.click("text=Fix the build")
    session_url = f"{live_server.url}/sessions/{sample_session.id}/"
    expect(page).to_have_url(session_url)
    page.wait_for_load_state("domcontentloaded")  # htmx (deferred) runs: a click opens in place
    expect(page.locator("section.step")).to_have_count(4)

    page.locator("#step-3 a.blob-ref").click()

    in_place = page.locator("#item-3-blob.blob-view.in-place")
    expect(in_place).to_contain_text("lines 1–300 of 300")
    expect(in_place).to_contain_text("step 1: compiling module_1.py ... ok")
    expect(page).to_have_url(session_url)  # opening in place leaves the address alone

    # The selector box inside keeps working in place.
    in_place.locator("input[name=selector]").fill("lines:42-43")
    in_place.locator("input[name=selector]").press("Enter")
    expect(in_place).to_contain_text("lines 42–43 of 300")
    expect(page).to_have_url(session_url)
    assert page.problems.csp_violations == []


def test_a_cut_item_opens_whole_in_place(page, live_server, data_dir):
    session_id = uuid.uuid4()
    text = "".join(f"line {n} of a long message\n" for n in range(1, 501))
    ingest_session(header(session_id), [user_item(1, text)], source_path="t", store=blob_store())
    session_url = f"{live_server.url}/sessions/{session_id}/"
    page.goto(session_url)
    item = page.locator("#item-1")
    expect(item).to_contain_text("more bytes")
    expect(item).not_to_contain_text("line 500 of a long message")

    item.get_by_role("link", name="open the item").click()

    expect(page.locator("#item-1")).to_contain_text("line 500 of a long message")
    expect(page.locator("#item-1")).not_to_contain_text("more bytes")
    expect(page.locator("article.item")).to_have_count(1)
    expect(page).to_have_url(session_url)  # opened in place, like a blob
    assert page.problems.csp_violations == []


def test_an_inspect_call_opens_what_the_model_read(page, live_server, sample_session):
    page.goto(f"{live_server.url}/sessions/{sample_session.id}/")

    page.click("#step-5 a.inspect-link")

    expect(page.locator("#item-5-blob")).to_contain_text("lines 2-3 of 300")


def test_a_selector_swaps_the_view_and_the_address_bar_reproduces_it(
    page, live_server, sample_session
):
    blob_url = f"{live_server.url}/blobs/{sample_session.text_blob}/"
    page.goto(blob_url)
    page.evaluate("window.notReloaded = true")

    page.fill("#blob-view-selector", "grep:module_7[0-9]\\.")
    page.press("#blob-view-selector", "Enter")

    expect(page.locator("#blob-view .caption")).to_contain_text("10 matches in lines 1–300 of 300")
    expect(page).to_have_url(re.compile(r"\?selector=grep%3Amodule_7%5B0-9%5D%5C\.$"))
    assert page.evaluate("window.notReloaded") is True  # swapped, not reloaded

    page.reload()
    expect(page.locator("#blob-view .caption")).to_contain_text("10 matches in lines 1–300 of 300")
    expect(page.locator("#blob-view-selector")).to_have_value("grep:module_7[0-9]\\.")

    # Following a match opens the text around it, at the line's anchor.
    page.click("#blob-view pre.content a.ln >> text=70")
    expect(page).to_have_url(re.compile(r"selector=lines%3A60-560#L70$"))
    expect(page.locator("#L70")).to_be_visible()


def test_a_bad_selector_shows_its_error_beside_the_box(page, live_server, sample_session):
    page.goto(f"{live_server.url}/blobs/{sample_session.json_blob}/")

    page.fill("#blob-view-selector", "lines:1-5")
    page.press("#blob-view-selector", "Enter")

    error = page.locator("#blob-view-error")
    expect(error).to_contain_text("lines: applies to text; this blob is json_array")
    expect(page.locator("#blob-view-selector")).to_have_attribute("aria-invalid", "true")


def test_back_returns_to_the_previous_view(page, live_server, sample_session):
    page.goto(f"{live_server.url}/blobs/{sample_session.text_blob}/?selector=lines:5-6")
    page.fill("#blob-view-selector", "lines:100-101")
    page.press("#blob-view-selector", "Enter")
    expect(page.locator("#blob-view .caption")).to_contain_text("lines 100–101 of 300")

    page.go_back()

    expect(page.locator("#blob-view .caption")).to_contain_text("lines 5–6 of 300")


def test_a_share_link_opens_in_a_fresh_browser_without_login(
    page, new_page, live_server, sample_session
):
    page.goto(f"{live_server.url}/blobs/{sample_session.text_blob}/?selector=lines:7-9")
    page.click("text=Share this view")
    page.click("text=Create share link")
    share_url = page.locator("#share-box input.share-url").input_value()

    stranger = new_page()
    stranger.goto(share_url)

    expect(stranger.locator("#blob-view .caption")).to_contain_text("lines 7–9 of 300")
    expect(stranger.locator("text=Log out")).to_have_count(0)
    stranger.fill("#blob-view-selector", "lines:20-21")
    stranger.press("#blob-view-selector", "Enter")
    expect(stranger.locator("#blob-view .caption")).to_contain_text("lines 20–21 of 300")
    assert stranger.url.startswith(share_url.split("?")[0])

    # Revoked (on the confirmation page), the link stops working.
    token = share_url.rstrip("/").rsplit("/", 1)[1]
    page.goto(f"{live_server.url}/shares/{token}/revoke")
    page.click("text=Revoke link")
    stranger.goto(share_url)
    expect(stranger.locator("h1")).to_contain_text("no longer works")


def test_a_hostile_blob_raises_no_dialog(page, live_server, sample_session):
    store = blob_store()
    blob_id = store.store_sync(Text((HOSTILE + "\n") * 50))
    refresh_blob(blob_id, store=store)

    page.goto(f"{live_server.url}/blobs/{blob_id}/")
    expect(page.locator("#L1")).to_be_visible()
    page.fill("#blob-view-selector", "grep:script")
    page.press("#blob-view-selector", "Enter")
    expect(page.locator("#blob-view .caption")).to_contain_text("50 matches in lines 1–50 of 50")
    page.goto(f"{live_server.url}/blobs/{blob_id}/raw")
    page.wait_for_timeout(300)

    assert page.problems.dialogs == []


def test_searching_sessions_swaps_the_list_and_the_address(page, live_server, sample_session):
    from blobviewer.models import Session

    Session.objects.create(id=uuid.uuid4(), title="Another run", created_at=timezone.now())
    page.goto(f"{live_server.url}/")
    expect(page.locator("#list tbody tr.session")).to_have_count(2)

    page.fill("#id_q", "build")

    # One session matches; its hits inside items and blobs are listed in a row under it.
    expect(page.locator("#list tbody tr.session")).to_have_count(1)
    expect(page.locator("#list")).to_contain_text("Fix the build")
    expect(page).to_have_url(re.compile(r"\?q=build"))
