"""A session walked in order for an export (blobviewer.catalog.export_atif, export_html):
its turns and messages as the timeline pairs them (blobviewer.timeline.steps), each with
its items read whole from the database, a window of items at a time, so a long session
is exported in bounded memory."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from blobviewer.models import Item, Session
from blobviewer.timeline.skeleton import load_skeleton
from blobviewer.timeline.steps import Step, Unit, build_units
from core.store.blob_id import BLOB_REF

# Items read from the database at a time (and at most this many seqs in one `IN`, well
# under SQLite's limit on a statement's parameters).
WINDOW_ITEMS = 500


@dataclass(frozen=True)
class LoadedUnit:
    """A turn or a message of the timeline, with the items it shows by seq: a message's
    item, a turn's assistant items, and the results of its steps."""

    unit: Unit
    items: Mapping[int, Item]

    def item_of(self, step: Step, *, result: bool) -> Item | None:
        """The step's result item (*result*), or the assistant item that made its call."""
        row = step.result if result else step.assistant
        return self.items.get(row.seq) if row is not None else None


def session_units(session: Session) -> list[Unit]:
    """The session's turns and messages, in order, from its skeleton (no texts read)."""
    return build_units(load_skeleton(session).rows)


def loaded_units(session: Session, units: list[Unit]) -> Iterator[LoadedUnit]:
    """*units* of *session* in order, each with its items read whole."""
    window: list[Unit] = []
    seqs: set[int] = set()
    for unit in units:
        window.append(unit)
        seqs.update(_seqs_of(unit))
        if len(seqs) >= WINDOW_ITEMS:
            yield from _loaded(session, window, seqs)
            window, seqs = [], set()
    if window:
        yield from _loaded(session, window, seqs)


def promoted_blob(item: Item) -> uuid.UUID | None:
    """The blob a promoted output went to (its summary starts with `[blob:<id>]` and the
    tool returned more than the history got); None for an output kept whole, and for an
    inspect result, which starts with a blob reference too but is what the model read."""
    if item.type != Item.Type.TOOL_RESULT or item.received_bytes <= item.output_bytes:
        return None
    match = BLOB_REF.match(item.output)
    return uuid.UUID(match.group(1)) if match and item.tool != "inspect" else None


def _seqs_of(unit: Unit) -> set[int]:
    seqs = {row.seq for row in unit.items}
    seqs.update(step.result.seq for step in unit.steps if step.result is not None)
    return seqs


def _loaded(session: Session, window: list[Unit], seqs: set[int]) -> Iterator[LoadedUnit]:
    ordered = sorted(seqs)
    items: dict[int, Item] = {}
    for start in range(0, len(ordered), WINDOW_ITEMS):
        part = ordered[start : start + WINDOW_ITEMS]
        items.update((item.seq, item) for item in session.items.filter(seq__in=part))
    for unit in window:
        yield LoadedUnit(unit, {seq: items[seq] for seq in _seqs_of(unit) if seq in items})
