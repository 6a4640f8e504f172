"""How much a search page costs: the same statements whatever the number of sessions that
match; sessions counted up to a cap; the page's sessions found by walking the list in its
order (an index serves it), stopping when the page is full; places looked up only for
the sessions on the page."""

from __future__ import annotations

import re
import uuid

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from blobviewer.data_dir import blob_store
from blobviewer.forms import SessionFilterForm
from blobviewer.ingest.database_ready import FILLED_TABLES
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Session
from blobviewer.search import queries
from blobviewer.search.queries import (
    FTS_TABLE,
    MAX_TRIGRAMS,
    parse_query,
    session_filter,
    session_places,
    trigrams,
)
from blobviewer.timeline import views
from blobviewer.timeline.views import SEARCH_SESSIONS_PER_PAGE
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db


def record_runs(count: int, *, word: str) -> list[uuid.UUID]:
    """*count* sessions whose big output (a blob) has *word* deep inside, and a message."""
    ids = []
    for n in range(count):
        session_id = uuid.uuid4()
        lines = [f"line {i}: compiling module_{i}.py ... ok" for i in range(300)]
        lines[150] = f"error in run {n}: {word} not found"
        items = [
            user_item(1, f"run {n}: look for the {word}"),
            tool_result_item(2, "\n".join(lines) + "\n"),
        ]
        ingest_session(
            header(session_id, title=f"run {n}"), items, source_path="t", store=blob_store()
        )
        ids.append(session_id)
    return ids


def _matches(queries: list[dict]) -> int:
    """The statements that look the query up in the search index."""
    if connection.vendor == "sqlite":
        return sum(f"{FTS_TABLE} MATCH" in query["sql"] for query in queries)
    # From the trigram index (LIKE), or among chunks asked for (STRPOS).
    looked_up = re.compile(r'COALESCE\([^,]*"folded", LOWER\(.*\)(::text LIKE|, )')
    return sum(bool(looked_up.search(query["sql"])) for query in queries)


def search_page(client, text: str, page: int = 1) -> tuple[bytes, list[dict]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(reverse("session_list"), {"q": text, "page": page})
    assert response.status_code == 200
    return response.content, captured.captured_queries


def test_a_search_page_costs_the_same_statements_for_few_or_many_matches(logged_in_client):
    record_runs(3, word="okapi")
    record_runs(SEARCH_SESSIONS_PER_PAGE + 10, word="walrus")

    few_page, few = search_page(logged_in_client, "okapi")
    many_page, many = search_page(logged_in_client, "walrus")
    second_page, second = search_page(logged_in_client, "walrus", page=2)

    assert b"3 sessions" in few_page
    assert f"{SEARCH_SESSIONS_PER_PAGE}+ sessions".encode() in many_page
    assert f"{SEARCH_SESSIONS_PER_PAGE + 10} sessions".encode() in second_page
    assert many_page.count(b'<tr class="hits">') == SEARCH_SESSIONS_PER_PAGE
    assert second_page.count(b'<tr class="hits">') == 10
    assert len(few) == len(many) == len(second)
    # SQLite asks its index to tell a rare word, for the sessions a rare word's chunks
    # name, and for the page with its count and totals; PostgreSQL matches in each
    # statement: the first and the last of those, its items' places and its blobs'
    # (SQLite reads the places' chunks for the query, which _matches does not count).
    expected = 3 if connection.vendor == "sqlite" else 4
    assert _matches(few) == _matches(many) == _matches(second) == expected


def test_a_search_counts_its_sessions_only_as_far_as_the_page_it_shows(
    logged_in_client, monkeypatch
):
    monkeypatch.setattr(views, "SEARCH_SESSIONS_PER_PAGE", 2)
    monkeypatch.setattr(views, "SEARCH_MAX_PAGE", 3)
    record_runs(7, word="walrus")
    record_runs(2, word="okapi")

    first, _ = search_page(logged_in_client, "walrus")
    second, _ = search_page(logged_in_client, "walrus", page=2)
    last_offered, _ = search_page(logged_in_client, "walrus", page=9)
    exact, _ = search_page(logged_in_client, "okapi")

    # Two shown and a third found: another page follows, how many is not known.
    assert b"2+ sessions" in first and b'rel="next"' in first
    assert b"<span>page 1</span>" in first
    assert b'class="totals"' not in first  # no sums over sessions it did not count
    assert b"4+ sessions" in second and b"<span>page 2</span>" in second
    # The last page offered: its sessions, no next page, still not all counted.
    assert b"6+ sessions" in last_offered and b"<span>page 3</span>" in last_offered
    assert last_offered.count(b'<tr class="hits">') == 2 and b'rel="next"' not in last_offered
    assert b"2 sessions" in exact and b'class="totals"' in exact and b"pager" not in exact


def test_the_last_page_of_a_search_counts_its_sessions(logged_in_client, monkeypatch):
    monkeypatch.setattr(views, "SEARCH_SESSIONS_PER_PAGE", 2)
    record_runs(5, word="walrus")

    last, _ = search_page(logged_in_client, "walrus", page=3)
    past, _ = search_page(logged_in_client, "walrus", page=7)

    for page in (last, past):
        assert b"5 sessions" in page and b"page 3 of 3" in page
        assert page.count(b'<tr class="hits">') == 1 and b'class="totals"' in page
        assert b"Total of all 5" in page


def _plan(sessions) -> str:
    """How the database would run *sessions*' query.

    PostgreSQL plans by the sizes its statistics give, and at a test's few rows reading a
    whole table and sorting it cost least, whatever the query; what the query decides is
    which index can serve it. So the statistics are the test's own (an earlier test's
    ANALYZE outlives its rollback) and whole-table reads and sorts are priced out: a query
    no index can serve still plans them."""
    sql, params = sessions.query.sql_with_params()
    explain = "EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN "
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"ANALYZE {', '.join(FILLED_TABLES)}")
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(explain + sql, params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


@pytest.mark.parametrize(
    "rare,listed,few_sessions",
    [(True, 10_000, 50), (True, 10_000, 0), (False, 10_000, 50), (False, 0, 50)],
)
def test_a_common_word_walks_the_list_in_its_order_and_a_rare_one_starts_from_its_chunks(
    rare, listed, few_sessions, monkeypatch
):
    ids = record_runs(3, word="walrus")
    monkeypatch.setattr(queries, "FEW_CHUNKS", 100 if rare else 0)
    monkeypatch.setattr(queries, "LISTED_CHUNKS", listed)
    monkeypatch.setattr(queries, "FEW_SESSIONS", few_sessions)
    sessions = SessionFilterForm({"q": "walrus"}).filter(Session.objects.all())

    assert set(sessions.values_list("pk", flat=True)) == set(ids)  # the same either way
    sqlite = connection.vendor == "sqlite"
    plan = _plan(sessions[:SEARCH_SESSIONS_PER_PAGE])
    in_order = "session_started" in plan and "TEMP B-TREE FOR ORDER BY" not in plan
    if rare and not sqlite:
        # The chunks the index finds name the sessions: no session is tested on its own.
        assert "IS NOT NULL" not in plan, plan
    elif rare and few_sessions:
        # SQLite: the sessions the listed chunks name, looked up, each confirmed by its
        # first matching chunk.
        assert "SEARCH blobviewer_session USING INDEX sqlite_autoindex" in plan, plan
        assert "CORRELATED SCALAR SUBQUERY" in plan and not in_order, plan
    elif rare:
        # SQLite, more sessions named: the list walked in its order for them, so that
        # confirming stops when the page is full.
        assert in_order and "CORRELATED SCALAR SUBQUERY" in plan, plan
    else:
        # The list's order from its index, each session tested in turn: the walk stops
        # when the page is full. PostgreSQL neither hashes every matching chunk first nor
        # asks its trigram index once per session.
        assert in_order, plan
        assert "hashed SubPlan" not in plan and "searchchunk_searched_trgm" not in plan
        if sqlite:
            # Listed first: the index's answer made once for the statement (not once
            # for a session's own chunks and again for its blobs'), each session's
            # chunks looked up in it; else only the session's chunks, read.
            assert plan.count(f"{FTS_TABLE} VIRTUAL TABLE") == (1 if listed else 0), plan


def test_places_are_found_only_among_the_sessions_asked_for(logged_in_client):
    ids = record_runs(4, word="walrus")
    query = parse_query("walrus")

    places = session_places(query, ids[:2])

    assert set(places) == set(ids[:2])
    for session_id in ids[:2]:
        found = [(place.seq, place.source) for place in places[session_id]]
        assert found == [(1, "text"), (2, "blob")]


def _index_definition() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [FTS_TABLE])
        return cursor.fetchone()[0]


def test_the_index_keeps_no_positions_and_still_finds_exact_substrings(logged_in_client):
    ids = record_runs(1, word="walrus")
    decoy = uuid.uuid4()  # every trigram of "abcd" and "abcd-x" is here, neither string is
    items = [user_item(1, "abc bcd, cd-x and d-x; ABC"), tool_result_item(2, "Straße")]
    ingest_session(header(decoy, title="decoy"), items, source_path="t", store=blob_store())

    if connection.vendor == "sqlite":  # which chunks hold a trigram, not where
        assert "detail=none" in _index_definition()

    def found(text: str) -> set[uuid.UUID]:
        query = parse_query(text)
        return set(Session.objects.filter(session_filter(query)).values_list("pk", flat=True))

    assert found("abcd") == set() and found("abcd-x") == set()
    assert found("bcd, CD-X") == {decoy}  # across words, any case
    assert found("STRASSE") == {decoy}  # ß folds to ss, in the index and the query
    assert found("walrus not") == {ids[0]}  # deep in a blob
    content, _ = search_page(logged_in_client, "abc bcd")
    assert b"decoy" in content and b"run 0" not in content


def test_a_long_query_asks_the_index_for_a_few_of_its_trigrams():
    query = parse_query("a fairly long query that spans many different trigrams of text")
    asked = trigrams(query).split(" AND ")
    assert len(asked) == MAX_TRIGRAMS
    assert asked[0] == '"a f"' and asked[-1] == '"ext"'  # its first and last, and between


@pytest.mark.django_db(transaction=True)
def test_the_lean_index_migration_keeps_what_was_indexed_both_ways():
    ids = record_runs(2, word="okapi")

    def found() -> set[uuid.UUID]:
        query = parse_query("okapi not found")
        return set(Session.objects.filter(session_filter(query)).values_list("pk", flat=True))

    try:
        call_command("migrate", "blobviewer", "0011", verbosity=0)  # the full index again
        if connection.vendor == "sqlite":
            assert "detail=none" not in _index_definition()
        assert found() == set(ids)
    finally:
        call_command("migrate", "blobviewer", verbosity=0)
    assert found() == set(ids)
    if connection.vendor == "sqlite":
        assert "detail=none" in _index_definition()


def test_an_ingest_checks_its_sessions_title_without_reading_every_title():
    """Each ingest compares a session's title chunk with its title: looked up by both the
    source and the session, not by the source alone (every session's title, so that ingest
    slowed as sessions grew)."""
    ids = record_runs(2, word="walrus")
    titles = queries.SearchChunk.objects.filter(session_id=ids[0], source="title")
    plan = _plan(titles)
    # Looked up by an index on the session (and the source), not by the source alone.
    sqlite = connection.vendor == "sqlite"
    by_session = r"USING .*INDEX .*\bsession_id=\?" if sqlite else r"Index Cond: .*\bsession_id = "
    assert re.search(by_session, plan), plan
    assert list(titles.values_list("text", flat=True)) == ["run 0"]


def test_a_titles_only_search_reads_the_titles_alone():
    """A query under three characters reads every title: from an index of the titles that
    holds their text on SQLite (not each title's row among all the chunks), by an index on
    the source on PostgreSQL."""
    ids = record_runs(3, word="walrus")
    sessions = SessionFilterForm({"q": "un"}).filter(Session.objects.all())

    assert set(sessions.values_list("pk", flat=True)) == set(ids)  # "run 0", "run 1", …
    plan = _plan(sessions[:SEARCH_SESSIONS_PER_PAGE])
    if connection.vendor == "sqlite":
        assert "USING COVERING INDEX searchchunk_titles (source=?)" in plan, plan
    else:
        # Alone or with the session, as the planner's statistics make it choose.
        conditions = [line for line in plan.splitlines() if "Index Cond:" in line]
        assert any("(source)::text = 'title'::text" in line for line in conditions), plan
        assert "Seq Scan on blobviewer_searchchunk" not in plan, plan


def _scans_of_chunks() -> tuple[int, int, int]:
    """(whole-table reads, index scans, rows fetched by them) of the chunk table in this
    transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT seq_scan, idx_scan, idx_tup_fetch FROM pg_stat_xact_user_tables"
            " WHERE relname = %s",
            [queries.SearchChunk._meta.db_table],
        )
        return cursor.fetchone()


def test_postgresql_counts_a_words_chunks_from_its_trigram_index_reading_one_at_most():
    """Whether a word is rare is asked of the trigram index, even where PostgreSQL's
    statistics say the table is small and the word in most of it (reading the table in its
    order then looks cheaper): the chunks it gives are counted from the plan of a statement
    that stops at the first chunk that matches, so no other chunk's text is read."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's index lists its chunks without reading any (CI runs both)")
    # A word of its own: the index still lists the rows of earlier tests, rolled back.
    word = f"walrus{uuid.uuid4().hex[:8]}"
    record_runs(20, word=word)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {', '.join(FILLED_TABLES)}")
    holding = [
        chunk.pk
        for chunk in queries.SearchChunk.objects.all()
        if word in (chunk.folded or chunk.text.lower())
    ]
    assert len(holding) >= 40  # the message and the blob of each run
    before = _scans_of_chunks()

    assert queries._chunks_found(parse_query(word)) == len(holding)
    assert queries._chunks_found(parse_query(f"okapi{uuid.uuid4().hex[:8]}")) == 0

    seq, scans, fetched = (a - b for a, b in zip(_scans_of_chunks(), before, strict=True))
    assert (seq, scans, fetched) == (0, 2, 1), (seq, scans, fetched)
