from __future__ import annotations

from django.contrib import admin

from blobviewer.models import Blob, BlobRef, Item, Session, ShareLink


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["title", "model", "created_at", "item_count", "tool_result_count", "blob_count"]
    list_filter = ["model", "source_format"]
    search_fields = ["id", "title"]
    readonly_fields = ["ingested_at", "updated_at"]


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ["session", "seq", "type", "tool", "at", "is_error"]
    list_filter = ["type", "is_error"]
    search_fields = ["session__id", "tool", "call_id"]
    raw_id_fields = ["session"]
    list_select_related = ["session"]


@admin.register(Blob)
class BlobAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "size", "count", "created_at", "missing"]
    list_filter = ["kind", "missing"]
    search_fields = ["id"]
    exclude = ["line_index"]  # thousands of checkpoints; nothing a person edits


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
    search_fields = ["token", "blob__id", "created_by__username"]
    raw_id_fields = ["blob", "created_by"]
