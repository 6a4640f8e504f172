"""gunicorn's configuration for the production server (`make serve`), from the environment.

`gunicorn -c blobviewer/gunicorn.conf.py` from any directory serves blobviewer.wsgi with
the gthread worker: WEB_CONCURRENCY processes (default 2), each with GUNICORN_THREADS
threads (default 4), so a slow page or a long upload holds one thread, not a process.
It listens on BIND, or else 127.0.0.1:PORT (default 8000): a proxy in front of it
terminates HTTPS (docs/team.md#run-it-for-a-team). Everything that must be shared between
the processes (sessions, failed logins, the limit on expensive selectors) lives in the
database or the data folder, never in one process's memory.

gunicorn's own variables still apply: FORWARDED_ALLOW_IPS (the proxies it believes about
X-Forwarded-Proto; default 127.0.0.1,::1) and GUNICORN_CMD_ARGS for anything else.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
# gunicorn reads this file before it changes into `chdir`; blobviewer must be importable
# for the shared reading of the environment below (systemd may start us from anywhere).
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from blobviewer.serve_preflight import server_settings  # noqa: E402

_server = server_settings(os.environ)
# Requests that wait on an object store take turns, one fewer than a worker's threads, so
# a store that hangs leaves a thread for the pages that need no store (core.store.s3.client).
os.environ.setdefault("BLOBVIEWER_S3_CONCURRENCY", str(max(1, _server.threads - 1)))

wsgi_app = "blobviewer.wsgi:application"
chdir = str(BASE_DIR)
bind = [_server.bind]
worker_class = "gthread"
workers = _server.workers
threads = _server.threads
proc_name = "blobviewer"
# Requests to stdout, errors to stderr: whatever runs `make serve` (systemd, a container)
# keeps the logs.
accesslog = "-"
errorlog = "-"
# gunicorn 25+ opens a control socket in $HOME by default; two servers of one user (or a
# test server beside a real one) would fight over it, and nothing here uses gunicornc.
control_socket_disable = True
