"""The facts at the top of a session, derived from its items after every ingest.

- `started_at` / `ended_at`: the earliest and latest time the recording holds (its items'
  times, and its header's own time where the format has one); None when it holds none.
  Never a file's modification time.
- `duration`: `ended_at - started_at`, None unless both are known.
- `step_count`: tool results paired with a call by call id (a call in any assistant item
  of the session with the result's `call_id`).
- `error_count`: tool results marked `is_error`.
- `status`: how the run ended, as the recording says (the importer puts it in the header);
  "" when it does not say.
- `Item.duration` of a tool result: from the time of the assistant item that made the call
  to the result's time, when both are known and the result is not earlier; else None.

The session's facts are recomputed from its rows, so they stay right when a log grows or
a rebuild re-derives items. Durations are set on items before they are inserted
(fill_step_durations), so that afterwards only the rare result whose call came later
needs an update: updating many rows one by one would make a first ingest of a long
session slow.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Count, Max, Min, Q

from blobviewer.models import Item, Session

_BATCH = 500


def update_session_facts(
    session: Session,
    *,
    recorded_start: datetime | None = None,
    recorded_end: datetime | None = None,
    status: str = "",
) -> None:
    """Recompute *session*'s facts (and its tool results' durations) and save them.

    *recorded_start*/*recorded_end*: times the recording's header holds besides its items'.
    """
    step_count = _update_step_durations(session)
    facts = Item.objects.filter(session=session).aggregate(
        first=Min("at"),
        last=Max("at"),
        errors=Count("pk", filter=Q(type=Item.Type.TOOL_RESULT, is_error=True)),
    )
    starts = [t for t in (facts["first"], recorded_start) if t is not None]
    ends = [t for t in (facts["last"], recorded_end) if t is not None]
    session.started_at = min(starts) if starts else None
    session.ended_at = max(ends) if ends else None
    session.duration = (
        session.ended_at - session.started_at
        if session.started_at is not None and session.ended_at is not None
        else None
    )
    session.step_count = step_count
    session.error_count = facts["errors"]
    session.status = status[:100]
    session.save(
        update_fields=[
            "started_at",
            "ended_at",
            "duration",
            "step_count",
            "error_count",
            "status",
            "updated_at",
        ]
    )


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


def fill_step_durations(session: Session, items: list[Item]) -> None:
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
