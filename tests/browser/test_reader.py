"""The blob reader in Chromium: selectable lines, paging both ways for every selector, the
JSON tree with JavaScript on and off, key completions, the wrap toggle, dark mode, a phone's
width, the keyboard alone; and screenshots of each kind of blob (/tmp/shots/reader-*.png)."""

from __future__ import annotations

import contextlib
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from blobviewer.catalog.blobs import refresh_blob
from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from browser.conftest import PASSWORD, PageProblems
from core.content import Structured, Text
from core.store.blob_id import BlobId, new_blob_id
from web.records import header, tool_result_item

SHOTS = Path("/tmp/shots")
LINE_BYTES = 80  # every line of the big text, with its newline
BIG_LINES = 1_310_720  # 100 MiB of 80-byte lines

CODE = '''"""A small module, with hostile text in it that must stay text."""

import os

BANNER = "<script>alert('code')</script>"
TRAP = '"><img src=x onerror="alert(2)">'


class Greeter:
    """Greets people."""

    def greet(self, name: str) -> str:
        # Say hello, politely.
        return f"Hello, {name}! You are {len(name)} letters long."


def main() -> int:
    for n in range(3):
        print(Greeter().greet(os.environ.get("USER", "world")), n * 2.5)
    return 0
'''


# --- making blobs ------------------------------------------------------------------------


def big_text_blob() -> BlobId:
    """A 100 MiB text written to the store a chunk at a time, then indexed."""
    store = blob_store()
    blob_id = new_blob_id()
    path = store.root / f"{blob_id}.txt"
    filler = "lorem ipsum dolor sit amet, consectetur adipiscing elit sed do eiusmod tempor "
    with open(path, "w", encoding="utf-8") as file:
        chunk = []
        for n in range(1, BIG_LINES + 1):
            line = f"line {n:07d} {filler}"[: LINE_BYTES - 1]
            chunk.append(line + "\n")
            if len(chunk) == 10_000:
                file.write("".join(chunk))
                chunk = []
        file.write("".join(chunk))
    assert path.stat().st_size == BIG_LINES * LINE_BYTES
    refresh_blob(blob_id, store=store)
    return blob_id


def stored(content: Text | Structured) -> BlobId:
    store = blob_store()
    blob_id = store.store_sync(content)
    refresh_blob(blob_id, store=store)
    return blob_id


def code_blob(path: str = "src/greeter.py", text: str = CODE) -> BlobId:
    """A blob made by a `Read` call that names a Python file, recorded in a session."""
    blob_id = stored(Text(text))
    call = {"id": "c1", "name": "Read", "arguments": {"file_path": path}}
    records = [
        {
            "type": "assistant",
            "seq": 1,
            "at": "2025-05-01T12:00:01+00:00",
            "text": "",
            "tool_calls": [call],
        },
        tool_result_item(
            2, f"[blob:{blob_id}] text | {text.count(chr(10))} lines", tool="Read", call_id="c1"
        ),
    ]
    ingest_session(header(uuid.uuid4()), records, source_path="t", store=blob_store())
    return blob_id


def login(page: Any, live_server: Any) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


@pytest.fixture
def open_as(browser: Any, live_server: Any, django_user_model: Any, transactional_db: None):
    """Opens a logged-in page in a new context with the given options (viewport, colour
    scheme, JavaScript); closes the contexts afterwards."""
    django_user_model.objects.create_user("alice", password=PASSWORD)
    contexts = []

    def open_page(**options: Any) -> Any:
        context = browser.new_context(**options)
        context.set_default_timeout(20_000)
        contexts.append(context)
        page = context.new_page()
        page.problems = PageProblems(page)
        login(page, live_server)
        return page

    yield open_page
    for context in contexts:
        context.close()


def blob_url(live_server: Any, blob_id: BlobId, selector: str | None = None) -> str:
    url = f"{live_server.url}/blobs/{blob_id}/"
    return url if selector is None else f"{url}?selector={selector}"


def position(page: Any) -> Any:
    return page.locator("#blob-view .caption")


# --- screenshots -----------------------------------------------------------------------


def test_screenshots_of_each_kind_of_blob(open_as, live_server, data_dir):
    text = stored(
        Text(
            "".join(
                f"{n:>4} INFO worker {n % 7}: handled request /api/items/{n} "
                f"in {n % 13 + 1} ms" + (" " + "x" * 160 if n % 9 == 0 else "") + "\n"
                for n in range(1, 121)
            )
        )
    )
    code = code_blob()
    obj = stored(
        Structured(
            {
                "status": "ok",
                "count": 3,
                "truncated": False,
                "next": None,
                "items": [
                    {
                        "id": n,
                        "title": f"issue {n}",
                        "labels": ["bug", "ui"][: n % 3],
                        "body": "A long description of the issue. " * (n * 4),
                    }
                    for n in range(3)
                ],
                "meta": {
                    "source": "tracker",
                    "fetched_at": "2025-05-01T12:00:00Z",
                    "page": {"size": 3, "number": 1},
                },
            }
        )
    )
    array = stored(
        Structured(
            [
                {"n": n, "name": f"entry <{n}>", "ok": n % 2 == 0, "tags": ["a", "b"]}
                for n in range(300)
            ]
        )
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    blobs = {
        "text": (text, "lines:1-60"),
        "code": (code, None),
        "object": (obj, None),
        "array": (array, None),
    }
    for scheme in ("light", "dark"):
        for width, height in ((1440, 1000), (390, 844)):
            page = open_as(viewport={"width": width, "height": height}, color_scheme=scheme)
            for name, (blob_id, selector) in blobs.items():
                page.goto(blob_url(live_server, blob_id, selector))
                expect(position(page)).to_be_visible()
                page.screenshot(
                    path=str(SHOTS / f"reader-{name}-{width}-{scheme}.png"),
                    full_page=width != 390 and name != "array",
                )
                assert page.evaluate(
                    "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
                ), f"{name} at {width} px scrolls sideways"


# --- lines you can select ----------------------------------------------------------------


def test_a_click_highlights_a_line_and_a_shift_click_a_range_to_open(
    open_as, live_server, data_dir
):
    blob_id = stored(Text("".join(f"row {n}\n" for n in range(1, 201))))
    page = open_as()
    page.goto(blob_url(live_server, blob_id))

    page.locator("#L12 a.ln").click()
    expect(page).to_have_url(re.compile(r"#L12$"))
    expect(page.locator("#L12")).to_have_class(re.compile(r"\bhl\b"))
    expect(page.locator("#blob-view .line-selection")).to_contain_text("Line 12 selected.")

    page.locator("#L15 a.ln").click(modifiers=["Shift"])
    expect(page).to_have_url(re.compile(r"#L12-L15$"))
    expect(page.locator("pre.lines .r.hl")).to_have_count(4)
    expect(page.locator("#blob-view .line-selection")).to_contain_text("Lines 12–15 selected.")
    # The highlight is a background over the whole row.
    background = page.locator("#L13").evaluate("row => getComputedStyle(row).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent")

    page.get_by_role("link", name="Select these lines").click()
    expect(position(page)).to_contain_text("lines 12–15 of 200")
    expect(page.locator("#blob-view-selector")).to_have_value("lines:12-15")
    expect(page.locator("#blob-view pre.lines .r")).to_have_count(4)

    # A range in the address highlights it when the page opens, scrolled into view.
    page.goto(blob_url(live_server, blob_id) + "#L150-L153")
    expect(page.locator("pre.lines .r.hl")).to_have_count(4)
    expect(page.locator("#L150")).to_be_in_viewport()
    assert page.problems.csp_violations == []


def test_without_javascript_a_line_in_the_address_is_scrolled_to_and_highlighted(
    open_as, live_server, data_dir
):
    blob_id = stored(Text("".join(f"row {n}\n" for n in range(1, 401))))
    page = open_as(java_script_enabled=False)
    page.goto(blob_url(live_server, blob_id) + "#L300")

    row = page.locator("#L300")
    expect(row).to_be_in_viewport()
    assert row.evaluate("row => row.matches(':target')")
    background = row.evaluate("row => getComputedStyle(row).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent")
    # Some lines above it stay in view, for context.
    expect(page.locator("#L296")).to_be_in_viewport()
    page.locator("#L12 a.ln").click()  # a plain link to #L12
    expect(page).to_have_url(re.compile(r"#L12$"))
    assert page.locator("#L12").evaluate("row => row.matches(':target')")


def test_lines_of_a_reader_in_place_are_selected_in_place(open_as, live_server, sample_session):
    page = open_as()
    session_url = f"{live_server.url}/sessions/{sample_session.id}/"
    page.goto(session_url)
    page.locator("#step-3 a.blob-ref").click()
    reader = page.locator("#item-3-blob.reader")
    expect(reader.locator(".caption")).to_contain_text("lines 1–300 of 300")

    reader.locator("#item-3-blob-L5 a.ln").click()
    reader.locator("#item-3-blob-L7 a.ln").click(modifiers=["Shift"])

    expect(page).to_have_url(re.compile(r"#item-3-blob-L5-L7$"))
    expect(reader.locator("pre.lines .r.hl")).to_have_count(3)
    reader.get_by_role("link", name="Select these lines").click()
    expect(reader.locator(".caption")).to_contain_text("lines 5–7 of 300")
    expect(page).to_have_url(re.compile(rf"^{re.escape(session_url)}"))  # still the session


# --- paging both ways --------------------------------------------------------------------


def follow(page: Any, rel: str) -> None:
    page.locator(f"#blob-view nav.pager.top a[rel={rel}]").click()


def test_it_pages_a_100mb_text_first_next_next_last_previous(open_as, live_server, data_dir):
    blob_id = big_text_blob()
    page = open_as()
    page.goto(blob_url(live_server, blob_id))
    expect(position(page)).to_contain_text("lines 1–500 of 1,310,720")
    expect(page.locator("#blob-view nav.pager.top .off")).to_have_count(2)  # first, previous

    follow(page, "next")
    expect(position(page)).to_contain_text("lines 501–1,000 of 1,310,720")
    expect(page).to_have_url(re.compile(r"selector=lines%3A501-1000$"))
    follow(page, "next")
    expect(position(page)).to_contain_text("lines 1,001–1,500 of 1,310,720")
    follow(page, "last")
    expect(position(page)).to_contain_text("lines 1,310,221–1,310,720 of 1,310,720")
    expect(page.locator("#L1310720")).to_contain_text("line 1310720 lorem")
    expect(page.locator("#blob-view nav.pager.top a[rel=next]")).to_have_count(0)
    follow(page, "prev")
    expect(position(page)).to_contain_text("lines 1,309,721–1,310,220 of 1,310,720")
    follow(page, "first")
    expect(position(page)).to_contain_text("lines 1–500 of 1,310,720")

    page.go_back()  # each page is in the history
    expect(position(page)).to_contain_text("lines 1,309,721–1,310,220 of 1,310,720")


def test_it_pages_a_big_json_array_by_slices(open_as, live_server, data_dir):
    blob_id = stored(Structured([{"n": n, "name": f"entry {n}"} for n in range(200_000)]))
    page = open_as()
    page.goto(blob_url(live_server, blob_id, "slice:0..50"))
    expect(position(page)).to_contain_text("entries 0..50 of 200,000")

    follow(page, "next")
    expect(position(page)).to_contain_text("entries 50..100 of 200,000")
    expect(page.locator("#blob-view-selector")).to_have_value("slice:50..100")
    follow(page, "next")
    expect(position(page)).to_contain_text("entries 100..150 of 200,000")
    follow(page, "last")
    expect(position(page)).to_contain_text("entries 199950..200000 of 200,000")
    expect(page.locator(".json-tree")).to_contain_text('"entry 199999"')
    follow(page, "prev")
    expect(position(page)).to_contain_text("entries 199900..199950 of 200,000")


def first_match(page: Any) -> int:
    return int(page.locator("#blob-view pre.grep a.ln").first.inner_text())


def last_match(page: Any) -> int:
    return int(page.locator("#blob-view pre.grep a.ln").last.inner_text())


def test_grep_pages_forward_and_back_to_its_first_page(open_as, live_server, data_dir):
    blob_id = stored(Text("".join(f"hit {n}\n" for n in range(1, 3_001))))
    page = open_as()
    page.goto(blob_url(live_server, blob_id, "grep:hit"))
    expect(position(page)).to_contain_text("in lines 1–")
    assert first_match(page) == 1
    ends = [last_match(page)]

    for _ in range(2):
        follow(page, "next")
        expect(position(page)).to_contain_text(f"in lines {ends[-1] + 1:,}–")
        assert first_match(page) == ends[-1] + 1
        expect(page.locator("#blob-view pre.grep mark").first).to_have_text("hit")
        ends.append(last_match(page))
    expect(page.locator("#blob-view nav.pager.top a[rel=prev]")).to_have_count(0)
    expect(page.locator("#blob-view nav.pager.top a[rel=last]")).to_have_count(0)

    follow(page, "first")
    expect(position(page)).to_contain_text("in lines 1–")
    assert first_match(page) == 1
    expect(page.locator("#blob-view-selector")).to_have_value("grep:hit")


# --- the JSON tree -----------------------------------------------------------------------

TREE = {
    "items": [{"id": n, "tags": ["a", "b"]} for n in range(3)],
    "meta": {"deep": {"er": {"est": "bottom"}}},
}


def summary_of(page: Any, key: str) -> Any:
    return page.locator(f".json-tree summary:has(> .jt-k:text-is('{key}'))")


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_the_json_tree_opens_closes_and_links_keys(open_as, live_server, data_dir, javascript):
    blob_id = stored(Structured(TREE))
    page = open_as(java_script_enabled=javascript)
    page.goto(blob_url(live_server, blob_id))
    expect(position(page)).to_contain_text("keys 0..2 of 2")

    bottom = page.locator(".json-tree .jt-str", has_text='"bottom"')
    expect(bottom).to_be_hidden()  # three levels down: closed
    summary_of(page, "er").locator(".jt-shape").click()  # expand
    expect(bottom).to_be_visible()
    summary_of(page, "er").locator(".jt-shape").click()  # collapse
    expect(bottom).to_be_hidden()
    summary_of(page, "items").locator(".jt-shape").click()  # an open node closes too
    expect(page.locator(".json-tree .jt-k", has_text=re.compile("^tags$")).first).to_be_hidden()

    summary_of(page, "meta").locator(".jt-k").click()  # a key opens its selector
    expect(page).to_have_url(re.compile(r"\?selector=key%3Ameta$"))
    expect(page.locator("#blob-view-selector")).to_have_value("key:meta")
    summary_of(page, "deep").locator(".jt-k").click()
    expect(page.locator("#blob-view-selector")).to_have_value("key:meta | key:deep")
    expect(position(page)).to_contain_text("keys 0..1 of 1")

    page.goto(blob_url(live_server, blob_id))
    summary_of(page, "items").locator(".jt-k").click()
    summary_of(page, "1").locator(".jt-k").click()  # an index opens its slice
    expect(page.locator("#blob-view-selector")).to_have_value("key:items | slice:1..2")
    expect(position(page)).to_contain_text("entries 1..2 of 3")


def test_the_last_click_wins_when_an_earlier_page_is_still_loading(open_as, live_server, data_dir):
    """A reader who clicks a key and then, before its page arrives, an entry under it sees
    the entry, even when the answer to the first click comes back first."""
    blob_id = stored(Structured(TREE))
    page = open_as()
    page.goto(blob_url(live_server, blob_id))
    held: dict[str, Any] = {}
    page.route(
        re.compile(r"\?selector=key%3Aitems"),
        lambda route: held.setdefault(route.request.url, route),
    )

    def wait_for_requests(count: int) -> list[Any]:
        for _ in range(250):
            if len(held) >= count:
                break
            page.wait_for_timeout(20)
        assert len(held) == count
        return list(held.values())

    summary_of(page, "items").locator(".jt-k").click()
    wait_for_requests(1)
    summary_of(page, "1").locator(".jt-k").click()  # still the first page's tree
    first, second = wait_for_requests(2)
    assert second.request.url.endswith("slice%3A1..2")
    for route in (first, second):  # the first click's answer arrives first
        # A request given up (the second click replaced it) cannot be continued.
        with contextlib.suppress(PlaywrightError):
            route.continue_()
        page.wait_for_timeout(300)
    expect(page.locator("#blob-view-selector")).to_have_value("key:items | slice:1..2")
    expect(position(page)).to_contain_text("entries 1..2 of 3")


def test_expand_all_and_collapse_all(open_as, live_server, data_dir):
    blob_id = stored(Structured(TREE))
    page = open_as()
    page.goto(blob_url(live_server, blob_id))
    bottom = page.locator(".json-tree .jt-str", has_text='"bottom"')

    page.get_by_role("button", name="Expand all").click()
    expect(bottom).to_be_visible()
    page.get_by_role("button", name="Collapse all").click()
    expect(page.locator(".json-tree details[open]")).to_have_count(0)


def test_the_raw_switch_shows_the_indented_text_and_back(open_as, live_server, data_dir):
    blob_id = stored(Structured(TREE))
    page = open_as()
    page.goto(blob_url(live_server, blob_id))

    page.locator(".view-switch").get_by_role("link", name="Raw").click()
    expect(page.locator("#blob-view pre.json")).to_contain_text('"est": "bottom"')
    expect(page).to_have_url(re.compile(r"as=raw"))
    page.locator(".view-switch").get_by_role("link", name="Tree").click()
    expect(page.locator(".json-tree")).to_be_visible()


# --- completions, wrap, dark, small screens, the keyboard --------------------------------


def test_key_completions_stop_at_200(open_as, live_server, data_dir):
    blob_id = stored(Structured({f"key_{n:03}": n for n in range(450)}))
    page = open_as()
    page.goto(blob_url(live_server, blob_id))

    options = page.locator("#blob-view-keys option")
    expect(options).to_have_count(200)
    expect(options.first).to_have_attribute("value", "key:key_000")
    expect(options.last).to_have_attribute("value", "key:key_199")
    expect(page.locator("#blob-view-selector")).to_have_attribute("list", "blob-view-keys")
    hint = page.locator("#blob-view .keys-more")
    expect(hint).to_contain_text("This object has 450 keys")
    hint.get_by_role("link", name="keys:200..400").click()
    expect(position(page)).to_contain_text("keys 200..400 of 450")


def overflows(page: Any, selector: str) -> bool:
    return page.locator(selector).evaluate("box => box.scrollWidth > box.clientWidth")


def test_the_wrap_toggle_is_remembered_across_reloads(open_as, live_server, data_dir):
    blob_id = stored(Text("short\n" + "word " * 2_000 + "\nend\n"))
    page = open_as()
    page.goto(blob_url(live_server, blob_id))
    toggle = page.locator("#blob-view button.wrap-toggle")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert overflows(page, "#blob-view pre.content")

    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    assert not overflows(page, "#blob-view pre.content")

    page.reload()
    expect(page.locator("#blob-view button.wrap-toggle")).to_have_attribute("aria-pressed", "true")
    assert not overflows(page, "#blob-view pre.content")

    page.locator("#blob-view button.wrap-toggle").click()
    page.reload()
    expect(page.locator("#blob-view button.wrap-toggle")).to_have_attribute("aria-pressed", "false")
    assert overflows(page, "#blob-view pre.content")


def luminance(css_colour: str) -> float:
    red, green, blue = (int(part) / 255 for part in re.findall(r"\d+", css_colour)[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_the_colours_follow_the_system_scheme(open_as, live_server, data_dir, scheme):
    blob_id = code_blob()
    page = open_as(color_scheme=scheme)
    page.goto(blob_url(live_server, blob_id))

    def colour(selector: str, prop: str) -> float:
        return luminance(
            page.locator(selector).first.evaluate(f"element => getComputedStyle(element).{prop}")
        )

    page_bg = colour("html", "backgroundColor")
    code_bg = colour("#blob-view pre.content", "backgroundColor")
    text = colour("#blob-view pre.content", "color")
    if scheme == "dark":
        assert page_bg < 0.15 and code_bg < 0.15 and text > 0.7
    else:
        assert page_bg > 0.9 and code_bg > 0.9 and text < 0.3
    keyword = colour("#blob-view pre.code .pg-k", "color")
    assert abs(keyword - code_bg) > 0.3  # coloured, and readable on its background


def test_no_blob_page_scrolls_sideways_at_390_px(open_as, live_server, data_dir):
    long_key = "a_really_long_key_name_" * 8
    blobs = [
        (stored(Text("x" * 5_000 + "\n" + "y " * 3_000 + "\n")), None),
        (code_blob(), None),
        (stored(Structured({long_key: "z" * 3_000, "list": [long_key] * 5})), None),
        (stored(Structured([{"k": long_key * 3}] * 20)), "slice:0..5"),
        (stored(Text("needle " * 900 + "\n")), "grep:needle"),
    ]
    page = open_as(viewport={"width": 390, "height": 844})
    for blob_id, selector in blobs:
        page.goto(blob_url(live_server, blob_id, selector))
        expect(position(page)).to_be_visible()
        assert page.evaluate(
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        ), f"{blob_id} {selector} scrolls the page sideways"
    # The first text's long lines scroll inside their box instead.
    page.goto(blob_url(live_server, blobs[0][0]))
    assert overflows(page, "#blob-view pre.content")


def test_a_keyboard_alone_selects_and_pages(open_as, live_server, data_dir):
    blob_id = stored(Text("".join(f"line {n}\n" for n in range(1, 2_001))))
    page = open_as()
    page.goto(blob_url(live_server, blob_id))

    for _ in range(40):  # Tab to the selector box
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "blob-view-selector":
            break
    assert page.evaluate("document.activeElement.id") == "blob-view-selector"
    page.keyboard.type("lines:1-100]")  # "]" in a text field is just a character
    page.keyboard.press("Backspace")
    page.keyboard.press("Enter")
    expect(position(page)).to_contain_text("lines 1–100 of 2,000")

    page.keyboard.press("Tab")  # out of the box
    page.keyboard.press("]")
    expect(position(page)).to_contain_text("lines 101–200 of 2,000")
    page.keyboard.press("]")
    expect(position(page)).to_contain_text("lines 201–300 of 2,000")
    page.keyboard.press("[")
    expect(position(page)).to_contain_text("lines 101–200 of 2,000")
    expect(page.locator("#blob-view .keys-hint")).to_be_visible()


def test_hostile_code_runs_nothing_when_coloured(open_as, live_server, data_dir):
    html = (
        '<script>alert("page")</script>\n<img src=x onerror="alert(1)">\n"><svg onload=alert(2)>\n'
    )
    blobs = [code_blob(), code_blob("site/index.html", html)]
    page = open_as()
    problems = page.problems
    for blob_id in blobs:
        page.goto(blob_url(live_server, blob_id))
        expect(position(page)).to_contain_text("coloured as")
        page.wait_for_timeout(300)
    expect(page.locator("#blob-view pre.content")).to_contain_text('<img src=x onerror="alert(1)">')
    assert problems.dialogs == []
    assert page.locator("#blob-view pre.content img, #blob-view pre.content svg").count() == 0


def test_grep_matches_come_with_dimmed_lines_around_them(page, live_server, data_dir):
    lines = [f"line {n}" for n in range(1, 61)]
    lines[9], lines[49] = "ERROR one", "ERROR two"
    blob_id = stored(Text("\n".join(lines) + "\n"))
    page.goto(blob_url(live_server, blob_id, "grep:ERROR"))

    rows = page.locator("#blob-view pre.grep .r")
    expect(rows).to_have_count(11)  # 2 matches, 2 x 4 lines around them, a gap between
    context = page.locator("#blob-view pre.grep .r.context")
    expect(context).to_have_count(8)
    expect(context.first).to_have_text(re.compile(r"^8\s*line 8"))
    expect(page.locator("#blob-view pre.grep .r.gap")).to_have_count(1)
    dim, bright = (
        page.locator(f"#blob-view pre.grep .r{kind}").first.evaluate(
            "(r) => getComputedStyle(r).color"
        )
        for kind in (".context", ":not(.context):not(.gap)")
    )
    assert dim != bright  # the lines around are dimmed; the matches are not
    expect(page.locator("#blob-view pre.grep mark")).to_have_count(2)  # nothing marked around
