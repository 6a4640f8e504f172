"""Two web servers with different local data folders, one database and one bucket serve the
same sessions and blobs: nothing the site keeps lives only on one host (docs/object-storage.md).

Each server is `manage.py runserver --noreload` in its own process, with its own
BLOBVIEWER_DATA and the same BLOBVIEWER_BLOBS (a prefix on the test SeaweedFS) and
DATABASE_URL: a temporary SQLite file, or with DATABASE_URL set for the test run a fresh
PostgreSQL database made and dropped here (as tests/web/test_production_server.py does).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from core.content import Text
from core.store import FsBlobStore, open_store
from web.production import LEAKY, free_port, own_database
from web.records import BUILD_LOG, record_sample_session

ROOT = Path(__file__).resolve().parents[3]
PASSWORD = "correct-horse-battery"
START_DEADLINE_SECONDS = 120  # only to give up on a server that never comes up


@dataclass
class Host:
    name: str
    url: str
    data: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def host_env(tmp_path: Path, name: str, *, database_url: str, place) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(LEAKY)}
    env.update(place.env)
    env.update(
        {
            "DEBUG": "true",
            "DATABASE_URL": database_url,
            "BLOBVIEWER_DATA": str(tmp_path / name),
            "BLOBVIEWER_BLOBS": place.url,
        }
    )
    return env


def manage(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def start(tmp_path: Path, name: str, env: dict[str, str]) -> Host:
    port = free_port()
    log = tmp_path / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    host = Host(name, f"http://127.0.0.1:{port}", Path(env["BLOBVIEWER_DATA"]), env, process, log)
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{name} exited with {process.returncode}:\n{host.output()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return host
        except OSError:
            time.sleep(0.1)
    stop(host)
    pytest.fail(f"{name} did not listen on {port}:\n{host.output()}")


def stop(host: Host) -> None:
    try:
        os.killpg(host.process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        host.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(host.process.pid, signal.SIGKILL)
        host.process.wait()


@pytest.fixture
def server_database(tmp_path: Path) -> Iterator[str]:
    with own_database(tmp_path) as database_url:
        yield database_url


@pytest.fixture
def hosts(tmp_path: Path, server_database: str, s3_place) -> Iterator[tuple[Host, Host]]:
    env_a = host_env(tmp_path, "host-a", database_url=server_database, place=s3_place)
    env_b = host_env(tmp_path, "host-b", database_url=server_database, place=s3_place)
    migrated = manage(env_a, "migrate", "--no-input")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    a = start(tmp_path, "host-a", env_a)
    try:
        b = start(tmp_path, "host-b", env_b)
        try:
            yield a, b
        finally:
            stop(b)
    finally:
        stop(a)


class Browser:
    """A logged-in person: cookies kept by hand, sent to whichever host is asked."""

    def __init__(self) -> None:
        self.cookies: dict[str, str] = {}

    def get(self, host: Host, path: str) -> httpx.Response:
        return self.request(host, "GET", path)

    def request(self, host: Host, method: str, path: str, **kwargs) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}))
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        response = httpx.request(method, host.url + path, headers=headers, timeout=60, **kwargs)
        for header in response.headers.get_list("set-cookie"):
            name, _, rest = header.partition("=")
            self.cookies[name] = rest.split(";", 1)[0]
        return response

    def log_in(self, host: Host) -> None:
        form = self.get(host, "/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        response = self.request(
            host,
            "POST",
            "/accounts/login/",
            data={"csrfmiddlewaretoken": token, "username": "alice", "password": PASSWORD},
            headers={"Referer": f"{host.url}/accounts/login/"},
        )
        assert response.status_code == 302, response.text[:2000]


def api_token(env: dict[str, str]) -> str:
    """Alice, made through the shared database, and an API token of hers."""
    code = (
        "from django.contrib.auth import get_user_model\n"
        "from blobviewer.models import ApiToken\n"
        f"user = get_user_model().objects.create_user('alice', password={PASSWORD!r})\n"
        "print(ApiToken.objects.issue(user=user, name='agent')[1])\n"
    )
    result = manage(env, "shell", "-c", code)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def upload(host: Host, secret: str, log: bytes, blobs: list[Path] = ()) -> httpx.Response:
    files = [("log", ("session.jsonl", log))]
    files += [("blob", (path.name, path.read_bytes())) for path in blobs]
    return httpx.post(
        f"{host.url}/api/sessions",
        files=files,
        headers={"Authorization": f"Bearer {secret}"},
        timeout=60,
    )


def test_two_hosts_on_one_database_and_bucket_serve_the_same_sessions_and_blobs(
    hosts, tmp_path, s3_place
):
    a, b = hosts
    secret = api_token(a.env)
    run = record_sample_session(FsBlobStore(tmp_path / "agent" / "blobs"), tmp_path / "agent")
    blob_files = sorted(p for p in (tmp_path / "agent" / "blobs").iterdir() if p.is_file())
    lines = run.path.read_bytes().splitlines(keepends=True)

    # The first part of the run reaches host A, the whole of it host B (a load balancer).
    first = upload(a, secret, b"".join(lines[:4]), blob_files)
    assert first.status_code == 201, first.text
    grown = upload(b, secret, b"".join(lines))
    assert grown.status_code == 201, grown.text
    assert (grown.json()["new_items"], grown.json()["items"]) == (6, 9)

    browser = Browser()
    browser.log_in(a)  # one login: the session lives in the shared database
    pages = {}
    for host in (a, b):
        session = browser.get(host, f"/sessions/{run.id}/")
        assert session.status_code == 200, session.text[:2000]
        assert "Fix the build" in session.text
        assert f"/blobs/{run.text_blob}/" in session.text
        blob = browser.get(host, f"/blobs/{run.text_blob}/?selector=lines:2-3")
        assert blob.status_code == 200, blob.text[:2000]
        assert "step 3: compiling module_3.py ... ok" in blob.text
        raw = browser.get(host, f"/blobs/{run.text_blob}/raw")
        assert raw.status_code == 200
        assert raw.headers["Content-Type"].startswith("text/plain")
        assert raw.headers["X-Content-Type-Options"] == "nosniff"
        assert raw.content == BUILD_LOG.encode()
        inspect = browser.get(host, f"/api/inspect/{run.json_blob}?selector=slice:0..2")
        assert inspect.status_code == 200
        pages[host.name] = (session.text.count("tool_result"), raw.content, inspect.text)
    assert pages["host-a"] == pages["host-b"]

    # A blob an agent writes straight into the bucket: each host reads it, and once
    # `blobs index` ran on host A, host B's blob list has it.
    straight = open_store(s3_place.url).store_sync(Text("written by an agent elsewhere\n"))
    for host in (a, b):
        page = browser.get(host, f"/blobs/{straight}/")
        assert page.status_code == 200 and "written by an agent elsewhere" in page.text
    assert str(straight) not in browser.get(b, "/blobs/").text
    indexed = manage(a.env, "blobs", "index")
    assert indexed.returncode == 0, indexed.stderr
    assert str(straight) in browser.get(b, "/blobs/").text

    # Neither host keeps a blob or a session log of its own.
    for host in (a, b):
        kept = [p for p in host.data.rglob("*") if p.is_file() and p.suffix in (".txt", ".json")]
        kept += list(host.data.glob("sessions/*.jsonl"))
        assert kept == [], (host.name, kept)


def test_an_otlp_conversation_sent_to_both_hosts_is_one_session_rebuilt_anywhere(
    hosts, tmp_path, s3_place, server_database
):
    from blobviewer.otlp.receiving import conversation_session
    from web.otlp.otlp_requests import BIG, as_otlp_json
    from web.otlp.test_otlp_conventions import spans_of

    a, b = hosts
    secret = api_token(a.env)
    tool = {"gen_ai.conversation.id": "two-hosts", "gen_ai.operation.name": "execute_tool"}
    first, second, _root = spans_of(
        ("fetch", 1, 2, {**tool, "gen_ai.tool.name": "fetch", "gen_ai.tool.call.result": BIG}),
        ("count", 3, 4, {**tool, "gen_ai.tool.name": "count", "gen_ai.tool.call.result": "7"}),
    )
    for host, span in ((a, first), (b, second)):
        response = httpx.post(
            f"{host.url}/v1/traces",
            content=as_otlp_json([span]),
            headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
    session_id = conversation_session("two-hosts")
    show = (
        "from blobviewer.models import Item\n"
        f"items = Item.objects.filter(session_id='{session_id}').order_by('seq')\n"
        "print([(i.type, i.tool, i.output[:6]) for i in items])\n"
    )
    both = str(
        [("assistant", "", ""), ("tool_result", "fetch", "[blob:")]
        + [("assistant", "", ""), ("tool_result", "count", "7")]
    )
    assert manage(b.env, "shell", "-c", show).stdout.strip().splitlines()[-1] == both
    # A third host, which never had the conversation's file, maps it again from the copy
    # when the importer has improved since (here: the session says an older one mapped it).
    env_c = host_env(tmp_path, "host-c", database_url=server_database, place=s3_place)
    older = (
        "from blobviewer.models import Session\n"
        f"Session.objects.filter(id='{session_id}').update(importer_version=1)\n"
    )
    assert manage(env_c, "shell", "-c", older).returncode == 0
    rebuilt = manage(env_c, "ingest", "--rebuild", "--all")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert manage(env_c, "shell", "-c", show).stdout.strip().splitlines()[-1] == both
    assert "rebuilt: 4 items re-derived" in rebuilt.stdout, rebuilt.stdout
    assert not (env_c_data := Path(env_c["BLOBVIEWER_DATA"]) / "otlp").exists() or not any(
        env_c_data.iterdir()
    )  # read from the copy, not kept here


def test_a_trace_sent_to_one_host_and_named_on_the_other_is_one_conversation(hosts):
    from blobviewer.otlp.receiving import conversation_session
    from web.otlp.otlp_requests import as_otlp_json
    from web.otlp.test_otlp_requests_streamed import agent_run

    a, b = hosts
    secret = api_token(a.env)
    fetch, chat, agent, _, _ = agent_run()
    for host, spans in ((a, [fetch, chat]), (b, [agent])):
        response = httpx.post(
            f"{host.url}/v1/traces",
            content=as_otlp_json(spans),
            headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
    show = (
        "from blobviewer.models import Item\n"
        f"items = Item.objects.filter(session_id='{conversation_session('joined')}')\n"
        "print([(i.type, i.tool) for i in items.order_by('seq')])\n"
    )
    joined = manage(a.env, "shell", "-c", show).stdout.strip().splitlines()[-1]
    assert joined == str([("assistant", ""), ("tool_result", "fetch"), ("assistant", "")])
