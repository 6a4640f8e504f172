"""Every entry point that takes a selector, fuzzed (docs/selectors.md#errors): the blob page, its
htmx fragment, the share page (anonymous), share creation, `/api/inspect` and the CLI.

Whatever the selector text (lone surrogates, `|`, quotes, control characters, the real
step names), none of them answers 500: an invalid selector gets 400 with core's own
one-line error (escaped in HTML), a valid one its view.

Selectors travel the way a client sends them: as UTF-8 bytes, percent-encoded, with a
lone surrogate written as the bytes `surrogatepass` gives it (what a hostile client can
put on the wire). Django decodes such bytes to U+FFFD, so a raw lone surrogate reaches a
form only from inside the process; the views and the form are fuzzed that way too.
"""

from __future__ import annotations

import io
import re
import sys
import uuid
from contextlib import redirect_stderr
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import quote

import pytest
from django.http import HttpRequest, HttpResponse, QueryDict
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django_htmx.middleware import HtmxDetails
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blobviewer.catalog.blobs import refresh_blob
from blobviewer.forms import SelectorForm
from blobviewer.models import ShareLink
from blobviewer.reader import views as reader_views
from blobviewer.team import views as team_views
from core.cli import main as cli_main
from core.content import Content, Structured, Text, encode_text
from core.inspect_tool import InspectError, inspect_blob
from core.selectors import SelectorError, evaluate, parse_selector
from core.store import FsBlobStore

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
EXAMPLES = settings(
    max_examples=50,
    # The fixtures (a data directory, blobs, a share link) are made once per test and
    # only read by the examples; the share links that examples add change nothing else.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# -- selector texts -------------------------------------------------------------------------

PIECES = [
    "lines:", "slice:", "key:", "grep:", "LINES:", " Key :", "|", " | ", '"', "'", '\\"',
    "\\", "\\ud800", '"\\ud800"', '"\\udfff x"', "\ud800", "\udc00", "\x00", "\x1b[31m",
    "\t", "\n", "\r", "..", "..=", "-", "0", "1", "3", "7-", "99999999999999999999999",
    "log", "results", "a|b", "ERROR", "é", "(", "[", "*", "{2}", "<script>", "&amp;",
]  # fmt: skip
any_chars = st.characters(codec=None)  # every code point: lone surrogates, controls
selector_texts = st.one_of(
    st.text(any_chars, max_size=20),
    st.lists(st.one_of(st.sampled_from(PIECES), st.text(any_chars, max_size=3)), max_size=8).map(
        "".join
    ),
)
# Selectors that fit the blobs below, so that the 200 side is exercised as often.
VALID = [
    "",
    "lines:2-3",
    "lines:2 | grep:ERROR",
    "grep:a|b",
    "key:log | lines:1",
    'key:"\\ud800"',
    'key:"a|b" | slice:0..1',
    "key:results | slice:1..",
    "slice:0..2",
    "keys:0..2",
]
# The issue's own case in all its forms: a step with a JSON-escaped lone surrogate.
escaped_surrogates = st.builds(
    lambda before, step, code, after: f'{before}{step}"\\u{code:04x}"{after}',
    st.sampled_from(["", "key:log | ", "lines:1 | "]),
    st.sampled_from(["key:", "grep:", "lines:", "slice:"]),
    st.integers(0xD800, 0xDFFF),
    st.sampled_from(["", " | lines:1", "|key:x"]),
)
texts = st.one_of(selector_texts, st.sampled_from(VALID), escaped_surrogates)


@dataclass(frozen=True)
class Blobs:
    store: FsBlobStore
    ids: dict[str, uuid.UUID]
    contents: dict[str, Content]


@pytest.fixture
def blobs(store: FsBlobStore) -> Blobs:
    contents: dict[str, Content] = {
        "text": Text('first line\nERROR: a|b "quoted"\n<b>tag</b>\nlone \ud800 here\nend\n'),
        "object": Structured(
            {"\ud800": "a lone surrogate's value", "a|b": [1, 2], "log": "x\nERROR y\n"}
            | {"results": [{"id": 1}, {"id": 2}]}
        ),
        "array": Structured([{"id": n, "name": f"item {n}"} for n in range(5)]),
    }
    ids = {}
    for name, content in contents.items():
        ids[name] = store.store_sync(content)
        refresh_blob(ids[name], store=store)
    return Blobs(store, ids, contents)


@pytest.fixture
def share_links(blobs: Blobs, user: Any) -> dict[str, ShareLink]:
    expires = timezone.now() + timedelta(days=1)
    return {
        name: ShareLink.objects.create(
            blob_id=blob_id, selector="", created_by=user, expires_at=expires
        )
        for name, blob_id in blobs.ids.items()
    }


# -- what core says -------------------------------------------------------------------------


def on_the_wire(text: str) -> str:
    """*text* percent-encoded as UTF-8, lone surrogates as `surrogatepass` bytes."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def received(encoded: str) -> str:
    """What Django makes of a percent-encoded form value (bad UTF-8 becomes U+FFFD)."""
    return QueryDict(f"selector={encoded}")["selector"]


def core_error(text: str, content: Content) -> str | None:
    """Core's one-line error for *text* on *content*; None when it selects something."""
    try:
        evaluate(parse_selector(text), content)
    except SelectorError as error:
        return str(error)
    return None


def parse_error(text: str) -> str | None:
    try:
        parse_selector(text)
    except SelectorError as error:
        return str(error)
    return None


ERROR_BESIDE_THE_BOX = re.compile(r'<p class="error" id="[^"]*-error" role="alert">(.*?)</p>', re.S)


def assert_page_answers(response: HttpResponse, error: str | None) -> None:
    """A valid selector's view (200), or 400 with exactly core's error beside the box."""
    html = response.content.decode("utf-8")  # strict: a page is always valid UTF-8
    shown = ERROR_BESIDE_THE_BOX.findall(html)
    if error is None:
        assert response.status_code == 200, shown
        assert shown == []
    else:
        assert response.status_code == 400
        assert shown == [escape(error)]
        assert "\n" not in error


# -- the blob page, its fragment, the share page --------------------------------------------


@EXAMPLES
@given(text=texts, kind=st.sampled_from(["text", "object", "array"]), htmx=st.booleans())
def test_the_blob_page_and_its_fragment_answer_every_selector_as_core_does(
    logged_in_client: Client, blobs: Blobs, text: str, kind: str, htmx: bool
) -> None:
    encoded = on_the_wire(text)
    url = f"{reverse('blob_detail', args=[blobs.ids[kind]])}?selector={encoded}"

    response = logged_in_client.get(url, headers=HTMX if htmx else {})

    assert_page_answers(response, core_error(received(encoded).strip(), blobs.contents[kind]))


@EXAMPLES
@given(text=texts, kind=st.sampled_from(["text", "object", "array"]), htmx=st.booleans())
def test_the_share_page_answers_every_selector_as_core_does_without_a_login(
    client: Client,
    blobs: Blobs,
    share_links: dict[str, ShareLink],
    text: str,
    kind: str,
    htmx: bool,
) -> None:
    encoded = on_the_wire(text)
    url = f"{reverse('share_detail', args=[share_links[kind].token])}?selector={encoded}"

    response = client.get(url, headers=HTMX if htmx else {})

    assert_page_answers(response, core_error(received(encoded).strip(), blobs.contents[kind]))


# -- share creation -------------------------------------------------------------------------


@EXAMPLES
@given(text=texts)
def test_share_creation_keeps_a_valid_selector_and_refuses_another_with_its_error(
    logged_in_client: Client, blobs: Blobs, text: str
) -> None:
    encoded = on_the_wire(text)
    before = set(ShareLink.objects.values_list("pk", flat=True))

    response = logged_in_client.post(
        reverse("share_create", args=[blobs.ids["object"]]),
        f"selector={encoded}&days=7",
        content_type="application/x-www-form-urlencoded",
    )

    seen = received(encoded).strip()
    new = ShareLink.objects.exclude(pk__in=before)
    if (error := parse_error(seen)) is not None:
        assert_page_answers(response, error)
        assert not new.exists()
        return
    assert response.status_code == 302
    [link] = new
    # The canonical form: what the database can hold, meaning the same selector.
    assert link.selector == str(parse_selector(seen))
    link.selector.encode("utf-8")  # raises on a lone surrogate
    assert parse_selector(link.selector) == parse_selector(seen)


# -- the inspect API ------------------------------------------------------------------------


@EXAMPLES
@given(text=texts, kind=st.sampled_from(["text", "object", "array"]))
def test_the_api_answers_every_selector_as_the_inspect_tool_does(
    logged_in_client: Client, blobs: Blobs, text: str, kind: str
) -> None:
    encoded = on_the_wire(text)
    blob_id = blobs.ids[kind]

    response = logged_in_client.get(f"{reverse('api_inspect', args=[blob_id])}?selector={encoded}")

    assert response["Content-Type"] == "text/plain; charset=utf-8"
    try:
        expected = inspect_blob(blobs.store, str(blob_id), received(encoded) or None)
    except InspectError as error:
        assert response.status_code == 400
        assert response.content.decode("utf-8") == str(error)  # strict UTF-8, one line
        assert "\n" not in str(error)
    else:
        assert response.status_code == 200
        assert response.content == encode_text(expected)


# -- the CLI --------------------------------------------------------------------------------


def run_cli(*args: str) -> tuple[int, bytes, str]:
    """`python -m core ARGS` in this process: its status, stdout bytes and stderr."""
    stdout, stderr = io.BytesIO(), io.StringIO()
    wrapper = io.TextIOWrapper(stdout, encoding="utf-8")
    with mock.patch.object(sys, "stdout", wrapper), redirect_stderr(stderr):
        status = cli_main(list(args))
    wrapper.flush()
    out = stdout.getvalue()
    wrapper.detach()  # or closing the wrapper would close the buffer
    return status, out, stderr.getvalue()


@EXAMPLES
@given(text=texts, kind=st.sampled_from(["text", "object", "array"]))
def test_the_cli_answers_every_selector_as_the_inspect_tool_does(
    blobs: Blobs, text: str, kind: str
) -> None:
    blob_id = str(blobs.ids[kind])

    # `--` so that a selector starting with "-" is not read as an option.
    status, out, err = run_cli("inspect", "--dir", str(blobs.store.root), "--", blob_id, text)

    try:
        expected = inspect_blob(blobs.store, blob_id, text)
    except InspectError as error:
        assert (status, out) == (2, b"")
        assert err == f"error: {error}\n"
        assert err.encode("utf-8") and err.count("\n") == 1
    else:
        assert (status, out, err) == (0, encode_text(expected), "")


# -- a raw lone surrogate reaching the form -------------------------------------------------


def raw_get(url: str, text: str, user: Any, *, htmx: bool) -> HttpRequest:
    """A GET request whose selector is *text* as it is, lone surrogates included."""
    request = RequestFactory().get(url, headers=HTMX if htmx else {})
    request.GET = QueryDict(mutable=True)
    request.GET["selector"] = text
    request.user = user
    request.htmx = HtmxDetails(request)
    return request


@EXAMPLES
@given(text=texts, kind=st.sampled_from(["text", "object", "array"]), htmx=st.booleans())
def test_the_views_answer_a_raw_selector_as_core_does(
    blobs: Blobs,
    share_links: dict[str, ShareLink],
    user: Any,
    text: str,
    kind: str,
    htmx: bool,
) -> None:
    blob_id, token = blobs.ids[kind], share_links[kind].token
    error = core_error(text.strip(), blobs.contents[kind])

    page = reader_views.blob_detail(raw_get("/", text, user, htmx=htmx), blob_id=blob_id)
    shared = team_views.share_detail(raw_get("/", text, user, htmx=htmx), token=token)

    assert_page_answers(page, error)
    assert_page_answers(shared, error)


@given(text=texts)
def test_the_selector_form_judges_a_selector_as_the_parser_does(text: str) -> None:
    form = SelectorForm({"selector": text})
    error = parse_error(text.strip())
    assert form.is_valid() == (error is None)
    if error is not None:
        assert form.errors["selector"] == [error]
    else:
        assert form.parsed == parse_selector(text)


# -- the cases of the issue, spelled out ----------------------------------------------------

SURROGATE_KEY = 'key:"\\ud800"'  # the JSON escape, as plain text in the selector


def test_a_json_escaped_lone_surrogate_names_a_key_that_holds_one(logged_in_client, blobs):
    response = logged_in_client.get(
        reverse("blob_detail", args=[blobs.ids["object"]]), {"selector": SURROGATE_KEY}
    )
    assert response.status_code == 200
    assert "a lone surrogate&#x27;s value" in response.content.decode()


def test_a_json_escaped_lone_surrogate_over_an_array_takes_that_key_of_every_entry(
    logged_in_client, blobs
):
    response = logged_in_client.get(
        reverse("blob_detail", args=[blobs.ids["array"]]), {"selector": SURROGATE_KEY}
    )
    assert response.status_code == 200
    assert "5 values, 5 missing" in response.content.decode()


@pytest.mark.parametrize("kind", ["text"])
def test_a_json_escaped_lone_surrogate_on_another_blob_is_a_400_with_its_error(
    logged_in_client, client, blobs, share_links, kind
):
    expected = core_error(SURROGATE_KEY, blobs.contents[kind])
    assert expected is not None and "key: applies to a JSON object" in expected
    for response in (
        logged_in_client.get(
            reverse("blob_detail", args=[blobs.ids[kind]]), {"selector": SURROGATE_KEY}
        ),
        client.get(
            reverse("share_detail", args=[share_links[kind].token]), {"selector": SURROGATE_KEY}
        ),
    ):
        assert_page_answers(response, expected)


def test_a_missing_key_that_holds_a_lone_surrogate_is_named_escaped(logged_in_client, blobs):
    response = logged_in_client.get(
        reverse("blob_detail", args=[blobs.ids["object"]]), {"selector": 'key:"\\udfff"'}
    )
    assert_page_answers(
        response, 'key:"\\udfff": no such key; the keys are: \\ud800, a|b, log, results'
    )


def test_a_raw_lone_surrogate_is_refused_with_the_parsers_error(blobs, user):
    request = raw_get("/", "key:\ud800", user, htmx=False)
    response = reader_views.blob_detail(request, blob_id=blobs.ids["object"])
    assert_page_answers(response, parse_error("key:\ud800"))
    assert "lone surrogate (\\ud800 at column 5)" in response.content.decode()
    # The box shows the selector again, escaped as the error shows it.
    assert 'value="key:\\ud800"' in response.content.decode()


def test_a_share_link_for_a_json_escaped_surrogate_stores_the_escape(logged_in_client, blobs):
    response = logged_in_client.post(
        reverse("share_create", args=[blobs.ids["object"]]),
        {"selector": SURROGATE_KEY, "days": "7"},
    )
    assert response.status_code == 302
    link = ShareLink.objects.get()
    assert link.selector == SURROGATE_KEY

    shared = Client().get(reverse("share_detail", args=[link.token]))
    assert shared.status_code == 200
    assert "a lone surrogate&#x27;s value" in shared.content.decode()


def test_a_nul_character_means_in_a_selector_what_it_means_to_core(logged_in_client, blobs):
    blob_id = blobs.ids["text"]

    page = logged_in_client.get(f"{reverse('blob_detail', args=[blob_id])}?selector=grep:%00")
    post = logged_in_client.post(
        reverse("share_create", args=[blob_id]),
        "selector=grep:a%00b&days=7",
        content_type="application/x-www-form-urlencoded",
    )

    assert page.status_code == 200
    assert post.status_code == 302
    assert ShareLink.objects.get().selector == 'grep:"a\\u0000b"'


def test_refusing_to_share_shows_the_blob_page_with_the_error_beside_the_box(
    logged_in_client, blobs
):
    response = logged_in_client.post(
        reverse("share_create", args=[blobs.ids["text"]]), {"selector": "lines:x", "days": "7"}
    )
    assert_page_answers(response, parse_error("lines:x"))
    assert 'value="lines:x"' in response.content.decode()
    assert not ShareLink.objects.exists()


def test_an_expiry_that_is_not_offered_is_refused_with_400_and_says_why(logged_in_client, blobs):
    response = logged_in_client.post(
        reverse("share_create", args=[blobs.ids["text"]]), {"selector": "lines:2", "days": "5"}
    )
    assert response.status_code == 400
    assert "Could not share: days: Select a valid choice. 5 is not one of" in (
        response.content.decode()
    )
    assert 'value="lines:2"' in response.content.decode()
    assert not ShareLink.objects.exists()


def test_the_cli_refuses_a_raw_lone_surrogate_from_an_undecodable_argument(
    blobs: Blobs, tmp_path: Path
) -> None:
    # An argument with the byte 0xff reaches Python as "\udcff" (surrogateescape).
    status, out, err = run_cli(
        "inspect", "--dir", str(blobs.store.root), str(blobs.ids["object"]), "key:\udcff"
    )
    assert (status, out) == (2, b"")
    assert err.startswith("error: the selector holds a lone surrogate (\\udcff at column 5)")
