"""Search inside recorded sessions and the blobs they reference, from the search index
(blobviewer.search.indexing) alone, never a blob file.

Search is substring search, case-insensitive by one rule on every database
(blobviewer.search.folding), applied to the text when it is indexed and to the query. A
query of MIN_QUERY_CHARS characters or more looks in sessions' titles, their items (text,
tool calls, tool output) and the text of their blobs; a shorter one only in titles, since
a trigram index cannot look it up. SQLite looks the folded query's trigrams up in an FTS5
trigram index that keeps which chunks hold each trigram, not where (`detail=none`: a
fraction of the size, and quicker to write), PostgreSQL in a pg_trgm GIN index; both then
demand the whole folded query as a substring of the folded chunk, so both databases give
the same hits.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import (
    CharField,
    F,
    Func,
    IntegerField,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, Collate, Lower
from django.db.models.lookups import In, IsNull

from blobviewer.models import BlobRef, Item, SearchChunk
from blobviewer.search.folding import fold
from core.selectors import Key

MIN_QUERY_CHARS = 3
MAX_QUERY_CHARS = 200

SNIPPET_CHARS = 60  # shown on each side of a match
FTS_TABLE = "blobviewer_searchchunk_fts"

_WHITESPACE = re.compile(r"\s+")

Source = SearchChunk.Source
# The order in which one item's places are shown: as the item reads, then its blobs.
_SOURCE_ORDER = {Source.TITLE: 0, Source.TEXT: 1, Source.CALLS: 2, Source.OUTPUT: 3, Source.BLOB: 4}


@dataclass(frozen=True, slots=True)
class SearchQuery:
    text: str  # as typed, less surrounding whitespace
    folded: str

    @property
    def full(self) -> bool:
        """Whether it searches items and blobs too (else only titles)."""
        return len(self.text) >= MIN_QUERY_CHARS


def parse_query(text: str | None) -> SearchQuery | None:
    """The query in *text*; None when it is blank. Longer ones are cut to MAX_QUERY_CHARS."""
    text = (text or "").strip()[:MAX_QUERY_CHARS]
    return SearchQuery(text, fold(text)) if text else None


def matching_chunks(
    query: SearchQuery, *, from_index: bool = False, listed: bool = False
) -> QuerySet[SearchChunk]:
    """Every chunk whose folded text contains the folded query (a full query only).

    Narrowed by the caller to a few sessions or blobs, the chunks are found by those and
    each is read for the query (instr on SQLite, strpos on PostgreSQL): the work grows
    with what is asked for, where the index's answer for a common word grows with the
    corpus (see session_filter). *from_index*: the chunks are found from the index
    instead, for a query it lists few chunks for. *listed* (SQLite): the chunks asked for
    are first looked up in the index's answer, and only those it lists are read."""
    chunks = _searched_chunks()
    sqlite = connection.vendor == "sqlite"
    if from_index and not sqlite:
        # LIKE '%…%' on the folded text, from pg_trgm's GIN index on it.
        return chunks.filter(searched__contains=query.folded)
    # The chunks that hold every trigram of the query (the tokenizer keeps case; both
    # sides are folded), then those whose folded text holds the query itself.
    if from_index:
        chunks = chunks.filter(pk__in=_index_answer(query))
    elif listed and sqlite:
        # `+id` keeps SQLite from walking the answer (a lookup per listed chunk) rather
        # than the chunks the caller asked for.
        chunks = chunks.filter(In(_plus(F("pk"), IntegerField()), _index_answer(query)))
    # strpos rather than LIKE on PostgreSQL: the trigram index does not serve it, so no
    # estimate (a stale one had it read the index's answer per session) can choose it, and
    # it finds a word in a long text quicker.
    return _holding(chunks, query, "instr" if sqlite else "strpos")


def _plus(expression: F, output_field: Any) -> Func:
    """*expression* behind SQLite's unary plus: the same value, which no index serves, so
    a term on it cannot choose which table or list the statement walks."""
    return Func(expression, template="+%(expressions)s", output_field=output_field)


def _holding(chunks: QuerySet[SearchChunk], query: SearchQuery, find: str) -> QuerySet:
    """Those of *chunks* whose folded text holds the folded query, by the database's
    function *find* (its position in the text, 0 where it is not there)."""
    holds = Func(F("searched"), Value(query.folded), function=find, output_field=IntegerField())
    return chunks.alias(holds=holds).filter(holds__gt=0)


def _index_answer(query: SearchQuery, *, limit: int | None = None) -> RawSQL:
    """The chunks (ids) that hold every trigram of *query*, from SQLite's FTS5 index (the
    first *limit* of them it lists). SQLite makes the list once a statement."""
    cut = "" if limit is None else f" LIMIT {int(limit)}"
    return RawSQL(
        f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s{cut}", [trigrams(query)]
    )


# Up to this many matching chunks, a search finds its sessions from them (a rare word);
# beyond, it walks the sessions in the list's order and stops when the page is full.
FEW_CHUNKS = 500
# SQLite: up to this many chunks in the index's answer, the walk tests a session's chunks
# against the answer before reading them, so a session without the word has none of its
# text read (a word in one session in twenty: 3 ms for the walk, against 11 ms reading).
# SQLite makes the answer once a statement, at a cost that grows with it (20 ms for the
# 110,000 chunks that hold `import` at 20,000 sessions); a word listed in more is in so
# many places that the walk soon finds enough sessions. Every search counts the answer up
# to this many, which costs as much again for a common word: at 20,000 sessions counting
# to 10,000 took 1.4-3.8 ms, to 2,000 0.4-1.0 ms, and `kafka_rebalance` (10,000 chunks)
# walked reading its sessions in 8.3 ms against 6.8 listed.
LISTED_CHUNKS = 2_000
# SQLite: up to this many sessions named by a rare word's chunks, each is confirmed; beyond,
# the list is walked in its order for them (which passes the sessions between).
FEW_SESSIONS = 50
# More named sessions than this go to SQLite as the subquery that names them, not as ids.
LISTED_SESSIONS = 1_000


def _chunks_found(query: SearchQuery) -> int:
    """How many chunks may match *query*, with no chunk's text read: on SQLite, those the
    index lists, counted up to LISTED_CHUNKS + 1; on PostgreSQL, those its trigram index
    gives (_candidates)."""
    if connection.vendor == "sqlite":
        listed = _index_answer(query, limit=LISTED_CHUNKS + 1)
        return _rows(listed.sql, listed.params)
    return _candidates(query)


def _candidates(query: SearchQuery) -> int:
    """PostgreSQL: how many chunks hold every trigram of *query*, by its trigram index.

    A statement cannot count the rows an index gives without reading each, and a chunk
    read is a chunk rechecked: its text read and lowered (40 µs for 6 KB, so 20 ms to
    count 500 chunks that hold `import`). The count is the one the plan's bitmap scan
    reports for the statement that asks for the first matching chunk (1-3 ms at 2,000
    sessions), which reads only the chunks before that one. It may count rows since
    deleted (a session indexed again) until they are vacuumed: more, never fewer."""
    first = matching_chunks(query, from_index=True).order_by().values("pk")[:1]
    sql, params = first.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        # From the trigram index, whatever PostgreSQL guesses of how many chunks match
        # (a guess: it keeps no statistics of texts this long): on a guess of many, it
        # would read the table in its order until one matches.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (ANALYZE, TIMING OFF, SUMMARY OFF, FORMAT JSON) {sql}", params)
        (plan,) = cursor.fetchone()
    if isinstance(plan, str):
        plan = json.loads(plan)
    nodes = [plan[0]["Plan"]]
    for node in nodes:
        if node["Node Type"] == "Bitmap Index Scan":
            return int(node["Actual Rows"])
        nodes.extend(node.get("Plans", ()))
    # Not from the index (there is one since migration 0013): as common as a word can be,
    # which the walk finds whatever its count.
    return FEW_CHUNKS + 1


def _rows(sql: str, params: Sequence[Any]) -> int:
    """How many rows *sql* gives."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM ({sql}) AS listed", params)
        return int(cursor.fetchone()[0])


def _searched_chunks() -> QuerySet[SearchChunk]:
    """Chunks with their folded text as `searched`: the copy kept, else the text with its
    ASCII capitals lowered (blobviewer.search.folding). PostgreSQL's trigram index is on
    this expression (migration 0013)."""
    text = F("text") if connection.vendor == "sqlite" else Collate(F("text"), "C")
    return SearchChunk.objects.alias(searched=Coalesce(F("folded"), Lower(text)))


# The trigrams a lookup asks for: enough to leave few chunks to check, few enough that
# FTS5 reads few lists.
MAX_TRIGRAMS = 12


def trigrams(query: SearchQuery) -> str:
    """The FTS5 query for the chunks that hold every trigram of *query* (up to
    MAX_TRIGRAMS of them, spread over it), each a quoted string."""
    text = query.folded
    found = sorted({text[i : i + 3] for i in range(len(text) - 2)}, key=text.index)
    if len(found) > MAX_TRIGRAMS:
        step = (len(found) - 1) / (MAX_TRIGRAMS - 1)
        found = [found[round(n * step)] for n in range(MAX_TRIGRAMS)]
    return " AND ".join('"' + trigram.replace('"', '""') + '"' for trigram in found)


def session_filter(query: SearchQuery) -> Q:
    """The sessions the query finds: by title, by an item, or by a blob they reference.

    A session is tested on its own chunks and its blobs' (one correlated subquery each),
    so a list in its order, cut to the page and one more, stops as soon as it has enough:
    the work grows with the page, not with the sessions that match. A rare word (few
    matching chunks) goes the other way: its few chunks name their sessions."""
    if not query.full:
        # No index can look up fewer than three characters; titles are few enough to scan.
        # LIKE is case-insensitive for ASCII on SQLite only, which changes nothing here:
        # both sides are folded, so neither has an ASCII capital.
        titles = _searched_chunks().filter(source=Source.TITLE, searched__contains=query.folded)
        return Q(pk__in=titles.values("session_id"))
    found = _chunks_found(query)
    if found <= FEW_CHUNKS and connection.vendor != "sqlite":
        return Q(pk__in=_naming(matching_chunks(query, from_index=True)).values("found_in"))
    walk = _found_in_session(query, listed=found <= LISTED_CHUNKS)
    if found > FEW_CHUNKS:
        return walk
    # SQLite, a rare word: the sessions its listed chunks name (none of them read), each
    # confirmed by its first matching chunk. Few, they are confirmed one by one; more,
    # confirmed in the list's order (`+id` keeps SQLite walking the list rather than
    # them), so that confirming stops when the page is full. Reading every listed chunk
    # took 36 ms for `disk_pressure` (400 chunks) at 20,000 sessions.
    # Each session once, as the text SQLite keeps a UUID as (32 hex digits): no UUID made
    # and prepared again for each (`disk_pressure`, 400 chunks naming 200 sessions at
    # 20,000: 2 ms of the page).
    listed = SearchChunk.objects.filter(pk__in=_index_answer(query))
    named = _naming(listed, as_text=True).values_list("found_in", flat=True).distinct()
    candidates = [session for session in named if session is not None]
    if len(candidates) <= FEW_SESSIONS:
        return Q(pk__in=candidates) & walk
    # A blob many sessions reference: as the subquery, since SQLite caps the parameters.
    among = named if len(candidates) > LISTED_SESSIONS else candidates
    return Q(In(_plus(F("pk"), CharField()), among)) & walk


def _naming(chunks: QuerySet[SearchChunk], *, as_text: bool = False) -> QuerySet[SearchChunk]:
    """*chunks* with the session each is found in as `found_in`: its own, or for a blob's
    chunk each session that references the blob; *as_text*: as the database keeps the id,
    not made a UUID."""
    text = {"output_field": CharField()} if as_text else {}
    return chunks.annotate(found_in=Coalesce("session_id", "blob__refs__session_id", **text))


def _found_in_session(query: SearchQuery, *, listed: bool) -> Q:
    """Whether a session (the outer row) has a chunk that matches *query*: its own, or one
    of a blob it references. On SQLite one subquery over both (the chunks of the session or
    of its blobs, an OR it looks up by both indexes), so a listed answer is made once a
    statement, not once for each (a word in 10,000 chunks at 20,000 sessions, listed: 10.6
    -> 5.8 ms).
    PostgreSQL would read every matching chunk for that OR (45 ms for `import` at 2,000
    sessions, against 3): it gets one subquery for each."""
    chunks = matching_chunks(query, listed=listed)
    if connection.vendor == "sqlite":
        blobs = BlobRef.objects.filter(session_id=OuterRef(OuterRef("pk"))).values("blob_id")
        return _found(chunks.filter(Q(session_id=OuterRef("pk")) | Q(blob_id__in=blobs)))
    own = chunks.filter(session_id=OuterRef("pk"))
    return _found(own) | _found(chunks.filter(blob__refs__session_id=OuterRef("pk")))


def _found(chunks: QuerySet[SearchChunk]) -> Q:
    """Whether *chunks* (correlated to a session) has one: a scalar subquery rather than
    EXISTS, which PostgreSQL would turn into one hashed list of every matching chunk of
    every session (each chunk's text read) before the list's order could cut it short."""
    first = Subquery(chunks.values("pk")[:1], output_field=IntegerField())
    return Q(IsNull(first, False))


@dataclass(frozen=True, slots=True)
class Place:
    """Where a session has a hit: an item's text, calls or output, or a blob (found through
    the item that references it). One place however often it matches there."""

    session_id: uuid.UUID
    seq: int  # the item; for a blob, the item that references it (its promoted output)
    item_type: str
    tool: str
    source: str
    chunk_id: int  # the first matching chunk there
    blob_id: uuid.UUID | None = None
    blob_kind: str = ""
    title: str = ""  # the item's title, where its importer gave one (a Codex poll's)

    @property
    def sort_key(self) -> tuple[int, int, str]:
        return (self.seq, _SOURCE_ORDER.get(self.source, 9), str(self.blob_id or ""))

    @property
    def is_step(self) -> bool:
        """A tool result: the timeline's step anchors (`#step-<seq>`) name it."""
        return self.item_type == Item.Type.TOOL_RESULT


def session_places(query: SearchQuery, session_ids: Sequence[uuid.UUID]) -> dict[Any, list[Place]]:
    """Every place where each of *session_ids* has a hit for a full query, in timeline
    order (by item, then text, calls, output, blob). Titles are not places."""
    places: dict[Any, list[Place]] = {session_id: [] for session_id in session_ids}
    if not query.full or not session_ids:
        return places
    # Each place's first matching chunk: a text's chunks are written in its order, so the
    # first has the lowest id. Items' places, then blobs', each found by the sessions asked
    # for (two statements: one with an OR would have PostgreSQL read every chunk that
    # matches anywhere).
    matching = matching_chunks(query).order_by()
    item_places = (
        matching.filter(session_id__in=session_ids, item__isnull=False)
        .values_list("session_id", "item_id", "source")
        .annotate(first=Min("pk"))
        .values_list(
            "first", "session_id", "source", "item__seq", "item__type", "item__tool", "item__title"
        )
    )
    for pk, session_id, source, seq, item_type, tool, title in item_places:
        places[session_id].append(Place(session_id, seq, item_type, tool, source, pk, title=title))
    # A blob's place: its first matching chunk, looked up for each reference to it by the
    # sessions asked for (from the index on the chunks' blob).
    first = matching.filter(blob_id=OuterRef("blob_id")).order_by("pk").values("pk")[:1]
    referencing = (
        BlobRef.objects.filter(session_id__in=session_ids)
        .annotate(first=Subquery(first, output_field=IntegerField()))
        .values_list(
            "session_id",
            "blob_id",
            "first",
            "blob__kind",
            "item__seq",
            "item__type",
            "item__tool",
            "item__title",
        )
    )
    chosen: dict[tuple[Any, Any], tuple[bool, int, str, str, str, int, str]] = {}
    for session_id, blob_id, pk, kind, seq, item_type, tool, title in referencing:
        if pk is None:  # the query is not in this blob
            continue
        # The output that was promoted into the blob, rather than a later inspect of it.
        inspected = item_type != Item.Type.TOOL_RESULT or tool == "inspect"
        rank = (inspected, seq, item_type, tool, title, pk, kind)
        key = (session_id, blob_id)
        if key not in chosen or rank < chosen[key]:
            chosen[key] = rank
    for (session_id, blob_id), (_, seq, item_type, tool, title, pk, kind) in chosen.items():
        places[session_id].append(
            Place(session_id, seq, item_type, tool, Source.BLOB, pk, blob_id, kind, title)
        )
    for found in places.values():
        found.sort(key=lambda place: place.sort_key)
    return places


@dataclass(frozen=True, slots=True)
class Snippet:
    before: str
    match: str
    after: str
    line: int  # the line of the match within the whole text (1-based)
    matched_text: str  # the match as it is in the text (newlines kept)
    offset: int = 0  # where the match starts in its chunk, in characters


def snippet(chunk: SearchChunk, query: SearchQuery, *, chars: int = SNIPPET_CHARS) -> Snippet:
    """The match of *query* in *chunk* with the rest of its line around it (up to *chars*
    characters either side), whitespace runs shown as one space; the match as the text has
    it (its case, before folding)."""
    text = chunk.text
    folded = text.casefold()  # as searched (chunks_by_id leaves the column in the database)
    position = folded.find(query.folded)
    if position < 0:  # cannot happen for a chunk the index found; show its start
        start = end = 0
    else:
        start, end = _unfolded_span(text, folded, position, position + len(query.folded))
    # The rest of the match's line(s), as grep shows a hit: at most *chars* either side.
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    first = max(line_start, start - chars)
    last = min(line_end, end + chars)
    return Snippet(
        before=("…" if first > line_start else "") + _one_line(text[first:start]),
        match=_one_line(text[start:end]),
        after=_one_line(text[end:last]) + ("…" if last < line_end else ""),
        line=chunk.line + text.count("\n", 0, start),
        matched_text=text[start:end],
        offset=start,
    )


def _unfolded_span(text: str, folded: str, start: int, end: int) -> tuple[int, int]:
    """The characters of *text* whose folding covers folded[start:end]. Each character
    folds on its own (casefold has no context), to one or more characters."""
    if len(folded) == len(text):  # every character folded to one: offsets agree
        return start, end
    position, first = 0, None
    for index, char in enumerate(text):
        position += len(char.casefold())
        if first is None and position > start:
            first = index
        if position >= end:
            return first or 0, index + 1
    return first or 0, len(text)


def _one_line(text: str) -> str:
    return _WHITESPACE.sub(" ", text)


# A grep: selector with the hit as a literal: these are the characters that mean something
# in both Python's re and RE2; escaped with a backslash, each stands for itself in both.
_REGEX_SPECIAL = re.compile(r"([\\.^$|?*+()\[\]{}])")


def regex_literal(text: str) -> str:
    return _REGEX_SPECIAL.sub(r"\\\1", text)


def grep_selector(matched_text: str) -> str:
    """`grep:<the hit's first non-blank line, as a literal>`; "" when it has none."""
    line = next((part for part in matched_text.split("\n") if part.strip()), "")
    if not line:
        return ""
    pattern = regex_literal(line.rstrip("\r"))
    # Quoted as JSON where the bare form would not read back: a "|" may look like the
    # start of another step, edge spaces would be stripped.
    if (
        "|" in pattern
        or pattern != pattern.strip()
        or pattern.startswith('"')
        or any(c < " " for c in pattern)
    ):
        return "grep:" + json.dumps(pattern, ensure_ascii=False)
    return f"grep:{pattern}"


# In a JSON blob's indented text (two spaces a level), a line at the first level that opens
# an array's entry (not one that closes it), and an object's key line at that level.
_ENTRY_LINE = re.compile(r"^  [^ \]}]", re.MULTILINE)
_KEY_LINE = re.compile(r'^  "', re.MULTILINE)


def json_hit_selector(chunk: SearchChunk, offset: int, kind: str) -> str:
    """The selector that shows the first-level part of a JSON blob holding the hit at
    *offset* in *chunk*: `slice:N..N+1` for an array's entry, `key:name` for an object's
    key; "" when the hit is outside any (a bracket line, a lone value).

    Read from the index (the chunks before this one), never from the blob's file.
    """
    if kind not in ("json_array", "json_object"):
        return ""
    earlier = SearchChunk.objects.filter(blob_id=chunk.blob_id, start__lt=chunk.start)
    pieces, covered = [], 0
    for start, text in earlier.order_by("start").values_list("start", "text"):
        pieces.append(text[covered - start :])  # chunks overlap: each part once
        covered = start + len(text)
    prefix = "".join(pieces)[: chunk.start] + chunk.text[:offset]
    if kind == "json_array":
        entries = len(_ENTRY_LINE.findall(prefix))
        return f"slice:{entries - 1}..{entries}" if entries else ""
    key_line = None
    for key_line in _KEY_LINE.finditer(prefix):  # noqa: B007 - the last one is wanted
        pass
    if key_line is None:
        return ""
    try:
        name, _ = json.JSONDecoder().raw_decode(prefix, key_line.start() + 2)
    except ValueError:
        return ""
    return str(Key(name)) if isinstance(name, str) else ""


def chunks_by_id(ids: Iterable[int]) -> dict[int, SearchChunk]:
    """The chunks for snippets, without their folded copy (folding again is cheaper than
    reading it)."""
    return SearchChunk.objects.defer("folded").in_bulk(list(set(ids)))
