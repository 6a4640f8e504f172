from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from blobviewer.models import (
    ApiToken,
    Blob,
    BlobRef,
    Item,
    PrunedBlob,
    PrunedSession,
    Session,
    ShareLink,
)


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = [
        "title",
        "owner",
        "model",
        "created_at",
        "item_count",
        "tool_result_count",
        "blob_count",
        "output_bytes_received",
        "output_bytes_in_history",
    ]
    list_filter = ["model", "source_format"]
    search_fields = ["id", "title", "owner__username"]
    readonly_fields = ["ingested_at", "updated_at"]
    # Only the owner's API tokens may add to a session; set it here or with
    # `manage.py sessions chown`. A raw id, not a select of every user.
    raw_id_fields = ["owner"]
    list_select_related = ["owner"]


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ["session", "seq", "type", "role", "sidechain", "tool", "at", "is_error"]
    list_filter = ["type", "sidechain", "is_error"]
    search_fields = ["session__id", "tool", "call_id"]
    raw_id_fields = ["session"]
    list_select_related = ["session"]


@admin.register(Blob)
class BlobAdmin(admin.ModelAdmin):
    list_display = ["id", "made_by_title", "kind", "size", "count", "created_at", "missing"]
    list_filter = ["kind", "missing"]
    search_fields = ["id", "made_by_title"]
    # An id box, not a menu of every item recorded.
    raw_id_fields = ["made_by"]


@admin.register(BlobRef)
class BlobRefAdmin(admin.ModelAdmin):
    list_display = ["item", "blob"]
    raw_id_fields = ["item", "session", "blob"]
    list_select_related = ["item", "item__session"]


@admin.register(ShareLink)
class ShareLinkAdmin(admin.ModelAdmin):
    list_display = [
        "token",
        "blob",
        "selector",
        "created_by",
        "created_at",
        "expires_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at"]
    search_fields = ["token", "blob__id", "created_by__username", "note"]
    raw_id_fields = ["blob", "created_by"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix", "user__username"]
    raw_id_fields = ["user"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    list_select_related = ["user"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A token is made on /tokens/ by its owner, the only one who ever sees its secret.
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{revoked} token(s) revoked.")


class TombstoneAdmin(admin.ModelAdmin):
    """Tombstones are written by `manage.py prune` only. Deleting one lets its session be
    ingested, or its blob uploaded, again."""

    readonly_fields = ["id", "pruned_at"]
    search_fields = ["id"]
    date_hierarchy = "pruned_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(PrunedSession)
class PrunedSessionAdmin(TombstoneAdmin):
    list_display = ["id", "title", "pruned_at"]
    search_fields = ["id", "title"]
    readonly_fields = ["id", "title", "pruned_at"]


@admin.register(PrunedBlob)
class PrunedBlobAdmin(TombstoneAdmin):
    list_display = ["id", "pruned_at"]
