"""What a search shows: hits with a snippet and links, for the session list and for the
find box on a session's page.

A hit is a place (blobviewer.search.queries.Place): an item's text, tool calls or output, or a blob
the session references, found through the item that references it. Hits of a session are
numbered in timeline order; `/sessions/<id>/find?q=…&hit=N` opens hit N: the timeline page
that shows its step, at the step's anchor, with the find box on it saying "hit N of M".
A blob hit also links to the blob's page showing the hit: a `grep:` of the matched text for
a text blob, the indented JSON from the hit's line for a JSON blob.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from django.urls import reverse

from blobviewer.models import Item, SearchChunk, Session
from blobviewer.reader.display import selector_url
from blobviewer.search.queries import (
    MIN_QUERY_CHARS,
    Place,
    SearchQuery,
    Snippet,
    Source,
    chunks_by_id,
    grep_selector,
    json_hit_selector,
    parse_query,
    session_places,
    snippet,
)
from blobviewer.timeline.pages import step_url

HITS_PER_SESSION = 3  # shown under each session in the list
# Parameters of a session page that carry the find box's state.
FIND_PARAM = "find"
HIT_PARAM = "hit"

_ITEM_NAMES = {
    Item.Type.USER: "user message",
    Item.Type.ASSISTANT: "assistant message",
    Item.Type.TOOL_RESULT: "tool result",
}


@dataclass(frozen=True, slots=True)
class Hit:
    place: Place
    number: int  # 1-based, among the session's hits
    snippet: Snippet
    where: str  # e.g. "#12 run_build output", "text blob of #12 run_build"
    find_url: str  # opens this hit on the timeline (through the find view)
    blob_url: str = ""  # the blob's page showing the hit; "" for an item hit

    @property
    def in_blob(self) -> bool:
        return self.place.blob_id is not None


def _where(place: Place) -> str:
    item = f"#{place.seq}"
    if place.item_type == Item.Type.TOOL_RESULT and (place.title or place.tool):
        item += f" {place.title or place.tool}"
    else:
        item += f" {_ITEM_NAMES.get(place.item_type, place.item_type)}"
    if place.source == Source.BLOB:
        kind = place.blob_kind.replace("_", " ") if place.blob_kind else "a"
        return f"{kind} blob of {item}"
    if place.source == Source.CALLS:
        return f"{item}, tool call"
    if place.source == Source.OUTPUT and place.item_type == Item.Type.TOOL_RESULT:
        return f"{item} output"
    return item


OPEN_PARAM = "open"  # `open=blob`: the find view goes to the blob's page at the hit


class FindUrls:
    """The find view's URLs of hits of one query: each session's path reversed once and the
    query encoded once, however many hits a page links (a page of the list links 40)."""

    def __init__(self, query: SearchQuery) -> None:
        self._query = urlencode({"q": query.text})
        self._paths: dict[uuid.UUID, str] = {}

    def __call__(self, session_id: uuid.UUID, number: int, *, open_blob: bool = False) -> str:
        path = self._paths.get(session_id)
        if path is None:
            path = self._paths[session_id] = reverse("session_find", args=[session_id])
        url = f"{path}?{self._query}&{HIT_PARAM}={number}"
        return f"{url}&{OPEN_PARAM}=blob" if open_blob else url


def find_url(
    session_id: uuid.UUID, query: SearchQuery, number: int, *, open_blob: bool = False
) -> str:
    return FindUrls(query)(session_id, number, open_blob=open_blob)


def _blob_url(
    place: Place,
    found: Snippet,
    chunk: SearchChunk,
    *,
    number: int,
    exact: bool,
    urls: FindUrls,
) -> str:
    """The blob's page showing the hit: a text blob's lines that have it (`grep:`); a JSON
    blob's first-level entry or key that holds it (grep: applies to text only). Finding
    that entry reads the blob's earlier chunks, so the session list links through the find
    view (*exact* False), which works it out for the one hit that is opened."""
    base = reverse("blob_detail", args=[place.blob_id])
    if place.blob_kind == "text":
        return selector_url(base, grep_selector(found.matched_text))
    if not exact:
        return urls(place.session_id, number, open_blob=True)
    return selector_url(base, json_hit_selector(chunk, found.offset, place.blob_kind))


def hits(
    query: SearchQuery,
    places: Sequence[Place],
    numbers: Sequence[int],
    *,
    exact: bool = False,
    urls: FindUrls | None = None,
) -> list[Hit]:
    """The hits at *places* (numbered *numbers*), with snippets; one query for all."""
    urls = urls or FindUrls(query)
    chunks = chunks_by_id(place.chunk_id for place in places)
    found = []
    for place, number in zip(places, numbers, strict=True):
        chunk = chunks.get(place.chunk_id)
        if chunk is None:  # re-indexed since the places were read
            continue
        piece = snippet(chunk, query)
        found.append(
            Hit(
                place=place,
                number=number,
                snippet=piece,
                where=_where(place),
                find_url=urls(place.session_id, number),
                blob_url=(
                    _blob_url(place, piece, chunk, number=number, exact=exact, urls=urls)
                    if place.blob_id
                    else ""
                ),
            )
        )
    return found


@dataclass(frozen=True, slots=True)
class SessionHits:
    """The first hits of one session in the list, and how many it has in all."""

    shown: list[Hit]
    count: int
    more_url: str  # the first hit not shown; "" when all are

    @property
    def more(self) -> int:
        return self.count - len(self.shown)


def list_hits(
    query: SearchQuery | None, sessions: Sequence[Session]
) -> dict[uuid.UUID, SessionHits]:
    """The hits to show under each of *sessions* (a page of the list) for *query*."""
    if query is None or not query.full:
        return {}
    places = session_places(query, [session.pk for session in sessions])
    first = {sid: found[:HITS_PER_SESSION] for sid, found in places.items()}
    flat = [place for found in first.values() for place in found]
    numbers = [n for found in first.values() for n in range(1, len(found) + 1)]
    by_session: dict[uuid.UUID, list[Hit]] = {sid: [] for sid in places}
    urls = FindUrls(query)
    for hit in hits(query, flat, numbers, urls=urls):
        by_session[hit.place.session_id].append(hit)
    result = {}
    for sid, found in places.items():
        more = ""
        if len(found) > HITS_PER_SESSION:
            more = urls(sid, HITS_PER_SESSION + 1)
        result[sid] = SessionHits(by_session[sid], len(found), more)
    return result


# --- find in this session --------------------------------------------------------------------


@dataclass(frozen=True)
class FindState:
    """The find box of a session page: the query, its hits, and the current one."""

    session_id: uuid.UUID
    text: str = ""  # as typed
    message: str = ""  # a one-line note: too short, nothing found
    count: int = 0
    number: int = 0  # the current hit (1-based); 0: none
    hit: Hit | None = None
    step_url: str = ""  # the current hit on the timeline (page, anchor, find state)
    prev_url: str = ""
    next_url: str = ""
    all_places: list[Place] = field(default_factory=list, repr=False)

    @property
    def action(self) -> str:
        return reverse("session_find", args=[self.session_id])

    @property
    def close_url(self) -> str:
        """The timeline page on screen (that of the current hit), without the find box."""
        if not self.step_url:
            return reverse("session_detail", args=[self.session_id])
        base, _, query = self.step_url.partition("#")[0].partition("?")
        kept = [(k, v) for k, v in parse_qsl(query) if k not in (FIND_PARAM, HIT_PARAM)]
        return f"{base}?{urlencode(kept)}" if kept else base


def find_state(session: Session, text: str | None, number: int) -> FindState:
    """The find box for *text* at hit *number* (out of range: the nearest hit)."""
    query = parse_query(text)
    if query is None:
        return FindState(session.pk)
    if not query.full:
        message = f"Type {MIN_QUERY_CHARS} characters or more to find text in this session."
        return FindState(session.pk, query.text, message)
    places = session_places(query, [session.pk])[session.pk]
    if not places:
        return FindState(session.pk, query.text, f"No hits for “{query.text}”.")
    number = min(max(number, 1), len(places))
    current = hits(query, [places[number - 1]], [number], exact=True)
    hit = current[0] if current else None
    count = len(places)
    return FindState(
        session.pk,
        query.text,
        count=count,
        number=number,
        hit=hit,
        step_url=hit_timeline_url(session, places[number - 1], query, number),
        prev_url=find_url(session.pk, query, (number - 2) % count + 1),
        next_url=find_url(session.pk, query, number % count + 1),
        all_places=places,
    )


def hit_timeline_url(session: Session, place: Place, query: SearchQuery, number: int) -> str:
    """The timeline page and anchor of *place*, with the find box's state in the query."""
    url = step_url(session, place.seq)
    path, _, anchor = url.partition("#")
    base, _, existing = path.partition("?")
    params = [*parse_qsl(existing), (FIND_PARAM, query.text), (HIT_PARAM, str(number))]
    return f"{base}?{urlencode(params)}" + (f"#{anchor}" if anchor else "")


def same_page(url: str, at: str) -> bool:
    """Whether *url* (a timeline URL) shows the same page as the one whose query is *at*,
    so that going there only needs a scroll (page 1 may be named or not)."""
    _, _, rest = url.partition("?")
    return _page_query(rest.partition("#")[0]) == _page_query(at)


def _page_query(query: str) -> list[tuple[str, str]]:
    pairs = [
        (key, value)
        for key, value in parse_qsl(query, keep_blank_values=True)
        if key not in (FIND_PARAM, HIT_PARAM) and not (key == "page" and value in ("", "1"))
    ]
    return sorted(pairs)


def anchor_of(url: str) -> str:
    return url.partition("#")[2]
