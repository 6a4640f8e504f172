"""The facts at the top of a session, derived from its items after every ingest.

- `started_at` / `ended_at`: the earliest and latest time the recording holds (its items'
  times, and its header's own time where the format has one); None when it holds none.
  Never a file's modification time.
- `duration`: `ended_at - started_at`, None unless both are known.
- `step_count`: tool results paired with a call by call id (a call in any assistant item
  of the session with the result's `call_id`).
- `error_count`: tool results marked `is_error`.
- `redaction_count`: the secrets redacted out of its items (core.redaction).
- `status`: how the run ended, as the recording says (the importer puts it in the header);
  "" when it does not say.
- `cost_usd` / `unpriced_turns`: what the run cost (the header's own figure, else the sum
  of its turns' costs, priced at the session's start) and how many turns with tokens had
  no cost, which leaves `cost_usd` None (blobviewer.timeline.cost, docs/cost.md).
- `Item.duration` of a tool result: from the time of the assistant item that made the call
  to the result's time, when both are known and the result is not earlier; else None.

The session's facts are recomputed from its rows, so they stay right when a log grows or
a rebuild re-derives items. Durations are set on items before they are inserted
(fill_step_durations), so that afterwards only the rare result whose call came later
needs an update: updating many rows one by one would make a first ingest of a long
session slow.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db.models import Count, Max, Min, Q, Sum

from blobviewer.models import Item, Session
from blobviewer.timeline.cost import USAGE_COLUMNS, TurnUsage, session_cost

_BATCH = 500


def update_session_facts(
    session: Session,
    *,
    recorded_start: datetime | None = None,
    recorded_end: datetime | None = None,
    status: str = "",
    recorded_cost: float | None = None,
) -> None:
    """Recompute *session*'s facts (and its tool results' durations) and save them.

    *recorded_start*/*recorded_end*: times the recording's header holds besides its items';
    *recorded_cost*: the cost its header gives for the whole run.
    """
    step_count = _update_step_durations(session)
    facts = Item.objects.filter(session=session).aggregate(
        first=Min("at"),
        last=Max("at"),
        errors=Count("pk", filter=Q(type=Item.Type.TOOL_RESULT, is_error=True)),
        redactions=Sum("redactions"),
    )
    _set_facts(
        session,
        times=[facts["first"], facts["last"], recorded_start, recorded_end],
        step_count=step_count,
        error_count=facts["errors"],
        redaction_count=facts["redactions"] or 0,
        status=status,
    )
    usages = Item.objects.filter(session=session).filter(_HAS_USAGE).values_list(*USAGE_COLUMNS)
    _set_cost(session, [TurnUsage(*row) for row in usages], recorded_cost)
    session.save(update_fields=[*FACT_FIELDS, "updated_at"])


# Items with none of these cost nothing.
_HAS_USAGE = (
    Q(input_tokens__isnull=False) | Q(output_tokens__isnull=False) | Q(cost_usd__isnull=False)
)


def _set_cost(session: Session, usages: list[TurnUsage], recorded: float | None) -> None:
    cost = session_cost(session.model, usages, at=session.started_at, recorded=recorded)
    session.cost_usd, session.unpriced_turns = cost.usd, cost.unpriced_turns


# The Session fields update_session_facts sets.
FACT_FIELDS = (
    "started_at",
    "ended_at",
    "duration",
    "step_count",
    "error_count",
    "redaction_count",
    "status",
    "cost_usd",
    "unpriced_turns",
)


def set_new_session_facts(
    session: Session,
    items: Sequence[StepItem],
    *,
    recorded_start: datetime | None = None,
    recorded_end: datetime | None = None,
    status: str = "",
    recorded_cost: float | None = None,
) -> None:
    """What fill_step_durations and update_session_facts do, for a session whose items
    are all in *items* (a first ingest, before they are inserted): the tool results'
    durations and the session's FACT_FIELDS are set from them, without a query; the
    caller saves both."""
    calls = call_times([(i.at, i.tool_calls) for i in _by_seq(items, Item.Type.ASSISTANT)])
    step_count = error_count = 0
    for item in _by_seq(items, Item.Type.TOOL_RESULT):
        paired = bool(item.call_id) and item.call_id in calls
        step_count += paired
        error_count += item.is_error
        item.duration = step_duration(calls[item.call_id], item.at) if paired else None
    times = [item.at for item in items if item.at is not None]
    _set_facts(
        session,
        times=[min(times, default=None), max(times, default=None), recorded_start, recorded_end],
        step_count=step_count,
        error_count=error_count,
        redaction_count=sum(item.redactions for item in items),
        status=status,
    )
    usages = [TurnUsage(*(getattr(item, name) for name in USAGE_COLUMNS)) for item in items]
    _set_cost(session, usages, recorded_cost)


class StepItem(Protocol):
    """What the facts read of an item (an Item, or a row about to be inserted)."""

    seq: int
    type: str
    at: datetime | None
    tool_calls: Any
    call_id: str
    is_error: bool
    redactions: int
    duration: timedelta | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cost_usd: float | None


def _by_seq(items: Sequence[StepItem], kind: str) -> list[StepItem]:
    return sorted((item for item in items if item.type == kind), key=lambda item: item.seq)


def _set_facts(
    session: Session,
    *,
    times: list[datetime | None],
    step_count: int,
    error_count: int,
    redaction_count: int,
    status: str,
) -> None:
    """*times*: the items' first and last time, and the recording's own start and end."""
    first, last, recorded_start, recorded_end = times
    starts = [t for t in (first, recorded_start) if t is not None]
    ends = [t for t in (last, recorded_end) if t is not None]
    session.started_at = min(starts) if starts else None
    session.ended_at = max(ends) if ends else None
    session.duration = (
        session.ended_at - session.started_at
        if session.started_at is not None and session.ended_at is not None
        else None
    )
    session.step_count = step_count
    session.error_count = error_count
    session.redaction_count = redaction_count
    session.status = status[:100]


def call_times(rows: list[tuple[datetime | None, object]]) -> dict[str, datetime | None]:
    """Call id -> time of the assistant item that first made the call, from its items'
    (at, tool_calls) rows."""
    calls: dict[str, datetime | None] = {}
    for at, tool_calls in rows:
        if not isinstance(tool_calls, list):
            continue
        for call in tool_calls:
            call_id = call.get("id") if isinstance(call, dict) else None
            if isinstance(call_id, str) and call_id:
                calls.setdefault(call_id, at)
    return calls


def step_duration(call_at: datetime | None, result_at: datetime | None) -> timedelta | None:
    """From the call's turn to its result; None when either time is unknown or the result
    is recorded before its call (clocks that disagree say nothing true)."""
    if call_at is None or result_at is None or result_at < call_at:
        return None
    return result_at - call_at


def fill_step_durations(session: Session, items: Sequence[StepItem]) -> None:
    """Set the duration of the tool results among *items*, which are about to be added to
    *session*, from the calls in its items already recorded and in *items*."""
    results = [item for item in items if item.type == Item.Type.TOOL_RESULT and item.call_id]
    if not results:
        return
    calls = _recorded_calls(session)
    for at, tool_calls in ((i.at, i.tool_calls) for i in items if i.type == Item.Type.ASSISTANT):
        for call_id, call_at in call_times([(at, tool_calls)]).items():
            calls.setdefault(call_id, call_at)
    for item in results:
        if item.call_id in calls:
            item.duration = step_duration(calls[item.call_id], item.at)


def _recorded_calls(session: Session) -> dict[str, datetime | None]:
    rows = Item.objects.filter(session=session, type=Item.Type.ASSISTANT).values_list(
        "at", "tool_calls"
    )
    return call_times(list(rows))


def _update_step_durations(session: Session) -> int:
    """Correct tool results' durations where they are not what their call says (a call
    recorded after its result); returns how many results are paired with a call."""
    calls = _recorded_calls(session)
    steps = 0
    changed = []
    for pk, call_id, at, duration in Item.objects.filter(
        session=session, type=Item.Type.TOOL_RESULT
    ).values_list("pk", "call_id", "at", "duration"):
        paired = bool(call_id) and call_id in calls
        steps += paired
        new = step_duration(calls[call_id], at) if paired else None
        if new != duration:
            changed.append(Item(pk=pk, duration=new))
    Item.objects.bulk_update(changed, ["duration"], batch_size=_BATCH)
    return steps
