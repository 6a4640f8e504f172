"""Live follow end to end, as a user runs it: `make serve` (gunicorn), `manage.py ingest
--watch` on a folder, a session page open in Chromium; lines appended to the watched
recording show up as new steps within 5 s, without a reload."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from playwright.sync_api import expect

from web.ingest_process import Watching
from web.production import PASSWORD, create_superuser, own_database, serving

SESSION = "0199a8e0-0000-7000-8000-0000000000aa"


def rollout_lines(start: int, stop: int) -> str:
    """Codex rollout lines: steps *start*..*stop*-1, each a call and its output."""
    lines = []
    for n in range(start, stop):
        at = f"2026-01-02T10:{n:02d}:00.000Z"
        arguments = json.dumps({"cmd": f"echo step {n}"})
        call = {"type": "function_call", "name": "exec_command", "arguments": arguments}
        output = {"type": "function_call_output", "call_id": f"c{n}", "output": f"step {n}\n"}
        for payload in ({**call, "call_id": f"c{n}"}, output):
            lines.append(json.dumps({"timestamp": at, "type": "response_item", "payload": payload}))
    return "".join(line + "\n" for line in lines)


def opening() -> str:
    meta = {"id": SESSION, "timestamp": "2026-01-02T09:59:59.000Z", "cwd": "/work"}
    task = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
    first = [
        {"timestamp": "2026-01-02T09:59:59.000Z", "type": "session_meta", "payload": meta},
        {"timestamp": "2026-01-02T10:00:00.000Z", "type": "response_item", "payload": task},
    ]
    return "".join(json.dumps(line) + "\n" for line in first)


def test_lines_appended_to_a_watched_recording_appear_on_the_open_page(
    browser, tmp_path: Path
) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    recording = watched / f"rollout-2026-01-02T10-00-00-{SESSION}.jsonl"
    recording.write_text(opening() + rollout_lines(0, 2), encoding="utf-8")
    # Production settings, but over plain HTTP on the loopback (no proxy in front).
    plain_http = {
        "SECURE_SSL_REDIRECT": "false",
        "SECURE_HSTS_SECONDS": "0",
        "SECURE_PROXY_SSL_HEADER": "false",
        "SESSION_COOKIE_SECURE": "false",
        "CSRF_COOKIE_SECURE": "false",
    }
    with (
        own_database(tmp_path) as database_url,
        serving(tmp_path, database_url, ALLOWED_HOSTS="127.0.0.1", **plain_http) as server,
    ):
        create_superuser(server)
        env = {"DATABASE_URL": database_url}
        watching = Watching([watched], data=server.data, logs=tmp_path / "logs", **env)
        try:
            watching.wait_for_output("watching ", bound=180)
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"{server.url}/accounts/login/")
            page.fill("#id_username", "alice")
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.goto(f"{server.url}/sessions/{uuid.UUID(SESSION)}/")
            steps = page.locator("section.step")
            expect(steps).to_have_count(2)
            page.evaluate("window.notReloaded = true")
            page.locator("#live input.follow").check()

            with recording.open("a", encoding="utf-8") as file:
                file.write(rollout_lines(2, 4))

            expect(steps).to_have_count(4, timeout=5_000)
            expect(steps.last).to_be_in_viewport()
            assert page.evaluate("window.notReloaded") is True
            context.close()
        finally:
            watching.kill()
