"""The site's pages. Each URL serves its whole page, or for htmx requests just the fragment
that changes (`template.html#partial`), so links work with and without JavaScript."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.paginator import Paginator
from django.db.models import Count, Sum
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.utils.http import content_disposition_header
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from blobviewer.catalog.blobs import as_missing, blob_for_view, indexed_blob, store_index_note
from blobviewer.catalog.listing import blob_rows, filter_choices
from blobviewer.catalog.listing import sort_headers as blob_sort_headers
from blobviewer.catalog.provenance import blob_provenance, timeline_url
from blobviewer.catalog.retention import pruned_blob
from blobviewer.data_dir import blob_store
from blobviewer.forms import (
    ApiTokenForm,
    BlobFilterForm,
    SelectorForm,
    SessionFilterForm,
    ShareLinkForm,
)
from blobviewer.models import ApiToken, Blob, Item, PrunedBlob, Session, ShareLink
from blobviewer.reader.blob_page import reader_view
from blobviewer.reader.display import blob_page
from blobviewer.reader.slots import Busy, evaluation_slot, stored_size
from blobviewer.search.results import (
    FIND_PARAM,
    OPEN_PARAM,
    anchor_of,
    find_state,
    list_hits,
    same_page,
)
from blobviewer.team.sharing import back_to_blob, new_share, share_url
from blobviewer.team.uploads import UploadError, received_upload, save_upload
from blobviewer.timeline.pages import item_blob_refs, item_page_context, page_context
from blobviewer.timeline.sort import headers as sort_headers
from core.content import encode_text
from core.inspect_tool import InspectError, inspect_blob
from core.selectors import SelectorError, escape_surrogates
from core.store import BlobNotFound, BlobReader, BlobStoreError

SESSIONS_PER_PAGE = 50
ITEMS_PER_PAGE = 100
BLOBS_PER_PAGE = 50

# A blob opened in place on a session's timeline replaces the slot under its item; its
# fragment then keeps targeting that slot and leaves the address bar alone.
_IN_PLACE_TARGET = re.compile(r"item-\d{1,10}-blob")
_PAGE_VIEW_ID = "blob-view"
# What replaces an item's cut copy on the timeline, by the item's type.
_ITEM_FRAGMENTS = {
    Item.Type.TOOL_RESULT: "_step_result.html",
    Item.Type.ASSISTANT: "_turn_text.html",
    Item.Type.USER: "_message.html",
}


def _render(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    fragment: str,
    status: int = 200,
) -> HttpResponse:
    """The whole *template*, or only *fragment* (`name.html#partial`) for htmx requests.

    A history restore (htmx found no cached copy of a page) needs the whole page.
    """
    if request.htmx and not request.htmx.history_restore_request:
        template = fragment
    response = render(request, template, context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


def _positive_int(value: str | None, default: int = 1) -> int:
    try:
        number = int(value or default)
    except ValueError:
        return default
    return number if number >= 1 else default


def _view_id(request: HttpRequest) -> str:
    target = request.htmx.target if request.htmx else None
    return target if target and _IN_PLACE_TARGET.fullmatch(target) else _PAGE_VIEW_ID


def _blob_view_context(
    request: HttpRequest,
    blob: Blob,
    *,
    base_url: str,
    default_selector: str = "",
    selector_text: str | None = None,
) -> tuple[dict[str, Any], int]:
    """The selector form and the selected page of *blob*, and the status to answer with:
    400 for a bad selector, 429 when the server is busy with other expensive ones.
    The selector is *selector_text*, else the query's, else *default_selector*."""
    if selector_text is None:
        selector_text = request.GET.get("selector", default_selector)
    form = SelectorForm({"selector": selector_text})
    page, status = None, 200
    if not form.is_valid():
        status = 400
    elif not blob.missing and not blob.error:
        store = blob_store()
        try:
            with evaluation_slot(form.parsed, blob.size or 0):
                page = blob_page(
                    blob, form.parsed, store=store, start=_positive_int(request.GET.get("start"))
                )
        except Busy as error:
            form.add_error("selector", str(error))
            status = 429
        except SelectorError as error:
            form.add_error("selector", str(error))
            status = 400
        except BlobNotFound:  # vanished since it was indexed; the page says so, unsaved
            blob = as_missing(blob)
        except BlobStoreError as error:  # damaged: say so on the page, not with a 500
            blob.error = str(error)
    # What the box shows again: a lone surrogate (which the parser refused) escaped, as
    # the error shows it, since no page can carry one.
    selector = (
        form.cleaned_data.get("selector", "")
        if form.is_valid()
        else escape_surrogates(selector_text)
    )
    view_id = _view_id(request)
    context = {
        "blob": blob,
        "form": form,
        "page": page,
        "selector": selector,
        "base_url": base_url,
        "view_id": view_id,
        "in_place": view_id != _PAGE_VIEW_ID,
    }
    context["reader"] = reader_view(
        request,
        blob,
        page,
        selector=form.parsed if form.is_valid() else None,
        selector_text=selector,
        base_url=base_url,
        view_id=view_id,
        in_place=context["in_place"],
        store=blob_store(),
    )
    return context, status


def _bearer_token(request: HttpRequest) -> str:
    """The token of an `Authorization: Bearer <token>` header; "" when there is none."""
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _unauthorized(request: HttpRequest, message: str) -> HttpResponse:
    response = _plain_text(
        f"{message}; make one at {request.build_absolute_uri(reverse('token_list'))}\n",
        status=401,
    )
    response["WWW-Authenticate"] = 'Bearer realm="blobviewer"'
    return response


# --- sessions ------------------------------------------------------------------------------


@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    form = SessionFilterForm(request.GET)
    sessions = form.filter(Session.objects.all())
    totals = sessions.order_by().aggregate(
        sessions=Count("pk"),
        items=Sum("item_count"),
        steps=Sum("step_count"),
        errors=Sum("error_count"),
        blobs=Sum("blob_count"),
        received=Sum("output_bytes_received"),
        in_history=Sum("output_bytes_in_history"),
    )
    totals = {name: value or 0 for name, value in totals.items()}
    totals["kept_out"] = max(0, totals["received"] - totals["in_history"])
    paginator = Paginator(sessions, SESSIONS_PER_PAGE)
    paginator.count = totals["sessions"]  # counted with the totals: one search, not two
    page = paginator.get_page(request.GET.get("page"))
    models = Session.objects.exclude(model="").order_by("model").values_list("model", flat=True)
    page.object_list = list(page.object_list)
    context = {
        "form": form,
        "page": page,
        "totals": totals,
        "models": models.distinct(),
        "query": form.query,
        "hits": list_hits(form.query, page.object_list),
        "sort": form.sort,
        "sort_headers": sort_headers(form.sort),
    }
    return _render(request, "session_list.html", context, fragment="session_list.html#list")


@require_GET
def session_find(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Find in a session: open hit `hit` of `q` on the timeline (its page, at its anchor,
    with the find box saying where it is), or with `open=blob` the blob's page at the hit.
    For htmx, when the hit is on the page on screen, only the find box is swapped and the
    page scrolls to the hit; otherwise the browser goes there."""
    session = get_object_or_404(Session, id=session_id)
    state = find_state(session, request.GET.get("q"), _positive_int(request.GET.get("hit")))
    target = state.step_url or _session_page_finding(session, state.text)
    if request.GET.get(OPEN_PARAM) == "blob" and state.hit and state.hit.blob_url:
        return redirect(state.hit.blob_url)  # `open=blob`: the blob's page at the hit
    if not request.htmx:
        return redirect(target)
    current = request.htmx.current_url or ""
    on_screen = urlsplit(current).path == session.get_absolute_url()
    if state.step_url and not (on_screen and same_page(state.step_url, urlsplit(current).query)):
        response = HttpResponse(status=200)
        response["HX-Redirect"] = state.step_url
        return response
    response = render(request, "_find_in_session_box.html", {"find": state})
    patch_vary_headers(response, ["HX-Request", "HX-Current-URL"])
    if state.step_url:
        response["HX-Push-Url"] = state.step_url
        response["HX-Reswap"] = f"outerHTML show:#{anchor_of(state.step_url)}:top"
    return response


def _session_page_finding(session: Session, text: str) -> str:
    url = session.get_absolute_url()
    return f"{url}?{urlencode({FIND_PARAM: text})}" if text else url


@require_GET
def session_detail(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The run as steps (see blobviewer.timeline.pages); htmx gets the outline and the steps."""
    session = get_object_or_404(Session, id=session_id)
    context = page_context(session, request.GET)
    response = _render(request, "session_detail.html", context, fragment="session_detail.html#body")
    if request.htmx and not request.htmx.history_restore_request:
        # The address bar shows `?errors=1`, not the form's `?errors=1&tool=`.
        response["HX-Push-Url"] = context["canonical_url"]
    return response


@require_GET
def item_detail(request: HttpRequest, session_id: uuid.UUID, seq: int) -> HttpResponse:
    """One item whole. For htmx, what replaces its cut copy on the timeline (the output,
    the text, the message); or, into the slot under a step, the output the model got."""
    item = get_object_or_404(
        Item.objects.select_related("session").prefetch_related(item_blob_refs()),
        session_id=session_id,
        seq=seq,
    )
    context = item_page_context(item)
    target = request.htmx.target if request.htmx else None
    if target == f"item-{seq}-blob" and item.type == Item.Type.TOOL_RESULT:
        fragment = "_output_in_place.html"
    else:
        fragment = _ITEM_FRAGMENTS.get(item.type, "_message.html")
    return _render(request, "item_detail.html", {**context, "whole": True}, fragment=fragment)


# --- blobs ---------------------------------------------------------------------------------


@require_GET
def blob_list(request: HttpRequest) -> HttpResponse:
    # Rows are made by ingest, uploads and `manage.py blobs index`, never here: the page
    # only notes (from two stats, no listing) when the store changed since the last index.
    form = BlobFilterForm(request.GET)
    rows = blob_rows(form)
    page = Paginator(rows, BLOBS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "form": form,
        "page": page,
        **filter_choices(form),
        "sort_headers": blob_sort_headers(form.sort_key),
        "index_note": store_index_note(),
    }
    return _render(request, "blob_list.html", context, fragment="blob_list.html#list")


def _add_blob_page_extras(
    request: HttpRequest,
    blob: Blob,
    context: dict[str, Any],
    *,
    share_form: ShareLinkForm | None = None,
) -> None:
    """What a whole blob page shows around its view: the step that made the blob and the
    steps that refer to it (blobviewer.catalog.provenance), and the share box."""
    whole_page = not request.htmx or request.htmx.history_restore_request
    provenance = blob_provenance(blob) if whole_page else None
    maker = provenance.maker if provenance else None
    link = new_share(request, blob)
    context.update(
        provenance=provenance,
        # Called by the template when it draws the header: the timeline's layout is read
        # to find the step's page.
        maker_url=partial(timeline_url, maker) if maker else "",
        share_form=share_form or ShareLinkForm(initial={"selector": context["selector"]}),
        new_share=link,
        share_url=share_url(request, link) if link else "",
    )


def _blob_pruned(request: HttpRequest, tombstone: PrunedBlob) -> HttpResponse:
    """The 410 page of a blob that retention deleted, instead of a 404."""
    return render(request, "blob_pruned.html", {"tombstone": tombstone}, status=410)


@require_GET
def blob_detail(request: HttpRequest, blob_id: uuid.UUID) -> HttpResponse:
    if tombstone := pruned_blob(blob_id, store=blob_store()):
        return _blob_pruned(request, tombstone)
    viewed = blob_for_view(blob_id, store=blob_store())  # writes nothing; see blob_index
    if viewed is None:
        raise Http404("No blob has this id.")
    blob = viewed.blob
    context, status = _blob_view_context(
        request, blob, base_url=reverse("blob_detail", args=[blob.id])
    )
    context["raw_url"] = reverse("blob_raw", args=[blob.id])
    context["unindexed"] = viewed.unindexed
    if not context["in_place"]:
        _add_blob_page_extras(request, blob, context)
    return _render(
        request, "blob_detail.html", context, fragment="blob_detail.html#view", status=status
    )


@require_GET
def blob_raw(request: HttpRequest, blob_id: uuid.UUID) -> HttpResponse:
    if tombstone := pruned_blob(blob_id, store=blob_store()):
        return _blob_pruned(request, tombstone)
    return _raw_response(blob_id)


def _raw_response(blob_id: uuid.UUID) -> StreamingHttpResponse:
    """The stored blob as it is, streamed from the store (never a redirect, which would
    outlive a revoked share and lose these headers); never sniffed into HTML."""
    try:
        blob = blob_store().open_sync(blob_id)
    except (BlobStoreError, OSError):
        raise Http404("The store has no blob with this id.") from None
    is_json = blob.kind == "json"
    response = StreamingHttpResponse(
        _Streamed(blob),
        content_type="application/json" if is_json else "text/plain; charset=utf-8",
    )
    response["Content-Length"] = str(blob.size)
    name = f"{blob_id}{'.json' if is_json else '.txt'}"
    response["Content-Disposition"] = content_disposition_header(False, name)
    response["X-Content-Type-Options"] = "nosniff"
    return response


class _Streamed:
    """A blob's bytes for a streaming response; closed with the response."""

    def __init__(self, blob: BlobReader) -> None:
        self.blob = blob

    def __iter__(self) -> Iterator[bytes]:
        return self.blob.blocks(0, _RAW_BLOCK)

    def close(self) -> None:
        self.blob.close()


_RAW_BLOCK = 256 * 1024


# --- the inspect API -----------------------------------------------------------------------


@require_GET
def api_inspect(request: HttpRequest, blob_id: uuid.UUID) -> HttpResponse:
    """Byte for byte what the model's inspect tool returns for this blob and selector."""
    store = blob_store()
    if not store.exists_sync(blob_id):
        return _plain_text(f"blob {blob_id} not found", status=404)
    selector = request.GET.get("selector") or None
    try:
        with evaluation_slot(selector, stored_size(store, blob_id)):
            result = inspect_blob(store, str(blob_id), selector)
    except Busy as error:
        return _plain_text(str(error), status=429)
    except InspectError as error:
        return _plain_text(str(error), status=400)
    return _plain_text(result)


def _plain_text(text: str, *, status: int = 200) -> HttpResponse:
    # encode_text keeps lone surrogates as the store does, instead of failing on them.
    response = HttpResponse(
        encode_text(text), content_type="text/plain; charset=utf-8", status=status
    )
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_not_required  # an agent on another machine authenticates with its API token
@csrf_exempt  # no cookies, so no cross-site request can carry the token
@require_POST
def api_ingest(request: HttpRequest) -> HttpResponse:
    """Record a session sent by an agent: a session log as the body, or a multipart
    `log` file with its `blob` files. 201 when it added something, 200 when not."""
    secret = _bearer_token(request)
    if not secret:
        return _unauthorized(request, "an API token is required: Authorization: Bearer <token>")
    token = ApiToken.objects.authenticate(secret)
    if token is None:
        return _unauthorized(request, "this API token is unknown or revoked")
    token.mark_used()
    try:
        with received_upload(request, max_bytes=settings.BLOBVIEWER_UPLOAD_MAX_BYTES) as upload:
            result = save_upload(upload, owner=token.user)
    except UploadError as error:
        # One line, ended, so that curl prints it as a line.
        return _plain_text(error.message + "\n", status=error.status)
    url = request.build_absolute_uri(result.session.get_absolute_url())
    response = JsonResponse(
        {
            "session": str(result.session.id),
            "url": url,
            "new_items": result.new_items,
            "items": result.items,
            "blobs": result.blobs,
            "missing_blobs": result.missing_blobs,
            "new_blobs": result.new_blobs,
        },
        status=201 if result.changed_anything else 200,
    )
    if result.changed_anything:
        response["Location"] = url
    return response


# --- API tokens ----------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """My API tokens; a POST makes one and shows its secret, this once."""
    form = ApiTokenForm(request.POST if request.method == "POST" else None)
    context: dict[str, Any] = {"api_url": request.build_absolute_uri(reverse("api_ingest"))}
    status, secret = 200, ""
    if request.method == "POST":
        if form.is_valid():
            new_token, secret = ApiToken.objects.issue(
                user=request.user, name=form.cleaned_data["name"]
            )
            context.update(new_token=new_token, secret=secret)
            form = ApiTokenForm()
        else:
            status = 400
    context.update(form=form, tokens=ApiToken.objects.filter(user=request.user))
    # The page itself, not a redirect: the secret is not stored anywhere (a flash message
    # would keep it in the session or a cookie), so this response is its only copy.
    response = render(request, "token_list.html", context, status=status)
    if secret:
        add_never_cache_headers(response)
    return response


@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=token_id, user=request.user)
    if not token.is_revoked:
        token.revoke()
        messages.success(request, f"Token “{token.name}” revoked; agents using it are refused.")
    return redirect("token_list")


# --- share links ---------------------------------------------------------------------------


@require_POST
def share_create(request: HttpRequest, blob_id: uuid.UUID) -> HttpResponse:
    # A POST may index the blob (a share link needs its row); a GET never does.
    blob = indexed_blob(blob_id, store=blob_store())
    if blob is None:
        raise Http404("No blob has this id.")
    form = ShareLinkForm(request.POST)
    if not form.is_valid():
        return _share_refused(request, blob, form)
    link = ShareLink.objects.create(
        blob=blob,
        selector=form.cleaned_data["selector"],
        created_by=request.user,
        expires_at=timezone.now() + timedelta(days=form.cleaned_data["days"]),
        note=form.cleaned_data["note"],
    )
    if request.htmx:
        # In place: the share box becomes the link with its Copy button.
        context = {"link": link, "share_url": share_url(request, link)}
        return render(request, "_share_result.html", context, status=201)
    return redirect(back_to_blob(link))


def _share_refused(request: HttpRequest, blob: Blob, form: ShareLinkForm) -> HttpResponse:
    """400: with htmx, the share box again with the errors and what was typed; else the
    blob's page with the selector that was to be shared (its error beside the selector
    box, as the page shows it) and the share box holding the other fields' errors."""
    if request.htmx:
        context = {"blob": blob, "share_form": form, "selector": form.data.get("selector", "")}
        return render(request, "_share_box.html", context, status=400)
    context, status = _blob_view_context(
        request,
        blob,
        base_url=reverse("blob_detail", args=[blob.id]),
        selector_text=request.POST.get("selector", ""),
    )
    context["raw_url"] = reverse("blob_raw", args=[blob.id])
    _add_blob_page_extras(request, blob, context, share_form=form)
    return render(request, "blob_detail.html", context, status=max(status, 400))


@require_GET
def share_list(request: HttpRequest) -> HttpResponse:
    links = list(ShareLink.objects.filter(created_by=request.user).select_related("blob"))
    for link in links:
        _with_share_url(request, link)
    return render(request, "share_list.html", {"links": links, "now": timezone.now()})


def _with_share_url(request: HttpRequest, link: ShareLink) -> ShareLink:
    """*link* with what its row's Copy field needs: the URL and an id for the field."""
    link.share_url = share_url(request, link)  # type: ignore[attr-defined]
    link.copy_id = f"share-url-{link.pk}"  # type: ignore[attr-defined]
    return link


@require_http_methods(["GET", "POST"])
def share_revoke(request: HttpRequest, token: str) -> HttpResponse:
    """GET asks "Revoke this link?" (the page a button leads to without JavaScript); POST
    revokes. With htmx (the list's button, after its hx-confirm) the answer is the list's
    row for the link, now revoked."""
    link = get_object_or_404(
        ShareLink.objects.select_related("blob"), token=token, created_by=request.user
    )
    if request.method == "GET":
        context = {"link": link, "share_url": share_url(request, link)}
        return render(request, "share_revoke_confirm.html", context)
    if link.revoked_at is None:
        link.revoked_at = timezone.now()
        link.save(update_fields=["revoked_at"])
        if not request.htmx:
            messages.success(request, "Share link revoked; it no longer opens.")
    if request.htmx:
        return render(request, "share_list.html#row", {"link": _with_share_url(request, link)})
    return redirect("share_list")


@login_not_required
@require_GET
def share_detail(request: HttpRequest, token: str) -> HttpResponse:
    """The blob behind a share link, no login needed. The visitor may change the selector,
    but the link never shows anything other than its one blob."""
    link = _active_share_link(request, token)
    if isinstance(link, HttpResponse):
        return link
    viewed = blob_for_view(link.blob_id, store=blob_store())
    blob = viewed.blob if viewed else link.blob
    context, status = _blob_view_context(
        request,
        blob,
        base_url=reverse("share_detail", args=[link.token]),
        default_selector=link.selector,
    )
    context.update(link=link, raw_url=reverse("share_raw", args=[link.token]))
    if not request.htmx or request.htmx.history_restore_request:
        # The step that made the blob, as text; nothing else of its session.
        context["provenance"] = blob_provenance(blob, references=0)
    return _render(
        request, "share_detail.html", context, fragment="blob_detail.html#view", status=status
    )


@login_not_required
@require_GET
def share_raw(request: HttpRequest, token: str) -> HttpResponse:
    link = _active_share_link(request, token)
    if isinstance(link, HttpResponse):
        return link
    return _raw_response(link.blob_id)


def _active_share_link(request: HttpRequest, token: str) -> ShareLink | HttpResponse:
    """The link, or the 410 page when it has expired or been revoked or its blob was
    deleted by retention; 404 when unknown."""
    link = get_object_or_404(ShareLink.objects.select_related("blob"), token=token)
    if not link.is_active:
        return render(request, "share_gone.html", {"link": link}, status=410)
    if tombstone := pruned_blob(link.blob_id, store=blob_store()):
        context = {"link": link, "tombstone": tombstone}
        return render(request, "share_gone.html", context, status=410)
    return link
