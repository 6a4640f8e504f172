"""The blob pages: a blob read with a selector (whole page or the swapped view), its raw
bytes, and `/api/inspect`, byte for byte what the model's inspect tool returns."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_safe

from blobviewer.catalog.blobs import as_missing, blob_for_view, replacement_of
from blobviewer.catalog.provenance import blob_provenance, timeline_url
from blobviewer.catalog.retention import pruned_blob
from blobviewer.data_dir import blob_store
from blobviewer.forms import SelectorForm, ShareLinkForm
from blobviewer.models import Blob, PrunedBlob
from blobviewer.reader.blob_page import reader_view
from blobviewer.reader.display import blob_page
from blobviewer.reader.slots import Busy, evaluation_slot, stored_size
from blobviewer.responses import plain_text, positive_int, render_page
from blobviewer.team.sharing import new_share, share_url
from core.inspect_tool import InspectError, inspect_blob
from core.selectors import SelectorError, escape_surrogates
from core.store import BlobNotFound, BlobReader, BlobStoreError, StoreUnavailable

# A blob opened in place on a session's timeline replaces the slot under its item; its
# fragment then keeps targeting that slot and leaves the address bar alone.
_IN_PLACE_TARGET = re.compile(r"item-\d{1,10}-blob")
_PAGE_VIEW_ID = "blob-view"


def _view_id(request: HttpRequest) -> str:
    target = request.htmx.target if request.htmx else None
    return target if target and _IN_PLACE_TARGET.fullmatch(target) else _PAGE_VIEW_ID


def blob_view_context(
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
                    blob, form.parsed, store=store, start=positive_int(request.GET.get("start"))
                )
        except Busy as error:
            form.add_error("selector", str(error))
            status = 429
        except SelectorError as error:
            form.add_error("selector", str(error))
            status = 400
        except BlobNotFound:  # vanished since it was indexed; the page says so, unsaved
            blob = as_missing(blob)
        except StoreUnavailable:
            raise  # a 503 (blobviewer.middleware), not a damaged blob
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
        "in_place": (in_place := view_id != _PAGE_VIEW_ID),
    }
    context["reader"] = reader_view(
        request,
        blob,
        page,
        selector=form.parsed if form.is_valid() else None,
        selector_text=selector,
        base_url=base_url,
        view_id=view_id,
        in_place=in_place,
        store=blob_store(),
    )
    return context, status


def add_blob_page_extras(
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


# The blob a link named before a rebuild replaced it (see blobviewer.catalog.blobs).
REPLACED_PARAM = "replaced"


def replaced_here(request: HttpRequest, blob: Blob) -> uuid.UUID | None:
    """The blob the `replaced` parameter names when *blob* replaces it, for the page's
    note; None otherwise (a parameter that says anything else is ignored)."""
    try:
        old = uuid.UUID(request.GET.get(REPLACED_PARAM, ""))
    except ValueError:
        return None
    row = Blob.objects.filter(pk=old).first()
    return old if row is not None and replacement_of(row) == blob.pk else None


@require_safe
def blob_detail(request: HttpRequest, blob_id: uuid.UUID) -> HttpResponse:
    if tombstone := pruned_blob(blob_id, store=blob_store()):
        return _blob_pruned(request, tombstone)
    viewed = blob_for_view(blob_id, store=blob_store())  # writes nothing; see blob_index
    if viewed is None:
        raise Http404("No blob has this id.")
    blob = viewed.blob
    if (replacement := replacement_of(blob)) is not None:
        query = request.GET.copy()
        query[REPLACED_PARAM] = str(blob.id)
        return redirect(f"{reverse('blob_detail', args=[replacement])}?{query.urlencode()}")
    context, status = blob_view_context(
        request, blob, base_url=reverse("blob_detail", args=[blob.id])
    )
    context["raw_url"] = reverse("blob_raw", args=[blob.id])
    context["unindexed"] = viewed.unindexed
    context["replaced"] = replaced_here(request, blob)
    if not context["in_place"]:
        add_blob_page_extras(request, blob, context)
    return render_page(
        request, "blob_detail.html", context, fragment="blob_detail.html#view", status=status
    )


@require_safe
def blob_raw(request: HttpRequest, blob_id: uuid.UUID) -> HttpResponse:
    if tombstone := pruned_blob(blob_id, store=blob_store()):
        return _blob_pruned(request, tombstone)
    return raw_response(blob_id)


def raw_response(blob_id: uuid.UUID) -> StreamingHttpResponse:
    """The stored blob as it is, streamed from the store (never a redirect, which would
    outlive a revoked share and lose these headers); never sniffed into HTML."""
    try:
        blob = blob_store().open_sync(blob_id)
    except StoreUnavailable:
        raise
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


@require_safe
def api_inspect(request: HttpRequest, blob_id: uuid.UUID) -> HttpResponse:
    """Byte for byte what the model's inspect tool returns for this blob and selector."""
    store = blob_store()
    if not store.exists_sync(blob_id):
        return plain_text(f"blob {blob_id} not found", status=404)
    selector = request.GET.get("selector") or None
    try:
        with evaluation_slot(selector, stored_size(store, blob_id)):
            result = inspect_blob(store, str(blob_id), selector)
    except Busy as error:
        return plain_text(str(error), status=429)
    except InspectError as error:
        return plain_text(str(error), status=400)
    return plain_text(result)
