"""What the OTLP receiver does with a decoded request: each conversation's new spans and
log records are appended to the file the site keeps of it (`<data>/otlp/<session>.jsonl`,
the recording that `manage.py ingest --rebuild` maps again), and the conversation is
ingested from that file as any recording is (blobviewer.ingest.importers.otlp), for the
token's user: promotion, redaction, search and facts as for every session.

A conversation's items are in time order. Spans that arrive after later ones were
recorded (another batch, another process) re-derive the session's items in that order:
its items are numbered again, and the outputs they promoted are promoted again, each old
blob replaced by its new one (docs/otlp.md#order-and-rebuilds).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from blobviewer.data_dir import blob_store, data_dir
from blobviewer.ingest.importers import otlp
from blobviewer.ingest.importers.recording import IMPORT_NAMESPACE, Recording
from blobviewer.ingest.options import IngestOptions
from blobviewer.ingest.rows import promoted_text_blob, with_digests
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Blob, Item, Session
from blobviewer.team.ownership import NotYours, claim_session


@dataclass(frozen=True)
class Received:
    """One conversation of a request, as recorded."""

    session_id: uuid.UUID
    new_lines: int
    new_items: int
    reordered: bool


def conversation_session(key: str) -> uuid.UUID:
    """The session of a conversation key: the same key always finds the same session."""
    return uuid.uuid5(IMPORT_NAMESPACE, f"{otlp.FORMAT}:{key}")


def kept_path(session_id: uuid.UUID) -> Path:
    return data_dir() / "otlp" / f"{session_id}.jsonl"


def check_owner(keys: Iterable[str], owner: AbstractBaseUser) -> None:
    """Raise NotYours, before anything is written, when a conversation's session is
    another user's or nobody's."""
    ids = [conversation_session(key) for key in keys]
    theirs = Session.objects.filter(id__in=ids).exclude(owner_id=owner.pk).first()
    if theirs is not None:
        raise NotYours(
            f"session {theirs.id} belongs to another user (or to no one): "
            "a token adds only to its user's sessions"
        )


def receive(key: str, lines: list[dict[str, Any]], *, owner: AbstractBaseUser) -> Received:
    """Keep the conversation's new lines and ingest it; raises NotYours (nothing written),
    IngestError."""
    session_id = conversation_session(key)
    with transaction.atomic():
        claim_session(session_id, owner)  # locks the session's row to the end
        # The claim's placeholder row (no recording yet) is this receiver's.
        Session.objects.filter(id=session_id, source_path="").update(source_format=otlp.FORMAT)
        path = kept_path(session_id)
        added = _append_new(path, session_id, key, lines)
        recording = otlp.load(path)
        reordered = not _continues(session_id, recording)
        old_blobs = _promoted_blobs(session_id) if reordered else {}
        if reordered:
            Item.objects.filter(session_id=session_id).delete()
        result = ingest_session(
            recording.header,
            recording.records,
            source_path=str(path),
            store=blob_store(),
            source_format=otlp.FORMAT,
            # A session an older importer version mapped is mapped again, in place.
            options=IngestOptions(owner=owner, claimed_only=True, rebuild=True),
        )
        if old_blobs:
            _mark_replaced(old_blobs, _promoted_blobs(session_id))
    return Received(session_id, added, result.new_items, reordered)


def _promoted_blobs(session_id: uuid.UUID) -> dict[str, uuid.UUID]:
    """The blob each of the session's promoted outputs and messages went to, by item
    digest."""
    items = Item.objects.filter(session_id=session_id).only(
        "pk", "seq", "type", "tool", "output", "text", "digest"
    )
    return {item.digest: blob for item in items if (blob := promoted_text_blob(item))}


def _mark_replaced(old: dict[str, uuid.UUID], new: dict[str, uuid.UUID]) -> None:
    """A re-derived output promoted again replaces its old blob, as a rebuild's does: links
    to the old blob, share links too, lead to the new one."""
    for digest, old_blob in old.items():
        if (new_blob := new.get(digest)) is not None and new_blob != old_blob:
            Blob.objects.filter(pk=old_blob).update(replaced_by_id=new_blob)


def _append_new(path: Path, session_id: uuid.UUID, key: str, lines: list[dict[str, Any]]) -> int:
    """Append the lines the kept file does not hold yet (a span sent again is held);
    how many."""
    held: set[str] = set()
    if path.exists():
        held = {otlp.line_id(line) for line in otlp.read_kept(path)[1]}
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    new = []
    for line in lines:
        if (line_id := otlp.line_id(line)) not in held:
            held.add(line_id)
            new.append(orjson.dumps(line) + b"\n")
    if not new:
        return 0
    with path.open("ab") as file:
        if file.tell() == 0:
            header = {"type": otlp.HEADER_TYPE, "id": str(session_id), "conversation": key}
            file.write(orjson.dumps(header) + b"\n")
        file.writelines(new)
    return len(new)


def _continues(session_id: uuid.UUID, recording: Recording) -> bool:
    """Whether the items recorded come first in the recording, in their order (so the
    new ones can follow them); else the session is re-derived in time order."""
    recorded = list(
        Item.objects.filter(session_id=session_id).order_by("seq").values_list("digest", flat=True)
    )
    digests = [record["digest"] for record in with_digests(recording.records, otlp.FORMAT)]
    return digests[: len(recorded)] == recorded
