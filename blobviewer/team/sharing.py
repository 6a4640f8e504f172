"""Sharing in place: what a blob page's share box shows, and where a share goes back to.

"Share this view" posts from the blob page. With htmx the answer replaces the share box
with the new link (and its Copy button); without JavaScript the browser is sent back to
the blob page, whose share box then shows that link (`?shared=<pk>`, honoured only for
the person who made the link, on its own blob).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse

from blobviewer.models import Blob, ShareLink

SHARED_PARAM = "shared"
SHARE_BOX_ID = "share-box"


def share_url(request: HttpRequest, link: ShareLink) -> str:
    """The link as its visitor opens it: an absolute URL."""
    return request.build_absolute_uri(link.get_absolute_url())


def back_to_blob(link: ShareLink) -> str:
    """The blob page at the shared selector, showing the new link in its share box."""
    query = {"selector": link.selector} if link.selector else {}
    query[SHARED_PARAM] = str(link.pk)
    url = reverse("blob_detail", args=[link.blob_id])
    return f"{url}?{urlencode(query)}#{SHARE_BOX_ID}"


def new_share(request: HttpRequest, blob: Blob) -> ShareLink | None:
    """The link that `?shared=<pk>` names, when the logged-in user made it for *blob*."""
    value = request.GET.get(SHARED_PARAM, "")
    if not value.isdigit() or len(value) > 18 or not request.user.is_authenticated:
        return None
    return ShareLink.objects.filter(pk=int(value), blob_id=blob.id, created_by=request.user).first()
