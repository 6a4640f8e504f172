"""The OTLP receiver (docs/otlp.md) against `POST /api/sessions` of the same content
(docs/benchmarks.md). Not a test: run it by hand or with `make bench`.

    python bench/otlp_bench.py [--batches 3]

It builds a throwaway data directory and SQLite database, serves the site over HTTP in
this process (wsgiref, one thread), and for tool outputs of 1 KB, 100 KB, 1 MB and 10 MB
sends batches of `execute_tool` spans through the official Python OTLP/HTTP exporter
(protobuf), each batch a new conversation; then the same calls and outputs as a session
log to `POST /api/sessions`. It prints spans (steps) a second and MB of output a second
for both, and their ratio: the receiver maps, keeps and promotes what the upload only
promotes, so the goal is the same order of magnitude.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SIZES = ((1024, 50), (100 * 1024, 20), (1024 * 1024, 8), (10 * 1024 * 1024, 2))  # bytes, spans


def output_of(size: int, n: int) -> str:
    line = f"{n:06d} INFO worker processed an item, status=ok".ljust(63) + "\n"
    return (line * (size // 64 + 1))[:size]


def spans_of(conversation: str, size: int, count: int) -> list[Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for n in range(count):
        attributes = {
            "gen_ai.conversation.id": conversation,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "run",
            "gen_ai.tool.call.id": f"c{n}",
            "gen_ai.tool.call.arguments": f'{{"n": {n}}}',
            "gen_ai.tool.call.result": output_of(size, n),
        }
        tracer.start_span("execute_tool run", attributes=attributes).end()
    return list(memory.get_finished_spans())


def session_log_of(size: int, count: int) -> bytes:
    import orjson

    at = "2026-12-05T10:00:00.000+00:00"
    lines: list[dict[str, Any]] = [
        {"type": "session", "id": str(uuid.uuid4()), "created_at": at, "title": "bench"}
    ]
    for n in range(count):
        call = {"id": f"c{n}", "name": "run", "arguments": {"n": n}}
        lines.append({"type": "assistant", "seq": 2 * n + 1, "at": at, "tool_calls": [call]})
        lines.append(
            {
                "type": "tool_result",
                "seq": 2 * n + 2,
                "at": at,
                "call_id": f"c{n}",
                "tool": "run",
                "output": output_of(size, n),
            }
        )
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def serve() -> str:
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from django.core.wsgi import get_wsgi_application

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = make_server("127.0.0.1", 0, get_wsgi_application(), handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=3)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="otlp-bench-"))
    atexit.register(shutil.rmtree, data, ignore_errors=True)
    os.environ.update(
        BLOBVIEWER_DATA=str(data),
        DJANGO_SETTINGS_MODULE="blobviewer.settings",
        DEBUG="true",
        BLOBVIEWER_OTLP_REQUESTS_PER_MINUTE="0",
    )
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    import httpx
    from django.core.management import call_command
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from blobviewer.models import ApiToken

    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("bench")
    _, secret = ApiToken.objects.issue(user=user, name="bench")
    url = serve()
    auth = {"Authorization": f"Bearer {secret}"}
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers=auth, timeout=600)
    print(
        f"{'output':>8} {'spans':>6}  {'OTLP spans/s':>12} {'MB/s':>7}  "
        f"{'upload steps/s':>14} {'MB/s':>7}  {'ratio':>6}"
    )
    for size, count in SIZES:
        otlp_seconds = upload_seconds = 0.0
        for _ in range(args.batches):
            spans = spans_of(str(uuid.uuid4()), size, count)
            started = time.perf_counter()
            assert exporter.export(spans).name == "SUCCESS"
            otlp_seconds += time.perf_counter() - started
            log = session_log_of(size, count)
            started = time.perf_counter()
            answer = httpx.post(
                f"{url}/api/sessions",
                content=log,
                headers={**auth, "Content-Type": "application/x-ndjson"},
                timeout=600,
            )
            upload_seconds += time.perf_counter() - started
            assert answer.status_code == 201, answer.text
        total = count * args.batches
        mb = size * total / 1e6
        print(
            f"{size // 1024:>6}KB {count:>6}  "
            f"{total / otlp_seconds:>12.1f} {mb / otlp_seconds:>7.1f}  "
            f"{total / upload_seconds:>14.1f} {mb / upload_seconds:>7.1f}  "
            f"{otlp_seconds / upload_seconds:>5.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
