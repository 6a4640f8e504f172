"""Where the reader's first, previous, next and last pages are, for every selector.

A page of a blob view is one *window*: lines A..B of a text, entries A..B of an array, key
lines A..B of an object. Its neighbours are windows of the same size before and after it
(`lines:20-45` → previous `lines:1-26`, next `lines:46-71`), as `less` pages, clamped to
the start and the end. The window is what the selector asked for, or what fitted on the
page when the page had to stop short of that. A view that shows everything has no
neighbours at all.

`grep:` is paged forward the way the inspect tool continues a cut result: the next page
greps again from the first line not shown (`lines:<n>- | grep:<regex>`), and the first
page is the grep over the whole range again; it has no previous or last page, since
where a page of matches starts is only known by searching up to it.

Everything here is pure: selectors in, selectors out. Every link keeps the steps before
the paged one (`key:items | slice:20..30` → `key:items | slice:30..40`).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.selectors import Grep, Keys, Lines, Selector, Slice


@dataclass(frozen=True, slots=True)
class Target:
    """A page to go to: a selector (None: the same one), and for JSON shown as indented
    rows, the first row."""

    selector: str | None
    start: int | None = None


@dataclass(frozen=True, slots=True)
class PageLinks:
    """The neighbouring pages of a view; None where there is none (at the start or end)."""

    first: Target | None = None
    prev: Target | None = None
    next: Target | None = None
    last: Target | None = None

    @property
    def any(self) -> bool:
        return any((self.first, self.prev, self.next, self.last))


NO_LINKS = PageLinks()


def without_trailing(selector: Selector, kind: type) -> Selector:
    """*selector* without the steps of *kind* at its end: what a window of that kind pages."""
    steps = list(selector.steps)
    while steps and isinstance(steps[-1], kind):
        steps.pop()
    return Selector(tuple(steps))


def line_links(base: Selector, *, first: int, last: int, total: int, window: int) -> PageLinks:
    """Lines *first*..*last* of a text of *total* lines are shown, in windows of *window*
    lines; *base* holds the steps that reached the text."""
    window = max(1, window)

    def lines(start: int, end: int) -> Target:
        return Target(str(base.then(Lines(start, end))))

    before, after = first > 1, last < total
    prev_start = max(1, first - window)
    return PageLinks(
        first=lines(1, window) if before else None,
        prev=lines(prev_start, prev_start + window - 1) if before else None,
        next=lines(last + 1, last + window) if after else None,
        last=lines(max(1, total - window + 1), total) if after else None,
    )


def range_links(
    base: Selector, step: type[Slice] | type[Keys], *, start: int, stop: int, total: int
) -> PageLinks:
    """Entries (or key lines) *start*..*stop* (half-open) of *total* are shown; the windows
    are that many wide, written as `slice:` or `keys:` (*step*) after *base*."""
    window = max(1, stop - start)

    def span(a: int, b: int) -> Target:
        return Target(str(base.then(step(a, b))))

    before, after = start > 0, stop < total
    prev_start = max(0, start - window)
    return PageLinks(
        first=span(0, window) if before else None,
        prev=span(prev_start, prev_start + window) if before else None,
        next=span(stop, stop + window) if after else None,
        last=span(max(0, total - window), total) if after else None,
    )


def grep_links(selector: Selector, *, searched_first: int, resume: int | None) -> PageLinks:
    """A grep page whose search started at line *searched_first*: next greps again from
    line *resume* (the first match not shown, or the first line not searched; None when
    the page shows the last match), up to the same end as the selector's own `lines:`
    before the grep; first greps again from line 1."""
    *before, grep = selector.steps
    assert isinstance(grep, Grep)
    narrowed = Selector(tuple(before))
    base = without_trailing(narrowed, Lines)
    last = narrowed.steps[-1] if narrowed.steps else None
    end = last.end if isinstance(last, Lines) else None  # the `lines:` that base leaves out

    def grep_from(line: int) -> Target:
        narrowed = base if line == 1 and end is None else base.then(Lines(line, end))
        return Target(str(narrowed.then(grep)))

    return PageLinks(
        first=grep_from(1) if searched_first > 1 else None,
        next=grep_from(resume) if resume is not None else None,
    )


def row_links(*, first: int, shown: int, total: int, per_page: int) -> PageLinks:
    """Rows *first*..*first+shown-1* of *total* rows of indented JSON are shown, at most
    *per_page* a page: the neighbours go by row, with the same selector (`start`)."""

    def rows(start: int) -> Target:
        return Target(None, start)

    last = first + shown - 1
    before, after = first > 1, last < total
    return PageLinks(
        first=rows(1) if before else None,
        prev=rows(max(1, first - per_page)) if before else None,
        next=rows(last + 1) if after else None,
        last=rows(max(1, total - per_page + 1)) if after else None,
    )
