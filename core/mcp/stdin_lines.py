"""The agent's stdin as the MCP SDK's stdio_server reads it, a line at a time, in a way
that a cancellation (the proxy's SIGTERM) can end."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import anyio.to_thread

from core.mcp.line_splitter import LineSplitter

__all__ = ["StdinLines"]

_READ_SIZE = 1 << 16


class StdinLines:
    """The agent's messages, a line each, for the SDK's stdio_server.

    The SDK reads stdin on a worker thread, and a thread blocked in a read cannot be
    cancelled: on SIGTERM the proxy would wait for the agent's next line. Waiting for
    stdin to be readable on the event loop instead lets a cancellation end the wait.
    A stdin that cannot be waited on (a regular file) is read as the SDK reads it.
    """

    def __init__(self, fd: int = 0) -> None:
        self._fd = fd

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        if stat.S_ISREG(os.fstat(self._fd).st_mode):
            async for line in self._split(self._read_on_a_thread):
                yield line
            return
        # The flag belongs to the open file, which a terminal shares with the shell.
        was_blocking = os.get_blocking(self._fd)
        os.set_blocking(self._fd, False)
        try:
            async for line in self._split(self._read_when_readable):
                yield line
        finally:
            os.set_blocking(self._fd, was_blocking)

    @staticmethod
    async def _split(read: Callable[[], Awaitable[bytes]]) -> AsyncIterator[str]:
        # Bytes that are not UTF-8 become U+FFFD, as the SDK's own reading of stdin does.
        splitter = LineSplitter()
        while chunk := await read():
            for line in splitter.feed(chunk):
                yield line.decode("utf-8", "replace")
        if rest := splitter.rest():
            yield rest.decode("utf-8", "replace")

    async def _read_when_readable(self) -> bytes:
        while True:
            await anyio.wait_readable(self._fd)
            try:
                return os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                continue

    async def _read_on_a_thread(self) -> bytes:
        return await anyio.to_thread.run_sync(os.read, self._fd, _READ_SIZE)
