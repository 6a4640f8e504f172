"""The server behind `mcp proxy`: its process, and the JSON-RPC lines it reads and writes
on its stdin and stdout, as a transport for the SDK's Client.

The SDK's own stdio client is not used because of what a buggy or hostile server can do
to it (docs/mcp.md#a-server-that-misbehaves):
- it decodes the server's output as strict UTF-8, and one invalid byte ends its reader,
  so that call and every later one stay unanswered. Here a line that is not UTF-8
  answers its own call with an error (core.mcp.server_lines), and the next line is read
  as any other;
- it joins all it holds of an unfinished line to each chunk it reads, so a one-line
  result of n bytes takes time quadratic in n (64 MB: a minute). Here each chunk is
  scanned once (core.mcp.line_splitter), and a big line is parsed on a worker thread
  holding about twice its size at most.
The server is stopped as the SDK stops one (the MCP lifecycle's shutdown for stdio): its
stdin closed, a grace period, then its process group terminated. POSIX only, like the
proxy's reading of its own stdin (core.mcp.stdin_lines).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import FORCE_KILL_TIMEOUT, PROCESS_TERMINATION_TIMEOUT
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from core.mcp.line_splitter import Line, LineSplitter
from core.mcp.server_lines import server_message
from core.mcp.worker_threads import run_and_release

__all__ = ["WrappedServer"]

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]
# A line this long is parsed on a worker thread, so that the agent's other calls (the
# proxy's own `inspect`, say) are answered meanwhile.
_BIG_LINE = 1 << 20
# Seconds the messages already sent get to reach the server when the proxy stops, and
# between looks at whether the server has exited.
_FLUSH = 0.5
_POLL = 0.01
_PIPE_ERRORS = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)


class WrappedServer:
    """*command*, started as a stdio MCP server with the proxy's environment when the
    SDK's Client enters this transport, and stopped when it leaves.

    `gone` is set when the server's output ends (it exited) or it stops reading, before
    the proxy stops it itself; `scanned` is how many bytes of its output were searched
    for line ends.
    """

    def __init__(self, command: Sequence[str]) -> None:
        self._command = list(command)
        self._splitter = LineSplitter()
        self._stopping = False
        self._context: AbstractAsyncContextManager[Streams] | None = None
        self.gone = anyio.Event()

    @property
    def scanned(self) -> int:
        return self._splitter.scanned

    async def __aenter__(self) -> Streams:
        self._context = context = self._connected()
        return await context.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._context is not None  # entered first
        return await self._context.__aexit__(*exc_info)

    @asynccontextmanager
    async def _connected(self) -> AsyncIterator[Streams]:
        process = await anyio.open_process(self._command, stderr=None, start_new_session=True)
        # No await until the task group is entered: a cancellation there would leave the
        # server running.
        to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception]()
        to_server, from_session = anyio.create_memory_object_stream[SessionMessage]()
        written = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._read, process, to_session)
            tasks.start_soon(self._write, process, from_session, to_session, written)
            try:
                yield from_server, to_server
            finally:
                self._stopping = True
                with anyio.CancelScope(shield=True):
                    from_server.close()  # a reader waiting on the session drains instead
                    to_server.close()
                    with anyio.move_on_after(_FLUSH):
                        await written.wait()
                    await _stop(process)
                tasks.cancel_scope.cancel()

    async def _read(
        self, process: Process, to_session: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        assert process.stdout is not None  # opened with a pipe
        async with to_session:
            try:
                async for chunk in process.stdout:
                    lines = self._splitter.feed(chunk)
                    lines.reverse()
                    while lines:  # each line let go once sent: a big one is freed early
                        await _send_line(lines.pop(), to_session)
                await _send_line(self._splitter.rest(), to_session)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                # The session has gone: read on, so that a server still writing is not
                # blocked on a full pipe and sees its stdin close.
                with contextlib.suppress(*_PIPE_ERRORS):
                    async for _ in process.stdout:
                        pass
                return
        self._ended()

    async def _write(
        self,
        process: Process,
        from_session: MemoryObjectReceiveStream[SessionMessage],
        to_session: MemoryObjectSendStream[SessionMessage | Exception],
        written: anyio.Event,
    ) -> None:
        assert process.stdin is not None  # opened with a pipe
        try:
            async with from_session:
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except _PIPE_ERRORS:
            # The server no longer reads: its pending calls fail rather than wait forever.
            self._ended()
            await to_session.aclose()
        finally:
            written.set()

    def _ended(self) -> None:
        if not self._stopping:
            self.gone.set()


async def _send_line(
    line: Line, to_session: MemoryObjectSendStream[SessionMessage | Exception]
) -> None:
    if not line or line.isspace():  # a blank line is no message
        return
    if len(line) < _BIG_LINE:
        await to_session.send(server_message(line))
    else:
        await to_session.send(await run_and_release(functools.partial(server_message, line)))


async def _stop(process: Process) -> None:
    """Close the server's stdin; terminate its process group (SIGTERM, then SIGKILL) if it
    has not exited within the SDK's grace period."""
    assert process.stdin is not None and process.stdout is not None  # opened with pipes
    with contextlib.suppress(*_PIPE_ERRORS):
        await process.stdin.aclose()
    if not await _exited(process, PROCESS_TERMINATION_TIMEOUT):
        await terminate_posix_process_tree(process, FORCE_KILL_TIMEOUT)
        await _exited(process, FORCE_KILL_TIMEOUT)
    with contextlib.suppress(*_PIPE_ERRORS):
        await process.stdout.aclose()
    if process.returncode is not None:
        with anyio.move_on_after(FORCE_KILL_TIMEOUT), contextlib.suppress(*_PIPE_ERRORS):
            await process.aclose()


async def _exited(process: Process, seconds: float) -> bool:
    """Whether the process has exited within *seconds* (its returncode, polled: waiting
    for it would also wait for pipes that a child of the server may hold open)."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(_POLL)
    return process.returncode is not None
