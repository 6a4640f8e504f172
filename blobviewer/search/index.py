"""Search inside recorded sessions and the blobs they reference.

Search is substring search, case-insensitive by one rule on every database: Unicode case
folding (Python's `str.casefold()`), applied to the text when it is indexed and to the
query. A query of MIN_QUERY_CHARS characters or more looks in sessions' titles, their
items (text, tool calls, tool output) and the text of their blobs; a shorter one only in
titles, since a trigram index cannot look it up.

Requests read only the index (SearchChunk rows), never a blob file: the index is written
when a session is ingested and when a blob it references arrives later (`index_session`,
`index_blob`). SQLite looks the folded query up in an FTS5 trigram index, PostgreSQL in a
pg_trgm GIN index; both then demand the whole folded query as a substring of the folded
chunk, so both databases give the same hits.

Long texts are cut into chunks of CHUNK_CHARS characters that overlap by OVERLAP_CHARS,
more than any folded query can span, so a match across a chunk's edge is inside the next
chunk whole. A blob is indexed up to settings.BLOBVIEWER_SEARCH_BLOB_BYTES of its text
(its indented rendering for JSON); its SearchedBlob row says how much, and its page says
so when that is not all of it.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce
from django.utils import timezone

from blobviewer.bulk_insert import claim_rows, insert_rows
from blobviewer.models import Blob, BlobRef, Item, SearchChunk, SearchedBlob, Session
from core.content import cut_utf8, decode_text, encode_text, utf8_size
from core.json_values import dumps_indented
from core.selectors import Key
from core.store import BlobStore, BlobStoreError

MIN_QUERY_CHARS = 3
MAX_QUERY_CHARS = 200
CHUNK_CHARS = 64 * 1024
# A folded query is at most 3 characters per character typed (e.g. "ΐ" folds to three);
# a chunk reaches this far into the next one so any match lies wholly inside one chunk.
OVERLAP_CHARS = 4 * MAX_QUERY_CHARS
DEFAULT_BLOB_BYTES = 4 * 1024 * 1024

SNIPPET_CHARS = 60  # shown on each side of a match
FTS_TABLE = "blobviewer_searchchunk_fts"

# PostgreSQL refuses NUL in text, and neither database encodes lone surrogates; the index
# keeps the stand-ins that ingest uses for item text (blobviewer.ingest.sessions._storable).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_WHITESPACE = re.compile(r"\s+")
_IDS = 500  # ids per query (both databases take far more parameters)

Source = SearchChunk.Source
# The order in which one item's places are shown: as the item reads, then its blobs.
_SOURCE_ORDER = {Source.TITLE: 0, Source.TEXT: 1, Source.CALLS: 2, Source.OUTPUT: 3, Source.BLOB: 4}


def blob_bytes_limit() -> int:
    """How many bytes of a blob's text search indexes (BLOBVIEWER_SEARCH_BLOB_BYTES)."""
    return int(getattr(settings, "BLOBVIEWER_SEARCH_BLOB_BYTES", DEFAULT_BLOB_BYTES))


def storable(text: str) -> str:
    """*text* as the databases can hold it: NUL as U+2400, lone surrogates as U+FFFD."""
    if text.isascii():  # much faster than the regex over a long text
        return text.replace("\x00", "\u2400") if "\x00" in text else text
    if not _UNSTORABLE.search(text):
        return text
    return _UNSTORABLE.sub(lambda m: "\u2400" if m.group() == "\x00" else "\ufffd", text)


def fold(text: str) -> str:
    """The one case rule of search, for indexed text and queries alike."""
    return storable(text).casefold()


# --- indexing ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Chunk:
    start: int  # in characters, within the whole text
    line: int  # the line of its first character (1-based)
    text: str


def text_chunks(text: str) -> Iterator[Chunk]:
    """*text* in overlapping chunks; nothing for an empty text."""
    start, line = 0, 1
    while start < len(text):
        end = start + CHUNK_CHARS + OVERLAP_CHARS
        yield Chunk(start, line, text[start:end])
        if end >= len(text):
            return
        line += text.count("\n", start, start + CHUNK_CHARS)
        start += CHUNK_CHARS


# The columns of a chunk row as indexing writes them (see _chunk_rows).
_CHUNK_FIELDS = ("session_id", "item_id", "blob_id", "source", "start", "line", "text", "folded")
ChunkRow = tuple[Any, Any, Any, str, int, int, str, str]


def _chunk_rows(
    text: str, source: str, *, session_id: Any = None, item_id: Any = None, blob_id: Any = None
) -> Iterator[ChunkRow]:
    """The rows of *text*'s chunks (_CHUNK_FIELDS), folded as queries are."""
    for chunk in text_chunks(storable(text)):
        yield (
            session_id,
            item_id,
            blob_id,
            source,
            chunk.start,
            chunk.line,
            chunk.text,
            chunk.text.casefold(),
        )


def calls_text(tool_calls: Any) -> str:
    """What search reads of an assistant item's tool calls: per call, its name and then one
    line per argument (`name: value`; a value that is not a string as compact JSON)."""
    if not isinstance(tool_calls, list):
        return ""
    lines: list[str] = []
    for call in tool_calls:
        if not isinstance(call, dict):
            continue
        lines.append(str(call.get("name") or ""))
        arguments = call.get("arguments")
        if isinstance(arguments, dict):
            for name, value in arguments.items():
                shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                lines.append(f"{name}: {shown}")
        elif arguments not in (None, ""):
            lines.append(str(arguments) if isinstance(arguments, str) else json.dumps(arguments))
    return "\n".join(lines)


def _item_rows(
    session_id: Any, item_id: int, text: str, tool_calls: Any, output: str
) -> Iterator[ChunkRow]:
    yield from _chunk_rows(text, Source.TEXT, session_id=session_id, item_id=item_id)
    calls = calls_text(tool_calls)
    yield from _chunk_rows(calls, Source.CALLS, session_id=session_id, item_id=item_id)
    yield from _chunk_rows(output, Source.OUTPUT, session_id=session_id, item_id=item_id)


class _ChunkWriter:
    """Chunk rows written a few megabytes of text at a time: few statements, each of a
    size that neither database minds (a blob's text is up to 4 MB, twice over with its
    folded copy). The trigram index is updated by the inserts themselves (SQLite's
    triggers feed FTS5; PostgreSQL's GIN index), so there is nothing else to write."""

    BYTES = 8 << 20

    def __init__(self) -> None:
        self.rows: list[ChunkRow] = []
        self.size = 0
        self.written = 0

    def add(self, rows: Iterable[ChunkRow]) -> None:
        for row in rows:
            self.rows.append(row)
            self.size += len(row[6]) + len(row[7])
            if self.size >= self.BYTES:
                self.flush()

    def flush(self) -> int:
        if self.rows:
            insert_rows(SearchChunk, _CHUNK_FIELDS, self.rows)
            self.written += len(self.rows)
            self.rows, self.size = [], 0
        return self.written


def index_items(items: Iterable[Item]) -> int:
    """(Re)index the text, tool calls and output of *items*; returns the chunks written."""
    items = list(items)
    if not items:
        return 0
    with transaction.atomic(savepoint=False):
        for batch in _batches([item.pk for item in items], _IDS):
            SearchChunk.objects.filter(item_id__in=batch).delete()
        writer = _ChunkWriter()
        for item in items:
            writer.add(
                _item_rows(item.session_id, item.pk, item.text, item.tool_calls, item.output)
            )
        return writer.flush()


def index_title(session: Session) -> None:
    """Keep the session's title chunk equal to its title (writes only when it changed)."""
    title = storable(session.title)
    current = list(
        SearchChunk.objects.filter(session_id=session.pk, source=Source.TITLE).values_list(
            "text", flat=True
        )
    )
    if current == ([title] if title else []):
        return
    with transaction.atomic(savepoint=False):
        SearchChunk.objects.filter(session_id=session.pk, source=Source.TITLE).delete()
        if title:
            SearchChunk.objects.create(
                session_id=session.pk, source=Source.TITLE, text=title, folded=title.casefold()
            )


def index_session(
    session_id: uuid.UUID, *, store: BlobStore, changed_items: Iterable[Item] = ()
) -> None:
    """Index what search does not know yet of a session: its title, items that have no
    chunks, *changed_items* (rewritten in place, e.g. re-derived by a rebuild), and the
    blobs it references that the store has and search has not read.

    Cheap when nothing is new (a few queries), so ingest calls it after every run. One
    transaction: a commit per blob would cost a disk sync each. Rows go in a few
    multi-row statements whatever the number of items and blobs.
    """
    with transaction.atomic():
        _index_session(session_id, store=store, changed_items=changed_items)


def _index_session(
    session_id: uuid.UUID, *, store: BlobStore, changed_items: Iterable[Item]
) -> None:
    # Locked: two ingests of one session at once (ingest --jobs, an upload) index it one
    # after the other, the second finding done what the first did (no chunk twice).
    session = Session.objects.select_for_update().filter(pk=session_id).only("pk", "title").first()
    if session is None:
        return
    index_title(session)
    index_items(changed_items)
    unindexed = (
        Item.objects.filter(session_id=session_id)
        .exclude(text="", output="", tool_calls=[])
        .exclude(
            pk__in=SearchChunk.objects.filter(session_id=session_id, item__isnull=False).values(
                "item_id"
            )
        )
        .values_list("pk", "text", "tool_calls", "output")
    )
    writer = _ChunkWriter()
    # Read in batches and written after each: a cursor is not read while writing.
    for batch in _batches(unindexed.iterator(chunk_size=_IDS), _IDS):
        for pk, text, tool_calls, output in batch:
            writer.add(_item_rows(session_id, pk, text, tool_calls, output))
        writer.flush()
    referenced = BlobRef.objects.filter(session_id=session_id).values("blob_id")
    index_pending_blobs(store=store, blob_ids=referenced)


def reindex_session(session_id: uuid.UUID, *, store: BlobStore) -> None:
    """Index a session afresh, e.g. after its items were re-derived in place."""
    SearchChunk.objects.filter(session_id=session_id).delete()
    index_session(session_id, store=store)


def index_pending_blobs(*, store: BlobStore, blob_ids: Any = None) -> int:
    """Index every blob (among *blob_ids*, a list or a values() query) that the store has
    and search has not read yet; returns how many were indexed."""
    blobs = Blob.objects.filter(missing=False, error="", search_index__isnull=True)
    if blob_ids is not None:
        blobs = blobs.filter(pk__in=blob_ids)
    pending = list(blobs.values_list("pk", flat=True))
    done = 0
    with transaction.atomic(savepoint=False):  # one disk sync, not one per blob
        texts: dict[uuid.UUID, tuple[str, int]] = {}
        size = 0
        for blob_id in pending:
            read = _blob_text(blob_id, store=store)
            if read is None:
                continue
            texts[blob_id] = read
            size += len(read[0])
            if size >= _ChunkWriter.BYTES:
                done += _write_blob_chunks(texts)
                texts, size = {}, 0
        done += _write_blob_chunks(texts)
    return done


def index_blob(blob: Blob, *, store: BlobStore) -> SearchedBlob | None:
    """Read the blob's text (up to the limit) into the index; None when the store cannot
    give it (missing or damaged: it is indexed once it can)."""
    read = _blob_text(blob.pk, store=store)
    if read is None:
        return None
    with transaction.atomic(savepoint=False):
        SearchedBlob.objects.filter(blob_id=blob.pk).delete()
        _write_blob_chunks({blob.pk: read})
    return SearchedBlob.objects.get(blob_id=blob.pk)


def _blob_text(blob_id: uuid.UUID, *, store: BlobStore) -> tuple[str, int] | None:
    """blob_search_text up to the limit; None when the store cannot give it."""
    try:
        return blob_search_text(store, blob_id, limit=blob_bytes_limit())
    except (BlobStoreError, OSError, UnicodeDecodeError):
        return None


def _write_blob_chunks(texts: dict[uuid.UUID, tuple[str, int]]) -> int:
    """Write the SearchedBlob row and the chunks of each blob of *texts* (its text and
    total size); returns how many were written. A blob another transaction indexed
    meanwhile keeps that transaction's rows: its SearchedBlob row is claimed first."""
    if not texts:
        return 0
    now = timezone.now()
    claimed = claim_rows(
        SearchedBlob,
        ("blob_id", "indexed_bytes", "total_bytes", "indexed_at"),
        [(blob_id, utf8_size(text), total, now) for blob_id, (text, total) in texts.items()],
        key="blob_id",
    )
    ids = [blob_id for blob_id in texts if blob_id in claimed]
    for batch in _batches(ids, _IDS):  # chunks of an earlier reading (a re-index)
        SearchChunk.objects.filter(blob_id__in=batch).delete()
    writer = _ChunkWriter()
    for blob_id in ids:
        writer.add(_chunk_rows(texts[blob_id][0], Source.BLOB, blob_id=blob_id))
    writer.flush()
    return len(ids)


def blob_search_text(store: BlobStore, blob_id: uuid.UUID, *, limit: int) -> tuple[str, int]:
    """The first *limit* UTF-8 bytes of what a blob's page shows (a text as it is, JSON
    indented), cut on a character boundary, and the size of all of it."""
    with store.open_sync(blob_id) as blob:
        if blob.kind == "text":
            head = blob.read(0, limit + 4)
            return decode_text(cut_utf8(head, min(limit, blob.size))), blob.size
    content = store.load_sync(blob_id)
    rendered = encode_text(dumps_indented(content.value))
    return decode_text(cut_utf8(rendered, limit)), len(rendered)


def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# --- querying ------------------------------------------------------------------------------


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


def matching_chunks(query: SearchQuery) -> QuerySet[SearchChunk]:
    """Every chunk whose folded text contains the folded query (a full query only)."""
    if connection.vendor == "sqlite":
        # A quoted FTS5 string is one phrase: the query's trigrams at consecutive positions,
        # which is exactly a substring (the tokenizer keeps case; both sides are folded).
        phrase = '"' + query.folded.replace('"', '""') + '"'
        found = RawSQL(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", [phrase])
        return SearchChunk.objects.filter(pk__in=found)
    # LIKE '%…%' on the folded text; pg_trgm's GIN index finds the candidates.
    return SearchChunk.objects.filter(folded__contains=query.folded)


def session_filter(query: SearchQuery) -> Q:
    """The sessions the query finds: by title, by an item, or by a blob they reference."""
    if not query.full:
        # No index can look up fewer than three characters; titles are few enough to scan.
        # LIKE is case-insensitive for ASCII on SQLite only, which changes nothing here:
        # both sides are folded, so neither has an ASCII capital.
        titles = SearchChunk.objects.filter(source=Source.TITLE, folded__contains=query.folded)
        return Q(pk__in=titles.values("session_id"))
    # One lookup of the index per statement: a chunk's own session (a title or an item),
    # or through its blob, every session that references that blob.
    found = matching_chunks(query).annotate(
        found_in=Coalesce("session_id", "blob__refs__session_id")
    )
    return Q(pk__in=found.values("found_in"))


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
    refs = BlobRef.objects.filter(session_id__in=session_ids)
    # Items' and blobs' chunks in one lookup of the index, each place's first chunk first.
    found = (
        matching_chunks(query)
        .filter(
            Q(session_id__in=session_ids, item__isnull=False)
            | Q(blob_id__in=refs.values("blob_id"))
        )
        .order_by("start", "pk")
        .values_list(
            "pk",
            "session_id",
            "source",
            "item__seq",
            "item__type",
            "item__tool",
            "blob_id",
            "blob__kind",
        )
    )
    seen: set[tuple[Any, ...]] = set()
    first_chunk: dict[uuid.UUID, tuple[int, str]] = {}
    for pk, session_id, source, seq, item_type, tool, blob_id, kind in found:
        if blob_id is not None:
            first_chunk.setdefault(blob_id, (pk, kind))
        elif (session_id, seq, source) not in seen:
            seen.add((session_id, seq, source))
            places[session_id].append(Place(session_id, seq, item_type, tool, source, pk))
    if first_chunk:
        referencing = refs.filter(blob_id__in=list(first_chunk)).values_list(
            "session_id", "blob_id", "item__seq", "item__type", "item__tool"
        )
        chosen: dict[tuple[Any, Any], tuple[bool, int, str, str]] = {}
        for session_id, blob_id, seq, item_type, tool in referencing:
            # The output that was promoted into the blob, rather than a later inspect of it.
            rank = (item_type != Item.Type.TOOL_RESULT or tool == "inspect", seq, item_type, tool)
            key = (session_id, blob_id)
            if key not in chosen or rank < chosen[key]:
                chosen[key] = rank
        for (session_id, blob_id), (_, seq, item_type, tool) in chosen.items():
            pk, kind = first_chunk[blob_id]
            places[session_id].append(
                Place(session_id, seq, item_type, tool, Source.BLOB, pk, blob_id, kind)
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
    folded = text.casefold()  # as stored (chunks_by_id leaves that column in the database)
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


# --- keeping the index in step with saved rows ---------------------------------------------
# Ingest writes items in bulk and indexes them itself (index_session); these catch the rows
# saved one at a time (the admin, `save()` in code), so no title or item goes unsearched.


def _title_saved(sender: type[Session], instance: Session, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if kwargs.get("raw") or (fields is not None and "title" not in fields):
        return
    index_title(instance)


def _item_saved(sender: type[Item], instance: Item, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if kwargs.get("raw") or (
        fields is not None and not {"text", "tool_calls", "output"} & set(fields)
    ):
        return
    index_items([instance])


def connect_signals() -> None:
    """Called once from the app's ready()."""
    from django.db.models.signals import post_save

    post_save.connect(_title_saved, sender=Session, dispatch_uid="search-title")
    post_save.connect(_item_saved, sender=Item, dispatch_uid="search-item")
