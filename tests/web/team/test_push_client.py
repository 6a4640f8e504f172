"""`blobviewer push` as a teammate runs it: the package installed into a fresh venv (no
Django there), sending to `make serve` started here (tests/web/production.py), which
this run's kind of database backs (docs/push.md)."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from blobviewer.ingest.sessions import ingest_file
from importers.recordings import CLAUDE_CODE, FIXTURES, claude_line, write_jsonl
from web.production import ROOT, Server, manage, own_database, restart, serving, stop

CODEX = (
    FIXTURES / "codex" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
)
# One server and one installed client for the module, on one xdist worker.
pytestmark = pytest.mark.xdist_group("push_client")

CONVERSATION = FIXTURES / "openhands" / "v1-conversation-cd94562403b9487ebdd4018e3f531dfd"
SENT = re.compile(
    r": sent ([\d,]+) bytes(?:; \d+ secrets? redacted \([^)]*\))?; \+(\d+) items \((\d+) in all\)"
)


@pytest.fixture(scope="module")
def blobviewer_command(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`blobviewer`, as `pip install .` of this repository into a fresh venv gives it."""
    folder = tmp_path_factory.mktemp("client")
    source = folder / "source"  # what a clean clone holds: no build output, no venv
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for package in ("blobviewer", "core"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv / "bin" / "blobviewer"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("server")
    with (
        own_database(folder) as database_url,
        serving(
            folder, database_url, ALLOWED_HOSTS="127.0.0.1", SECURE_SSL_REDIRECT="false"
        ) as running,
    ):
        yield running


def token_of(server: Server, username: str) -> str:
    """A new API token of *username* (made on the first call), as /tokens/ makes one."""
    code = (
        "from django.contrib.auth import get_user_model; from blobviewer.models import ApiToken; "
        f"user, _ = get_user_model().objects.get_or_create(username={username!r}); "
        "print(ApiToken.objects.issue(user=user, name='laptop')[1])"
    )
    made = manage(server, "shell", "-c", code)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def alice(server: Server) -> str:
    return token_of(server, "alice")


def push_env(server: Server, token: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BLOBVIEWER_", "DJANGO"))}
    env.update(BLOBVIEWER_URL=server.url, BLOBVIEWER_TOKEN=token, HOME=str(home))
    env.update(XDG_STATE_HOME=str(home / ".local" / "state"))
    return env


def push(command: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(command), "push", *args], env=env, capture_output=True, text=True, timeout=180
    )


def sent(output: str) -> list[tuple[int, int, int]]:
    """(bytes, new items, items in all) of each `sent` line."""
    return [tuple(int(n.replace(",", "")) for n in match) for match in SENT.findall(output)]


def cut(source: Path, share: float) -> tuple[bytes, bytes]:
    data = source.read_bytes()
    lines = data.splitlines(keepends=True)
    head = b"".join(lines[: int(len(lines) * share)])
    return head, data[len(head) :]


@pytest.fixture
def whole_items(db, store, tmp_path: Path) -> dict[Path, int]:
    """How many items one ingest of each whole recording makes (in the test database)."""
    counts = {}
    for source in (CLAUDE_CODE, CODEX):
        copy = tmp_path / "whole" / source.name
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(source.read_bytes())
        counts[source] = ingest_file(copy, store=store).total_items
    return counts


def test_the_client_installs_without_django(blobviewer_command):
    python = blobviewer_command.parent / "python"
    no_django = subprocess.run(
        [str(python), "-c", "import django"], capture_output=True, timeout=60
    )
    assert no_django.returncode != 0

    helped = subprocess.run(
        [str(blobviewer_command), "push", "--help"], capture_output=True, text=True
    )

    assert helped.returncode == 0
    assert (
        "--agents" in helped.stdout and "--watch" in helped.stdout and "--dry-run" in helped.stdout
    )


def test_a_grown_recording_sends_only_its_new_bytes(
    blobviewer_command, server, alice, tmp_path, whole_items
):
    home = tmp_path / "home"
    recording = tmp_path / "runs" / CLAUDE_CODE.name
    recording.parent.mkdir()
    head, rest = cut(CLAUDE_CODE, 0.5)
    recording.write_bytes(head)
    env = push_env(server, alice, home)

    first = push(blobviewer_command, env, str(recording.parent))
    recording.write_bytes(head + rest)
    grown = push(blobviewer_command, env, str(recording.parent))
    again = push(blobviewer_command, env, str(recording.parent))

    assert first.returncode == 0, first.stderr
    assert sent(first.stdout)[0][0] == len(head)
    assert grown.returncode == 0, grown.stderr
    [(size, new, total)] = sent(grown.stdout)
    assert size == len(rest) and new > 0
    assert total == whole_items[CLAUDE_CODE]
    assert "0 sent, 1 unchanged" in again.stdout and again.returncode == 0


def test_a_lost_state_file_resumes_where_the_server_stands(
    blobviewer_command, server, alice, tmp_path, whole_items
):
    home = tmp_path / "home"
    recording = tmp_path / "runs" / CODEX.name
    recording.parent.mkdir()
    head, rest = cut(CODEX, 0.3)
    recording.write_bytes(head)
    env = push_env(server, alice, home)
    assert push(blobviewer_command, env, str(recording)).returncode == 0
    shutil.rmtree(home / ".local" / "state")  # a new laptop, or a wiped state
    recording.write_bytes(head + rest)

    grown = push(blobviewer_command, env, str(recording))

    assert grown.returncode == 0, grown.stderr
    [(size, _, total)] = sent(grown.stdout)
    assert size == len(rest)  # the server said where it stands (409), and only the rest went
    assert total == whole_items[CODEX]


def test_another_users_recording_and_bad_input_are_refused_and_the_rest_goes_on(
    blobviewer_command, server, alice, tmp_path
):
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy2(CLAUDE_CODE, runs / "alices.jsonl")
    assert (
        push(blobviewer_command, push_env(server, alice, tmp_path / "a"), str(runs)).returncode == 0
    )
    (runs / "notes.json").write_text('{"not": "a recording"}')
    (runs / "broken.jsonl").write_text(
        '{"type": "session_meta", "payload": {"id": "x"}}\nnot json\n'
    )
    shutil.copy2(FIXTURES / "codex" / "codex_golden.jsonl", runs / "bobs.jsonl")
    bob = push_env(server, token_of(server, "bob"), tmp_path / "b")

    answered = push(blobviewer_command, bob, str(runs))

    assert answered.returncode == 1
    errors = answered.stderr.splitlines()
    assert any(
        "alices.jsonl: refused: session" in e and "belongs to another user" in e for e in errors
    )
    assert any("broken.jsonl: refused: line 2: not JSON" in e for e in errors)
    assert "notes.json: skipped: not a recording" in answered.stdout
    assert len(sent(answered.stdout)) == 1  # bobs.jsonl went through
    assert "1 sent, 0 unchanged, 1 not recordings, 2 refused, 0 not sent" in answered.stdout
    stranger = push_env(server, "bv_unknown", tmp_path / "c")
    nothing = push(blobviewer_command, stranger, str(runs))
    assert nothing.returncode == 1
    assert nothing.stderr.startswith("blobviewer push: this API token is unknown or revoked")
    assert nothing.stderr.count("\n") == 1  # said once, not for every file


def test_agents_folders_and_a_dry_run(blobviewer_command, server, alice, tmp_path):
    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-home-ana-demo"
    project.mkdir(parents=True)
    shutil.copy2(FIXTURES / "codex" / "session_with_compaction.jsonl", project / "codex-copy.jsonl")
    env = push_env(server, alice, home)

    dry = push(blobviewer_command, env, "--agents", "--dry-run")
    real = push(blobviewer_command, env, "--agents")

    assert f"found Claude Code recordings in {home / '.claude' / 'projects'}" in dry.stdout
    size = (project / "codex-copy.jsonl").stat().st_size
    assert f"codex-copy.jsonl: would send {size:,} bytes" in dry.stdout
    assert not sent(dry.stdout)
    assert real.returncode == 0, real.stderr
    assert sent(real.stdout)[0][0] == size


def _lines(stream) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait_for(lines: queue.Queue[str], pattern: str, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if re.search(pattern, line):
            return line
    raise AssertionError(f"no line matching {pattern!r} within {seconds} s")


def test_watch_sends_what_an_agent_appends_within_ten_seconds(
    blobviewer_command, server, alice, tmp_path
):
    runs = tmp_path / "runs"
    runs.mkdir()
    head, rest = cut(CODEX, 0.5)
    (runs / CODEX.name).write_bytes(head)
    watching = subprocess.Popen(
        [str(blobviewer_command), "push", "--watch", str(runs)],
        env=push_env(server, alice, tmp_path / "home"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = _lines(watching.stdout)
        _wait_for(lines, r"^1 sent, 0 unchanged", 60)  # the first pass
        appended = time.monotonic()
        with (runs / CODEX.name).open("ab") as file:
            file.write(rest)
        line = _wait_for(lines, SENT.pattern, 10)
        assert sent(line)[0][0] == len(rest)
        assert time.monotonic() - appended < 10
    finally:
        watching.send_signal(signal.SIGINT)
        watching.wait(timeout=30)
    assert watching.returncode == 0


def test_a_server_that_is_down_then_back_loses_nothing(
    blobviewer_command, server, alice, tmp_path, whole_items
):
    runs = tmp_path / "runs"
    runs.mkdir()
    head, rest = cut(CLAUDE_CODE, 0.4)
    recording = runs / "down-and-back.jsonl"
    recording.write_bytes(head)
    env = push_env(server, alice, tmp_path / "home")
    assert push(blobviewer_command, env, str(runs)).returncode == 0
    stop(server.process)
    recording.write_bytes(head + rest)
    try:
        waiting = subprocess.Popen(
            [str(blobviewer_command), "push", str(runs)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)  # it finds nobody there, and tries again with backoff
        assert waiting.poll() is None
    finally:
        restart(server)
    out, err = waiting.communicate(timeout=120)

    assert waiting.returncode == 0, err
    [(size, _, total)] = sent(out)
    assert size == len(rest) and total == whole_items[CLAUDE_CODE]
    state = json.loads((tmp_path / "home" / ".local/state/blobviewer/push.json").read_text())
    assert state[server.url][str(recording.resolve())]["offset"] == len(head + rest)


def test_secrets_are_redacted_before_they_leave_the_machine(
    blobviewer_command, server, alice, tmp_path
):
    token, aws = "ghp_" + "a1B2" * 9, "AKIAIOSFODNN7EXAMPLE"
    session = str(uuid.uuid4())
    lines = [
        claude_line("user", f"push with {token}", uuid="u1", sessionId=session),
        claude_line(
            "assistant", [{"type": "text", "text": f"use {aws}"}], uuid="a1", sessionId=session
        ),
    ]
    runs = tmp_path / "runs"
    runs.mkdir()
    recording = write_jsonl(runs / "secrets.jsonl", lines)
    env = push_env(server, alice, tmp_path / "home")

    dry = push(blobviewer_command, env, "--dry-run", str(runs))
    real = push(blobviewer_command, env, str(runs))

    size = recording.stat().st_size
    said = "2 secrets redacted (aws_access_key, github_token)"
    assert f"secrets.jsonl: would send {size:,} bytes; {said}" in dry.stdout
    assert real.returncode == 0, real.stderr
    assert said in real.stdout and sent(real.stdout)[0][0] == size
    held = b"".join(path.read_bytes() for path in (server.data / "pushed").rglob("secrets.jsonl"))
    assert b"[redacted:github_token]" in held
    assert token.encode() not in held and aws.encode() not in held


def test_a_conversation_folder_is_sent_whole_when_it_changed(
    blobviewer_command, server, alice, tmp_path
):
    runs = tmp_path / "runs"
    folder = runs / CONVERSATION.name
    shutil.copytree(CONVERSATION, folder)
    env = push_env(server, alice, tmp_path / "home")

    first = push(blobviewer_command, env, str(runs))
    again = push(blobviewer_command, env, str(runs))
    events = sorted(path for path in folder.rglob("*.json") if path.is_file())
    events[-1].write_text(events[-1].read_text())  # rewritten: a newer modification time
    os.utime(events[-1], ns=(time.time_ns(), time.time_ns() + 10**9))
    changed = push(blobviewer_command, env, str(runs))

    assert first.returncode == 0, first.stderr
    [(size, new, total)] = sent(first.stdout)
    assert new == total > 0 and size > 0
    assert "0 sent, 1 unchanged" in again.stdout
    assert changed.returncode == 0, changed.stderr
    assert sent(changed.stdout)[0][1:] == (0, total)  # sent whole, nothing new in it
    assert any(path.is_dir() for path in (server.data / "pushed").rglob(CONVERSATION.name))
