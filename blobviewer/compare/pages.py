"""What the compare page shows (docs/pages.md#comparing-two-runs): the two runs' facts
side by side, their steps aligned a page at a time, the first place they part ways, and
a step pair's output diff."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Sum

from blobviewer.compare.alignment import Pair, align, first_divergence
from blobviewer.compare.line_sources import LineSource, StoredOutput, TextOutput
from blobviewer.compare.output_diff import DiffPage, output_diff
from blobviewer.compare.runs import RunStep, run_steps
from blobviewer.data_dir import blob_store, renderings
from blobviewer.ingest.rows import promoted_blob_id
from blobviewer.models import Item, Session
from blobviewer.templatetags.timeline_tags import duration_text
from blobviewer.timeline.cost import session_cost_shown
from blobviewer.timeline.tasks import PROMPT_TASK

# Aligned pairs on a page of the compare page (a hundred steps: the session page shows
# twenty).
ROWS_PER_PAGE = 50
# Lines of each output one page of a diff covers at most.
DIFF_WINDOW = 2_000


@dataclass(frozen=True, slots=True)
class PairRow:
    """One aligned pair: *number* (from 1), each side's step or None, and how they
    relate: `same` (one step, the same output), `differs` (one step, outputs differ),
    `only-a` / `only-b` (a step one run made, the other did not)."""

    number: int
    a: RunStep | None
    b: RunStep | None
    relation: str

    @property
    def sides(self) -> tuple[tuple[str, RunStep | None], tuple[str, RunStep | None]]:
        return ("a", self.a), ("b", self.b)


@dataclass(frozen=True, slots=True)
class Fact:
    label: str
    a: str
    b: str

    @property
    def differs(self) -> bool:
        return self.a != self.b


@dataclass(frozen=True, slots=True)
class AlignedRuns:
    """Two runs' steps and their alignment (pairs of indexes into them): what the
    compare page reads and works out whatever page it shows, and all of the page's work
    that grows with the runs' length."""

    a: list[RunStep]
    b: list[RunStep]
    pairs: list[Pair]

    def relation(self, i: int | None, j: int | None) -> str:
        """How pair (i, j) relates (see PairRow)."""
        if i is None:
            return "only-b"
        if j is None:
            return "only-a"
        return "same" if self.a[i].output_digest == self.b[j].output_digest else "differs"

    def row(self, number: int) -> PairRow:
        """Pair *number* (from 1) as a row of the page."""
        i, j = self.pairs[number - 1]
        a = self.a[i] if i is not None else None
        b = self.b[j] if j is not None else None
        return PairRow(number, a, b, self.relation(i, j))


def aligned_runs(a: Session, b: Session) -> AlignedRuns:
    """The steps of *a* and *b*, read, keyed and aligned."""
    steps_a, steps_b = run_steps(a), run_steps(b)
    return AlignedRuns(steps_a, steps_b, align([s.key for s in steps_a], [s.key for s in steps_b]))


def compare_context(a: Session, b: Session, query: Mapping[str, str]) -> dict[str, Any]:
    """The compare page of *a* and *b* for *query* (`page`). Beyond aligned_runs, its work
    is one pass over the pairs' indexes (the counts, the first divergence) and rows for
    the shown page only."""
    runs = aligned_runs(a, b)
    counts = Counter(runs.relation(i, j) for i, j in runs.pairs)
    diverged = first_divergence(runs.pairs, lambda i, j: runs.relation(i, j) == "differs")
    pages = max(1, -(-len(runs.pairs) // ROWS_PER_PAGE))
    number = _page_number(query.get("page"), pages)
    first = (number - 1) * ROWS_PER_PAGE + 1
    last = min(number * ROWS_PER_PAGE, len(runs.pairs))
    return {
        "a": a,
        "b": b,
        "facts": _facts(a, b),
        "rows": [runs.row(n) for n in range(first, last + 1)],
        "counts": {
            relation.replace("-", "_"): counts[relation]
            for relation in ("same", "differs", "only-a", "only-b")
        },
        "page_number": number,
        "page_count": pages,
        "divergence": runs.row(diverged + 1) if diverged is not None else None,
        "divergence_page": diverged // ROWS_PER_PAGE + 1 if diverged is not None else None,
    }


def _page_number(asked: str | None, pages: int) -> int:
    try:
        return min(max(int(asked or 1), 1), pages)
    except ValueError:
        return 1


def _facts(a: Session, b: Session) -> list[Fact]:
    """The facts the page's header sets side by side (differences are marked)."""
    tokens = {session.pk: _tokens(session) for session in (a, b)}

    def fact(label: str, value: Any) -> Fact:
        return Fact(label, value(a), value(b))

    return [
        fact("Agent", lambda s: str(s.meta.get("agent") or s.source_format)),
        fact("Model", lambda s: s.model or "—"),
        fact("Task", _task),
        fact("Steps", lambda s: f"{s.step_count:,}"),
        fact("Errors", lambda s: f"{s.error_count:,}"),
        fact("Tokens in / out", lambda s: tokens[s.pk]),
        fact("Cost", _cost),
        fact("Duration", lambda s: duration_text(s.duration) or "—"),
        fact("Outcome", _outcome),
    ]


def _task(session: Session) -> str:
    if session.task.startswith(PROMPT_TASK):  # known by its first message: which one
        return f"first message {session.task.removeprefix(PROMPT_TASK)[:8]}"
    return session.task or "—"


def _cost(session: Session) -> str:
    shown = session_cost_shown(session.cost_usd, session.unpriced_turns, session.model)
    return shown.text or "—"


def _tokens(session: Session) -> str:
    totals = Item.objects.filter(session=session).aggregate(
        read=Sum("input_tokens"), wrote=Sum("output_tokens")
    )
    if totals["read"] is None and totals["wrote"] is None:
        return "—"
    return f"{totals['read'] or 0:,} / {totals['wrote'] or 0:,}"


def _outcome(session: Session) -> str:
    if not session.outcome:
        return "—"
    reward = f" (reward {session.reward:g})" if session.reward is not None else ""
    return session.outcome + reward


def step_output(session: Session, seq: int) -> tuple[Item, LineSource] | None:
    """Tool result *seq* of *session* and its output as a diff reads it: the blob it was
    promoted to, else its text; None when there is no such result."""
    item = (
        Item.objects.filter(session=session, seq=seq, type=Item.Type.TOOL_RESULT)
        .only("seq", "tool", "output", "type", "session_id")
        .first()
    )
    if item is None:
        return None
    blob_id = promoted_blob_id(item)
    if blob_id is None:
        return item, TextOutput(item.output)
    return item, StoredOutput(blob_store(), blob_id, renderings())


def diff_page(a: LineSource, b: LineSource, page: int) -> DiffPage:
    """Page *page* of the diff of two outputs, DIFF_WINDOW lines of each at most."""
    return output_diff(a, b, page=page, window=DIFF_WINDOW)
