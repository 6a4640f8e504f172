"""The blob list (`/blobs/`): every stored output the catalog knows, filtered and sorted."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from blobviewer.catalog.listing import blob_rows, filter_choices, sort_headers
from blobviewer.catalog.store_scan import catalog_note
from blobviewer.forms import BlobFilterForm
from blobviewer.responses import render_page

BLOBS_PER_PAGE = 50


@require_safe
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
        "sort_headers": sort_headers(form.sort_key),
        "index_note": catalog_note(),
    }
    return render_page(request, "blob_list.html", context, fragment="blob_list.html#list")
