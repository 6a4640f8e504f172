from __future__ import annotations

from django.apps import AppConfig


class BlobviewerConfig(AppConfig):
    name = "blobviewer"
    verbose_name = "blobviewer"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from blobviewer.search.indexing import connect_signals

        connect_signals()
