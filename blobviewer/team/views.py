"""What people do together: agents' uploads with API tokens, the tokens page, share links
(made, listed, revoked, and opened without a login)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from blobviewer.catalog.blobs import blob_for_view, catalogued_blob, replacement_of
from blobviewer.catalog.provenance import blob_provenance
from blobviewer.catalog.retention import pruned_blob
from blobviewer.data_dir import blob_store
from blobviewer.forms import ApiTokenForm, ShareLinkForm
from blobviewer.models import ApiToken, Blob, ShareLink
from blobviewer.reader.views import add_blob_page_extras, blob_view_context, raw_response
from blobviewer.responses import RETRY_AFTER_SECONDS, plain_text, render_page
from blobviewer.team.pushed import HELD_OFFSET, HeldElsewhere, Push, receive_push
from blobviewer.team.sharing import back_to_blob, share_url
from blobviewer.team.uploads import UploadError, received_upload, save_upload


def _bearer_token(request: HttpRequest) -> str:
    """The token of an `Authorization: Bearer <token>` header; "" when there is none."""
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _unauthorized(request: HttpRequest, message: str) -> HttpResponse:
    response = plain_text(
        f"{message}; make one at {request.build_absolute_uri(reverse('token_list'))}\n",
        status=401,
    )
    response["WWW-Authenticate"] = 'Bearer realm="blobviewer"'
    return response


def api_token(request: HttpRequest) -> ApiToken | HttpResponse:
    """The API token the request is sent with (marked used), or the 401 to answer."""
    secret = _bearer_token(request)
    if not secret:
        return _unauthorized(request, "an API token is required: Authorization: Bearer <token>")
    token = ApiToken.objects.authenticate(secret)
    if token is None:
        return _unauthorized(request, "this API token is unknown or revoked")
    token.mark_used()
    return token


def _refused(error: UploadError) -> HttpResponse:
    # One line, ended, so that curl prints it as a line.
    response = plain_text(error.message + "\n", status=error.status)
    if error.status == 503:
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    if isinstance(error, HeldElsewhere):
        response[HELD_OFFSET] = str(error.offset)
    return response


@login_not_required  # an agent on another machine authenticates with its API token
@csrf_exempt  # no cookies, so no cross-site request can carry the token
@require_POST
def api_ingest(request: HttpRequest) -> HttpResponse:
    """Record a session sent by an agent: a session log as the body, or a multipart
    `log` file with its `blob` files. 201 when it added something, 200 when not."""
    token = api_token(request)
    if isinstance(token, HttpResponse):
        return token
    try:
        with received_upload(request, max_bytes=settings.BLOBVIEWER_UPLOAD_MAX_BYTES) as upload:
            result = save_upload(upload, owner=token.user)
    except UploadError as error:
        return _refused(error)
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


@require_http_methods(["GET", "HEAD", "POST"])
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
    blob = catalogued_blob(blob_id, store=blob_store())
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
    context, status = blob_view_context(
        request,
        blob,
        base_url=reverse("blob_detail", args=[blob.id]),
        selector_text=request.POST.get("selector", ""),
    )
    context["raw_url"] = reverse("blob_raw", args=[blob.id])
    add_blob_page_extras(request, blob, context, share_form=form)
    return render(request, "blob_detail.html", context, status=max(status, 400))


@require_safe
def share_list(request: HttpRequest) -> HttpResponse:
    links = list(ShareLink.objects.filter(created_by=request.user).select_related("blob"))
    for link in links:
        _with_share_url(request, link)
    return render(request, "share_list.html", {"links": links, "now": timezone.now()})


def _with_share_url(request: HttpRequest, link: ShareLink) -> ShareLink:
    """*link* with what its row's Copy field needs: the URL and an id for the field."""
    link.share_url = share_url(request, link)
    link.copy_id = f"share-url-{link.pk}"
    return link


@require_http_methods(["GET", "HEAD", "POST"])
def share_revoke(request: HttpRequest, token: str) -> HttpResponse:
    """GET asks "Revoke this link?" (the page a button leads to without JavaScript); POST
    revokes. With htmx (the list's button, after its hx-confirm) the answer is the list's
    row for the link, now revoked."""
    link = get_object_or_404(
        ShareLink.objects.select_related("blob"), token=token, created_by=request.user
    )
    if request.method in ("GET", "HEAD"):  # asking, never revoking
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
@require_safe
def share_detail(request: HttpRequest, token: str) -> HttpResponse:
    """The blob behind a share link, no login needed. The visitor may change the selector,
    but the link never shows anything other than its one blob."""
    link = _active_share_link(request, token)
    if isinstance(link, HttpResponse):
        return link
    replacement = replacement_of(link.blob)  # a rebuild re-derived the shared output
    viewed = blob_for_view(replacement or link.blob_id, store=blob_store())
    blob = viewed.blob if viewed else link.blob
    context, status = blob_view_context(
        request,
        blob,
        base_url=reverse("share_detail", args=[link.token]),
        default_selector=link.selector,
    )
    context.update(
        link=link,
        raw_url=reverse("share_raw", args=[link.token]),
        replaced=link.blob_id if replacement else None,
    )
    if not request.htmx or request.htmx.history_restore_request:
        # The step that made the blob, as text; nothing else of its session.
        context["provenance"] = blob_provenance(blob, references=0)
    return render_page(
        request, "share_detail.html", context, fragment="blob_detail.html#view", status=status
    )


@login_not_required
@require_safe
def share_raw(request: HttpRequest, token: str) -> HttpResponse:
    link = _active_share_link(request, token)
    if isinstance(link, HttpResponse):
        return link
    return raw_response(replacement_of(link.blob) or link.blob_id)


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


@login_not_required  # `blobviewer push` authenticates with its API token
@csrf_exempt  # no cookies, so no cross-site request can carry the token
@require_POST
def api_recordings(request: HttpRequest) -> HttpResponse:
    """Add a part of a recording pushed from another machine and, for the last part,
    ingest it (blobviewer.team.pushed): 201 when it added something, 200 when not, 202
    for a part that is not the last; 409 with the offset the site holds."""
    token = api_token(request)
    if isinstance(token, HttpResponse):
        return token
    try:
        push = Push.of(request)
        result = receive_push(
            request, push, owner=token.user, max_bytes=settings.BLOBVIEWER_UPLOAD_MAX_BYTES
        )
    except UploadError as error:
        return _refused(error)
    sessions = [
        {
            "session": str(outcome.session_id),
            "url": request.build_absolute_uri(reverse("session_detail", args=[outcome.session_id])),
            "new_items": outcome.new_items,
            "items": outcome.total_items,
        }
        for outcome in result.results
    ]
    status = 202 if not push.final else 201 if result.changed_anything else 200
    response = JsonResponse(
        {"offset": result.offset, "sessions": sessions, "refused": [m for _, m in result.refused]},
        status=status,
    )
    response[HELD_OFFSET] = str(result.offset)
    return response
