"""Sessions for the timeline's tests: a recorded log whose parallel results are out of call
order, and small builders for records in the session log's shape."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_file, ingest_session
from blobviewer.models import Item, Session

DATA = Path(__file__).parent / "data"
# A user asks; one assistant turn makes three parallel calls (Bash, Read, Grep) whose
# results the log records in the order Grep (an error), Bash (2,700 bytes: promoted),
# Read; then an Edit, then the answer.
OUT_OF_ORDER_LOG = DATA / "parallel_calls_out_of_order.jsonl"
OUT_OF_ORDER_ID = uuid.UUID("01900000-0000-7000-8000-00000000a11e")


def ingest_out_of_order() -> Session:
    ingest_file(OUT_OF_ORDER_LOG, store=blob_store())
    return Session.objects.get(id=OUT_OF_ORDER_ID)


def call(call_id: str, name: str, arguments: Any = None) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": {} if arguments is None else arguments}


def assistant(seq: int, *calls: dict[str, Any], text: str = "") -> dict[str, Any]:
    return {"type": "assistant", "seq": seq, "at": None, "text": text, "tool_calls": list(calls)}


def result(
    seq: int, call_id: str, output: str, *, tool: str = "run", is_error: bool = False
) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "seq": seq,
        "at": None,
        "call_id": call_id,
        "tool": tool,
        "output": output,
        "is_error": is_error,
    }


def user(seq: int, text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "user", "seq": seq, "at": None, "text": text, **extra}


def record(records: list[dict[str, Any]], *, title: str = "a run", **header: Any) -> Session:
    """Ingest *records* as one session (big outputs are promoted, as for any log)."""
    session_id = uuid.uuid4()
    fields = {
        "type": "session",
        "id": str(session_id),
        "created_at": "2025-05-01T12:00:00+00:00",
        "title": title,
        "model": "m",
        "meta": {},
        **header,
    }
    ingest_session(fields, records, source_path=f"test:{session_id}", store=blob_store())
    return Session.objects.get(id=session_id)


def steps_session(count: int, *, output: str = "ok", every_error: int = 0, tool: str = "run"):
    """A session of *count* one-call turns, each followed by its result."""
    records: list[dict[str, Any]] = [user(1, "go")]
    for n in range(count):
        seq = 2 + 2 * n
        records.append(assistant(seq, call(f"c{n}", tool, {"command": f"step {n}"})))
        error = bool(every_error) and n % every_error == 0
        records.append(result(seq + 1, f"c{n}", f"{output} {n}", tool=tool, is_error=error))
    return record(records, title=f"{count} steps")


def set_tokens(session: Session, seq: int, *, inputs: int, outputs: int, context: int) -> None:
    Item.objects.filter(session=session, seq=seq).update(
        input_tokens=inputs, output_tokens=outputs, context_tokens=context
    )


def set_duration(session: Session, seq: int, seconds: float) -> None:
    Item.objects.filter(session=session, seq=seq).update(duration=timedelta(seconds=seconds))


def tokens_session() -> Session:
    """Four turns with recorded tokens; the first and the third had an output promoted."""
    big = "".join(f"row {n}\n" for n in range(400))
    session = record(
        [
            user(1, "go"),
            assistant(2, call("a", "run"), call("b", "run")),
            result(3, "a", big),
            result(4, "b", "small"),
            assistant(5, call("c", "run")),
            result(6, "c", "small"),
            assistant(7, call("d", "run")),
            result(8, "d", big + "more"),
            assistant(9, text="done"),
        ]
    )
    for seq, context in ((2, 1_200), (5, 1_900), (7, 2_400), (9, 3_100)):
        set_tokens(session, seq, inputs=context, outputs=50 + seq, context=context)
    return session
