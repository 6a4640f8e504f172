"""Forms: the filters of the lists, the selector box, making a share link or an API token."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator
from django.db.models import QuerySet

from blobviewer.models import Blob, Session
from blobviewer.search import MAX_QUERY_CHARS, SearchQuery, parse_query, session_filter
from blobviewer.session_sort import DEFAULT_SORT, Sort, UnknownSort, parse_sort
from core.selectors import Selector, SelectorError, parse_selector


class SessionFilterForm(forms.Form):
    """The session list's search, filters and sort (`?q=…&model=…&has_blobs=on&sort=-duration`).

    The search is blobviewer.search's: case-folded substring search in titles, items and
    blobs, or in titles only for a query shorter than MIN_QUERY_CHARS.
    """

    q = forms.CharField(required=False, max_length=MAX_QUERY_CHARS, label="Search")
    model = forms.CharField(required=False, max_length=200)
    has_blobs = forms.BooleanField(required=False, label="with blobs")

    @property
    def query(self) -> SearchQuery | None:
        """The search, when there is a valid one."""
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
        return self.is_valid() and any(
            self.cleaned_data[name] for name in ("q", "model", "has_blobs")
        )

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
        return sessions


class BlobFilterForm(forms.Form):
    MISSING = "missing"

    kind = forms.CharField(required=False, max_length=20)

    def filter(self, blobs: QuerySet[Blob]) -> QuerySet[Blob]:
        if not self.is_valid() or not self.cleaned_data["kind"]:
            return blobs
        kind = self.cleaned_data["kind"]
        if kind == self.MISSING:
            return blobs.filter(missing=True)
        return blobs.filter(kind=kind, missing=False)


class SelectorField(forms.CharField):
    """A selector's text. Core's parser is its judge, so that a selector means the same
    here as in the inspect tool and the CLI: Django's check for NUL characters is left
    out (`grep:a\x00b` is a valid selector; its canonical form, the one a share link
    stores, writes control characters as JSON escapes)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(required=False, max_length=1000, strip=True, **kwargs)
        self.validators = [
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
