"""Forms: the filters of the lists, the selector box, making a share link or an API token."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator
from django.db.models import Exists, F, OuterRef, QuerySet
from django.utils.functional import cached_property

from blobviewer.models import OUTCOMES, Blob, BlobRef, Session
from blobviewer.search.queries import MAX_QUERY_CHARS, SearchQuery, parse_query, session_filter
from blobviewer.timeline.sort import DEFAULT_SORT, Sort, UnknownSort, parse_sort
from core.selectors import Selector, SelectorError, parse_selector


class SessionFilterForm(forms.Form):
    """The session list's search, filters and sort (`?q=…&model=…&has_blobs=on&sort=-duration`).

    The search is blobviewer.search.queries: case-folded substring search in titles, items and
    blobs, or in titles only for a query shorter than MIN_QUERY_CHARS.
    """

    q = forms.CharField(required=False, max_length=MAX_QUERY_CHARS, label="Search")
    model = forms.CharField(required=False, max_length=200)
    has_blobs = forms.BooleanField(required=False, label="with blobs")
    # Evaluation runs (docs/evaluations.md): the job a trial ran in, and how it ended.
    job = forms.CharField(required=False, max_length=200)
    # Runs of one task (blobviewer.timeline.tasks).
    task = forms.CharField(required=False, max_length=300)
    outcome = forms.ChoiceField(
        required=False, choices=[("", "any"), *((o, o) for o in OUTCOMES), ("none", "none")]
    )

    @cached_property
    def query(self) -> SearchQuery | None:
        """The search, when there is a valid one (one object for the request: SQLite keeps
        the index's answer for it, blobviewer.search.queries)."""
        return parse_query(self.cleaned_data["q"]) if self.is_valid() else None

    @property
    def sort(self) -> Sort:
        """The sort the URL asks for; an unknown one sorts newest first (see sort_error)."""
        try:
            return parse_sort(self.data.get("sort"))
        except UnknownSort:
            return parse_sort(DEFAULT_SORT)

    @property
    def sort_error(self) -> str:
        try:
            parse_sort(self.data.get("sort"))
        except UnknownSort as error:
            return str(error)
        return ""

    @property
    def filtering(self) -> bool:
        filters = ("q", "model", "has_blobs", "job", "outcome", "task")
        return self.is_valid() and any(self.cleaned_data[name] for name in filters)

    def filter(self, sessions: QuerySet[Session]) -> QuerySet[Session]:
        """The sessions that match, in the order asked for; an invalid form filters nothing."""
        sessions = sessions.order_by(*self.sort.order_by())
        if not self.is_valid():
            return sessions
        data = self.cleaned_data
        if query := self.query:
            sessions = sessions.filter(session_filter(query))
        if data["model"]:
            sessions = sessions.filter(model=data["model"])
        if data["has_blobs"]:
            sessions = sessions.filter(blob_count__gt=0)
        if data["job"]:
            sessions = sessions.filter(job=data["job"])
        if data["task"]:
            sessions = sessions.filter(task=data["task"])
        if data["outcome"]:
            sessions = sessions.filter(outcome="" if data["outcome"] == "none" else data["outcome"])
        return sessions


class BlobFilterForm(forms.Form):
    """The blob list's filters and sort (`?kind=text&tool=Read&session=<id>&sort=-size`).

    Each filter that is valid applies, whatever the others say (an invalid one is shown
    with its error and filters nothing); an unknown sort sorts newest first.
    """

    MISSING = "missing"
    # Sort keys and their orders; blobs without a value (a missing blob's size, the time
    # of an id that is not a UUID v7) come last both ways, and the id breaks ties, so
    # paging through equal values never shows a blob twice or skips one.
    SORTS = {
        "-created": (F("created_at").desc(nulls_last=True), F("id").desc()),
        "created": (F("created_at").asc(nulls_last=True), F("id").asc()),
        "-size": (F("size").desc(nulls_last=True), F("id").desc()),
        "size": (F("size").asc(nulls_last=True), F("id").asc()),
    }
    DEFAULT_SORT = "-created"

    kind = forms.CharField(required=False, max_length=20)
    tool = forms.CharField(required=False, max_length=200)
    session = forms.UUIDField(
        required=False, error_messages={"invalid": "not a session id (a UUID)."}
    )
    sort = forms.ChoiceField(
        required=False,
        choices=[(key, key) for key in SORTS],
        error_messages={"invalid_choice": "unknown sort %(value)s; newest first instead."},
    )

    @property
    def sort_key(self) -> str:
        if self.is_bound:
            self.is_valid()
        return getattr(self, "cleaned_data", {}).get("sort") or self.DEFAULT_SORT

    def filter(self, blobs: QuerySet[Blob]) -> QuerySet[Blob]:
        """The blobs that match, in the order asked for."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})  # an unbound form filters nothing
        if kind := data.get("kind"):
            blobs = (
                blobs.filter(missing=True)
                if kind == self.MISSING
                else blobs.filter(kind=kind, missing=False)
            )
        if tool := data.get("tool"):
            blobs = blobs.filter(made_by__tool=tool)
        if session := data.get("session"):
            refs = BlobRef.objects.filter(blob=OuterRef("pk"), session_id=session)
            blobs = blobs.filter(Exists(refs))
        return blobs.order_by(*self.SORTS[self.sort_key])


class SelectorField(forms.CharField):
    """A selector's text. Core's parser is its judge, so that a selector means the same
    here as in the inspect tool and the CLI: Django's check for NUL characters is left
    out (`grep:a\x00b` is a valid selector; its canonical form, the one a share link
    stores, writes control characters as JSON escapes)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(required=False, max_length=1000, strip=True, **kwargs)
        self.validators: list[Any] = [
            v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)
        ]


class SelectorForm(forms.Form):
    """The selector box; a valid form has the parsed Selector in cleaned_data["parsed"]."""

    selector = SelectorField()

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if "selector" in data:
            try:
                data["parsed"] = parse_selector(data["selector"])
            except SelectorError as error:
                self.add_error("selector", str(error))
        return data

    @property
    def parsed(self) -> Selector:
        return self.cleaned_data["parsed"]


def _expiry_choices() -> list[tuple[int, str]]:
    days = sorted({1, 7, 30, 90, settings.SHARE_LINK_DAYS})
    return [(n, f"{n} day{'s' if n != 1 else ''}") for n in days]


class ShareLinkForm(forms.Form):
    selector = SelectorField()
    days = forms.TypedChoiceField(choices=_expiry_choices, coerce=int, label="expires in")
    note = forms.CharField(
        required=False,
        max_length=500,
        strip=True,
        label="Note",
        widget=forms.TextInput(attrs={"placeholder": "what to look at (optional)"}),
    )

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.fields["days"].initial = settings.SHARE_LINK_DAYS

    def clean_selector(self) -> str:
        selector = self.cleaned_data["selector"]
        try:
            return str(parse_selector(selector)) if selector else ""
        except SelectorError as error:
            raise forms.ValidationError(str(error)) from None


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        strip=True,
        help_text="What will use it, e.g. “build server agent”.",
    )
