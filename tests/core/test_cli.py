"""`python -m core` (docs/agents.md): `store` prints what would enter the history, `inspect` what
the tool returns; errors are one line on stderr with exit status 2 and no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from core.cli import main
from core.content import Structured, Text
from core.inspect_tool import inspect_blob
from core.store import FsBlobStore
from core.store.blob_id import find_blob_refs
from core.summary import summarize

REPO = Path(__file__).resolve().parents[2]


def run(
    *args: str, stdin: bytes = b"", data: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if data is not None:
        env["BLOBVIEWER_DATA"] = str(data)
    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=REPO,
        env=env,
        input=stdin,
        capture_output=True,
        timeout=60,
    )


def printed(text: str) -> bytes:
    """What the CLI writes to a pipe for *text*: exactly the text."""
    return text.encode("utf-8", "surrogatepass")


def assert_one_line_error(result: subprocess.CompletedProcess[bytes], fragment: str) -> None:
    assert result.returncode == 2
    assert result.stdout == b""
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert fragment in stderr


# -- store ----------------------------------------------------------------------------------


def test_store_prints_a_small_output_unchanged(tmp_path: Path) -> None:
    result = run("store", "--dir", str(tmp_path / "blobs"), stdin="héllo\r\nworld\n".encode())
    assert result.returncode == 0
    assert result.stdout == "héllo\r\nworld\n".encode()
    assert not (tmp_path / "blobs").exists()


def test_store_prints_exactly_the_output_to_a_pipe_without_adding_a_newline(
    tmp_path: Path,
) -> None:
    result = run("store", "--dir", str(tmp_path), "-", stdin=b"no newline")
    assert result.stdout == b"no newline"


def test_store_prints_the_summary_of_a_large_output_and_saves_the_blob(tmp_path: Path) -> None:
    text = "".join(f"row {n}\n" for n in range(500))
    source = tmp_path / "output.txt"
    source.write_text(text)
    result = run("store", "--dir", str(tmp_path / "blobs"), str(source))
    assert result.returncode == 0
    [blob_id] = find_blob_refs(result.stdout.decode())
    store = FsBlobStore(tmp_path / "blobs")
    assert store.load_sync(blob_id) == Text(text)
    assert result.stdout == printed(summarize(blob_id, Text(text)))


def test_store_recognizes_json(tmp_path: Path) -> None:
    value = [{"id": n, "name": f"item {n}"} for n in range(100)]
    result = run("store", "--dir", str(tmp_path), stdin=json.dumps(value, indent=2).encode())
    [blob_id] = find_blob_refs(result.stdout.decode())
    assert result.stdout == printed(summarize(blob_id, Structured(value)))
    assert FsBlobStore(tmp_path).load_sync(blob_id) == Structured(value)


def test_store_defaults_to_the_data_directorys_blobs(tmp_path: Path) -> None:
    result = run("store", stdin=b"x" * 900, data=tmp_path)
    [blob_id] = find_blob_refs(result.stdout.decode())
    assert (tmp_path / "blobs" / f"{blob_id}.txt").read_bytes() == b"x" * 900


def test_store_reports_a_missing_file(tmp_path: Path) -> None:
    assert_one_line_error(
        run("store", "--dir", str(tmp_path), str(tmp_path / "nope.txt")), "cannot read"
    )


def test_store_reports_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    root = tmp_path / "blobs"  # tmp_path also holds the test's own data and temporary folders
    result = run("store", "--dir", str(root), stdin=b"caf\xe9" * 300)
    assert_one_line_error(result, "not UTF-8")
    assert not root.exists() or not any(root.iterdir())


# -- inspect --------------------------------------------------------------------------------


@pytest.fixture
def blobs(tmp_path: Path) -> tuple[FsBlobStore, dict[str, uuid.UUID]]:
    store = FsBlobStore(tmp_path / "blobs")
    ids = {
        "text": store.store_sync(Text("".join(f"line {n}\n" for n in range(1, 3001)))),
        "array": store.store_sync(Structured([{"id": n} for n in range(500)])),
        "object": store.store_sync(
            Structured({"results": list(range(50)), "log": "a\nERROR b\nc", "a|b": {"x": 1}})
        ),
    }
    return store, ids


@pytest.mark.parametrize(
    ("kind", "selector"),
    [
        ("text", None),
        ("text", "lines:20-50"),
        ("text", "lines:7"),
        ("text", "lines:2990-"),
        ("text", "lines:1-"),
        ("text", r"grep:^line 1\d$"),
        ("text", "lines:100-200 | grep:5"),
        ("array", None),
        ("array", "slice:3..8"),
        ("array", "slice:490.."),
        ("array", "slice:..2"),
        ("array", "slice:3..=4"),
        ("array", "slice:.."),
        ("object", None),
        ("object", "key:results"),
        ("object", 'key:"a|b"'),
        ("object", "key:results | slice:0..5"),
        ("object", "key:log | grep:ERROR"),
        ("object", "key:log|lines:2"),
    ],
)
def test_inspect_prints_what_the_tool_returns(
    blobs: tuple[FsBlobStore, dict[str, uuid.UUID]],
    capsysbinary: pytest.CaptureFixture[bytes],
    kind: str,
    selector: str | None,
) -> None:
    store, ids = blobs
    args = ["inspect", "--dir", str(store.root), str(ids[kind])]
    assert main(args + ([selector] if selector else [])) == 0
    assert capsysbinary.readouterr().out == printed(inspect_blob(store, str(ids[kind]), selector))


def test_inspect_runs_as_a_module(blobs: tuple[FsBlobStore, dict[str, uuid.UUID]]) -> None:
    store, ids = blobs
    result = run("inspect", "--dir", str(store.root), str(ids["text"]), "lines:2-3")
    assert result.returncode == 0
    assert result.stdout == f"[blob:{ids['text']}] lines 2-3 of 3000\nline 2\nline 3".encode()


@pytest.mark.parametrize(
    ("blob_id", "selector", "fragment"),
    [
        ("../etc/passwd", None, "expected a UUID"),
        ("not-a-uuid", "lines:1", "expected a UUID"),
        (str(uuid.UUID(int=1)), None, "not found"),
        ("{text}", "lines:0", "line numbers start at 1"),
        ("{text}", "bogus", "expected lines:A-B"),
        ("{text}", "slice:0..3", "slice: applies to a JSON array; this blob is text"),
        (
            "{array}",
            "lines:1-10",
            "lines: applies to text; this blob is json_array — try slice:0..10",
        ),
        ("{object}", "key:nope", "no such key"),
        ("{text}", "lines:3001", "past the end"),
    ],
)
def test_inspect_errors_go_to_stderr_with_status_2(
    blobs: tuple[FsBlobStore, dict[str, uuid.UUID]],
    blob_id: str,
    selector: str | None,
    fragment: str,
) -> None:
    store, ids = blobs
    blob_id = blob_id.format(**{k: str(v) for k, v in ids.items()})
    result = run("inspect", "--dir", str(store.root), blob_id, *([selector] if selector else []))
    assert_one_line_error(result, fragment)


def test_a_damaged_blob_is_an_error_not_a_traceback(
    blobs: tuple[FsBlobStore, dict[str, uuid.UUID]],
) -> None:
    store, ids = blobs
    (store.root / f"{ids['array']}.json").write_bytes(b"[{")
    assert_one_line_error(
        run("inspect", "--dir", str(store.root), str(ids["array"])), "damaged JSON"
    )


def test_usage_errors_exit_with_status_2(tmp_path: Path) -> None:
    for args in ([], ["inspect"], ["frobnicate"]):
        result = run(*args)
        assert result.returncode == 2
        assert b"Traceback" not in result.stderr
        assert b"usage:" in result.stderr


# -- writing the output ---------------------------------------------------------------------


def run_into(stdout: int, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """`python -m core ARGS` with its output going to the file descriptor *stdout*."""
    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        input=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=60,
    )


def closed_pipe() -> int:
    """The write end of a pipe whose reader has already gone, as after `| head`."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    return write_end


@pytest.mark.parametrize("command", ["inspect", "store"])
def test_a_full_disk_is_a_one_line_error_with_status_2(
    blobs: tuple[FsBlobStore, dict[str, uuid.UUID]], command: str
) -> None:
    store, ids = blobs
    args = [command, "--dir", str(store.root)]
    args += [str(ids["text"])] if command == "inspect" else []
    with open("/dev/full", "wb") as full:
        result = run_into(full.fileno(), *args, stdin=b"line\n" * 1000)
    assert result.returncode == 2
    assert result.stderr == b"error: cannot write the output: No space left on device\n"


@pytest.mark.parametrize("command", ["inspect", "store"])
def test_a_reader_that_has_gone_ends_the_command_quietly(
    blobs: tuple[FsBlobStore, dict[str, uuid.UUID]], command: str
) -> None:
    store, ids = blobs
    args = [command, "--dir", str(store.root)]
    args += [str(ids["text"])] if command == "inspect" else []
    write_end = closed_pipe()
    try:
        result = run_into(write_end, *args, stdin=b"line\n" * 1000)
    finally:
        os.close(write_end)
    assert result.returncode == 141  # as SIGPIPE would end it, like `cat`
    assert result.stderr == b""


def test_store_keeps_the_blob_when_only_printing_its_summary_fails(tmp_path: Path) -> None:
    with open("/dev/full", "wb") as full:
        result = run_into(full.fileno(), "store", "--dir", str(tmp_path), stdin=b"x" * 900)
    assert result.returncode == 2
    [saved] = tmp_path.glob("*.txt")
    assert saved.read_bytes() == b"x" * 900


def test_a_selector_that_is_a_double_dash_reaches_the_selector_parser(tmp_path, capsys):
    # argparse in Python 3.11 drops every "--", so `inspect -- ID --` lost its selector
    # and printed the overview instead of the selector's error.
    from core.cli import main
    from core.content import Text
    from core.store import FsBlobStore

    blob_id = FsBlobStore(tmp_path).store_sync(Text("a\nb\n"))

    status = main(["inspect", "--dir", str(tmp_path), "--", str(blob_id), "--"])

    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1
