"""The Worker's loop: promotion into the blob store, inspect, errors, turns, concurrency."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from core.agent.history import AssistantMessage, Item, ToolCall, ToolResult, UserMessage
from core.agent.model_clients import ModelError, ScriptedClient, call
from core.agent.session_log import SessionLogWriter, read_session_log
from core.agent.tools import ToolError, tool
from core.agent.worker import RunResult, StopReason, Worker
from core.content import Content, Inline, Stored, Structured, Text, ToolOutput, utf8_size
from core.store import FsBlobStore
from core.store.blob_id import BlobId, find_blob_refs
from core.store.errors import BlobIOError

# 1,000 lines of 50 bytes: a 50 KB file.
BIG = "".join(f"line {n:04d} of the big log file, padded to 50 bytes\n" for n in range(1, 1001))
FILES = {"big.log": BIG, "small.txt": "hello\n"}


@tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: the file's name
    """
    if path not in FILES:
        raise ToolError(f"no file {path!r}")
    return FILES[path]


def turns(*calls: ToolCall, answer: str = "done") -> list[AssistantMessage]:
    """One turn per call, then a final answer."""
    return [AssistantMessage("", (c,)) for c in calls] + [AssistantMessage(answer)]


def run(worker: Worker, text: str = "go") -> RunResult:
    return asyncio.run(worker.run(text))


def results(result: RunResult) -> list[ToolResult]:
    return [item for item in result.items if isinstance(item, ToolResult)]


def blob_in(history: Sequence[Item], index: int = 0) -> str:
    """The blob id that the *index*-th tool result of *history* refers to."""
    outputs = [item.output for item in history if isinstance(item, ToolResult)]
    return str(find_blob_refs(outputs[index])[0])


def inspect_turn(selector: str | None = None, *, of: int = 0) -> Any:
    """A scripted turn that inspects the blob of an earlier result."""

    def turn(history: Sequence[Item]) -> AssistantMessage:
        args = {"blob_id": blob_in(history, of)}
        if selector is not None:
            args["selector"] = selector
        return AssistantMessage("", (call("inspect", **args),))

    return turn


# -- promotion ----------------------------------------------------------------------------------


def test_a_50kb_output_enters_the_history_as_a_summary_of_at_most_400_bytes(
    store: FsBlobStore,
) -> None:
    client = ScriptedClient(turns(call("read_file", path="big.log")))
    result = run(Worker(client, [read_file], store))
    (stored,) = results(result)
    assert not stored.is_error
    assert stored.output.startswith("[blob:")
    assert "text | 1000 lines" in stored.output.splitlines()[0]
    assert utf8_size(stored.output) <= 400
    assert store.load_sync(blob_in(result.items)) == Text(BIG)


def test_the_run_counts_bytes_received_bytes_kept_and_blobs(store: FsBlobStore) -> None:
    client = ScriptedClient(
        turns(call("read_file", path="big.log"), call("read_file", path="small.txt"))
    )
    result = run(Worker(client, [read_file], store))
    summary, small = results(result)
    stats = result.stats
    assert stats.output_bytes == len(BIG) + len("hello\n")
    assert stats.history_bytes == utf8_size(summary.output) + len("hello\n")
    assert stats.kept_out_bytes == len(BIG) - utf8_size(summary.output)
    assert (stats.blobs, stats.tool_calls, stats.tool_errors, stats.turns) == (1, 2, 0, 3)
    assert result.blob_ids == (BlobId(blob_in(result.items)),)


def test_a_small_output_enters_the_history_as_it_is(store: FsBlobStore) -> None:
    client = ScriptedClient(turns(call("read_file", path="small.txt")))
    result = run(Worker(client, [read_file], store))
    assert results(result)[0].output == "hello\n"
    assert result.stats.blobs == 0
    assert list(store.root.glob("*")) == []


def test_a_large_json_output_is_stored_as_structured_json(store: FsBlobStore) -> None:
    rows = [{"name": f"package-{n}", "version": "1.0"} for n in range(100)]

    @tool
    def packages() -> list[dict[str, str]]:
        """List packages."""
        return rows

    result = run(Worker(ScriptedClient(turns(call("packages"))), [packages], store))
    assert results(result)[0].output.splitlines()[0].endswith("json_array | 100 entries")
    assert store.load_sync(blob_in(result.items)) == Structured(rows)


def test_content_blocks_of_text_are_stored_as_their_text(store: FsBlobStore) -> None:
    blocks = [{"type": "text", "text": BIG}, {"type": "image", "data": "iVBO", "mimeType": "x"}]

    @tool
    def fetch() -> str:
        """Fetch a page, as an MCP client hands it over."""
        return json.dumps(blocks)

    result = run(Worker(ScriptedClient(turns(call("fetch"))), [fetch], store))
    (stored,) = results(result)
    assert "text | 1001 lines" in stored.output.splitlines()[0]
    assert store.load_sync(blob_in(result.items)) == Text(BIG + "[1 image not stored]")
    assert result.stats.output_bytes == len(json.dumps(blocks))  # as the tool returned it


def test_without_a_store_the_whole_output_enters_the_history_and_there_is_no_inspect() -> None:
    client = ScriptedClient(turns(call("read_file", path="big.log")))
    result = run(Worker(client, [read_file]))
    assert results(result)[0].output == BIG
    assert result.stats.kept_out_bytes == 0
    assert result.stats.blobs == 0
    assert client.requests[0].tool_names == ("read_file",)


# -- tools that return a ToolOutput ---------------------------------------------------------------


def test_a_stored_output_from_a_tool_is_stored_and_summarized_even_when_small(
    store: FsBlobStore,
) -> None:
    @tool
    def report() -> ToolOutput:
        """Report."""
        return Stored(Structured({"status": "ok"}))

    result = run(Worker(ScriptedClient(turns(call("report"))), [report], store))
    summary = results(result)[0].output
    assert summary.splitlines()[1:] == ["── keys ──", "status: string(2)"]
    assert store.load_sync(blob_in(result.items)) == Structured({"status": "ok"})


def test_an_inline_output_from_a_tool_is_not_promoted_even_when_large(store: FsBlobStore) -> None:
    @tool
    def dump() -> ToolOutput:
        """Dump."""
        return Inline(BIG)

    result = run(Worker(ScriptedClient(turns(call("dump"))), [dump], store))
    assert results(result)[0].output == BIG
    assert result.stats.blobs == 0


def test_without_a_store_a_stored_output_from_a_tool_enters_whole() -> None:
    @tool
    def report() -> ToolOutput:
        """Report."""
        return Stored(Structured({"status": "ok"}))

    result = run(Worker(ScriptedClient(turns(call("report"))), [report]))
    assert results(result)[0].output == '{"status":"ok"}'


# -- inspect ------------------------------------------------------------------------------------


def test_inspect_is_registered_with_a_store(store: FsBlobStore) -> None:
    client = ScriptedClient([AssistantMessage("hi")])
    run(Worker(client, [read_file], store))
    assert client.requests[0].tool_names == ("read_file", "inspect")


def test_inspect_lines_returns_those_lines(store: FsBlobStore) -> None:
    client = ScriptedClient(
        [
            AssistantMessage("", (call("read_file", path="big.log"),)),
            inspect_turn("lines:10-12"),
            AssistantMessage("done"),
        ]
    )
    result = run(Worker(client, [read_file], store))
    blob_id = blob_in(result.items)
    assert results(result)[1].output == "\n".join(
        [
            f"[blob:{blob_id}] lines 10-12 of 1000",
            "line 0010 of the big log file, padded to 50 bytes",
            "line 0011 of the big log file, padded to 50 bytes",
            "line 0012 of the big log file, padded to 50 bytes",
        ]
    )


def test_an_inspect_result_is_never_promoted(store: FsBlobStore) -> None:
    client = ScriptedClient(
        [
            AssistantMessage("", (call("read_file", path="big.log"),)),
            inspect_turn(None),
            AssistantMessage("done"),
        ]
    )
    result = run(Worker(client, [read_file], store))
    overview = results(result)[1].output
    assert utf8_size(overview) > 800
    assert overview.startswith(f"[blob:{blob_in(result.items)}] text | 1000 lines |")
    assert result.stats.blobs == 1


def test_inspect_errors_are_tool_errors_and_the_run_goes_on(store: FsBlobStore) -> None:
    client = ScriptedClient(
        [
            AssistantMessage("", (call("inspect", blob_id="not-a-blob"),)),
            AssistantMessage("", (call("read_file", path="big.log"),)),
            inspect_turn("slice:0..2", of=1),
            AssistantMessage("done"),
        ]
    )
    result = run(Worker(client, [read_file], store))
    bad_id, _, misfit = results(result)
    assert bad_id.is_error and misfit.is_error
    assert bad_id.output == "not a blob id: 'not-a-blob' (expected a UUID)"
    assert misfit.output.startswith("slice: applies to ")
    assert "\n" not in misfit.output
    assert result.stop_reason is StopReason.ANSWERED


def test_a_tool_named_inspect_clashes_with_the_built_in_one(store: FsBlobStore) -> None:
    @tool
    def inspect(blob_id: str) -> str:
        """Mine."""
        return blob_id

    with pytest.raises(ValueError, match="two tools are named 'inspect'.*built in"):
        Worker(ScriptedClient([]), [inspect], store)
    Worker(ScriptedClient([]), [inspect])  # without a store there is no clash


# -- errors ---------------------------------------------------------------------------------------


@tool
def explode() -> str:
    """Fails."""
    raise RuntimeError("boom\nTraceback (most recent call last): ...")


def test_tool_errors_unknown_tools_and_crashes_are_error_results_and_the_run_goes_on() -> None:
    client = ScriptedClient(
        turns(
            call("read_file", path="missing.txt"),
            call("delete_everything"),
            call("explode"),
            call("read_file", path="small.txt"),
        )
    )
    result = run(Worker(client, [read_file, explode]))
    missing, unknown, crash, fine = results(result)
    assert missing == ToolResult("call_1", "read_file", "no file 'missing.txt'", is_error=True)
    assert unknown.is_error
    assert unknown.output == (
        "unknown tool 'delete_everything'; available tools: read_file, explode"
    )
    assert crash.is_error
    assert crash.output == "explode failed: RuntimeError: boom"
    assert fine == ToolResult("call_4", "read_file", "hello\n")
    assert result.stop_reason is StopReason.ANSWERED
    assert result.text == "done"
    assert result.stats.tool_errors == 3


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "invalid arguments for read_file: missing required 'path'"),
        ({"path": 7}, "invalid arguments for read_file: 'path' must be string, got number"),
        (
            {"path": "a", "mode": "r"},
            "invalid arguments for read_file: unexpected 'mode' (expected: path)",
        ),
        (
            '{"path": "a',
            'invalid arguments for read_file: arguments are not a JSON object: {"path": "a',
        ),
    ],
)
def test_invalid_arguments_are_error_results_and_the_tool_is_not_called(
    arguments: Any, message: str
) -> None:
    called = []

    @tool(name="read_file")
    def spy(path: str) -> str:
        """Spy."""
        called.append(path)
        return path

    client = ScriptedClient(turns(ToolCall("c1", "read_file", arguments)))
    result = run(Worker(client, [spy]))
    assert results(result) == [ToolResult("c1", "read_file", message, is_error=True)]
    assert called == []
    assert result.stop_reason is StopReason.ANSWERED


def test_a_store_that_fails_is_an_error_result(tmp_path: Path) -> None:
    class BrokenStore:
        async def store(self, content: Content) -> BlobId:
            raise BlobIOError("cannot write blob: No space left on device")

        async def load(self, blob_id: BlobId | str) -> Content:
            raise AssertionError

        async def exists(self, blob_id: BlobId | str) -> bool:
            return False

    client = ScriptedClient(turns(call("read_file", path="big.log")))
    result = run(Worker(client, [read_file], BrokenStore()))
    assert results(result)[0].output == (
        "the output of read_file (50000 bytes) could not be stored: "
        "cannot write blob: No space left on device"
    )
    assert results(result)[0].is_error


def test_something_that_is_not_a_tool_is_refused_with_a_hint() -> None:
    def read(path: str) -> str:
        return path

    with pytest.raises(TypeError, match=r"is not a tool.*decorate a function with @tool"):
        Worker(ScriptedClient([]), [read])  # type: ignore[list-item]


def test_a_model_error_propagates_and_the_history_keeps_what_was_done() -> None:
    client = ScriptedClient([AssistantMessage("", (call("read_file", path="small.txt"),))])
    worker = Worker(client, [read_file])
    with pytest.raises(ModelError, match="the script has 1 turns"):
        run(worker)
    assert [type(item) for item in worker.history] == [UserMessage, AssistantMessage, ToolResult]


# -- the loop ---------------------------------------------------------------------------------


def test_the_turn_limit_stops_a_runaway_loop_with_a_clear_reason() -> None:
    client = ScriptedClient([AssistantMessage("", (call("read_file", path="small.txt"),))] * 10)
    result = run(Worker(client, [read_file], max_turns=3))
    assert result.stop_reason is StopReason.TURN_LIMIT
    assert result.text == ""
    assert result.detail == (
        "stopped after 3 turns: the model was still calling tools (raise max_turns to let it go on)"
    )
    assert result.stats.turns == 3
    assert len(client.requests) == 3
    assert isinstance(result.items[-1], ToolResult)


def test_an_answer_ends_the_run() -> None:
    result = run(Worker(ScriptedClient([AssistantMessage("42")]), []), "question")
    assert result.text == "42"
    assert result.stop_reason is StopReason.ANSWERED
    assert result.detail == "the model answered after 1 turn"
    assert result.items == (UserMessage("question"), AssistantMessage("42"))


def test_a_second_run_continues_the_conversation() -> None:
    client = ScriptedClient([AssistantMessage("first"), AssistantMessage("second")])
    worker = Worker(client, [])
    run(worker, "one")
    second = run(worker, "two")
    assert second.items == (UserMessage("two"), AssistantMessage("second"))
    assert client.requests[1].history == (
        UserMessage("one"),
        AssistantMessage("first"),
        UserMessage("two"),
    )


def test_the_system_prompt_goes_to_the_model() -> None:
    client = ScriptedClient([AssistantMessage("ok")])
    run(Worker(client, [], system="Be brief."))
    assert client.requests[0].system == "Be brief."


def test_the_calls_of_one_turn_run_at_once_and_their_results_keep_call_order() -> None:
    events: list[str] = []
    second_done = asyncio.Event()

    @tool
    async def slow(label: str) -> str:
        """Waits until the fast call is done, which only works if both run at once."""
        events.append(f"{label} started")
        await asyncio.wait_for(second_done.wait(), timeout=5)
        events.append(f"{label} finished")
        return label

    @tool
    async def fast(label: str) -> str:
        """Finishes first."""
        events.append(f"{label} started")
        await asyncio.sleep(0)
        events.append(f"{label} finished")
        second_done.set()
        return label

    client = ScriptedClient(
        [
            AssistantMessage("", (call("slow", label="a"), call("fast", label="b"))),
            AssistantMessage("done"),
        ]
    )
    result = run(Worker(client, [slow, fast]))
    assert events == ["a started", "b started", "b finished", "a finished"]
    assert [r.output for r in results(result)] == ["a", "b"]
    assert not any(r.is_error for r in results(result))


def test_sync_tools_of_one_turn_overlap_too() -> None:
    import threading

    both_started = threading.Barrier(2, timeout=5)

    @tool
    def wait(label: str) -> str:
        """Waits for the other call at a barrier."""
        both_started.wait()
        return label

    client = ScriptedClient(
        [
            AssistantMessage("", (call("wait", label="a"), call("wait", label="b"))),
            AssistantMessage("done"),
        ]
    )
    result = run(Worker(client, [wait]))
    assert [(r.output, r.is_error) for r in results(result)] == [("a", False), ("b", False)]


# -- the session log ------------------------------------------------------------------------------


def test_the_session_log_of_a_run_reads_back_to_the_same_items(
    tmp_path: Path, store: FsBlobStore
) -> None:
    client = ScriptedClient(
        [
            AssistantMessage("reading", (call("read_file", path="big.log"), call("nope"))),
            inspect_turn("lines:1-2"),
            AssistantMessage("done"),
        ]
    )
    with SessionLogWriter(tmp_path / "sessions", title="t", model=client.model) as log:
        result = run(Worker(client, [read_file], store, session_log=log))
    read = read_session_log(log.path)
    assert read.items() == list(result.items)
    assert read.header["model"] == "scripted"
    assert [r["seq"] for r in read.records] == list(range(1, len(result.items) + 1))


def test_each_item_is_in_the_log_before_the_model_is_asked_again(tmp_path: Path) -> None:
    seen: list[int] = []

    with SessionLogWriter(tmp_path) as log:

        def count_logged(history: Sequence[Item]) -> AssistantMessage:
            seen.append(len(read_session_log(log.path).records))
            return AssistantMessage("done")

        client = ScriptedClient(
            [AssistantMessage("", (call("read_file", path="small.txt"),)), count_logged]
        )
        run(Worker(client, [read_file], session_log=log))
    assert seen == [3]  # user message, assistant message, tool result


# -- secrets ------------------------------------------------------------------------------------

ENV = "OPENAI_API_KEY=sk-proj-" + "Ab3" * 20 + "\nDEBUG=true\n"
TOKEN = "ghp_" + "a1B2" * 9


@tool
def read_env(big: bool = False) -> str:
    """Read the .env file.

    Args:
        big: with 50 KB of log after it
    """
    return ENV + (f"pushed with {TOKEN}\n" + BIG if big else "")


def test_secrets_in_a_tool_output_are_redacted_before_the_model_the_store_or_the_log_sees_them(
    tmp_path: Path, store: FsBlobStore
) -> None:
    seen: list[str] = []

    def model_reads(history: Sequence[Item]) -> AssistantMessage:
        seen.extend(item.output for item in history if isinstance(item, ToolResult))
        return AssistantMessage(f"the token was {TOKEN}")  # the model repeats a secret

    client = ScriptedClient(
        [AssistantMessage("", (call("read_env"), call("read_env", big=True))), model_reads]
    )
    with SessionLogWriter(tmp_path / "sessions") as log:
        result = run(Worker(client, [read_env], store, session_log=log))

    small, big = results(result)
    assert (small.redactions, big.redactions) == (1, 2)
    assert "[redacted:openai_key]" in small.output and "sk-proj-" not in small.output
    stored = store.load_sync(blob_in(result.items, 1))
    assert isinstance(stored, Text) and "[redacted:github_token]" in stored.text
    assert not any("sk-proj-" in text or TOKEN in text for text in [*seen, stored.text])
    logged = log.path.read_text()
    assert "sk-proj-" not in logged and TOKEN not in logged
    records = read_session_log(log.path).records
    assert [r.get("redactions") for r in records] == [None, None, 1, 2, 1]
    assert read_session_log(log.path).items()[2] == small


def test_with_redaction_off_the_output_is_kept_as_the_tool_returned_it(
    store: FsBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BLOBVIEWER_REDACT", "off")
    client = ScriptedClient(turns(call("read_env")))

    (result,) = results(run(Worker(client, [read_env], store)))

    assert result.output == ENV and result.redactions == 0
