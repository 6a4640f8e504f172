"""ASGI entry point: `uvicorn blobviewer.asgi:application`.

Under ASGI each request's synchronous code runs in a thread of its own, so a connection kept
for the next request would be left behind: connections close after each request here
unless CONN_MAX_AGE says otherwise (Django's advice; gunicorn's threads keep theirs).
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "blobviewer.settings")
os.environ.setdefault("CONN_MAX_AGE", "0")

application = get_asgi_application()
