"""What the OTLP receiver does with a decoded request: each conversation's new spans and
log records are appended to the file the site keeps of it (`<data>/otlp/<session>.jsonl`,
the recording that `manage.py ingest --rebuild` maps again), and the conversation is
ingested from that file as any recording is (blobviewer.ingest.importers.otlp), for the
token's user: promotion, redaction, search and facts as for every session.

A line's conversation is the one it names, else its trace's: named by another line of
the request, or by an earlier request (TraceConversation), else the trace id itself,
until a line of the trace names its conversation: that conversation then takes in the
trace's session (its kept lines are added to the conversation's, the session goes, and
the outputs it promoted keep their blobs in the conversation). Spans of
an agent's run arrive in any order (a tool's span ends, and is exported, before the
agent's span that names the conversation), and make one session.

A conversation's items are in time order. A span that arrives after later ones were
recorded (another batch, another process) takes its place among them: the items after
its first one are made again, numbered on from it, and the outputs they had promoted keep
their blobs (docs/otlp.md#order-and-rebuilds).

With blobs in an object store, each conversation's file is kept there too, as ingest keeps
recordings (blobviewer.ingest.kept_recordings: `<prefix>/sessions/<id>/otlp.recording`),
and that copy is the conversation: a host whose own file differs takes the copy before it
adds a request's lines, so requests sent to any host of a team add to one session, and a
rebuild on any host maps all of it. The session's row lock makes one request at a time
read and replace the copy.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from blobviewer.catalog.session_logs import KeptRecordings, kept_recordings
from blobviewer.data_dir import blob_store, data_dir
from blobviewer.ingest.importers import otlp
from blobviewer.ingest.importers.recording import IMPORT_NAMESPACE, Recording
from blobviewer.ingest.options import IngestOptions
from blobviewer.ingest.planning import check_not_pruned
from blobviewer.ingest.rows import promoted_text_blob, with_digests
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Blob, Item, Session, TraceConversation
from blobviewer.otlp.decoding import Decoded, Entry
from blobviewer.team.ownership import NotYours, claim_session


@dataclass(frozen=True)
class Received:
    """One conversation of a request, as recorded."""

    session_id: uuid.UUID
    new_lines: int
    new_items: int
    reordered: bool


@dataclass(frozen=True)
class Conversation:
    """The lines of a request that go to one conversation, and the traces it names (their
    sessions until now, the trace ids' conversations, it takes in)."""

    key: str
    entries: list[Entry]
    names: set[str]  # trace ids whose conversation this request says it is
    trace_only: bool = False  # the key is a trace id: no line of the trace named one yet


def conversation_session(key: str) -> uuid.UUID:
    """The session of a conversation key: the same key always finds the same session."""
    return uuid.uuid5(IMPORT_NAMESPACE, f"{otlp.FORMAT}:{key}")


def kept_path(session_id: uuid.UUID) -> Path:
    return data_dir() / "otlp" / f"{session_id}.jsonl"


def conversations(decoded: Decoded, owner: AbstractBaseUser) -> list[Conversation]:
    """The request's lines by conversation (see the module's docstring); traces named by
    an earlier request are looked up among *owner*'s sessions only."""
    named: dict[str, str] = {}
    for entry in decoded.entries:
        if entry.own_key and entry.trace_id:
            named.setdefault(entry.trace_id, entry.own_key)
    unnamed = {e.trace_id for e in decoded.entries if e.trace_id and e.trace_id not in named}
    earlier = _named_before(unnamed, owner)
    grouped: dict[str, list[Entry]] = defaultdict(list)
    trace_only: set[str] = set()
    for entry in decoded.entries:
        trace = entry.trace_id
        key = entry.own_key or named.get(trace) or earlier.get(trace)
        if not key and trace:
            key = trace
            trace_only.add(trace)
        grouped[key or f"service:{entry.service}"].append(entry)
    names: dict[str, set[str]] = defaultdict(set)
    for trace, key in named.items():
        if key != trace:
            names[key].add(trace)
    return [
        Conversation(key, entries, names[key], trace_only=key in trace_only)
        for key, entries in grouped.items()
    ]


def _named_before(traces: Iterable[str], owner: AbstractBaseUser) -> dict[str, str]:
    """The conversation an earlier request named for each of *traces*, among *owner*'s."""
    found = TraceConversation.objects.filter(trace_id__in=traces, session__owner_id=owner.pk)
    return dict(found.values_list("trace_id", "key"))


def check_owner(request: Iterable[Conversation], owner: AbstractBaseUser) -> None:
    """Raise NotYours, before anything is written, when a conversation's session is
    another user's or nobody's."""
    ids = [conversation_session(c.key) for c in request]
    theirs = Session.objects.filter(id__in=ids).exclude(owner_id=owner.pk).first()
    if theirs is not None:
        raise NotYours(
            f"session {theirs.id} belongs to another user (or to no one): "
            "a token adds only to its user's sessions"
        )


def receive(conversation: Conversation, lines: IO[bytes], *, owner: AbstractBaseUser) -> Received:
    """Keep the conversation's new lines (read from *lines*, the file decode wrote) and
    ingest it; raises NotYours (nothing written), SessionPruned (nothing written),
    IngestError."""
    key = conversation.key
    if conversation.trace_only:  # another request may have named it since
        key = _named_before([key], owner).get(key, key)
    session_id = conversation_session(key)
    path = kept_path(session_id)
    with transaction.atomic():
        check_not_pruned(session_id, str(path))
        claim_session(session_id, owner)  # locks the session's row to the end
        # The claim's placeholder row (no recording yet) is this receiver's.
        Session.objects.filter(id=session_id, source_path="").update(source_format=otlp.FORMAT)
        # The sessions of the traces it names, the owner's only, locked as they are now.
        traces = {conversation_session(trace) for trace in conversation.names} - {session_id}
        taken = list(
            Session.objects.select_for_update()
            .filter(id__in=traces, owner_id=owner.pk)
            .values_list("id", flat=True)
        )
        copies = kept_recordings()
        if copies is not None:
            for kept_id in (session_id, *taken):
                _fetch_newer(copies, kept_id, kept_path(kept_id))
        new = _request_lines(conversation.entries, lines)
        added, header, held = _append_new(path, session_id, key, _taken_lines(taken, new))
        recording = otlp.recording_of(header, held)
        kept = _items_in_place(session_id, recording)
        old_blobs = _promoted_blobs(session_id, *taken) if kept is not None or taken else {}
        if kept is not None:  # a span came late: the items after its first one are made again
            Item.objects.filter(session_id=session_id, seq__gt=kept).delete()
        if taken:  # gone before the ingest, which makes their blobs this session's
            Session.objects.filter(id__in=taken).delete()
            transaction.on_commit(lambda: _remove_kept(taken, copies))
        result = ingest_session(
            recording.header,
            recording.records,
            source_path=str(path),
            store=blob_store(),
            source_format=otlp.FORMAT,
            # A session an older importer version mapped is mapped again, in place.
            options=IngestOptions(owner=owner, claimed_only=True, rebuild=True),
            kept_blobs=old_blobs,  # an output made again keeps its blob
        )
        if old_blobs:
            _mark_replaced(old_blobs, _promoted_blobs(session_id))
        _name_traces(conversation.names, key, session_id)
        if copies is not None and added:
            data = path.read_bytes()
            copies.keep(session_id, otlp.FORMAT, data, name=path.name, layout="file")
    return Received(session_id, added, result.new_items, kept is not None)


def _request_lines(entries: list[Entry], lines: IO[bytes]) -> Iterator[tuple[str, bytes]]:
    for entry in entries:
        lines.seek(entry.offset)
        yield entry.line_id, lines.read(entry.size)


def _taken_lines(
    taken: list[uuid.UUID], new: Iterator[tuple[str, bytes]]
) -> Iterator[tuple[str, bytes]]:
    """The kept lines of the sessions taken in, then the request's."""
    for session_id in taken:
        path = kept_path(session_id)
        if path.exists():
            for line in otlp.read_kept(path)[1]:
                yield otlp.line_id(line), orjson.dumps(line) + b"\n"
    yield from new


def _name_traces(traces: set[str], key: str, session_id: uuid.UUID) -> None:
    """Remember the conversation of each trace the request named (the first naming stays)."""
    TraceConversation.objects.bulk_create(
        [
            TraceConversation(trace_id=trace, key=key, session_id=session_id)
            for trace in sorted(traces)
        ],
        ignore_conflicts=True,
    )


def _remove_kept(sessions: list[uuid.UUID], copies: KeptRecordings | None) -> None:
    for session_id in sessions:
        kept_path(session_id).unlink(missing_ok=True)
        if copies is not None:
            copies.delete(session_id)


def _same(path: Path, size: int, sha256: str) -> bool:
    """Whether the file at *path* has *size* bytes whose digest is *sha256*."""
    if not path.exists() or path.stat().st_size != size:
        return False
    return hashlib.sha256(path.read_bytes()).hexdigest() == sha256


def _fetch_newer(copies: KeptRecordings, session_id: uuid.UUID, path: Path) -> None:
    """With blobs in an object store, the conversation's kept file is the copy there
    (every host's requests add to it): this host's file is replaced by the copy when they
    differ (another host added to it since, or this host never had it)."""
    copy = copies.info(session_id, otlp.FORMAT)
    if copy is None:
        return
    if _same(path, copy.size, copy.sha256):
        return
    found = copies.read(session_id, otlp.FORMAT)
    if found is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.part")
        partial.write_bytes(found[1])
        partial.replace(path)


def _promoted_blobs(*session_ids: uuid.UUID) -> dict[str, uuid.UUID]:
    """The blob each of the sessions' promoted outputs and messages went to, by item
    digest (the same span makes items of the same digest in any session)."""
    items = Item.objects.filter(session_id__in=session_ids).only(
        "pk", "seq", "type", "tool", "output", "text", "digest"
    )
    return {item.digest: blob for item in items if (blob := promoted_text_blob(item))}


def _mark_replaced(old: dict[str, uuid.UUID], new: dict[str, uuid.UUID]) -> None:
    """A re-derived output promoted again replaces its old blob, as a rebuild's does: links
    to the old blob, share links too, lead to the new one."""
    for digest, old_blob in old.items():
        if (new_blob := new.get(digest)) is not None and new_blob != old_blob:
            Blob.objects.filter(pk=old_blob).update(replaced_by_id=new_blob)


def _append_new(
    path: Path, session_id: uuid.UUID, key: str, lines: Iterable[tuple[str, bytes]]
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    """Append the *lines* (each with its line id) the kept file does not hold yet (a span
    sent again is held); how many, and the file's header and lines as it now is. The file
    is read once: a request costs one reading of its conversation, not two."""
    header: dict[str, Any] = {"type": otlp.HEADER_TYPE, "id": str(session_id), "conversation": key}
    kept: list[dict[str, Any]] = []
    if path.exists() and _without_partial_line(path):
        header, kept = otlp.read_kept(path)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    held = {otlp.line_id(line) for line in kept}
    added = 0
    file = None
    try:
        for line_id, data in lines:
            if line_id in held:
                continue
            if file is None:
                file = path.open("ab")
                if file.tell() == 0:
                    file.write(orjson.dumps(header) + b"\n")
            held.add(line_id)
            file.write(data)
            kept.append(orjson.loads(data))
            added += 1
    finally:
        if file is not None:
            file.close()
    return added, header, kept


def _without_partial_line(path: Path) -> int:
    """Cut off a last line that does not end (a write a crash broke off: the request it
    was part of failed, so its sender sends it again), so that what is appended next
    starts a line of its own; the file's size then."""
    with path.open("r+b") as file:
        size = file.seek(0, os.SEEK_END)
        end = size
        while end:
            start = max(0, end - 64 * 1024)
            file.seek(start)
            block = file.read(end - start)
            if end == size and block.endswith(b"\n"):
                return size
            newline = block.rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        file.truncate(end)
        return end


def _items_in_place(session_id: uuid.UUID, recording: Recording) -> int | None:
    """None when the items recorded come first in the recording, in their order (the new
    ones follow them); else how many of them do (the rest are made again, in time order)."""
    recorded = list(
        Item.objects.filter(session_id=session_id).order_by("seq").values_list("seq", "digest")
    )
    digests = [record["digest"] for record in with_digests(recording.records, otlp.FORMAT)]
    for index, (_, digest) in enumerate(recorded):
        if index >= len(digests) or digests[index] != digest:
            return recorded[index - 1][0] if index else 0
    return None
