"""The session page's chart of context tokens per turn, with the promoted outputs marked:
the picture of what promotion kept out of the model's context.

Coordinates are computed here, on the server; the template writes them into an SVG whose
look comes only from presentation attributes and classes in site.css (the CSP allows no
inline style or script). The chart's size is bounded whatever the session's length: past
MAX_POINTS turns, each point is the largest context of a run of turns, and past MAX_MARKS
promoted outputs, each mark stands for the outputs of a run of turns.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from html import escape

from blobviewer.timeline.steps import Step, Unit

WIDTH = 720
HEIGHT = 170
# The plot area inside the SVG: room on the left for the axis labels, below for marks.
LEFT, RIGHT, TOP, BOTTOM = 46, 8, 10, 30
MAX_POINTS = 300
MAX_MARKS = 150
POINTS_WITH_TITLES = 80
MARKS_STACKED = 3  # marks of one turn stack upwards; more are counted in the last one
_MARK_STEP = 7


@dataclass(frozen=True, slots=True)
class ChartMark:
    """A promoted output's mark at (*x*, *y*); the page links it to *step*."""

    x: float
    y: float
    step: Step
    title: str


@dataclass(frozen=True, slots=True)
class Gridline:
    y: float
    label: str


@dataclass(frozen=True, slots=True)
class TokenChart:
    """What the template draws: the context line (an SVG path), points with titles (for
    short sessions), marks for promoted outputs, gridlines with labels."""

    width: int
    height: int
    line: str
    points: tuple[tuple[float, float, str], ...]
    marks: tuple[ChartMark, ...]
    gridlines: tuple[Gridline, ...]
    turns: int
    turns_with_tokens: int
    promoted: int
    max_tokens: int
    baseline: float
    left: int
    right: float


def token_chart(
    units: list[Unit],
    *,
    label: Callable[[Step], str],
    marks_bytes: int = 16_000,
    link: int = 200,
) -> TokenChart | None:
    """The chart of the main conversation's turns (a sub-agent has a context of its own);
    None when no turn recorded its tokens. *label* names a step in its mark's title; the
    marks, each with a link of up to *link* bytes, take at most about *marks_bytes*."""
    turns = [unit for unit in units if unit.kind == "turn" and unit.items and not unit.sidechain]
    tokens = [turn.context_tokens for turn in turns]
    recorded = [t for t in tokens if t is not None]
    if not recorded:
        return None
    top = _nice_ceiling(max(recorded))
    per_point = max(1, math.ceil(len(turns) / MAX_POINTS))
    columns = math.ceil(len(turns) / per_point)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    baseline = TOP + plot_h

    def x_of(column: int) -> float:
        if columns == 1:
            return LEFT + plot_w / 2
        return round(LEFT + plot_w * column / (columns - 1), 1)

    def y_of(value: int) -> float:
        return round(baseline - plot_h * value / top, 1)

    commands: list[str] = []
    points: list[tuple[float, float, str]] = []
    pen_down = False
    for column in range(columns):
        chunk = [t for t in tokens[column * per_point : (column + 1) * per_point] if t is not None]
        if not chunk:
            pen_down = False  # turns without counts leave a gap, not a made-up value
            continue
        x, y = x_of(column), y_of(max(chunk))
        commands.append(f"{'L' if pen_down else 'M'}{x} {y}")
        pen_down = True
        if per_point == 1:
            points.append((x, y, f"turn {column + 1}: {max(chunk):,} context tokens"))
    if len(points) > POINTS_WITH_TITLES:
        points = []  # too many to hover one by one, and each costs bytes; the line says it

    promoted = [
        (index, step) for index, turn in enumerate(turns) for step in turn.steps if step.promoted
    ]
    per_mark = (
        max(per_point, math.ceil(len(turns) / MAX_MARKS))
        if len(promoted) > MAX_MARKS
        else per_point
    )
    while True:
        marks = _marks(promoted, per_mark, per_point, x_of, baseline, label)
        size = sum(80 + link + len(escape(m.title).encode()) for m in marks)
        if size <= marks_bytes or per_mark >= len(turns):
            break
        per_mark *= 2  # fewer marks, each for the outputs of more turns

    gridlines = tuple(
        Gridline(y_of(top * share // 4), _short(top * share // 4)) for share in range(0, 5, 2)
    )
    return TokenChart(
        width=WIDTH,
        height=HEIGHT + _MARK_STEP * (MARKS_STACKED - 1),
        line=" ".join(commands),
        points=tuple(points),
        marks=tuple(marks),
        gridlines=gridlines,
        turns=len(turns),
        turns_with_tokens=len(recorded),
        promoted=len(promoted),
        max_tokens=max(recorded),
        baseline=baseline,
        left=LEFT,
        right=WIDTH - RIGHT,
    )


def _marks(
    promoted: list[tuple[int, Step]],
    per_mark: int,
    per_point: int,
    x_of: Callable[[int], float],
    baseline: float,
    label: Callable[[Step], str],
) -> list[ChartMark]:
    """Marks under the turns of the promoted outputs: one per output, stacked upwards to
    MARKS_STACKED a column; the outputs of *per_mark* turns share a column."""
    groups: dict[int, list[Step]] = {}
    for index, step in promoted:
        groups.setdefault(index // per_mark, []).append(step)
    marks: list[ChartMark] = []
    for group, steps in groups.items():
        x = x_of(group * per_mark // per_point)
        for stack, step in enumerate(steps[:MARKS_STACKED]):
            rest = steps[MARKS_STACKED - 1 :] if stack == MARKS_STACKED - 1 else [step]
            kept_out = sum(s.kept_out for s in rest)
            title = (
                f"{label(step)}: {kept_out:,} bytes kept out of the context"
                if len(rest) == 1
                else f"{label(step)} and {len(rest) - 1} more: {kept_out:,} bytes kept out"
            )
            marks.append(ChartMark(x, baseline + 8 + _MARK_STEP * stack, step, title))
    return marks


def _nice_ceiling(value: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten that is at least *value* (and >= 10)."""
    value = max(value, 10)
    power = 10 ** (len(str(value)) - 1)
    for factor in (1, 2, 5, 10):
        if factor * power >= value:
            return factor * power
    return 10 * power  # pragma: no cover - the loop always returns


def _short(value: int) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return str(value)
