"""How the session list sorts: one sort key per column, given in the URL (`?sort=-duration`).

Every column sorts in the database on values stored with the session. Sessions with no
value for a column (no duration recorded, no status, no model, no cost) come last in both
directions on both databases, and the session id breaks ties, so paging through equal
values never shows a session twice or skips one. "Started" is the recorded start, or for
a recording without times its ingest time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import F, OrderBy, Value
from django.db.models.functions import Coalesce, Lower, NullIf


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    expression: Any
    descending_first: bool  # what a first click on its header asks for
    # Never null: ordered without NULLS LAST, so that an index on it serves the order on
    # both databases (SQLite's indexes take no NULLS LAST).
    never_null: bool = False

    def order_by(self, *, descending: bool) -> list[OrderBy]:
        direction = "desc" if descending else "asc"
        nulls = {} if self.never_null else {"nulls_last": True}
        return [
            getattr(self.expression, direction)(**nulls),
            getattr(F("id"), direction)(),
        ]


def _blank_as_null(field: str) -> Any:
    return NullIf(F(field), Value(""))


COLUMNS: dict[str, Column] = {
    column.key: column
    for column in (
        Column("title", Lower(_blank_as_null("title")), descending_first=False),
        Column("source", F("source_format"), descending_first=False),
        Column("model", _blank_as_null("model"), descending_first=False),
        # ingested_at is always set; the session_started index serves this order.
        Column(
            "started",
            Coalesce("started_at", "ingested_at"),
            descending_first=True,
            never_null=True,
        ),
        Column("duration", F("duration"), descending_first=True),
        Column("cost", F("cost_usd"), descending_first=True),
        Column("items", F("item_count"), descending_first=True),
        Column("steps", F("step_count"), descending_first=True),
        Column("errors", F("error_count"), descending_first=True),
        Column("blobs", F("blob_count"), descending_first=True),
        Column("received", F("output_bytes_received"), descending_first=True),
        Column(
            "kept",
            F("output_bytes_received") - F("output_bytes_in_history"),
            descending_first=True,
        ),
        Column("status", _blank_as_null("status"), descending_first=False),
    )
}
DEFAULT_SORT = "-started"


@dataclass(frozen=True, slots=True)
class Sort:
    column: Column
    descending: bool

    def __str__(self) -> str:
        return f"{'-' if self.descending else ''}{self.column.key}"

    def order_by(self) -> list[OrderBy]:
        return self.column.order_by(descending=self.descending)

    def header(self, key: str) -> dict[str, str]:
        """For a column header: the sort value its link asks for (the other direction
        when it is this sort's column), and `aria-sort`'s value ("" when not sorted by it)."""
        column = COLUMNS[key]
        if column is self.column:
            descending = not self.descending
            state = "descending" if self.descending else "ascending"
        else:
            descending, state = column.descending_first, ""
        return {"sort": f"{'-' if descending else ''}{key}", "aria": state}


class UnknownSort(ValueError):
    pass


def parse_sort(value: str | None) -> Sort:
    """`key` (ascending) or `-key` (descending); blank is the default, newest first.
    Raises UnknownSort with a one-line message for anything else."""
    value = (value or "").strip() or DEFAULT_SORT
    descending = value.startswith("-")
    column = COLUMNS.get(value.removeprefix("-"))
    if column is None:
        keys = ", ".join(COLUMNS)
        raise UnknownSort(f"unknown sort {value[:50]!r}; sort by one of {keys} (- for descending)")
    return Sort(column, descending)


def headers(sort: Sort) -> dict[str, dict[str, str]]:
    return {key: sort.header(key) for key in COLUMNS}
