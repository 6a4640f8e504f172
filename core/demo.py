"""A real agent run for a newcomer's first look: `python -m core demo [--data DIR]
[--store URL]`.

The Worker runs with a ScriptedClient (no model, no network) and the real demo tools over
this repository's own files. Its big outputs go to `<data>/blobs` (or the store given,
e.g. `s3://bucket/prefix`, the site's BLOBVIEWER_BLOBS) and each session's log to
`<data>/sessions`, where the site and `python -m core inspect` read them. The script
reads a large file, greps, lists packages, reads a package's metadata, and calls
`inspect` with every selector form, a bad one included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.agent.history import AssistantMessage, Item, ToolCall, ToolResult
from core.agent.model_clients import ScriptedClient, Turn
from core.agent.session_log import SessionLogWriter
from core.agent.worker import RunResult, Worker
from core.demo_tools import demo_tools
from core.store import BlobStore, FsBlobStore
from core.store.blob_id import BlobId, find_blob_refs
from core.wording import plural

__all__ = ["DemoError", "DemoResult", "DemoSession", "demo_main", "report", "run_demo"]

REPO_ROOT = Path(__file__).resolve().parent.parent
BIG_FILE = "core/summary.py"  # large enough to be stored, small enough to read in a demo
SMALL_FILE = "requirements.txt"  # stays inline
VENDORED_JS = "static/vendor/htmx-*.min.js"
SYSTEM_PROMPT = (
    "You answer questions about a software project with the tools you have. Large tool "
    "outputs are stored as blobs: you see a summary that starts with [blob:<id>]; call "
    "inspect with that id and a selector to read the part you need."
)


class DemoError(RuntimeError):
    """The demo's script could not go on (e.g. an output it meant to inspect was inline)."""


@dataclass(frozen=True, slots=True)
class DemoSession:
    title: str
    session_id: str
    log_path: Path
    result: RunResult


@dataclass(frozen=True, slots=True)
class DemoResult:
    data_dir: Path
    sessions: tuple[DemoSession, ...]
    blobs: str = ""  # where the blobs went, for people: a folder, or an s3:// URL

    @property
    def items(self) -> int:
        return sum(len(s.result.items) for s in self.sessions)

    @property
    def output_bytes(self) -> int:
        return sum(s.result.stats.output_bytes for s in self.sessions)

    @property
    def history_bytes(self) -> int:
        return sum(s.result.stats.history_bytes for s in self.sessions)

    @property
    def blob_ids(self) -> tuple[BlobId, ...]:
        return tuple(blob_id for s in self.sessions for blob_id in s.result.blob_ids)


# -- the scripts ------------------------------------------------------------------------------


def _blob_of(history: Sequence[Item], call_id: str) -> str:
    """The blob id in the result of the tool call *call_id*."""
    for item in history:
        if isinstance(item, ToolResult) and item.call_id == call_id:
            refs = find_blob_refs(item.output)
            if item.is_error or not refs:
                raise DemoError(
                    f"the demo meant to inspect the output of {call_id} ({item.tool}), "
                    "but it was not stored as a blob"
                )
            return str(refs[0])
    raise DemoError(f"no result for tool call {call_id} in the history")


CallSpec = tuple[str, str, dict[str, object]]  # (call id, tool name, arguments)


def _calls(*calls: CallSpec) -> AssistantMessage:
    return AssistantMessage("", tuple(ToolCall(i, name, args) for i, name, args in calls))


def _inspect(
    call_id: str, blob_of: str, selector: str | None = None
) -> Callable[[Sequence[Item]], CallSpec]:
    """An inspect call on the blob that the result of the call *blob_of* was stored as."""

    def make(history: Sequence[Item]) -> CallSpec:
        args: dict[str, object] = {"blob_id": _blob_of(history, blob_of)}
        if selector is not None:
            args["selector"] = selector
        return (call_id, "inspect", args)

    return make


def _then(text: str, *makers: Callable[[Sequence[Item]], CallSpec]) -> Turn:
    """A turn computed from the history, so it can name the blobs of earlier results."""

    def turn(history: Sequence[Item]) -> AssistantMessage:
        calls = (make(history) for make in makers)
        return AssistantMessage(text, tuple(ToolCall(i, name, args) for i, name, args in calls))

    return turn


def _tour_script(repo_root: Path) -> list[Turn]:
    def answer(history: Sequence[Item]) -> AssistantMessage:
        summary = _blob_of(history, "read_summary")
        packages = _blob_of(history, "packages")
        return AssistantMessage(
            f"{BIG_FILE} renders the summaries that stand in for stored outputs "
            f"(read it in [blob:{summary}]): a text gets its head and tail lines, a JSON "
            "array its schema and first entries, a JSON object one line per key, and no "
            "summary exceeds 400 bytes. The project depends on Django (see "
            f"[blob:{packages}] for every installed package), and its core library keeps "
            "big tool outputs like the ones in this run out of the model's context."
        )

    first: list[CallSpec] = [
        ("read_summary", "read_file", {"path": BIG_FILE}),
        ("read_requirements", "read_file", {"path": SMALL_FILE}),
        ("list_root", "list_dir", {"path": "."}),
    ]
    # The vendored htmx is one 50 KB line: it shows a summary of a single huge line.
    vendored = sorted(repo_root.glob(VENDORED_JS))
    if vendored:
        first.append(
            ("read_htmx", "read_file", {"path": vendored[-1].relative_to(repo_root).as_posix()})
        )
    return [
        _calls(*first),
        _calls(("grep_defs", "grep", {"pattern": r"^(async )?def |^class ", "path": "core"})),
        _calls(
            ("packages", "installed_packages", {}),
            ("django", "package_metadata", {"name": "Django"}),
        ),
        _then(
            "Let me look inside the stored outputs.",
            _inspect("overview", "read_summary"),
            _inspect("first_lines", "read_summary", "lines:1-20"),
        ),
        _then(
            "",
            _inspect("first_packages", "packages", "slice:0..5"),
            _inspect("django_version", "django", "key:version"),
            _inspect("summary_defs", "grep_defs", "grep:summary"),
        ),
        _then(
            "",
            _inspect("django_docs", "django", "key:description | grep:(?i)django"),
            _inspect("bad_selector", "read_summary", "lines:ten-20"),
        ),
        answer,
    ]


def _framework_script(repo_root: Path) -> list[Turn]:
    def answer(history: Sequence[Item]) -> AssistantMessage:
        django = _blob_of(history, "django")
        return AssistantMessage(
            "The site is built on Django (its metadata is in "
            f"[blob:{django}]); {SMALL_FILE} pins it together with django-htmx."
        )

    return [
        _calls(
            ("requirements", "read_file", {"path": SMALL_FILE}),
            ("outside", "read_file", {"path": "../../etc/passwd"}),
            ("no_args", "package_metadata", {}),
        ),
        _calls(("django", "package_metadata", {"name": "Django"})),
        _then(
            "",
            _inspect("overview", "django"),
            _inspect("requires", "django", "key:requires_dist | slice:0..3"),
        ),
        answer,
    ]


_SESSIONS: tuple[tuple[str, str, Callable[[Path], list[Turn]]], ...] = (
    (
        "Demo: a tour of this repository",
        "Give me a tour of this repository: what does core/summary.py do, what is defined "
        "in core/, and which web framework is installed?",
        _tour_script,
    ),
    (
        "Demo: which web framework is this?",
        "Which web framework does this project use, and in which version?",
        _framework_script,
    ),
)


# -- running ----------------------------------------------------------------------------------


async def run_demo_async(
    data_dir: Path, *, repo_root: Path = REPO_ROOT, store: BlobStore | None = None
) -> DemoResult:
    if store is None:
        store = FsBlobStore(data_dir / "blobs")
    tools = demo_tools(repo_root)
    sessions = []
    for title, question, script in _SESSIONS:
        client = ScriptedClient(script(repo_root), model="scripted-demo")
        meta = {"source": "python -m core demo", "tools": [t.name for t in tools]}
        with SessionLogWriter(
            data_dir / "sessions", title=title, model=client.model, meta=meta
        ) as log:
            worker = Worker(client, tools, store, system=SYSTEM_PROMPT, session_log=log)
            result = await worker.run(question)
        sessions.append(DemoSession(title, log.session_id, log.path, result))
    return DemoResult(data_dir, tuple(sessions), str(store))


def run_demo(
    data_dir: Path, *, repo_root: Path = REPO_ROOT, store: BlobStore | None = None
) -> DemoResult:
    """Run the demo sessions, writing session logs under *data_dir* and blobs into
    *store* (default: `<data_dir>/blobs`)."""
    return asyncio.run(run_demo_async(Path(data_dir), repo_root=Path(repo_root), store=store))


def report(result: DemoResult) -> str:
    """A few lines for people: what each session wrote and how much it kept out."""
    lines = []
    for session in result.sessions:
        stats = session.result.stats
        lines += [
            f"{session.title}",
            f"  {len(session.result.items)} items, {stats.tool_calls} tool calls "
            f"({plural(stats.tool_errors, 'error')}), {plural(stats.blobs, 'blob')}",
            f"  tool outputs {stats.output_bytes:,} bytes -> history {stats.history_bytes:,} "
            f"bytes ({stats.kept_out_bytes:,} kept out)",
            f"  log: {session.log_path}",
        ]
    kept = result.output_bytes - result.history_bytes
    lines += [
        f"Total: {result.items} items; tool outputs {result.output_bytes:,} bytes, "
        f"{result.history_bytes:,} of them in the history ({kept:,} kept out); "
        f"{plural(len(result.blob_ids), 'blob')} in {result.blobs or result.data_dir / 'blobs'}",
    ]
    return "\n".join(lines)


def demo_main(
    data_dir: Path, *, repo_root: Path = REPO_ROOT, store: BlobStore | None = None
) -> str:
    """`python -m core demo`: run the demo into *data_dir* (blobs into *store* when given)
    and return the report."""
    return report(run_demo(data_dir, repo_root=repo_root, store=store))
