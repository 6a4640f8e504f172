"""A session's items as steps: each tool call paired with its result, grouped by turn.

This module is plain Python over small rows (no text, no outputs), so a page of a
10,000-step session is laid out without reading what the items say:

- `build_units(rows)` groups the items: a *turn* is a run of consecutive assistant items
  (Claude Code writes one API message as several lines) with the steps their calls made,
  in call order, each paired with its result by call id wherever the recording put the
  result; every other item is a *message* that stays where it was recorded. A result
  whose call is not in the recording becomes a turn of its own with that one step.
- `StepFilter` keeps the steps a reader asked for (errors only, steps with blobs, one
  tool); messages are hidden while a filter is on.
- `outline_marks` and `biggest_steps` are the outline's two orders of the steps.

How the units are cut into pages is blobviewer.timeline.paging.
"""

from __future__ import annotations

import math
import uuid
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter

from blobviewer.timeline.cost import USAGE_COLUMNS, TurnUsage

TOOL_RESULT = "tool_result"
ASSISTANT = "assistant"

# Outline marks are shaded by the bytes a tool returned, in these size classes
# (class n: up to SIZE_CLASSES[n] bytes); class 0 holds outputs that stay inline.
SIZE_CLASSES = (800, 10_000, 100_000, 1_000_000)
TOOL_CHARS = 200  # a tool filter longer than this is cut (no tool has such a name)


@dataclass(slots=True)
class CallRow:
    """One tool call of an assistant item: its position, id, tool name, and for `inspect`
    calls the blob id its arguments name."""

    index: int
    id: str
    name: str
    inspect_blob: uuid.UUID | None = None


@dataclass(slots=True)
class ItemRow:
    """What the layout needs to know of an item: never its text or output, only sizes.

    *text_chars* is the length in characters of a message's text (0 for tool results,
    whose size is *output_bytes*). Not frozen, only because frozen dataclasses are slow to
    make, and a long session makes tens of thousands of these per request.
    """

    seq: int
    type: str
    pk: int = 0
    call_id: str = ""
    tool: str = ""
    is_error: bool = False
    received_bytes: int = 0
    output_bytes: int = 0
    text_chars: int = 0
    role: str = ""
    sidechain: bool = False
    has_blobs: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    context_tokens: int | None = None
    calls: tuple[CallRow, ...] = ()
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None  # as the recording gives it

    @property
    def promoted(self) -> bool:
        """A tool result whose output went to a blob: the history got less than it."""
        return self.type == TOOL_RESULT and self.received_bytes > self.output_bytes


@dataclass(slots=True)
class Step:
    """A tool call with its result. Either may be missing from a recording: a call that
    never got a result, or a result whose call was not recorded."""

    call: CallRow | None
    assistant: ItemRow | None
    result: ItemRow | None
    turn: Unit | None = field(default=None, repr=False)

    @property
    def anchor(self) -> str:
        """`step-<seq of the result>`; a call without a result: `call-<seq>-<index>`."""
        if self.result is not None:
            return f"step-{self.result.seq}"
        assert self.assistant is not None and self.call is not None
        return f"call-{self.assistant.seq}-{self.call.index}"

    @property
    def seq(self) -> int:
        if self.result is not None:
            return self.result.seq
        assert self.assistant is not None
        return self.assistant.seq

    @property
    def tool(self) -> str:
        if self.call is not None and self.call.name:
            return self.call.name
        return self.result.tool if self.result is not None else ""

    @property
    def is_error(self) -> bool:
        return self.result is not None and self.result.is_error

    @property
    def has_blobs(self) -> bool:
        return self.result is not None and self.result.has_blobs

    @property
    def received_bytes(self) -> int:
        return self.result.received_bytes if self.result is not None else 0

    @property
    def output_bytes(self) -> int:
        return self.result.output_bytes if self.result is not None else 0

    @property
    def kept_out(self) -> int:
        return max(0, self.received_bytes - self.output_bytes)

    @property
    def promoted(self) -> bool:
        return self.result is not None and self.result.promoted

    @property
    def size_class(self) -> int:
        return size_class(self.received_bytes)


@dataclass(slots=True)
class Unit:
    """A turn (assistant items and the steps of their calls) or a message (one item)."""

    kind: str  # "turn" or "message"
    items: list[ItemRow]
    steps: list[Step] = field(default_factory=list)
    hidden_steps: int = 0  # steps of this turn that the filter does not show

    @property
    def first_seq(self) -> int:
        return self.items[0].seq if self.items else self.steps[0].seq

    @property
    def sidechain(self) -> bool:
        rows = self.items or [s.result for s in self.steps if s.result is not None]
        return bool(rows) and rows[0].sidechain

    def _last(self, name: str) -> int | None:
        # One API message split over several items repeats its usage on each: the last
        # recorded value is the message's own, not a sum.
        values = [getattr(item, name) for item in self.items if getattr(item, name) is not None]
        return values[-1] if values else None

    @property
    def input_tokens(self) -> int | None:
        return self._last("input_tokens")

    @property
    def output_tokens(self) -> int | None:
        return self._last("output_tokens")

    @property
    def context_tokens(self) -> int | None:
        context = self._last("context_tokens")
        return context if context is not None else self.input_tokens

    @property
    def usages(self) -> list[TurnUsage]:
        """The model calls of the turn that recorded tokens or a cost (an API message's
        usage is on one of its items: blobviewer.timeline.cost prices each once)."""
        return [
            TurnUsage(*(getattr(item, name) for name in USAGE_COLUMNS))
            for item in self.items
            if item.input_tokens is not None
            or item.output_tokens is not None
            or item.cost_usd is not None
        ]


def size_class(received_bytes: int) -> int:
    """0 (stays inline) to len(SIZE_CLASSES) (over a megabyte), by bytes received."""
    return bisect_left(SIZE_CLASSES, received_bytes)


def build_units(rows: Iterable[ItemRow]) -> list[Unit]:
    """Group items (in any order; sorted by seq here) into turns and messages, in the
    order of each unit's first item. See the module docstring."""
    units: list[Unit] = []
    open_calls: dict[str, list[Step]] = {}  # call id -> its steps still without a result
    turn: Unit | None = None
    previous: ItemRow | None = None
    for row in sorted(rows, key=attrgetter("seq")):
        if row.type == ASSISTANT:
            continues = (
                turn is not None
                and previous is not None
                and previous.type == ASSISTANT
                and previous.sidechain == row.sidechain
            )
            if not continues:
                turn = Unit("turn", [])
                units.append(turn)
            assert turn is not None
            turn.items.append(row)
            for call in row.calls:
                step = Step(call, row, None, turn)
                turn.steps.append(step)
                if call.id:
                    open_calls.setdefault(call.id, []).append(step)
        elif row.type == TOOL_RESULT:
            waiting = open_calls.get(row.call_id) if row.call_id else None
            if waiting:
                # The nearest earlier call with this id (ids repeat only in odd recordings).
                waiting.pop().result = row
            else:
                orphan = Unit("turn", [])
                orphan.steps.append(Step(None, None, row, orphan))
                units.append(orphan)
        else:
            units.append(Unit("message", [row]))
        previous = row
    return units


def all_steps(units: Iterable[Unit]) -> list[Step]:
    return [step for unit in units for step in unit.steps]


@dataclass(frozen=True, slots=True)
class StepFilter:
    """Which steps to show: only failed ones, only those that reference a blob, only
    calls of one tool. With any of these on, messages are hidden."""

    errors: bool = False
    blobs: bool = False
    tool: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> StepFilter:
        """From a URL's query: `errors=1`, `blobs=1`, `tool=<name>` (absent or empty: off)."""
        truthy = {"1", "on", "true", "yes"}
        return cls(
            errors=str(query.get("errors", "")).lower() in truthy,
            blobs=str(query.get("blobs", "")).lower() in truthy,
            tool=str(query.get("tool", "") or "")[:TOOL_CHARS],
        )

    @property
    def active(self) -> bool:
        return self.errors or self.blobs or bool(self.tool)

    def matches(self, step: Step) -> bool:
        return (
            (not self.errors or step.is_error)
            and (not self.blobs or step.has_blobs)
            and (not self.tool or step.tool == self.tool)
        )

    def apply(self, units: list[Unit]) -> list[Unit]:
        """The units as the filter shows them: turns cut down to their matching steps."""
        if not self.active:
            return units
        shown: list[Unit] = []
        for unit in units:
            steps = [step for step in unit.steps if self.matches(step)]
            if steps:
                shown.append(Unit(unit.kind, unit.items, steps, len(unit.steps) - len(steps)))
        return shown


@dataclass(frozen=True, slots=True)
class Mark:
    """One mark of the outline: a step, or (in a long session) a run of steps shown as
    one, linked to its most telling step (an error, else the biggest output)."""

    step: Step
    first: Step
    last: Step
    count: int
    size_class: int
    errors: int

    @property
    def anchor(self) -> str:
        return self.step.anchor


def outline_marks(steps: list[Step], *, limit: int) -> list[Mark]:
    """One mark per step, or at most *limit* marks, each for a run of consecutive steps."""
    if not steps:
        return []
    per_mark = max(1, math.ceil(len(steps) / limit))
    marks = []
    for start in range(0, len(steps), per_mark):
        run = steps[start : start + per_mark]
        errors = [step for step in run if step.is_error]
        telling = errors[0] if errors else max(run, key=lambda s: s.received_bytes)
        marks.append(
            Mark(
                step=telling,
                first=run[0],
                last=run[-1],
                count=len(run),
                size_class=max(step.size_class for step in run),
                errors=len(errors),
            )
        )
    return marks


def biggest_steps(steps: list[Step], *, limit: int) -> list[Step]:
    """The steps whose tools returned the most bytes, biggest first (ties: in order)."""
    ranked = sorted(
        (step for step in steps if step.result is not None),
        key=lambda s: (-s.received_bytes, s.seq),
    )
    return ranked[:limit]
