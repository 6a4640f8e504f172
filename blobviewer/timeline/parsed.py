"""A session's skeleton parsed into units and steps, with what every page of it shares:
the layouts of the filters asked for, the outline's marks, the chart, which inspect call
read which step's blob. Kept for the last few sessions viewed, while each is unchanged."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.db.models import Count, Max
from django.http import QueryDict
from django.utils.html import escape

from blobviewer.models import Session
from blobviewer.timeline.paging import (
    CHART_MARKS_BYTES,
    LABEL_CHARS,
    OUTLINE_BYTES,
    OUTLINE_MARKS,
    Layout,
    paginate,
)
from blobviewer.timeline.skeleton import Skeleton, load_skeleton
from blobviewer.timeline.steps import (
    Mark,
    Step,
    StepFilter,
    Unit,
    all_steps,
    build_units,
    outline_marks,
)
from blobviewer.timeline.token_chart import TokenChart, token_chart
from blobviewer.timeline.tool_args import html_size


@dataclass(frozen=True)
class Inspections:
    producer: dict[uuid.UUID, Step]  # blob -> the step whose output it holds
    readers: dict[uuid.UUID, list[Step]]  # blob -> the inspect calls that read it


def _inspections_of(steps: list[Step], blobs_of: Mapping[int, list[uuid.UUID]]) -> Inspections:
    producer: dict[uuid.UUID, Step] = {}
    readers: dict[uuid.UUID, list[Step]] = {}
    for step in steps:
        if step.call is not None and step.call.inspect_blob is not None:
            readers.setdefault(step.call.inspect_blob, []).append(step)
        elif step.result is not None and step.result.has_blobs and step.tool != "inspect":
            for blob_id in blobs_of.get(step.result.pk, ()):
                producer.setdefault(blob_id, step)
    return Inspections(producer, readers)


class ParsedSession:
    """A session's skeleton grouped into units and steps, and the layouts of the filters
    asked for so far. Shared by the requests that view the same state of a session (see
    parsed_session), and read-only once made, but for the layouts it adds under its lock."""

    def __init__(self, skeleton: Skeleton, url: str) -> None:
        self.skeleton = skeleton
        self.url = url
        self.units = build_units(skeleton.rows)
        self.steps = all_steps(self.units)
        self.by_result = {s.result.seq: s for s in self.steps if s.result is not None}
        self.inspections = _inspections_of(self.steps, skeleton.blobs_of)
        self._shown: dict[StepFilter, tuple[list[Unit], Layout, list[Step]]] = {}
        self._marks: dict[StepFilter, list[tuple[Mark, str]]] = {}
        self._lock = threading.Lock()

    @cached_property
    def counts(self) -> dict[str, int]:
        steps = self.steps
        return {
            "steps": len(steps),
            "errors": sum(1 for s in steps if s.is_error),
            "with_blobs": sum(1 for s in steps if s.has_blobs),
            "promoted": sum(1 for s in steps if s.promoted),
            "unanswered": sum(1 for s in steps if s.result is None),
            "turns": sum(1 for u in self.units if u.kind == "turn" and u.items),
        }

    @cached_property
    def tool_counts(self) -> list[tuple[str, int]]:
        counts: dict[str, int] = {}
        for step in self.steps:
            if step.tool:
                counts[step.tool] = counts.get(step.tool, 0) + 1
        return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))

    @cached_property
    def chart(self) -> TokenChart | None:
        link = self._longest_link(StepFilter())  # marks link to the unfiltered pages
        return token_chart(self.units, label=_label, marks_bytes=CHART_MARKS_BYTES, link=link)

    def marks(self, step_filter: StepFilter, layout: Layout) -> list[tuple[Mark, str]]:
        """The outline's marks under the filter with their labels: one per step, or fewer
        (each for a run of steps) so that they fit OUTLINE_BYTES with the longest links."""
        with self._lock:
            found = self._marks.get(step_filter)
        if found is not None:
            return found
        steps = self.shown(step_filter)[2]
        link = self._longest_link(step_filter)
        limit = OUTLINE_MARKS
        while True:
            labelled = [(mark, _mark_label(mark)) for mark in outline_marks(steps, limit=limit)]
            # `<a class="m s1 e here" href="…" title="…"></a>`: 45 bytes and the two values.
            size = sum(45 + link + html_size(label) for _, label in labelled)
            if size <= OUTLINE_BYTES or limit <= 10:
                break
            limit = max(10, limit * OUTLINE_BYTES // size - 1)  # fewer marks, a run each
        with self._lock:
            self._marks[step_filter] = labelled
        return labelled

    def shown(self, step_filter: StepFilter) -> tuple[list[Unit], Layout, list[Step]]:
        """The units, pages and steps the filter shows."""
        with self._lock:
            found = self._shown.get(step_filter)
        if found is None:
            units = step_filter.apply(self.units)
            found = (units, paginate(units), all_steps(units))
            with self._lock:
                self._shown[step_filter] = found
        return found

    def _longest_link(self, step_filter: StepFilter) -> int:
        """The bytes of the longest link to a step under the filter: a page number of six
        digits, the outline switch on, the longest anchor, and a margin."""
        query = filter_query(step_filter)
        query.update({"outline": "biggest", "page": "999999"})
        return len(escape(f"{self.url}?{query.urlencode()}#call-9999999999-9999")) + 30


# The last few sessions' parsed skeletons, in this process: paging through a long session
# then reads its items' small columns once, not on every page. An entry is used only while
# the session is as it was: ingest, a rebuild and late blobs all save the session (which
# moves `updated_at`, and its counts and totals change with them), and the count and last
# id of its items (one query on an index) tell added or removed items apart.
_PARSED: OrderedDict[tuple[Any, ...], ParsedSession] = OrderedDict()
_PARSED_KEPT = 4
_PARSED_LOCK = threading.Lock()


def parsed_session(session: Session, url: str) -> ParsedSession:
    items = session.items.aggregate(count=Count("pk"), last=Max("pk"))
    key = (
        session.pk,
        session.updated_at,
        session.item_count,
        session.blob_count,
        session.output_bytes_received,
        session.importer_version,
        items["count"],
        items["last"],
    )
    with _PARSED_LOCK:
        found = _PARSED.get(key)
        if found is not None:
            _PARSED.move_to_end(key)
            return found
    parsed = ParsedSession(load_skeleton(session), url)
    with _PARSED_LOCK:
        _PARSED[key] = parsed
        while len(_PARSED) > _PARSED_KEPT:
            _PARSED.popitem(last=False)
    return parsed


def filter_query(step_filter: StepFilter) -> QueryDict:
    query = QueryDict(mutable=True)
    if step_filter.errors:
        query["errors"] = "1"
    if step_filter.blobs:
        query["blobs"] = "1"
    if step_filter.tool:
        query["tool"] = step_filter.tool
    return query


def _label(step: Step) -> str:
    return f"#{step.seq} {step.tool[:LABEL_CHARS] or 'tool result'}"


def _mark_label(mark: Mark) -> str:
    """The words behind an outline mark (its aria-label and title)."""
    step = mark.step
    if mark.count == 1:
        words = f"{_label(step)}, {step.received_bytes:,} bytes"
        return words + (", error" if step.is_error else "") + ("" if step.result else ", no result")
    words = (
        f"#{mark.first.seq}–#{mark.last.seq}: {mark.count} steps, "
        f"biggest {step.received_bytes:,} bytes"
    )
    return words + (f", {mark.errors} error{'s' if mark.errors > 1 else ''}" if mark.errors else "")
