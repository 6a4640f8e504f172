"""Writing what an ingest planned, in one transaction: the session row (new, or updated
under its lock, with its owner and tombstone checked again there), the items, the blob
rows and links, and the session's facts and totals."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from blobviewer.bulk_insert import insert_objects, insert_rows
from blobviewer.catalog.blobs import BlobFacts
from blobviewer.catalog.provenance import link_made_by, made_blob, made_by_titles
from blobviewer.ingest.errors import owned_by_another
from blobviewer.ingest.importers.recording import finite_number
from blobviewer.ingest.options import IngestOptions
from blobviewer.ingest.planning import IngestPlan, check_not_pruned
from blobviewer.ingest.rows import (
    USAGE_FIELDS,
    PendingItem,
    promoted_blob_id,
    promoted_text_blob,
    session_created_at,
    storable_json,
)
from blobviewer.models import OUTCOMES, Blob, BlobRef, Item, PrunedSession, Session
from blobviewer.search.folding import storable
from blobviewer.timeline.facts import (
    FACT_FIELDS,
    fill_step_durations,
    set_new_session_facts,
    update_session_facts,
)
from blobviewer.timeline.tasks import prompt_task, recorded_task
from core.redaction import redact_title

_BATCH = 500
TOTAL_FIELDS = (
    "item_count",
    "tool_result_count",
    "output_bytes_in_history",
    "output_bytes_received",
    "blob_count",
)


@dataclass(frozen=True)
class SessionWrite:
    """What one ingest writes of a session: the session row's *fields* (see
    session_fields), the *plan*, the rows of its new and re-derived items, each item's
    blob references, the facts of those blobs, and the header's start and status."""

    session_id: uuid.UUID
    source_path: str
    fields: dict[str, Any]
    plan: IngestPlan
    new_items: list[PendingItem]
    rederived: list[PendingItem]
    item_refs: list[tuple[PendingItem, list[uuid.UUID]]]
    blobs: BlobFacts
    recorded_start: datetime | None
    status: str
    options: IngestOptions
    recorded_cost: float | None = None  # the header's cost of the whole run

    @property
    def items(self) -> list[PendingItem]:
        return [*self.new_items, *self.rederived]


def session_fields(
    header: Mapping[str, Any],
    session_id: uuid.UUID,
    plan: IngestPlan,
    *,
    source_path: str,
    source_format: str,
    version: int,
) -> dict[str, Any]:
    """The session row's columns that the header and the recording give."""
    return {
        "title": storable(redact_title(str(header.get("title") or "")))[:500],
        "model": storable(str(header.get("model") or ""))[:200],
        "meta": storable_json(header.get("meta") or {}),
        "created_at": session_created_at(header, session_id, kept=plan.kept_created_at),
        "source_path": source_path[:1000],
        "source_format": source_format,
        "importer_version": version,
        **evaluation_fields(header),
        **_task_field(header, plan),
    }


def _task_field(header: Mapping[str, Any], plan: IngestPlan) -> dict[str, str]:
    """The session's task (blobviewer.timeline.tasks): the one the recording names, else
    its first user message's digest, found where this ingest has every item (a first
    ingest, a rebuild); {} for an append that names none (the task found before stays)."""
    task = recorded_task(header)
    if not task and (plan.first or plan.rebuild):
        task = prompt_task([*plan.rederived, *plan.new])
    return {"task": storable(task)[:300]} if task or plan.first or plan.rebuild else {}


def evaluation_fields(header: Mapping[str, Any]) -> dict[str, Any]:
    """An evaluation run's job, outcome and reward as the header gives them
    (docs/evaluations.md): text cut to its column, a reward only when it is a number."""
    reward = finite_number(header.get("reward"))
    outcome = header.get("outcome")
    return {
        "job": storable(str(header.get("job") or ""))[:200],
        "outcome": outcome if outcome in OUTCOMES else "",
        "reward": reward,
    }


def write_session(write: SessionWrite) -> tuple[Session, int]:
    """Write *write* in one transaction; the session row, and how many blob links were
    inserted. Raises what the database raises (another ingest's rows: IntegrityError)."""
    plan = write.plan
    with transaction.atomic():
        session = _session_row(write)
        _rederive(plan, write.rederived)
        # A first ingest knows every item of the session: its facts and totals come from
        # them, not from reading the rows back (checked under the lock: the plan was made
        # before it). A session this transaction inserted has no items but these.
        first = plan.new_session or (
            plan.first and not Item.objects.filter(session_id=write.session_id).exists()
        )
        if first and not plan.new_session:
            _set_new_facts(session, write)
        elif not first:
            fill_step_durations(session, write.items)
        _insert_items(write.new_items, write.rederived)
        refs = _link_blobs(session, write)
        _mark_replaced(plan, write.rederived)
        if not first:
            _size_found_late(session, write.blobs)
            _update_totals(session)
            update_session_facts(
                session,
                recorded_start=write.recorded_start,
                status=write.status,
                recorded_cost=write.recorded_cost,
            )
        elif not plan.new_session:  # a new session's were inserted with its row
            _set_totals(session, write.new_items, {blob_id for _, blob_id in refs})
            session.save(update_fields=[*TOTAL_FIELDS, *FACT_FIELDS, "updated_at"])
    return session, len(refs)


def _session_row(write: SessionWrite) -> Session:
    """The session's row, inserted or updated (and so locked), its owner and tombstone
    checked again under the lock."""
    owner = write.options.owner
    if write.plan.new_session:
        session = _insert_session(write)
    else:
        session, _ = Session.objects.update_or_create(id=write.session_id, defaults=write.fields)
        _find_late_task(session, write)
    if owner is not None and session.owner_id != owner.pk:
        # Checked again under the row lock update_or_create took: another ingest may have
        # given the session an owner since planning looked.
        if session.owner_id is not None or write.options.claimed_only:
            raise owned_by_another(write.session_id, write.source_path, session.owner_id)
        session.owner = owner
        session.save(update_fields=["owner"])
    # Again under the session row's lock: a prune that committed meanwhile wins.
    if write.options.force:
        PrunedSession.objects.filter(id=write.session_id).delete()
    else:
        check_not_pruned(write.session_id, write.source_path)
    return session


def _find_late_task(session: Session, write: SessionWrite) -> None:
    """A session without a task whose first ingests held no plain user message is known
    by the first one this append brings (the items before it had none)."""
    if session.task or "task" in write.fields:
        return
    task = storable(prompt_task(write.plan.new))[:300]
    if task:
        session.task = task
        session.save(update_fields=["task"])


def _insert_session(write: SessionWrite) -> Session:
    """A new session's row, with the facts and totals of its items, which are all known.

    Inserted without save()'s signals: search indexes the title after the transaction,
    with the items. Another ingest that inserts this session meanwhile makes this try
    fail, as its items would (their seqs are taken), and the next one plans again (see
    ingest_session)."""
    session = Session(id=write.session_id, owner=write.options.owner, **write.fields)
    _set_new_facts(session, write)
    referenced = {blob_id for _, blob_ids in write.item_refs for blob_id in blob_ids}
    _set_totals(session, write.new_items, referenced)
    session.ingested_at = session.updated_at = timezone.now()
    insert_objects(Session, [session])
    session._state.adding, session._state.db = False, DEFAULT_DB_ALIAS
    return session


def _set_new_facts(session: Session, write: SessionWrite) -> None:
    set_new_session_facts(
        session,
        write.new_items,
        recorded_start=write.recorded_start,
        status=write.status,
        recorded_cost=write.recorded_cost,
    )


def _link_blobs(session: Session, write: SessionWrite) -> list[tuple[int | None, uuid.UUID]]:
    """Save the blob rows (each with the step that made it), the grown token counts and
    the items' blob links; the links, as (item pk, blob id)."""
    written_items = write.items
    blobs = write.blobs
    # Which step made each blob: a new blob's row is inserted with its maker; older ones
    # are linked after (a rebuild's re-created items, again).
    new_blobs = {row.id for row in blobs.new}
    # made_by_titles and link_made_by read only the Item fields an PendingItem has too.
    makers = made_by_titles(session, written_items, new_blobs)  # type: ignore[arg-type]
    for blob_id, (maker, title) in makers.items():
        blobs.rows[blob_id].made_by_id = maker.pk
        blobs.rows[blob_id].made_by_title = title
    blobs.save()
    _refresh_tokens(write.plan.grown_tokens)
    if write.plan.failed_since:
        Item.objects.filter(pk__in=write.plan.failed_since).update(is_error=True)
    refs = [(item.id, blob_id) for item, blob_ids in write.item_refs for blob_id in blob_ids]
    insert_rows(
        BlobRef,
        ("item_id", "session_id", "blob_id"),
        [(item_id, write.session_id, blob_id) for item_id, blob_id in refs],
    )
    made = {made_blob(item.type, item.tool, item.output) for item in written_items}
    if not made - {None} <= new_blobs:  # blobs that already had rows: linked now
        link_made_by(session, written_items)  # type: ignore[arg-type]  # as made_by_titles
    return refs


def _rederive(plan: IngestPlan, rederived: list[PendingItem]) -> None:
    """A rebuild's deletes: items no longer derived go, and so do the rows of re-derived
    items (with their blob links, which the caller makes anew); the caller inserts the
    re-derived items again under their old pk and seq: one delete and one insert instead
    of an update per row (Django's bulk_update writes a CASE per field and row, far too
    slow for a session of thousands of items)."""
    gone = [*plan.removed, *(item.id for item in rederived)]
    for start in range(0, len(gone), _BATCH):
        Item.objects.filter(pk__in=gone[start : start + _BATCH]).delete()


def _mark_replaced(plan: IngestPlan, rederived: list[PendingItem]) -> None:
    """A rebuild that re-derived an output (or a promoted message) into a new blob: the old
    blob is replaced by it, so that links to the old one, share links included, lead to
    the new one."""
    for item in rederived:
        old, new = plan.old_blobs.get(item.seq), promoted_text_blob(item)
        if old is not None and new is not None and old != new:
            Blob.objects.filter(pk=old).update(replaced_by_id=new)


def _insert_items(new_items: list[PendingItem], rederived: list[PendingItem]) -> None:
    """Insert the items (a statement per few hundred rows); new ones get their pk."""
    ids = insert_objects(Item, new_items, exclude=("id",), returning="id")
    for item, pk in zip(new_items, ids, strict=True):
        item.id = pk
    insert_objects(Item, rederived)


def _refresh_tokens(grown: Mapping[int, Mapping[str, int | float | None]]) -> None:
    Item.objects.bulk_update(
        [Item(pk=pk, **tokens) for pk, tokens in grown.items()],
        list(USAGE_FIELDS),
        batch_size=_BATCH,
    )


def _size_found_late(session: Session, facts: BlobFacts) -> None:
    """Revisit the session's items whose blob was missing when they were ingested and is
    in the store now: their received bytes become the blob's size."""
    blobs = facts.rows
    found = [blob_id for blob_id, blob in blobs.items() if not blob.missing]
    if not found:
        return
    candidates = (
        Item.objects.filter(session=session, type=Item.Type.TOOL_RESULT, blob_refs__blob__in=found)
        .exclude(tool="inspect")
        .filter(received_bytes=F("output_bytes"))
        .only("pk", "type", "tool", "output", "output_bytes", "received_bytes")
    )
    changed = []
    for item in candidates:
        blob_id = promoted_blob_id(item)
        if blob_id is None:
            continue
        blob = blobs.get(blob_id) or Blob.objects.filter(id=blob_id, missing=False).first()
        if blob is None or blob.missing or blob.size is None:
            continue
        if item.received_bytes != blob.size:
            item.received_bytes = blob.size
            changed.append(item)
    Item.objects.bulk_update(changed, ["received_bytes"], batch_size=_BATCH)


def _update_totals(session: Session) -> None:
    totals = Item.objects.filter(session=session).aggregate(
        items=Count("pk"),
        tool_results=Count("pk", filter=Q(type=Item.Type.TOOL_RESULT)),
        in_history=Sum("output_bytes"),
        received=Sum("received_bytes"),
    )
    session.item_count = totals["items"]
    session.tool_result_count = totals["tool_results"]
    session.output_bytes_in_history = totals["in_history"] or 0
    session.output_bytes_received = totals["received"] or 0
    session.blob_count = (
        BlobRef.objects.filter(session=session).values("blob_id").distinct().count()
    )
    session.save(update_fields=[*TOTAL_FIELDS, "updated_at"])


def _set_totals(session: Session, items: list[PendingItem], blob_ids: set[uuid.UUID]) -> None:
    """The session's totals for a session whose items are all *items*, referencing
    *blob_ids* (what _update_totals reads back otherwise); not saved."""
    session.item_count = len(items)
    session.tool_result_count = sum(item.type == Item.Type.TOOL_RESULT for item in items)
    session.output_bytes_in_history = sum(item.output_bytes for item in items)
    session.output_bytes_received = sum(item.received_bytes for item in items)
    session.blob_count = len(blob_ids)
