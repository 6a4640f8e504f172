"""Search across sessions (`/?q=…`): titles, items and the inside of blobs, case-folded,
answered by the index on both databases, with a snippet and links for every hit."""

from __future__ import annotations

import importlib
import json
import re
import uuid
from html import unescape
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.urls import reverse

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Blob, BlobRef, Item, SearchChunk, SearchedBlob, Session
from blobviewer.search import queries
from blobviewer.search.folding import fold
from blobviewer.search.indexing import CHUNK_CHARS, OVERLAP_CHARS, index_session
from blobviewer.search.queries import grep_selector, parse_query, session_filter
from core.content import Structured, Text
from core.store.blob_id import BLOB_REF
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
NEEDLE = "KeyError: 'flux_capacitor'"


def big_output(middle: str, *, lines: int = 400) -> str:
    """A tool output over the promotion threshold whose summary (head 5, tail 3 lines)
    does not show *middle*: only the blob has it."""
    body = [f"line {n}: compiling module_{n}.py ... ok" for n in range(1, lines + 1)]
    body[lines // 2] = middle
    return "\n".join(body) + "\n"


def record(
    title: str,
    *items: dict,
    session_id: uuid.UUID | None = None,
) -> uuid.UUID:
    session_id = session_id or uuid.uuid4()
    ingest_session(
        header(session_id, title=title), list(items), source_path="test", store=blob_store()
    )
    return session_id


def blob_of(session_id: uuid.UUID, seq: int) -> uuid.UUID:
    output = Item.objects.get(session_id=session_id, seq=seq).output
    return uuid.UUID(BLOB_REF.match(output).group(1))


def search(client, q: str, **params) -> str:
    return client.get(reverse("session_list"), {"q": q, **params}).content.decode()


def titles_in(html: str) -> list[str]:
    return re.findall(r'<td class="title"><a [^>]*>([^<]*)</a>', html)


def hit_rows(html: str) -> list[str]:
    return re.findall(r'<li class="hit[^"]*">.*?</li>', html, re.S)


def links(html: str, css_class: str) -> list[str]:
    return [unescape(h) for h in re.findall(rf'<a class="{css_class}" href="([^"]*)"', html)]


# --- what it finds -------------------------------------------------------------------------


def test_it_finds_a_string_that_occurs_only_inside_a_blob(logged_in_client, store):
    found = record(
        "Fix the build",
        user_item(1, "The build fails."),
        tool_result_item(2, big_output(f"Traceback: {NEEDLE} in reactor.py"), tool="run_build"),
    )
    record("Unrelated run", user_item(1, "Nothing to see."))
    summary = Item.objects.get(session_id=found, seq=2).output
    assert BLOB_REF.match(summary) and "flux_capacitor" not in summary  # only the blob has it

    html = search(logged_in_client, "flux_capacitor")

    assert titles_in(html) == ["Fix the build"]
    [hit] = hit_rows(html)
    assert "text blob of #2 run_build" in hit
    assert "<mark>flux_capacitor</mark>" in hit
    assert "Traceback: KeyError: &#x27;" in hit  # the snippet around it, escaped
    assert "1 session with “flux_capacitor” in a title, an item or a blob" in html


def test_each_hit_links_to_its_step_and_to_the_blob_showing_the_hit(logged_in_client, store):
    session_id = record(
        "Fix the build",
        user_item(1, "The build fails."),
        tool_result_item(2, big_output(f"Traceback: {NEEDLE} in reactor.py"), tool="run_build"),
    )
    blob_id = blob_of(session_id, 2)
    html = search(logged_in_client, "FLUX_CAPACITOR")

    [blob_url] = links(html, "hit-blob")
    path, query = blob_url.split("?")
    assert path == reverse("blob_detail", args=[blob_id])
    assert parse_qs(query)["selector"] == ["grep:flux_capacitor"]
    blob_page = re.sub(r"<[^>]+>", "", logged_in_client.get(blob_url).content.decode())
    # The page shows the hit's line, and not the lines around it.
    assert "Traceback: KeyError: &#x27;flux_capacitor&#x27; in reactor.py" in blob_page
    assert "compiling module_1.py" not in blob_page

    [step_url] = links(html, "hit-step")
    response = logged_in_client.get(step_url)
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert location.path == reverse("session_detail", args=[session_id])
    assert parse_qs(location.query)["find"] == ["FLUX_CAPACITOR"]
    assert parse_qs(location.query)["hit"] == ["1"]
    assert location.fragment == "step-2"


def test_it_finds_item_text_and_links_to_that_item(logged_in_client):
    session_id = record(
        "Plan", user_item(1, "hello"), user_item(2, "please refactor the Quantum_Parser now")
    )

    html = search(logged_in_client, "quantum_parser")

    [hit] = hit_rows(html)
    assert "#2 user message" in hit and "<mark>Quantum_Parser</mark>" in hit
    assert links(html, "hit-blob") == []  # not in a blob
    response = logged_in_client.get(links(html, "hit-step")[0])
    location = urlsplit(response["Location"])
    assert location.path == reverse("session_detail", args=[session_id])
    assert location.fragment == "item-2"


def test_it_finds_the_arguments_of_tool_calls(logged_in_client):
    call = {
        "type": "assistant",
        "seq": 1,
        "text": "",
        "tool_calls": [
            {"id": "c1", "name": "bash", "arguments": {"command": "pytest -x tests/zebra"}}
        ],
    }
    record("Run the tests", call)

    html = search(logged_in_client, "tests/zebra")

    [hit] = hit_rows(html)
    assert "#1 assistant message, tool call" in hit
    assert "command: pytest -x <mark>tests/zebra</mark>" in hit


def test_it_folds_case_by_unicode_rules_for_text_and_query(logged_in_client):
    record("German", tool_result_item(1, big_output("Die Hauptstraße ist gesperrt")))
    record("Greek", user_item(1, "ΟΔΟΣ όσος"))
    record("Neither", user_item(1, "Strasbourg"))

    assert titles_in(search(logged_in_client, "STRASSE")) == ["German"]
    assert titles_in(search(logged_in_client, "hauptSTRASSE")) == ["German"]
    html = search(logged_in_client, "straße")
    assert titles_in(html) == ["German"]
    assert "<mark>straße</mark>" in html  # the text as written, not its folding
    # Final sigma and sigma fold alike; so do capital and small letters.
    assert titles_in(search(logged_in_client, "οδος ΌΣΟΣ")) == ["Greek"]


def test_a_query_under_three_characters_searches_titles_only_and_says_so(logged_in_client):
    record("ab testing report", user_item(1, "nothing here"))
    record("Other run", user_item(1, "ab is in this item only"))

    html = search(logged_in_client, "AB")

    assert titles_in(html) == ["ab testing report"]
    assert "Searching titles only: type 3 characters or more" in html
    assert hit_rows(html) == []
    # Three characters or more search the items too.
    assert titles_in(search(logged_in_client, "AB IS")) == ["Other run"]


def test_the_index_answers_even_after_the_blob_files_are_deleted(logged_in_client, store):
    session_id = record(
        "Fix the build", tool_result_item(1, big_output(f"Traceback: {NEEDLE}"), tool="run_build")
    )
    blob_id = blob_of(session_id, 1)
    before = search(logged_in_client, "flux_capacitor")

    store.path_of(blob_id).unlink()
    after = search(logged_in_client, "flux_capacitor")

    assert titles_in(after) == ["Fix the build"]
    assert hit_rows(after) == hit_rows(before)
    assert "<mark>flux_capacitor</mark>" in hit_rows(after)[0]


def test_a_blob_uploaded_after_its_session_becomes_searchable(client, api_token, store, tmp_path):
    _, secret = api_token
    agent_store = type(store)(tmp_path / "agent-blobs")
    blob_id = agent_store.store_sync(Text(big_output("late arrival: zeppelin_hangar_7")))
    session_id = uuid.uuid4()
    log = "".join(
        json.dumps(line) + "\n"
        for line in [
            header(session_id, title="Sent from afar"),
            tool_result_item(1, f"[blob:{blob_id}] text | 400 lines", tool="run"),
        ]
    ).encode()

    def upload(*blobs: Path) -> int:
        data = {
            "log": SimpleUploadedFile("session.jsonl", log),
            "blob": [SimpleUploadedFile(p.name, p.read_bytes()) for p in blobs],
        }
        return client.post(
            "/api/sessions", data=data, headers={"Authorization": f"Bearer {secret}"}
        ).status_code

    assert upload() == 201
    assert Blob.objects.get(id=blob_id).missing
    client.force_login(api_token[0].user)
    assert titles_in(search(client, "zeppelin_hangar")) == []

    assert upload(agent_store.path_of(blob_id)) == 201

    html = search(client, "zeppelin_hangar")
    assert titles_in(html) == ["Sent from afar"]
    assert "<mark>zeppelin_hangar</mark>" in hit_rows(html)[0]


def test_snippets_are_escaped_and_mark_only_the_match(logged_in_client):
    record("Hostile", user_item(1, "<script>alert(1)</script> needle_here <img src=x onerror=y>"))

    html = search(logged_in_client, "needle_here")

    [hit] = hit_rows(html)
    assert "<script>" not in hit and "<img" not in hit
    assert "&lt;script&gt;alert(1)&lt;/script&gt; <mark>needle_here</mark> &lt;img" in hit


def test_a_hostile_query_is_escaped_wherever_it_is_shown(logged_in_client):
    query = '<b>"bold"</b>'
    record("Tags", user_item(1, f"text with {query} in it"))

    html = search(logged_in_client, query)

    assert titles_in(html) == ["Tags"]
    assert "<b>" not in html
    assert "“&lt;b&gt;&quot;bold&quot;&lt;/b&gt;”" in html


def test_it_shows_three_hits_per_session_and_links_to_the_rest(logged_in_client):
    session_id = record("Many", *(user_item(n, f"item {n} says ostrich") for n in range(1, 8)))

    html = search(logged_in_client, "ostrich")

    rows = hit_rows(html)
    assert [re.search(r"#(\d+)", row).group(1) for row in rows] == ["1", "2", "3"]
    assert "4 more hits in this session" in html
    more = unescape(re.search(r'<p class="more-hits"><a href="([^"]*)"', html).group(1))
    location = urlsplit(logged_in_client.get(more)["Location"])
    assert location.path == reverse("session_detail", args=[session_id])
    assert parse_qs(location.query)["hit"] == ["4"] and location.fragment == "item-4"


def test_a_json_array_hit_opens_the_entry_that_holds_it(logged_in_client, store):
    rows = [{"id": n, "name": f"row {n}", "tags": ["a", "b"]} for n in range(3000)]
    rows[2500]["name"] = "the Walrus row"  # far past the first chunk of the indented text
    session_id = record("JSON rows", tool_result_item(1, json.dumps(rows), tool="query"))
    blob_id = blob_of(session_id, 1)
    assert SearchChunk.objects.filter(blob_id=blob_id).count() > 3

    html = search(logged_in_client, "walrus")

    [hit] = hit_rows(html)
    assert "json array blob of #1 query" in hit
    assert '"name": "the <mark>Walrus</mark> row"' in unescape(hit)
    [link] = links(html, "hit-blob")
    response = logged_in_client.get(link)  # worked out when opened, from the index
    assert response.status_code == 302
    url = urlsplit(response["Location"])
    assert url.path == reverse("blob_detail", args=[blob_id])
    assert parse_qs(url.query) == {"selector": ["slice:2500..2501"]}
    page = unescape(logged_in_client.get(response["Location"]).content.decode())
    assert "the Walrus row" in page and "row 2499" not in page


def test_a_json_object_hit_opens_the_key_that_holds_it(logged_in_client, store):
    value = {f"key {n}": {"notes": ["x"] * 50} for n in range(40)}
    value["build | log"] = {"lines": ["ok"] * 30 + ["Walrus detected"]}
    session_id = record("JSON object", tool_result_item(1, json.dumps(value), tool="fetch"))

    [link] = links(search(logged_in_client, "walrus"), "hit-blob")

    location = urlsplit(logged_in_client.get(link)["Location"])
    assert location.path == reverse("blob_detail", args=[blob_of(session_id, 1)])
    assert parse_qs(location.query) == {"selector": ['key:"build | log"']}


@pytest.mark.parametrize("position", [CHUNK_CHARS - 5, CHUNK_CHARS + OVERLAP_CHARS - 5])
def test_a_match_across_a_chunk_edge_is_found(logged_in_client, position):
    text = "x" * position + "edge_straddler" + "y" * (CHUNK_CHARS + OVERLAP_CHARS)
    record("Long", user_item(1, text))
    assert SearchChunk.objects.filter(source="text").count() == 3

    html = search(logged_in_client, "edge_straddler")

    assert titles_in(html) == ["Long"]
    assert len(hit_rows(html)) == 1  # one place, though two chunks hold it


def test_a_place_that_matches_in_many_chunks_shows_its_first_match(logged_in_client, store):
    filler = "z" * (CHUNK_CHARS + OVERLAP_CHARS)
    text = "walrus first " + filler + " walrus second " + filler + " walrus third"
    lines = [f"line {n}: ok" for n in range(3 * CHUNK_CHARS // 10)]
    lines[5], lines[len(lines) // 2], lines[-1] = "walrus one", "walrus two", "walrus three"
    output = "\n".join(lines) + "\n"
    session_id = record("Many chunks", user_item(1, text), tool_result_item(2, output))
    assert SearchChunk.objects.filter(source="text").count() >= 3
    assert SearchChunk.objects.filter(blob_id=blob_of(session_id, 2)).count() >= 3

    hits = [
        unescape(re.sub(r"<[^>]+>", "", row))
        for row in hit_rows(search(logged_in_client, "walrus"))
    ]

    assert len(hits) == 3  # the message, the output as the model got it, the blob
    assert "walrus first" in hits[0]
    assert "walrus one" in hits[2] and "text blob of #2" in hits[2]


def test_a_blob_hit_is_placed_at_the_step_that_promoted_it_not_at_a_later_reference(
    logged_in_client, store
):
    session_id = uuid.uuid4()
    promoted = tool_result_item(2, big_output(f"raise {NEEDLE}"), tool="run_build")
    record("Refs", user_item(1, "Build it."), promoted, session_id=session_id)
    ref = f"[blob:{blob_of(session_id, 2)}]"
    inspected = tool_result_item(3, f"{ref} lines:190-210 → ok", tool="inspect", call_id="d")
    items = [user_item(1, "Build it."), promoted, inspected, user_item(4, f"Look at {ref}")]
    record("Refs", *items, session_id=session_id)
    assert BlobRef.objects.filter(session_id=session_id).count() == 3

    [hit] = [
        unescape(re.sub(r"<[^>]+>", "", row))
        for row in hit_rows(search(logged_in_client, "flux_capacitor"))
    ]

    assert hit.startswith("text blob of #2 run_build")


def test_a_blob_is_indexed_up_to_the_limit_and_its_page_says_so(logged_in_client, settings):
    settings.BLOBVIEWER_SEARCH_BLOB_BYTES = 2_000
    output = big_output("early_bird", lines=20) + big_output("late_comer", lines=400)
    session_id = record("Partly indexed", tool_result_item(1, output))
    blob_id = blob_of(session_id, 1)
    state = SearchedBlob.objects.get(blob_id=blob_id)
    assert (state.indexed_bytes, state.total_bytes) == (2_000, len(output.encode()))

    assert titles_in(search(logged_in_client, "early_bird")) == ["Partly indexed"]
    assert titles_in(search(logged_in_client, "late_comer")) == []
    page = logged_in_client.get(reverse("blob_detail", args=[blob_id])).content.decode()
    assert "Search sees only the first 2.0\xa0KB of this blob" in page


def test_a_fully_indexed_blob_page_says_nothing_about_search(logged_in_client, store):
    session_id = record("Whole", tool_result_item(1, big_output("all of it")))

    page = logged_in_client.get(reverse("blob_detail", args=[blob_of(session_id, 1)]))

    assert "Search sees only" not in page.content.decode()


def test_the_htmx_fragment_carries_the_hits(logged_in_client):
    record("Fragment", user_item(1, "a marmalade sandwich"))

    response = logged_in_client.get(reverse("session_list"), {"q": "marmalade"}, headers=HTMX)

    html = response.content.decode()
    assert html.lstrip().startswith('<div id="list">')
    assert "<mark>marmalade</mark>" in html


def test_a_too_long_query_is_a_one_line_error_and_keeps_the_box(logged_in_client):
    record("Anything", user_item(1, "x"))

    response = logged_in_client.get(reverse("session_list"), {"q": "q" * 201})

    assert response.status_code == 200
    html = response.content.decode()
    assert "Search: Ensure this value has at most 200 characters (it has 201)." in html
    assert 'value="' + "q" * 201 + '"' in html


# --- one rule on both databases ------------------------------------------------------------

CORPUS = [
    "plain ascii text",
    "100% sure_thing",
    "back\\slash and 'quotes' and \"doubles\"",
    "Straße in München",
    "ΣΊΣΥΦΟΣ and σίσυφος",
    "İstanbul and ǅemal",
    "fts syntax: NEAR(a b) AND x* OR y NOT z",
    "tab\tand\nnewline",
    "emoji 🙂 in the middle",
    "NUL\x00byte",
    "glob chars: a*b?c[d]e and [!x]",
    # Non-ASCII text whose folding only lowers ASCII capitals: the index keeps no folded
    # copy of it (blobviewer.search.folding), so the database lowers it, and must not lower
    # anything more (Cherokee capitals fold to themselves).
    "naïve Text with Ꭰ Here",
    "Kelvin \u212a and the \ufb01le ligature",
]
QUERIES = [
    "ascii",
    "% s",
    "_th",
    "\\sl",
    "'qu",
    '"dou',
    "STRASSE",
    "münchen",
    "σίσυφοσ",
    "ΣΊΣΥΦΟΣ AND",
    "i̇st",
    "ǆem",
    "near(a",
    "x* or",
    "\tand\nn",
    "🙂 in",
    "\u2400by",
    "nothing like this",
    "NAÏVE TEXT",
    "ꭰ her",
    "text with ꭰ",
    "kelvin k",
    "the file",
    "ab",
    "a*b",
    "b?c[d",
    "[d]",
    "[!x]",
    "a*e",
    "[a-z]",
]


# Every way session_filter finds a query's sessions, by its thresholds.
EVERY_WAY = pytest.mark.parametrize(
    ("few", "listed", "few_sessions", "listed_sessions"),
    [
        (500, 10_000, 50, 1_000),
        (500, 10_000, 0, 1_000),
        (500, 10_000, 0, 0),
        (0, 10_000, 50, 1_000),
        (0, 0, 50, 1_000),
    ],
    ids=[
        "from the index",
        "from the index, walked",
        "from the index, walked, named by a subquery",
        "walked, listed first",
        "walked, read",
    ],
)


def _thresholds(monkeypatch, few: int, listed: int, few_sessions: int, listed_sessions: int):
    monkeypatch.setattr(queries, "FEW_CHUNKS", few)
    monkeypatch.setattr(queries, "LISTED_CHUNKS", listed)
    monkeypatch.setattr(queries, "FEW_SESSIONS", few_sessions)
    monkeypatch.setattr(queries, "LISTED_SESSIONS", listed_sessions)


@EVERY_WAY
def test_search_finds_exactly_the_texts_whose_folding_contains_the_folded_query(
    few, listed, few_sessions, listed_sessions, db, monkeypatch
):
    """Each database answers as Python's casefold() and `in` do, so both answer alike
    (CI runs this on SQLite and on PostgreSQL), whether the query's few chunks name their
    sessions (on SQLite, each confirmed in turn, or in the list's walk) or each session is
    tested on its own (a common word's walk), its chunks looked up in the index's answer
    first (SQLite) or not."""
    _thresholds(monkeypatch, few, listed, few_sessions, listed_sessions)
    by_text = {}
    for text in CORPUS:
        session_id = record(f"corpus {len(by_text)}", user_item(1, text))
        by_text[session_id] = text

    for q in QUERIES:
        query = parse_query(q)
        found = set(Session.objects.filter(session_filter(query)).values_list("id", flat=True))
        if query.full:
            expected = {sid for sid, text in by_text.items() if fold(q.strip()) in fold(text)}
        else:
            expected = set()  # no title has it
        assert found == expected, q


@EVERY_WAY
def test_a_session_is_found_by_a_blob_it_only_references(
    few, listed, few_sessions, listed_sessions, store, monkeypatch
):
    """The word only in a blob: found for the session that promoted it and for one that
    names it (`[blob:<id>]`), as for one with it in its own text; not for the others."""
    _thresholds(monkeypatch, few, listed, few_sessions, listed_sessions)
    promoting = uuid.uuid4()
    record("Promotes", tool_result_item(1, big_output(f"raise {NEEDLE}")), session_id=promoting)
    naming = record("Names it", user_item(1, f"See [blob:{blob_of(promoting, 1)}]."))
    own = record("Own text", user_item(1, f"it says {NEEDLE.upper()} here"))
    record("Neither", user_item(1, "nothing to see"), tool_result_item(2, big_output("ok")))

    found = Session.objects.filter(session_filter(parse_query(NEEDLE)))

    assert set(found.values_list("id", flat=True)) == {promoting, naming, own}


def test_the_grep_selector_of_a_hit_is_a_literal_in_python_and_re2_syntax():
    assert grep_selector("a.b*c") == r"grep:a\.b\*c"
    assert grep_selector("f(x) [0]") == r"grep:f\(x\) \[0\]"
    assert grep_selector("first line\nsecond") == "grep:first line"
    assert grep_selector("a|lines:3") == 'grep:"a\\\\|lines:3"'


def test_ingest_again_indexes_nothing_twice(store):
    session_id = record("Twice", user_item(1, "once only"), tool_result_item(2, big_output("z")))
    chunks = SearchChunk.objects.count()

    index_session(session_id, store=store)
    record(
        "Twice",
        user_item(1, "once only"),
        tool_result_item(2, big_output("z")),
        session_id=session_id,
    )

    assert SearchChunk.objects.count() == chunks


def test_a_retitled_session_is_found_by_its_new_title(logged_in_client):
    session_id = record("Old name", user_item(1, "x"))
    session = Session.objects.get(id=session_id)
    session.title = "Brand new name"
    session.save()

    assert titles_in(search(logged_in_client, "new name")) == ["Brand new name"]
    assert titles_in(search(logged_in_client, "old name")) == []


def test_structured_content_is_searched_as_its_page_shows_it(store):
    blob_id = store.store_sync(Structured({"status": "failed", "code": 7}))
    session_id = record("Refs", tool_result_item(1, f"[blob:{blob_id}] json_object | 2 keys"))

    found = Session.objects.filter(session_filter(parse_query('"status": "failed"')))

    assert list(found.values_list("id", flat=True)) == [session_id]


def test_the_migration_indexes_what_was_recorded_before_it(logged_in_client, store):
    from django.apps import apps

    migration = importlib.import_module("blobviewer.migrations.0006_search_index")
    record(
        "Recorded earlier",
        user_item(1, "an old hedgehog"),
        tool_result_item(2, big_output(f"Traceback: {NEEDLE}"), tool="run_build"),
    )
    SearchChunk.objects.all().delete()
    SearchedBlob.objects.all().delete()
    assert titles_in(search(logged_in_client, "flux_capacitor")) == []

    migration.index_what_is_recorded(apps, SimpleNamespace(connection=connection))

    assert titles_in(search(logged_in_client, "flux_capacitor")) == ["Recorded earlier"]
    assert titles_in(search(logged_in_client, "hedgehog")) == ["Recorded earlier"]
    assert titles_in(search(logged_in_client, "ea")) == ["Recorded earlier"]  # the title


def test_a_deleted_session_is_found_no_more(logged_in_client):
    session_id = record("Short-lived", user_item(1, "ephemeral mayfly"))
    assert titles_in(search(logged_in_client, "mayfly")) == ["Short-lived"]

    Session.objects.filter(id=session_id).delete()

    assert titles_in(search(logged_in_client, "mayfly")) == []
    assert not SearchChunk.objects.filter(session_id=session_id).exists()
